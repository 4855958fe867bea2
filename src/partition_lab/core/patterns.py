"""Patterns: the composite ops that importers decompose (LayerNorm, GELU, SiLU...), found in an
OpGraph so that support is judged for the whole unit, as accelerator compilers and TVM's BYOC
pattern tables (``MergeComposite``) judge it.

A :class:`Pattern` is a small DAG template: :class:`Step` s in topological order, each an op (or
alternatives) and its arguments, every argument either an earlier step (by index) or a named
value from outside the pattern (``"x"``: every use of one name must be the same tensor). The last
step is the pattern's output. Arguments are matched as a set, in any order (an
:class:`~.graph.OpNode` lists its input tensors, not which position each fills); constant
operands (weights: epsilon, gamma, 0.5) are not arguments. A match is a :class:`Unit` only if no
node but its output is read outside it, so the unit can stand for one composite op.

:func:`find_units` matches every pattern of a library (largest first) and returns units that do
not overlap. :data:`~.pattern_library.PATTERNS` is the built-in library, each pattern in the
forms that TVM's ONNX importer and ``torch.export`` -> ONNX produce; ``stands_for`` names the
Relay op(s) a compiler maps the unit to, whose support decides the unit's (empty: the unit is
supported where each of its ops is).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .graph import OpGraph, OpNode, TensorType

Arg = int | str


@dataclass(frozen=True)
class Step:
    """One op of a pattern: its op names, its arguments (earlier steps or named values) and
    attribute constraints (``(("axis", (-1,)),)``: the node's attribute must equal the value;
    lists and tuples compare alike)."""

    ops: frozenset[str]
    args: tuple[Arg, ...]
    attrs: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def of(cls, ops: str | Iterable[str], *args: Arg, **attrs: Any) -> Step:
        return cls(frozenset([ops] if isinstance(ops, str) else ops), tuple(args),
                   tuple((name, _plain(value)) for name, value in sorted(attrs.items())))

    def accepts(self, node: OpNode) -> bool:
        """Whether ``node`` has one of this step's ops and every constrained attribute."""
        return node.op in self.ops and all(
            name in node.attrs and _plain(node.attrs[name]) == value for name, value in self.attrs)


def _plain(value: Any) -> Any:
    """``value`` with lists turned into tuples (recursively), so TOML lists match Relay tuples."""
    if isinstance(value, list | tuple):
        return tuple(_plain(v) for v in value)
    return value


@dataclass(frozen=True)
class Pattern:
    """A composite op as a DAG template (see the module docstring).

    ``name`` is what a unit is called (``layer_norm``, the ``Composite`` name a codegen sees);
    ``stands_for`` the Relay ops whose support decides the unit's; ``form`` tells the variants
    of one pattern apart (which importer writes it that way); ``construct`` is the construct in a
    reason's words where the name alone does not say it (``embedding lookup with {dtype} ids``:
    ``{dtype}`` is the dtype of the first tensor the unit reads from outside). ``check``, where given, is asked
    of every match (the graph and the matched nodes in step order) and must return True: the
    shape conditions that make ``expand_dims``, ``broadcast_to``, ``reshape`` a ``repeat``.
    """

    name: str
    steps: tuple[Step, ...]
    stands_for: tuple[str, ...] = ()
    form: str = ""
    description: str = ""
    # keyword-only: a positional argument after ``description`` is easily given to the wrong one
    construct: str = field(default="", kw_only=True)
    check: Callable[[OpGraph, Sequence[int]], bool] | None = field(
        default=None, compare=False, repr=False, kw_only=True)

    def __post_init__(self) -> None:
        if not self.steps:
            raise ValueError(f"pattern {self.name!r} has no steps")
        used: set[int] = set()
        for index, step in enumerate(self.steps):
            for arg in step.args:
                if isinstance(arg, int):
                    if not 0 <= arg < index:
                        raise ValueError(f"pattern {self.name!r}: step {index} refers to step "
                                         f"{arg}, which does not come before it")
                    used.add(arg)
        unused = [i for i in range(len(self.steps) - 1) if i not in used]
        if unused:
            raise ValueError(f"pattern {self.name!r}: steps {unused} feed no later step, so "
                             "the last step is not the only output")

    @property
    def ops(self) -> list[str]:
        """One op name per step, for messages (``mean, subtract, variance, ...``)."""
        return [sorted(step.ops)[0] for step in self.steps]


