"""``tvm:<backend>``: a target whose support is what TVM's own pattern table for the backend takes.

A matched pattern is a unit of support: its bindings are judged together (one verdict, one
:class:`~partition_lab.core.patterns.Unit` the strategies keep on one device, one
``Composite=<backend>.<pattern>`` function in the partitioned module). An op no composite takes
gets a reason naming the pattern whose check rejected it, where the check returned False and on
what (:mod:`.matching`), or that no pattern of the table takes it. The verdicts are read from
the Relax module the graph was read from (:func:`remember`), so the target judges graphs the
Relax adapter read; a graph of another IR gets one reason saying so.
"""

from __future__ import annotations

import weakref
from typing import Any

import tvm

from ...core.graph import OpGraph, OpNode
from ...core.patterns import Pattern, Step, Unit
from ...core.platform import Device, Platform
from ...core.support import Verdict
from ...targets.base import TargetSpec
from ...targets.devices import host
from ..graph import RelaxGraph
from .backends import OPTIONS, Backend, backend, checked_options, load_patterns
from .matching import Matching, match
from .pattern_text import pattern_text

_READ: weakref.WeakKeyDictionary[OpGraph, weakref.ref[RelaxGraph]] = weakref.WeakKeyDictionary()
RULE = "tvm-pattern"


def remember(rg: RelaxGraph) -> RelaxGraph:
    """Note which Relax module ``rg.graph`` was read from (the adapter calls it)."""
    _READ[rg.graph] = weakref.ref(rg)
    return rg


def relax_of(graph: OpGraph) -> RelaxGraph | None:
    ref = _READ.get(graph)
    return None if ref is None else ref()


