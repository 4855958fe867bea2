"""TargetSpec: a table of supported ops plus named rules, answering "can this op run there, and why".

A node is supported iff its op is in the table (or the target takes every op) and no rule that
applies to it rejects it. The first rejecting rule decides, and its reason names the rule's
condition and the failing value. An accepted node's reason is what the accepting rules said
(``conv2d_nhwc_tensorcore: (32, 64, 64) matches (16,16,16)``) or, if none spoke, the op table's
entry for the op.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ..core.graph import OpGraph, OpNode
from ..core.pattern_library import PATTERN_NAMES, PATTERNS
from ..core.patterns import Pattern, Unit, find_units
from ..core.platform import PREPARE_STEPS
from ..core.support import Verdict
from ..errors import TargetSpecError
from .op_names import did_you_mean
from .rules import Rule, spoken_verdicts
from .units import judge_units

OP_TABLE_RULE = "op-table"


class TargetSpec:
    """A partitioning target: which Relay ops it runs, under which conditions, and why.

    Parameters
    ----------
    name
        Target name (``"tensorcore"``, ``"neuron@2020"``); also the device name in plans.
    description, version, provenance
        Words for users: what the target models, which release, where the data comes from
        (``provenance`` is quoted in "not in <name>'s operator list (<provenance>)").
    supported
        Op -> reason it is supported (an empty reason gets ``supported_reason`` or a default).
        An op listed in both ``supported`` and ``unsupported`` is unsupported.
    unsupported
        Op -> reason it is not (for ops worth explaining, e.g. where they come from).
    supports_all
        The target takes every op not in ``unsupported`` (the CPU; user targets based on it).
    supported_reason
        Reason given for a supported op whose table entry has none.
    anchors
        Ops an accelerator region must contain (empty: no such requirement).
    rules
        :class:`~.rules.Rule` objects, checked in order after the op table.
    prepare_steps
        Names from :data:`PREPARE_STEPS` the pass layer runs before annotation.
    default_profile
        Hardware profile name the cost model uses for this target, or None.
    options
        The options the target was built with (shown, and re-applied by :meth:`with_options`).
    factory
        ``factory(**options) -> TargetSpec`` rebuilding the target with other options; None if
        it takes none.
    sources
        Citations for the data (shown by :meth:`describe`).

    Raises
    ------
    TargetSpecError
        On an unknown prepare step or an anchor op the target does not support.

    Examples
    --------
    >>> from partition_lab.targets.rules import AttrIn
    >>> npu = TargetSpec("npu", supported=["nn.conv2d", "nn.relu"], anchors=["nn.conv2d"],
    ...                  rules=[AttrIn("no-groups", frozenset({"nn.conv2d"}), "groups", (1,))])
    >>> npu.supports_op("nn.relu"), npu.supports_op("image.resize2d")
    (True, False)
    """

    def __init__(
        self,
        name: str,
        *,
        description: str = "",
        version: str = "",
        provenance: str = "",
        supported: Mapping[str, str] | Iterable[str] = (),
        unsupported: Mapping[str, str] | Iterable[str] = (),
        supports_all: bool = False,
        supported_reason: str = "",
        anchors: Iterable[str] = (),
        rules: Sequence[Rule] = (),
        prepare_steps: Iterable[str] = (),
        default_profile: str | None = None,
        options: Mapping[str, Any] | None = None,
        factory: Callable[..., TargetSpec] | None = None,
        sources: Iterable[str] = (),
        patterns: Iterable[str] = (),
        custom_patterns: Sequence[Pattern] = (),
    ) -> None:
        if not isinstance(name, str) or not name:
            raise TargetSpecError(f"a target needs a non-empty name, got {name!r}")
        self.name = name
        self.description = description
        self.version = version
        self.provenance = provenance
        self.supports_all = supports_all
        self.supported_reason = supported_reason
        self.unsupported: dict[str, str] = _reasons(unsupported)
        self.supported: dict[str, str] = {
            op: reason for op, reason in _reasons(supported).items() if op not in self.unsupported}
        self.anchors = frozenset(anchors)
        self.rules: tuple[Rule, ...] = tuple(rules)
        self._prepare_steps = tuple(prepare_steps)
        self.default_profile = default_profile
        self.options: dict[str, Any] = dict(options or {})
        self.factory = factory
        self.sources = tuple(sources)
        # A pattern the target defines is one it judges whole: its name joins ``patterns``.
        self.custom_patterns: tuple[Pattern, ...] = tuple(custom_patterns)
        self.patterns = frozenset(patterns) | {p.name for p in self.custom_patterns}
        self._validate()

    def _validate(self) -> None:
        for step in self._prepare_steps:
            if step not in PREPARE_STEPS:
                raise TargetSpecError(
                    f"target {self.name}: unknown prepare step {step!r}; expected one of "
                    f"{', '.join(PREPARE_STEPS)}")
        for op in sorted(self.anchors):
            if not self.supports_op(op):
                raise TargetSpecError(
                    f"target {self.name}: anchor {op} is not a supported op of the target")
        known = (*PATTERN_NAMES, *dict.fromkeys(p.name for p in self.custom_patterns))
        unknown = sorted(self.patterns - set(known))
        if unknown:
            raise TargetSpecError(f"target {self.name}: unknown pattern {unknown[0]!r}"
                                  f"{did_you_mean(unknown[0], known)}; known patterns: "
                                  f"{', '.join(known)}")
        for pattern in self.custom_patterns:
            if pattern.name in PATTERN_NAMES:
                raise TargetSpecError(
                    f"target {self.name}: custom pattern {pattern.name!r} has the name of a "
                    "built-in pattern; list the built-in one in patterns, or name yours "
                    "differently")
        for rule in self.rules:
            if not (hasattr(rule, "check") and hasattr(rule, "applies_to")):
                raise TargetSpecError(
                    f"target {self.name}: {rule!r} is not a rule (needs applies_to and check)")

    # ------------------------------------------------------------------ queries
    def __repr__(self) -> str:
        return f"TargetSpec({self.name!r})"

    def prepare_steps(self) -> tuple[str, ...]:
        """Relay preparation steps to run before annotation, in order (see PREPARE_STEPS)."""
        return self._prepare_steps

    def supports_op(self, op: str) -> bool:
        """Whether the op table admits ``op`` (rules on shapes and dtypes not considered)."""
        if op in self.unsupported:
            return False
        return self.supports_all or op in self.supported

    def is_anchor(self, op: str) -> bool:
        return op in self.anchors

    def op_reason(self, op: str) -> str:
        """The op table's reason for ``op``, supported or not."""
        if op in self.unsupported:
            return self.unsupported[op] or f"{op} is not supported by {self.name}"
        if op in self.supported and self.supported[op]:
            return self.supported[op]
        if self.supports_all or op in self.supported:
            return self.supported_reason or f"{op} is supported by {self.name}"
        where = f" ({self.provenance})" if self.provenance else ""
        return f"{op} is not in {self.name}'s operator list{where}"

    # ------------------------------------------------------------------ verdicts
    def check(self, node: OpNode) -> Verdict:
        """The verdict for one node: the op table first, then every rule that applies."""
        anchor = node.op in self.anchors
        if not self.supports_op(node.op):
            return Verdict(False, self.op_reason(node.op), OP_TABLE_RULE, anchor)
        acceptances: list[Verdict] = []
        for rule, verdict in spoken_verdicts(self.rules, node):
            if not verdict.supported:
                return Verdict(False, verdict.reason, verdict.rule or rule.name, anchor)
            acceptances.append(verdict)
        if acceptances:
            reason = "; ".join(v.reason for v in acceptances)
            return Verdict(True, reason, acceptances[-1].rule, anchor)
        return Verdict(True, self.op_reason(node.op), OP_TABLE_RULE, anchor)

    def check_graph(self, graph: OpGraph, units: Sequence[Unit] | None = None) -> list[Verdict]:
        """Verdicts for every node of ``graph``, in node-id order.

        Nodes of a unit of a pattern this target declares (``patterns``) share the unit's
        verdict (:func:`~.units.judge_units`); ``units`` defaults to every unit of the built-in
        library in ``graph``.
        """
        verdicts = [self.check(node) for node in graph.nodes]
        if not self.patterns:
            return verdicts
        found = find_units(graph, self.pattern_library()) if units is None else units
        return judge_units(self, graph, verdicts, [u for u in found if u.name in self.patterns])

    def pattern_library(self) -> tuple[Pattern, ...]:
        """The patterns to look for in a graph for this target: the built-in ones and its own."""
        return (*PATTERNS, *self.custom_patterns)

    # ------------------------------------------------------------------ derivation
    def with_options(self, **options: Any) -> TargetSpec:
        """The same target rebuilt with ``options`` on top of its own; self if none are given.

        Raises TargetSpecError if the target takes no options or does not know one.
        """
        if not options:
            return self
        if self.factory is None:
            raise TargetSpecError(
                f"target {self.name} takes no options; got {', '.join(sorted(options))}")
        return self.factory(**{**self.options, **options})

    def extend(
        self,
        name: str,
        *,
        description: str | None = None,
        version: str | None = None,
        provenance: str | None = None,
        supported: Mapping[str, str] | Iterable[str] = (),
        unsupported: Mapping[str, str] | Iterable[str] = (),
        anchors: Iterable[str] | None = None,
        rules: Sequence[Rule] = (),
        prepare_steps: Iterable[str] | None = None,
        default_profile: str | None = None,
        sources: Iterable[str] = (),
        patterns: Iterable[str] | None = None,
        custom_patterns: Sequence[Pattern] = (),
    ) -> TargetSpec:
        """A new target built on this one.

        ``supported`` ops are added, ``unsupported`` ops removed (with their reasons), ``rules``
        and ``custom_patterns`` appended after this target's; ``anchors``, ``prepare_steps`` and
        ``patterns`` replace this target's when given. Options of this target are kept as they are. A base rule that
        applies only to ops the extension lists in ``supported`` is dropped: the extension
        brings its own kernel for them (neuron's resize rule does not judge a custom resize).
        """
        added, removed = _reasons(supported), _reasons(unsupported)
        base_rules = tuple(r for r in self.rules if not (r.ops and r.ops <= added.keys()))
        # An op the extension supports again leaves the base's unsupported table.
        still_unsupported = {op: r for op, r in self.unsupported.items() if op not in added}
        return TargetSpec(
            name,
            description=self.description if description is None else description,
            version=self.version if version is None else version,
            provenance=self.provenance if provenance is None else provenance,
            supported={**self.supported, **added},
            unsupported={**still_unsupported, **removed},
            supports_all=self.supports_all,
            supported_reason=self.supported_reason,
            anchors=self.anchors if anchors is None else anchors,
            rules=(*base_rules, *rules),
            prepare_steps=self._prepare_steps if prepare_steps is None else prepare_steps,
            default_profile=default_profile or self.default_profile,
            options=self.options,
            sources=(*self.sources, *sources),
            patterns=self.patterns if patterns is None else patterns,
            custom_patterns=(*self.custom_patterns, *custom_patterns),
        )

    # ------------------------------------------------------------------ reporting
    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready description of the target (ops with reasons, rules, options)."""
        return {
            "name": self.name,
            "description": self.description,
            "version": self.version,
            "provenance": self.provenance,
            "sources": list(self.sources),
            "options": dict(self.options),
            "supports_all": self.supports_all,
            "supported": dict(sorted(self.supported.items())),
            "unsupported": dict(sorted(self.unsupported.items())),
            "anchors": sorted(self.anchors),
            "rules": [rule.to_dict() for rule in self.rules],
            "prepare_steps": list(self._prepare_steps),
            "patterns": sorted(self.patterns),
            "custom_patterns": [{"name": p.name, "ops": p.ops, "stands_for": list(p.stands_for)}
                                for p in self.custom_patterns],
            "default_profile": self.default_profile,
        }

    def describe(self) -> str:
        """The target and its rules in words (what ``partition-lab targets`` prints)."""
        lines = [f"{self.name}: {self.description}" if self.description else self.name]
        if self.version or self.provenance:
            lines.append(f"  version: {self.version or '-'} ({self.provenance or 'no source given'})")
        if self.options:
            lines.append("  options: " + ", ".join(f"{k}={v!r}" for k, v in self.options.items()))
        if self._prepare_steps:
            lines.append("  prepares the model with: " + ", ".join(
                f"{s} ({PREPARE_STEPS[s]})" for s in self._prepare_steps))
        if self.default_profile:
            lines.append(f"  cost profile: {self.default_profile}")
        if self.patterns:
            lines.append(f"  patterns judged as one unit: {', '.join(sorted(self.patterns))}")
        if self.anchors:
            lines.append("  anchors (a region must hold one): " + ", ".join(sorted(self.anchors)))
        if self.supports_all:
            lines.append("  supports every op" + (" except those below" if self.unsupported else ""))
        else:
            lines.append(f"  supported ops ({len(self.supported)}): " + ", ".join(sorted(self.supported)))
        for op, reason in sorted(self.unsupported.items()):
            lines.append(f"  not supported: {op}: {reason or 'listed as unsupported'}")
        for rule in self.rules:
            lines.append(f"  rule {rule.describe() if hasattr(rule, 'describe') else rule.name}")
        lines.extend(f"  source: {s}" for s in self.sources)
        return "\n".join(lines)


def _reasons(ops: Mapping[str, str] | Iterable[str]) -> dict[str, str]:
    if isinstance(ops, Mapping):
        return {str(op): str(reason or "") for op, reason in ops.items()}
    if isinstance(ops, str):
        raise TargetSpecError(f"expected a list of op names, got the string {ops!r}")
    return dict.fromkeys(ops, "")
