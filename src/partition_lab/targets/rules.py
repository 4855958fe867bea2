"""Support rules: small objects that look at one op and answer with a reasoned verdict.

A rule has a ``name``, the ``ops`` it applies to (empty: every op) and a ``check`` that returns a
:class:`~partition_lab.core.plan.Verdict` or None (no opinion). A :class:`~.base.TargetSpec` runs its
rules in order: the first rejection decides; acceptances explain why the op qualifies.

Declarative kinds, usable from a target file (``kind = "..."``) or from Python:

``multiple_of``
    Named dimensions must be multiples of one of several alternatives, e.g. (batch, cin, cout)
    multiples of (16,16,16) or (8,16,32) or (32,16,8).
``dtype_in``
    Tensor dtypes must be in an allow-list (``dtypes``) and/or outside a deny-list (``exclude``).
``attr_in``
    An attribute must take one of the listed values (``groups`` in [1]).
``max_size``
    Named dimensions must not exceed a maximum.
``any_of``
    Accept if any of its rules accepts (alternative kernels or templates).

Python users can subclass :class:`Rule` and implement ``check``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..core.graph import OpNode, TensorType
from ..core.support import Verdict
from ..errors import TargetSpecError
from .schema import Fields
from .shapes import DIMENSION_NAMES, attr, data_type, dimension, is_dimension_name

TENSOR_SELECTIONS = ("data", "args", "inputs", "outputs", "activations")


class Rule:
    """Base class of support rules.

    Subclasses set ``name`` (shown in verdicts as ``Verdict.rule``) and ``ops`` (a set of Relay
    op names; empty: every op) and implement :meth:`check`. Override :meth:`applies_to` for a
    condition other than the op name.
    """

    # Declared, not assigned: a default here would become a dataclass default in subclasses.
    name: str
    ops: frozenset[str]
    kind: ClassVar[str] = "python"

    def applies_to(self, node: OpNode) -> bool:
        """Whether this rule has anything to say about ``node``."""
        return not self.ops or node.op in self.ops

    def check(self, node: OpNode) -> Verdict | None:
        """A rejection, an explained acceptance, or None (no opinion)."""
        raise NotImplementedError

    def describe(self) -> str:
        """The rule in words, for ``partition-lab targets``."""
        return f"{self.name} ({_ops_text(self.ops)})"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "ops": sorted(self.ops)}

    @classmethod
    def from_fields(cls, f: Fields, name: str, ops: frozenset[str]) -> Rule:
        """Build the rule from a checked table of a target file (declarative kinds only)."""
        raise TargetSpecError(f"{f.where}: rule kind {cls.kind!r} cannot be read from a file")

    # helpers for subclasses
    def accept(self, reason: str) -> Verdict:
        return Verdict(True, reason, self.name)

    def reject(self, reason: str) -> Verdict:
        return Verdict(False, reason, self.name)


@dataclass(frozen=True)
class MultipleOf(Rule):
    """Dimensions ``dims`` must be multiples of one of ``alternatives`` (checked in order).

    ``dtypes`` limits the rule to ops whose data dtype is listed (empty: any dtype). ``label``
    names what matched in the acceptance reason (default: ``name``); ``context`` is appended to a
    rejection in parentheses.
    """

    name: str
    ops: frozenset[str]
    dims: tuple[str, ...]
    alternatives: tuple[tuple[int, ...], ...]
    context: str = ""
    dtypes: frozenset[str] = frozenset()
    label: str = ""
    kind: ClassVar[str] = "multiple_of"

    def __post_init__(self) -> None:
        _check_dims(self.name, self.dims)
        for alt in self.alternatives:
            if len(alt) != len(self.dims) or any(m <= 0 for m in alt):
                raise TargetSpecError(
                    f"rule {self.name}: alternative {alt} needs {len(self.dims)} positive "
                    f"multiples, one per dimension {self.dims}")

    def applies_to(self, node: OpNode) -> bool:
        if self.ops and node.op not in self.ops:
            return False
        data = data_type(node)
        return not self.dtypes or (data is not None and data.dtype in self.dtypes)

    def check(self, node: OpNode) -> Verdict:
        sizes = _read_dims(node, self.dims)
        if isinstance(sizes, str):
            return self.reject(sizes)
        for alt in self.alternatives:
            if all(size % m == 0 for size, m in zip(sizes, alt, strict=True)):
                return self.accept(f"{self.label or self.name}: {_tuple(sizes, ', ')} "
                                   f"matches {_tuple(alt)}")
        return self.reject(f"{node.op}: {self.explain(sizes)}{_paren(self.context)}")

    def explain(self, sizes: Sequence[int]) -> str:
        """Why ``sizes`` fail: the dimensions that fail in every alternative, or the tuple."""
        always_failing = []
        for i, dim in enumerate(self.dims):
            if all(sizes[i] % alt[i] for alt in self.alternatives):
                needed = sorted({alt[i] for alt in self.alternatives})
                always_failing.append(f"{dim} {sizes[i]} is not a multiple of {_or(needed)}")
        if always_failing:
            return " and ".join(always_failing)
        misses = []
        for alt in self.alternatives:
            failing = [f"{dim} {size}" for dim, size, m in zip(self.dims, sizes, alt, strict=True)
                       if size % m]
            misses.append(f"{_tuple(alt)} (fails on {', '.join(failing)})")
        return f"({', '.join(self.dims)}) = {_tuple(sizes, ', ')} matches none of {'; '.join(misses)}"

    def describe(self) -> str:
        alts = " or ".join(_tuple(alt) for alt in self.alternatives)
        when = f" when data is {', '.join(sorted(self.dtypes))}" if self.dtypes else ""
        return (f"{self.name} ({_ops_text(self.ops)}{when}): ({', '.join(self.dims)}) "
                f"multiples of {alts}")

    def to_dict(self) -> dict[str, Any]:
        out = {**super().to_dict(), "dims": list(self.dims),
               "multiples": [list(alt) for alt in self.alternatives]}
        return _with_optional(out, context=self.context, dtypes=sorted(self.dtypes),
                              label=self.label)

    @classmethod
    def from_fields(cls, f: Fields, name: str, ops: frozenset[str]) -> MultipleOf:
        dims = f.strings("dims")
        return cls(name, ops, dims, _read_multiples(f, len(dims)),
                   context=f.string("reason", ""), dtypes=frozenset(f.strings("dtypes", ())))


@dataclass(frozen=True)
class DtypeIn(Rule):
    """Dtypes of the selected tensors must be in ``dtypes`` (if given) and not in ``exclude``.

    ``tensor`` selects what is checked: ``data`` (first argument), ``args`` (all arguments,
    weights included), ``inputs`` (activations coming in), ``outputs``, or ``activations``
    (inputs and outputs, not constant weights). ``message`` may use ``{op}``, ``{tensor}``,
    ``{value}`` and ``{expected}``.
    """

    name: str
    ops: frozenset[str]
    dtypes: frozenset[str] = frozenset()
    exclude: frozenset[str] = frozenset()
    tensor: str = "data"
    message: str = ""
    context: str = ""
    accept_reason: Mapping[str, str] = field(default_factory=dict)
    kind: ClassVar[str] = "dtype_in"

    def __post_init__(self) -> None:
        if self.tensor not in TENSOR_SELECTIONS:
            raise TargetSpecError(f"rule {self.name}: tensor {self.tensor!r} is not one of "
                                  f"{', '.join(TENSOR_SELECTIONS)}")
        if not self.dtypes and not self.exclude:
            raise TargetSpecError(f"rule {self.name}: give dtypes (allowed) or exclude (denied)")
        _check_message(self.name, self.message, op="", tensor="", value="", expected="")

    def check(self, node: OpNode) -> Verdict | None:
        for label, spec in _select_tensors(node, self.tensor):
            if (self.dtypes and spec.dtype not in self.dtypes) or spec.dtype in self.exclude:
                return self.reject(self._message(node, label, spec.dtype))
        data = data_type(node)
        note = self.accept_reason.get(data.dtype) if data is not None else None
        return self.accept(note.format(op=node.op)) if note else None

    def _message(self, node: OpNode, label: str, dtype: str) -> str:
        expected = (f"one of {', '.join(sorted(self.dtypes))}" if self.dtypes
                    else f"not {', '.join(sorted(self.exclude))}")
        template = self.message or "{op}: {tensor} dtype {value} is not {expected}"
        return template.format(op=node.op, tensor=label, value=dtype,
                               expected=expected) + _paren(self.context)

    def describe(self) -> str:
        parts = []
        if self.dtypes:
            parts.append(f"in {', '.join(sorted(self.dtypes))}")
        if self.exclude:
            parts.append(f"not {', '.join(sorted(self.exclude))}")
        return f"{self.name} ({_ops_text(self.ops)}): {self.tensor} dtype {' and '.join(parts)}"

    def to_dict(self) -> dict[str, Any]:
        return _with_optional({**super().to_dict(), "tensor": self.tensor},
                              dtypes=sorted(self.dtypes), exclude=sorted(self.exclude),
                              message=self.message, reason=self.context)

    @classmethod
    def from_fields(cls, f: Fields, name: str, ops: frozenset[str]) -> DtypeIn:
        return cls(name, ops, dtypes=frozenset(f.strings("dtypes", ())),
                   exclude=frozenset(f.strings("exclude", ())), tensor=f.string("tensor", "data"),
                   message=f.string("message", ""), context=f.string("reason", ""))


@dataclass(frozen=True)
class AttrIn(Rule):
    """Attribute ``attr`` must be one of ``values`` (Relay's default is used when it is absent).

    ``message`` may use ``{op}``, ``{attr}``, ``{value}`` and ``{expected}``.
    """

    name: str
    ops: frozenset[str]
    attr: str
    values: tuple[Any, ...]
    message: str = ""
    context: str = ""
    kind: ClassVar[str] = "attr_in"

    def __post_init__(self) -> None:
        _check_message(self.name, self.message, op="", attr="", value="", expected="")

    def check(self, node: OpNode) -> Verdict | None:
        value = attr(node, self.attr)
        if _normalize(value) in {_normalize(v) for v in self.values}:
            return None
        expected = _or([_show(v) for v in self.values])
        template = self.message or "{op}: {attr} {value} is not {expected}"
        return self.reject(template.format(op=node.op, attr=self.attr, value=_show(value),
                                           expected=expected) + _paren(self.context))

    def describe(self) -> str:
        values = [_show(v) for v in self.values]
        allowed = f"= {values[0]}" if len(values) == 1 else f"in {', '.join(values)}"
        return f"{self.name} ({_ops_text(self.ops)}): {self.attr} {allowed}"

    def to_dict(self) -> dict[str, Any]:
        values = [list(v) if isinstance(v, tuple) else v for v in self.values]
        return _with_optional({**super().to_dict(), "attr": self.attr, "values": values},
                              message=self.message, reason=self.context)

    @classmethod
    def from_fields(cls, f: Fields, name: str, ops: frozenset[str]) -> AttrIn:
        return cls(name, ops, f.string("attr"), f.scalars("values"),
                   message=f.string("message", ""), context=f.string("reason", ""))


@dataclass(frozen=True)
class MaxSize(Rule):
    """Each of the dimensions ``dims`` must be at most ``maximum``."""

    name: str
    ops: frozenset[str]
    dims: tuple[str, ...]
    maximum: int
    context: str = ""
    kind: ClassVar[str] = "max_size"

    def __post_init__(self) -> None:
        _check_dims(self.name, self.dims)

    def check(self, node: OpNode) -> Verdict | None:
        sizes = _read_dims(node, self.dims)
        if isinstance(sizes, str):
            return self.reject(sizes)
        too_big = [f"{d} {s}" for d, s in zip(self.dims, sizes, strict=True) if s > self.maximum]
        if too_big:
            return self.reject(f"{node.op}: {' and '.join(too_big)} exceeds {self.maximum}"
                               f"{_paren(self.context)}")
        return None

    def describe(self) -> str:
        return f"{self.name} ({_ops_text(self.ops)}): {', '.join(self.dims)} <= {self.maximum}"

    def to_dict(self) -> dict[str, Any]:
        return _with_optional({**super().to_dict(), "dims": list(self.dims),
                               "max": self.maximum}, reason=self.context)

    @classmethod
    def from_fields(cls, f: Fields, name: str, ops: frozenset[str]) -> MaxSize:
        return cls(name, ops, f.strings("dims"), f.positive_int("max"),
                   context=f.string("reason", ""))


def spoken_verdicts(rules: Iterable[Rule], node: OpNode) -> Iterator[tuple[Rule, Verdict]]:
    """``(rule, verdict)`` for each of ``rules`` that applies to ``node`` and has an opinion."""
    for rule in rules:
        if rule.applies_to(node):
            verdict = rule.check(node)
            if verdict is not None:
                yield rule, verdict


@dataclass(frozen=True)
class AnyOf(Rule):
    """Alternatives: the first rule that accepts decides; if all reject, the rejection lists
    every reason. Rules with no opinion are skipped; if none has one, neither has this rule.
    """

    name: str
    rules: tuple[Rule, ...]
    ops: frozenset[str] = frozenset()
    kind: ClassVar[str] = "any_of"

    def applies_to(self, node: OpNode) -> bool:
        if self.ops and node.op not in self.ops:
            return False
        return any(rule.applies_to(node) for rule in self.rules)

    def check(self, node: OpNode) -> Verdict | None:
        rejections = []
        for _, verdict in spoken_verdicts(self.rules, node):
            if verdict.supported:
                return verdict
            rejections.append(verdict)
        if not rejections:
            return None
        return Verdict(False, "; ".join(v.reason for v in rejections), self.name)

    def describe(self) -> str:
        inner = "; or ".join(rule.describe() for rule in self.rules)
        return f"{self.name}: any of [{inner}]"

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "rules": [rule.to_dict() for rule in self.rules]}

    @classmethod
    def from_fields(cls, f: Fields, name: str, ops: frozenset[str]) -> AnyOf:
        rules = tuple(rule_from_dict(item, f"{f.place('rules')}[{i}]", default_ops=ops)
                      for i, item in enumerate(f.table_list("rules")))
        if not rules:
            raise TargetSpecError(f"{f.place('rules')}: an any_of rule needs at least one rule")
        return cls(name, rules, ops)


RULE_KINDS: dict[str, type[Rule]] = {
    cls.kind: cls for cls in (MultipleOf, DtypeIn, AttrIn, MaxSize, AnyOf)
}
_KIND_KEYS: dict[str, tuple[str, ...]] = {
    "multiple_of": ("dims", "multiples", "dtypes", "reason"),
    "dtype_in": ("dtypes", "exclude", "tensor", "message", "reason"),
    "attr_in": ("attr", "values", "message", "reason"),
    "max_size": ("dims", "max", "reason"),
    "any_of": ("rules",),
}


def rule_from_dict(data: Any, where: str, default_ops: frozenset[str] = frozenset()) -> Rule:
    """Build a declarative rule from a table of a target file.

    Common keys: ``kind`` (required), ``name``, ``ops`` (list of Relay op names; empty or
    missing: every op). The other keys depend on the kind (see the module docstring).
    Raises TargetSpecError naming ``where`` and the key at fault.
    """
    if not isinstance(data, Mapping):
        raise TargetSpecError(f"{where}: expected a table, got {type(data).__name__}")
    kind = data.get("kind")
    if kind not in RULE_KINDS:
        raise TargetSpecError(
            f"{where}.kind: {kind!r} is not a rule kind; expected one of "
            f"{', '.join(sorted(RULE_KINDS))}")
    f = Fields(data, where, ("kind", "name", "ops", *_KIND_KEYS[kind]))
    name = f.string("name", kind)
    ops = frozenset(f.strings("ops", tuple(default_ops)))
    try:
        return RULE_KINDS[kind].from_fields(f, name, ops)
    except TargetSpecError as error:
        message = str(error)
        raise TargetSpecError(message if message.startswith(where) else f"{where}: {message}") from None


# ---------------------------------------------------------------------------------- helpers
def _read_multiples(f: Fields, n_dims: int) -> tuple[tuple[int, ...], ...]:
    """``multiples``: [32] or [16, 32] (alternatives for one dim) or [[16,16,16], [8,16,32]]."""
    value = f.data.get("multiples")
    place = f.place("multiples")
    if not isinstance(value, list) or not value:
        raise TargetSpecError(f"{place}: expected a non-empty list, got {value!r}")
    if all(_is_positive_int(v) for v in value) and n_dims == 1:
        return tuple((v,) for v in value)
    if all(isinstance(v, list) and len(v) == n_dims and all(_is_positive_int(x) for x in v)
           for v in value):
        return tuple(tuple(v) for v in value)
    raise TargetSpecError(
        f"{place}: expected lists of {n_dims} positive integers (one per dim), or for a single "
        f"dim a list of positive integers; got {value!r}")


def _is_positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _read_dims(node: OpNode, dims: Sequence[str]) -> list[int] | str:
    """The sizes of ``dims``, or a rejection reason when one cannot be read."""
    sizes = []
    for dim in dims:
        size = dimension(node, dim)
        if size is None:
            return f"{node.op}: has no dimension {dim!r} that this rule can read"
        if size < 0:
            return f"{node.op}: {dim} is dynamic; the rule needs a static size"
        sizes.append(size)
    return sizes


def _select_tensors(node: OpNode, which: str) -> list[tuple[str, TensorType]]:
    operands = node.args or node.inputs
    if which == "data":
        return [("data", operands[0])] if operands else []
    if which == "args":
        names = ["data", "kernel" if "conv" in node.op else "weight"]
        return [(names[i] if i < 2 else f"arg{i}", t) for i, t in enumerate(operands)]
    if which == "inputs":
        return [(f"input {i}", t) for i, t in enumerate(node.inputs)]
    outputs = [(f"output {i}", t) for i, t in enumerate(node.outputs)]
    if which == "outputs":
        return outputs
    return [(f"input {i}", t) for i, t in enumerate(node.inputs)] + outputs


def _check_dims(name: str, dims: Sequence[str]) -> None:
    if not dims:
        raise TargetSpecError(f"rule {name}: needs at least one dimension")
    for dim in dims:
        if not is_dimension_name(dim):
            raise TargetSpecError(
                f"rule {name}: {dim!r} is not a dimension name; expected argI[J], outI[J] or "
                f"one of {', '.join(DIMENSION_NAMES)}")


def _check_message(name: str, message: str, **fields: str) -> None:
    """Fail early (at load time) on a message template with an unknown placeholder."""
    try:
        message.format(**fields)
    except (KeyError, IndexError, ValueError) as error:
        raise TargetSpecError(
            f"rule {name}: message {message!r} has a bad placeholder ({error}); it may use "
            f"{', '.join('{' + k + '}' for k in fields)}") from None


def _normalize(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return tuple(_normalize(v) for v in value)
    return value


def _show(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return _tuple(value, ", ")
    return str(value)


def _tuple(values: Iterable[Any], sep: str = ",") -> str:
    return "(" + sep.join(str(v) for v in values) + ")"


def _or(items: Sequence[Any]) -> str:
    items = [str(i) for i in items]
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} or {items[-1]}"


def _paren(text: str) -> str:
    return f" ({text})" if text else ""


def _ops_text(ops: Iterable[str]) -> str:
    ops = sorted(ops)
    return ", ".join(ops) if ops else "every op"


def _with_optional(out: dict[str, Any], **optional: Any) -> dict[str, Any]:
    out.update({k: v for k, v in optional.items() if v})
    return out


def predicate_rule(name: str, ops: Iterable[str],
                   test: Callable[[OpNode], str | None]) -> Rule:
    """A rule from a function that returns a rejection reason, or None when the op is fine.

    >>> no_big_kernels = predicate_rule("small-kernels", ["nn.conv2d"],
    ...     lambda n: "kernel larger than 7" if n.attrs.get("kernel_size", (1,))[0] > 7 else None)
    """
    return _PredicateRule(name, frozenset(ops), test)


@dataclass(frozen=True)
class _PredicateRule(Rule):
    name: str
    ops: frozenset[str]
    test: Callable[[OpNode], str | None]

    def check(self, node: OpNode) -> Verdict | None:
        reason = self.test(node)
        return None if reason is None else self.reject(reason)


#: Coordinate modes and rounding methods under which a nearest-neighbour resize by an integer
#: factor s reads input pixel floor(out / s) at every output pixel, as an upsampling does.
#: half_pixel maps out x = k*s + r to k + (r - (s-1)/2) / s, always within 0.5 of k, so any
#: rounding to the nearest integer gives k (floor does not); asymmetric maps it to k + r/s, so
#: only floor gives k; tf_half_pixel_for_nn maps it to k + (r + 0.5)/s, floor again. Relay's
#: default rounding ("") is floor unless the mode is align_corners.
NEAREST_AS_UPSAMPLING: Mapping[str, frozenset[str]] = {
    "asymmetric": frozenset({"floor", ""}),
    "tf_half_pixel_for_nn": frozenset({"floor", ""}),
    "half_pixel": frozenset({"round", "round_prefer_floor", "round_prefer_ceil"}),
    "pytorch_half_pixel": frozenset({"round", "round_prefer_floor", "round_prefer_ceil"}),
}


@dataclass(frozen=True)
class ResizeAsUpsampling(Rule):
    """``image.resize2d`` decided by its method and attributes, naming the compiler's own op.

    A compiler whose list has a nearest-neighbour upsampling (``upsampling_op``, e.g. MXNet
    ``UpSampling`` for neuron-cc) runs a resize that computes the same thing: method
    ``nearest_neighbor``, layout NCHW, one integer factor for height and width, and a
    coordinate mode / rounding pair of :data:`NEAREST_AS_UPSAMPLING`. Every other method is
    rejected with the framework op it comes from (``sources``: method -> op name) when known.
    """

    name: str
    ops: frozenset[str]
    upsampling_op: str
    compiler: str
    sources: Mapping[str, str] = field(default_factory=dict)
    kind: ClassVar[str] = "resize_as_upsampling"

    def check(self, node: OpNode) -> Verdict:
        method = str(attr(node, "method") or "linear")
        if method != "nearest_neighbor":
            source = self.sources.get(method)
            # The framework op outside parentheses: drawings show a reason without its remarks.
            origin = (f" is MXNet {source} (ONNX Resize mode {_onnx_mode(method)}), which"
                      if source else "")
            return self.reject(f"{node.op}: method {method}{origin} is not on {self.compiler}'s "
                               f"list; only a nearest-neighbour resize by an integer factor is "
                               f"(as MXNet {self.upsampling_op})")
        problem = self._mismatch(node)
        if problem:
            return self.reject(f"{node.op}: nearest-neighbour, but {problem}, so it is not "
                               f"MXNet {self.upsampling_op}, the form {self.compiler} lists")
        scale = node.outputs[0].shape[2] // (node.args or node.inputs)[0].shape[2]
        return self.accept(f"{node.op}: nearest-neighbour x{scale} is MXNet "
                           f"{self.upsampling_op}(sample_type=nearest, scale={scale}) on "
                           f"{self.compiler}'s list")

    @staticmethod
    def _mismatch(node: OpNode) -> str:
        """Why a nearest-neighbour resize is not an upsampling, or "" when it is one."""
        layout = str(attr(node, "layout") or "NCHW")
        if layout != "NCHW":
            return f"layout {layout} is not NCHW"
        data = (node.args or node.inputs or (None,))[0]  # an op's result or a constant (a mask)
        if data is None or not node.outputs or len(data.shape) != 4:
            return "its input is not a 4-D tensor"
        (_, _, h, w), (_, _, oh, ow) = data.shape, node.outputs[0].shape
        if min(h, w, oh, ow) <= 0 or oh % h or ow % w:
            return f"{h}x{w} -> {oh}x{ow} is not an integer scale"
        if oh // h != ow // w:
            return f"height x{oh // h} and width x{ow // w} differ (UpSampling has one scale)"
        mode = str(attr(node, "coordinate_transformation_mode") or "half_pixel")
        rounding = str(attr(node, "rounding_method") or "")
        if oh == h:  # a copy: every mode reads the same pixel
            return ""
        if rounding not in NEAREST_AS_UPSAMPLING.get(mode, frozenset()):
            shown = rounding or "default"
            return f"coordinate mode {mode} with rounding {shown} does not read pixel floor(out/s)"
        return ""

    def describe(self) -> str:
        return (f"{self.name} ({_ops_text(self.ops)}): nearest_neighbor, NCHW, one integer scale, "
                f"coordinates as MXNet {self.upsampling_op}; other methods rejected")

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "upsampling_op": self.upsampling_op,
                "compiler": self.compiler, "sources": dict(self.sources)}


def _onnx_mode(method: str) -> str:
    return {"nearest_neighbor": "nearest"}.get(method, method)