class TvmBackendTarget(TargetSpec):
    """The target of one TVM BYOC backend (see the module docstring)."""

    def __init__(self, spec: Backend, **options: Any) -> None:
        self.backend = spec
        checked = checked_options(spec, options)
        self.tvm_patterns, self.problem = load_patterns(spec)
        level = checked.get("feature_level")
        if level is not None and not self.problem:  # what partition_for_nnapi(feature_level=)
            from tvm.relax.backend.contrib.nnapi import min_feature_level  # keeps of the table

            self.tvm_patterns = [p for p in self.tvm_patterns
                                 if level >= min_feature_level(p.name)]
        count = f"{len(self.tvm_patterns)} patterns" if not self.problem else self.problem
        if checked:
            count += ", " + ", ".join(f"{k}={v!r}" for k, v in sorted(checked.items()))
        super().__init__(
            spec.name,
            description=f"{spec.what} through TVM's own Relax pattern table ({count}); what "
                        f"{spec.partition_for or 'FuseOpsByPattern'} offloads",
            version=f"apache-tvm {tvm.__version__}",
            provenance=f"{spec.module} (tvm.relax.backend.pattern_registry, prefix "
                       f"{spec.name!r})",
            supported_reason=f"a {spec.name} pattern takes it",
            # no shipped profile of a phone NPU or an Apple GPU: inferentia1 stands in
            default_profile="t4" if spec.cuda else "inferentia1",
            options=checked, factory=lambda **again: TvmBackendTarget(spec, **again),
            sources=[f"apache-tvm {tvm.__version__} {spec.module}"])
        self._matched: weakref.WeakKeyDictionary[OpGraph, Matching] = weakref.WeakKeyDictionary()
        self._texts: dict[tuple[str, int], str] = {}

    def matching(self, graph: OpGraph) -> Matching | None:
        """The table's matching of the module ``graph`` was read from (None: none known)."""
        if self.problem:
            return None
        if graph not in self._matched:
            rg = relax_of(graph)
            if rg is None:
                return None
            self._matched[graph] = match(rg, self.tvm_patterns)
        return self._matched[graph]

    def describe(self) -> str:
        """The target, its options and its pattern table in order, each pattern as nested
        calls (what ``partition-lab targets tvm:<backend>`` prints)."""
        lines = [f"{self.name}: {self.description}",
                 f"  version: {self.version} ({self.provenance})",
                 f"  cost profile: {self.default_profile}"]
        taken = OPTIONS.get(self.backend.name, {})
        for key, (kind, default, what) in taken.items():
            lines.append(f"  option {key}={self.options.get(key, default)!r} ({kind.__name__}): "
                         f"{what}")
        if not taken:
            lines.append("  options: none")
        if self.problem:
            lines.append(f"  {self.problem}")
        lines.append(f"  patterns, in table order (greedy takes the first that matches and "
                     f"whose check accepts), {len(self.tvm_patterns)}:")
        for p in self.tvm_patterns:
            check = "" if p.check is None else f"  [check {_check_name(p.check)}]"
            lines.append(f"    {p.name}: {self._form(p)}{check}")
        lines.extend(f"  source: {s}" for s in self.sources)
        return "\n".join(lines)

    def check(self, node: OpNode) -> Verdict:
        return Verdict(False, self._no_module(), RULE)

    def _no_module(self) -> str:
        return self.problem or (f"tvm:{self.name} judges the Relax module a graph was read "
                                "from; this graph was not read by partition_lab.relax")

    def units_in(self, graph: OpGraph) -> list[Unit]:
        """One unit per composite, named by its pattern without the prefix (``nn.conv2d``:
        the outline names it ``Composite=<backend>.nn.conv2d``, as ``partition_for_*`` does)."""
        found = self.matching(graph)
        if found is None:
            return []
        return [Unit(_pattern(graph, self._short(name), nodes), nodes)
                for name, nodes in found.composites]

    def check_graph(self, graph: OpGraph, units: Any = None) -> list[Verdict]:
        found = self.matching(graph)
        if found is None:
            return [Verdict(False, self._no_module(), RULE) for _ in graph.nodes]
        verdicts: list[Verdict | None] = [None] * len(graph)
        for name, nodes in found.composites:
            ops = ", ".join(dict.fromkeys(graph[n].op for n in nodes))
            checked = [c for c in found.calls if c.pattern == name and c.accepted
                       and set(nodes) <= set(c.nodes)]
            by = f"; its check {checked[0].check} accepted it" if checked else ""
            reason = (f"pattern {name} takes it ({len(nodes)} op{'s' * (len(nodes) > 1)}: "
                      f"{ops}){by}")
            for n in nodes:
                verdicts[n] = Verdict(True, reason, f"{RULE}:{name}")
        rg = relax_of(graph)
        for node in graph.nodes:
            if verdicts[node.id] is None:
                relax_op = rg.views[node.id].relax_op if rg is not None else node.op
                verdicts[node.id] = self._left_off(node.id, relax_op, found)
        return [v for v in verdicts if v is not None]

    def _left_off(self, node: int, relax_op: str, found: Matching) -> Verdict:
        calls = [c for c in found.calls if node in c.nodes]
        errors = [c for c in calls if c.error]
        if errors:
            c = errors[0]
            return Verdict(False, f"tvm:{self.name}: the check {c.check} of pattern {c.pattern} "
                           f"raised {c.error}", f"{RULE}-error:{c.pattern}")
        rejected = [c for c in calls if not c.accepted]
        if rejected:
            c = rejected[0]
            more = sorted({r.pattern for r in rejected[1:]} - {c.pattern})
            also = f" (also rejected by: {', '.join(more)})" if more else ""
            return Verdict(False, f"pattern {c.pattern} matches {relax_op} here but its check "
                           f"{c.check} rejected it: {c.why}{also}", f"{RULE}-check:{c.pattern}")
        accepted = [c for c in calls if c.accepted]
        if accepted:
            return Verdict(False, f"pattern {accepted[0].pattern}'s check accepted {relax_op} "
                           "here, but FuseOpsByPattern did not group it (an overlapping match "
                           "took part of it)", f"{RULE}:{accepted[0].pattern}")
        naming = sorted((p for p in self.tvm_patterns if f'name="{relax_op}"' in self._text(p)),
                        key=lambda p: len(self._form(p)))  # the simplest forms first
        if naming:
            forms = "; ".join(f"{p.name} is {self._form(p)}" for p in naming[:2])
            more = f"; and {len(naming) - 2} more" if len(naming) > 2 else ""
            return Verdict(False, f"no {self.name} pattern matches this {relax_op}: "
                           f"{len(naming)} of its {len(self.tvm_patterns)} patterns have "
                           f"{relax_op} ({forms}{more}), and this call and its neighbours do "
                           "not fit any of them", f"{RULE}-none")
        return Verdict(False, f"no {self.name} pattern has {relax_op} (none of its "
                       f"{len(self.tvm_patterns)} patterns)", f"{RULE}-none")

    def _text(self, pattern: Any) -> str:
        """The pattern's TVM text (which ops it names), computed once per pattern."""
        key = ("text", id(pattern))
        if key not in self._texts:
            self._texts[key] = str(pattern.pattern)
        return self._texts[key]

    def _form(self, pattern: Any) -> str:
        key = ("form", id(pattern))
        if key not in self._texts:
            self._texts[key] = pattern_text(pattern.pattern)
        return self._texts[key]

    def _short(self, name: str) -> str:
        prefix = f"{self.name}."
        return name[len(prefix):] if name.startswith(prefix) else name