@dataclass(frozen=True)
class Unit:
    """A pattern matched in a graph: ``nodes`` in step order (casts seen through just before the
    step that reads them, see :class:`_Inputs`); the last is its output."""

    pattern: Pattern
    nodes: tuple[int, ...]

    @property
    def output(self) -> int:
        return self.nodes[-1]

    @property
    def name(self) -> str:
        return self.pattern.name


@dataclass
class _Inputs:
    """Per node: its input tensors as ``(tensor key, producer node or None)``, seen through
    casts. ToMixedPrecision keeps ``erf`` and ``softmax`` in float32 with a ``cast`` on each
    side, which would hide GELU and attention: a cast read only by one node is transparent here,
    and ``via[(node, key)]`` lists the casts skipped on that input, which join the unit.
    ``source[key]`` is the tensor that a cast's output ``key`` casts (through chains of casts):
    a named value matches the tensor or a cast of it, as ToMixedPrecision gives GELU-tanh's
    float32 ops ``cast(x)`` and its ``0.5 * x`` ``x`` itself."""

    of: dict[int, list[tuple[str, int | None]]] = field(default_factory=dict)
    via: dict[tuple[int, str], tuple[int, ...]] = field(default_factory=dict)
    source: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of_graph(cls, graph: OpGraph) -> _Inputs:
        raw: dict[int, list[tuple[str, int | None]]] = {node.id: [] for node in graph}
        for tensor in graph.tensors:
            for consumer in tensor.consumers:
                raw[consumer].append((tensor.key, tensor.producer))
        found = cls({node: [] for node in raw})
        for node, tensors in raw.items():
            for key, producer in tensors:
                skipped: list[int] = []
                while producer is not None and _transparent(graph, raw, producer):
                    skipped.insert(0, producer)
                    key, producer = raw[producer][0]
                found.of[node].append((key, producer))
                if skipped:
                    found.via[(node, key)] = tuple(skipped)
        for node in graph:
            if node.op == "cast" and len(raw[node.id]) == 1:
                origin = raw[node.id][0][0]
                for out in graph.tensors_of(node.id):
                    found.source[out.key] = found.source.get(origin, origin)
        return found


def _transparent(graph: OpGraph, raw: Mapping[int, list[tuple[str, int | None]]],
                 node: int) -> bool:
    """A ``cast`` of one tensor whose result only one node reads."""
    if graph[node].op != "cast" or len(raw[node]) != 1:
        return False
    (out,) = graph.tensors_of(node) or (None,)
    return out is not None and not out.is_output and len(out.consumers) == 1


def match_at(graph: OpGraph, pattern: Pattern, output: int,
             inputs: _Inputs | None = None) -> Unit | None:
    """The unit of ``pattern`` whose output is node ``output``, or None."""
    inputs = inputs or _Inputs.of_graph(graph)
    last = len(pattern.steps) - 1
    found = _solve(graph, pattern, inputs, last, {last: output}, {})
    if found is None:
        return None
    if pattern.check is not None and not pattern.check(
            graph, [found[i] for i in range(len(pattern.steps))]):
        return None
    nodes: list[int] = []
    for node in (found[i] for i in range(len(pattern.steps))):
        for key, _ in inputs.of[node]:  # the casts seen through, just before their reader
            nodes.extend(inputs.via.get((node, key), ()))
        nodes.append(node)
    if len(set(nodes)) != len(nodes) or not _closed(graph, nodes):
        return None
    return Unit(pattern, tuple(nodes))


def _solve(graph: OpGraph, pattern: Pattern, inputs: _Inputs, step: int,
           assign: dict[int, int], bind: dict[str, str]) -> dict[int, int] | None:
    """Assignments of steps ``step, step-1, ..., 0`` to nodes that satisfy the pattern."""
    if step < 0:
        return assign
    if step not in assign:
        return None  # unreachable for a validated pattern: every step feeds a later one
    node = graph[assign[step]]
    spec = pattern.steps[step]
    tensors = inputs.of[node.id]
    # A node lists a tensor it reads twice once (x * x has one input), so an argument named
    # twice is one tensor.
    args = tuple(dict.fromkeys(spec.args))
    if not spec.accepts(node) or len(tensors) != len(args):
        return None
    for order in _orders(len(tensors)):
        trial, names = dict(assign), dict(bind)
        if all(_bind(arg, tensors[i], trial, names, inputs.source)
               for arg, i in zip(args, order, strict=True)):
            solved = _solve(graph, pattern, inputs, step - 1, trial, names)
            if solved is not None:
                return solved
    return None


def _orders(count: int) -> Iterable[tuple[int, ...]]:
    return itertools.permutations(range(count)) if count <= 4 else [tuple(range(count))]