def _check_name(check: Any) -> str:
    func = getattr(check, "func", check)
    name = getattr(func, "__qualname__", "") or getattr(func, "__name__", "")
    return name or "(a Python function TVM wraps)"


def _pattern(graph: OpGraph, name: str, nodes: tuple[int, ...]) -> Pattern:
    """A core Pattern describing one composite (its steps are the composite's ops)."""
    index = {n: i for i, n in enumerate(nodes)}
    steps: list[list[Any]] = []
    for n in nodes:
        args: list[Any] = [index[p] for p in graph.nx.predecessors(n) if p in index]
        args.append(f"in{n}")
        steps.append([graph[n].op, args])
    used = {a for _, args in steps for a in args if isinstance(a, int)}
    steps[-1][1].extend(i for i in range(len(nodes) - 1) if i not in used)
    return Pattern(name, tuple(Step.of(op, *args) for op, args in steps),
                   description="a TVM composite")


def build(name: str, **options: Any) -> TvmBackendTarget:
    """The ``tvm:<name>`` target, with the options of its ``partition_for_*``
    (:data:`~.backends.OPTIONS`)."""
    return TvmBackendTarget(backend(name), **options)


def platform(name: str, **options: Any) -> Platform:
    """The backend's device (BYOC, ``Compiler=<backend>``) + for a CUDA backend the GPU's CUDA
    cores (TVM's cuda target runs every op, as in ``tensorcore``) + the host CPU."""
    spec = build(name, **options)
    gpu = spec.backend.cuda
    devices = [Device(spec.name, spec, role="byoc", memory="gpu" if gpu else "accel",
                      compiler=spec.name, preference=20, profile=spec.default_profile,
                      description=spec.description)]
    if gpu:
        cores = TargetSpec("cuda", description="the GPU's CUDA cores: TVM's cuda target runs "
                           "every op", provenance="TVM cuda target", supports_all=True,
                           supported_reason="runs on the GPU's CUDA cores (TVM cuda target)",
                           default_profile="t4")
        devices.append(Device("cuda", cores, role="main", memory="gpu", preference=10,
                              colour="#4c9be8", profile="t4", matrix_engine=False,
                              description="the GPU's CUDA cores (TVM's cuda main target)"))
    devices.append(host())
    return Platform(f"tvm:{name}", tuple(devices),
                    description=f"{spec.backend.what} (TVM's pattern table)"
                                + (", CUDA cores" if gpu else "") + ", host CPU")