def _bind(arg: Arg, tensor: tuple[str, int | None], assign: dict[int, int],
          names: dict[str, str], source: Mapping[str, str]) -> bool:
    key, producer = tensor
    if isinstance(arg, str):
        value = source.get(key, key)  # a cast of x is x
        if names.setdefault(arg, value) != value:
            return False
        return producer is None or producer not in assign.values()
    if producer is None:
        return False
    if arg in assign:
        return assign[arg] == producer
    if producer in assign.values():
        return False
    assign[arg] = producer
    return True


def _closed(graph: OpGraph, nodes: Sequence[int]) -> bool:
    """No node but the output is read outside the unit or is a graph output."""
    inside = set(nodes)
    for node in nodes[:-1]:
        for tensor in graph.tensors_of(node):
            if tensor.is_output or any(c not in inside for c in tensor.consumers):
                return False
    return True


def find_units(graph: OpGraph, patterns: Iterable[Pattern]) -> list[Unit]:
    """Every non-overlapping unit of ``patterns`` (a library such as
    :data:`~.pattern_library.PATTERNS`) in ``graph``.

    Larger patterns are matched first, then by output node; a node belongs to one unit at most.
    """
    library = sorted(patterns,
                     key=lambda p: (-len(p.steps), p.name, p.form))
    last_ops = {op for pattern in library for op in pattern.steps[-1].ops}
    candidates = [node.id for node in graph if node.op in last_ops]
    inputs = _Inputs.of_graph(graph)
    taken: set[int] = set()
    units: list[Unit] = []
    for pattern in library:
        for output in candidates:
            if output in taken or graph[output].op not in pattern.steps[-1].ops:
                continue
            unit = match_at(graph, pattern, output, inputs)
            if unit is not None and not taken.intersection(unit.nodes):
                units.append(unit)
                taken.update(unit.nodes)
    return sorted(units, key=lambda u: u.output)


#: The op name prefix of a unit priced as one op (:func:`composite_node`).
COMPOSITE_OP_PREFIX = "composite:"


def composite_node(graph: OpGraph, unit: Unit) -> OpNode:
    """The unit as one op, as a compiler that maps it to one kernel runs it: op
    ``composite:<pattern>``, the unit's FLOPs, the tensors it reads from outside, its weights and
    its output's outputs (intermediate tensors never reach memory). ``attrs["members"]`` lists
    the ops it stands for (:func:`~.ops.op_class` reads them). Cost models price this node in
    place of the unit's ops.
    """
    inside = set(unit.nodes)
    reads: dict[str, TensorType] = {}
    for tensor in graph.tensors:
        if tensor.producer not in inside and inside.intersection(tensor.consumers):
            reads.setdefault(tensor.key, tensor.spec)
    members = [graph[n] for n in unit.nodes]
    output = graph[unit.output]
    return OpNode(
        id=output.id, op=COMPOSITE_OP_PREFIX + unit.name, name=output.name,
        source_name=output.source_name, inputs=tuple(reads.values()), outputs=output.outputs,
        weights=tuple(w for node in members for w in node.weights),
        attrs={"members": tuple(node.op for node in members)},
        flops=sum(node.flops for node in members))


def units_to_data(units: Sequence[Unit]) -> list[dict[str, Any]]:
    """Units as JSON-ready records (a plan file's ``units``): pattern name, form and nodes."""
    return [{"pattern": u.name, "form": u.pattern.form, "nodes": list(u.nodes)} for u in units]


def units_from_data(records: Sequence[Mapping[str, Any]],
                    library: Iterable[Pattern]) -> list[Unit]:
    """The inverse of :func:`units_to_data`. A pattern not in ``library`` (a target file's own)
    comes back as a stand-in of the same name: a read plan needs only the name and
    the nodes (its verdicts travel with it)."""
    known = {(p.name, p.form): p for p in library}
    units = []
    for record in records:
        nodes = tuple(int(n) for n in record["nodes"])
        pattern = known.get((record["pattern"], record.get("form", "")))
        if pattern is None:
            steps = tuple(Step.of("any", i - 1 if i else "x") for i in range(len(nodes)))
            pattern = Pattern(str(record["pattern"]), steps, (), str(record.get("form", "")))
        units.append(Unit(pattern, nodes))
    return units


def unit_of_node(units: Sequence[Unit]) -> Mapping[int, Unit]:
    """``{node: its unit}`` for every node in a unit."""
    return {node: unit for unit in units for node in unit.nodes}
