"""OpGraph + plans (+ weights) as portable files, for running partitions where TVM is not.

The GPU machine has PyTorch but no TVM, so everything the executor there needs is exported
here as plain JSON: the graph (ops, attributes, tensor types, edges), how each call argument
binds to a tensor or a weight (:class:`ArgRef`), the plans of several strategies and free-form
metadata (predicted times...). Weights are not exported: both sides generate them from the
shapes and a seed (:func:`partition_lab.executors.weights.synthetic_weights`), or take them from the
Relay module here (:func:`weights_from_relay`).

A bundle file (schema ``partition_lab.bundle/2``, gzip-compressed JSON)::

    {"schema": "partition_lab.bundle/2", "meta": {...},
     "platform": {"name", "description", "devices": [{"name", "role", "memory", "compiler",
                  "precision", "preference", "colour", "profile", "matrix_engine"}, ...],
                  "links": [{"memories": [a, b], "profile"}]},
     "graph": {"name", "nodes": [...], "edges": [[producer, index, consumer], ...],
               "inputs": {name: {"shape", "dtype", "consumers"}}, "outputs": [[node, index]]},
     "bindings": [[["t", "<tensor key>"] | ["w", <weight index>], ...] per node],
     "plans": {strategy: PartitionPlan.to_dict()}}

The platform travels as data (:func:`platform_to_dict`), so the GPU machine rebuilds the same
devices, memory spaces and precisions without TVM (:func:`platform_from_dict`); every plan of
the bundle is read against it. Bundles of schema ``partition_lab.bundle/1`` (no platform; plans
of schema plan/1 or plan/2) still load.

Nothing here imports TVM at module level; :func:`bindings_from_relay` and
:func:`weights_from_relay` import it when called.
"""

from __future__ import annotations

import gzip
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .._io import GZIP_ERRORS, check_regular_file, read_gzip_limited
from ..core.graph import DTYPE_BYTES, OpGraph, OpNode, TensorType
from ..core.plan import PartitionPlan
from ..core.plan_validation import check_verdicts
from ..core.platform import (
    AS_PREPARED,
    COMPILER_NAME,
    PRECISIONS,
    Device,
    Link,
    Platform,
    device_patterns,
    host_device,
)
from ..core.verdicts import AcceptsAll
from ..errors import PartitionLabError, PlanError
from ..targets import get_platform

SCHEMA = "partition_lab.bundle/2"
SCHEMAS = ("partition_lab.bundle/1", SCHEMA)


@dataclass(frozen=True)
class ArgRef:
    """What one flattened call argument is: a tensor (by key) or the node's ``index``-th weight."""

    kind: str  # "tensor" or "weight"
    key: str = ""
    index: int = -1

    def to_json(self) -> list[Any]:
        return ["t", self.key] if self.kind == "tensor" else ["w", self.index]

    @classmethod
    def from_json(cls, data: Sequence[Any]) -> ArgRef:
        tag, value = data
        return cls("tensor", key=str(value)) if tag == "t" else cls("weight", index=int(value))


#: Per node, its flattened call arguments in call order.
Bindings = tuple[tuple[ArgRef, ...], ...]


@dataclass
class Bundle:
    """A graph with its argument bindings, plans by strategy name, and metadata."""

    graph: OpGraph
    bindings: Bindings
    plans: dict[str, PartitionPlan] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    platform: Platform | None = None  #: default: the first plan's platform

    def __post_init__(self) -> None:
        if self.platform is None and self.plans:
            self.platform = next(iter(self.plans.values())).platform


# ---------------------------------------------------------------------------- TVM side
def bindings_from_relay(relay_graph: Any) -> Bindings:
    """The argument bindings of a :class:`~partition_lab.relay.relay_graph.RelayGraph`.

    The OpGraph records argument types in call order but not which tensor each one is (its
    edges are per producer); executing the graph needs that order (``divide(a, b)``).
    """
    from tvm import relay

    graph: OpGraph = relay_graph.graph
    node_of = relay_graph.node_of
    key_of = {(t.producer, t.index): t.key for t in graph.tensors if t.producer is not None}
    bindings = []
    for node_id, parts in enumerate(relay_graph.parts):
        refs: list[ArgRef] = []
        for leaf in _leaves(parts.args):
            if isinstance(leaf, relay.TupleGetItem):
                leaf = _tuple_item(leaf, graph)
            if isinstance(leaf, tuple):  # (producer call, output index) of a TupleGetItem
                refs.append(ArgRef("tensor", key=key_of[(node_of(leaf[0]), leaf[1])]))
            elif isinstance(leaf, relay.Call):
                producer = node_of(leaf)
                refs.extend(ArgRef("tensor", key=key_of[(producer, index)])
                            for index in range(len(graph[producer].outputs)))
            elif isinstance(leaf, relay.Var) and leaf.name_hint in graph.graph_inputs:
                refs.append(ArgRef("tensor", key=f"input:{leaf.name_hint}"))
            else:  # a constant or a parameter variable: the node's next weight
                refs.append(ArgRef("weight", index=sum(r.kind == "weight" for r in refs)))
        _check_binding(graph[node_id], refs)
        bindings.append(tuple(refs))
    return tuple(bindings)


def _leaves(args: Any) -> list[Any]:
    """Call arguments with Relay tuples flattened, in order."""
    from tvm import relay

    leaves: list[Any] = []
    for expr in args:
        if isinstance(expr, relay.Tuple):
            leaves.extend(_leaves(expr.fields))
        else:
            leaves.append(expr)
    return leaves


def _tuple_item(expr: Any, graph: OpGraph) -> Any:
    """What ``tuple[index]`` reads: ``(call, output index)`` of a tuple-producing call, or the
    field of a tuple literal (a call, a graph input, a constant; nested items resolved)."""
    from tvm import relay

    inner = expr.tuple_value
    if isinstance(inner, relay.Call):
        return inner, expr.index
    if isinstance(inner, relay.Tuple):
        field_expr = inner.fields[expr.index]
        if isinstance(field_expr, relay.TupleGetItem):
            return _tuple_item(field_expr, graph)
        if isinstance(field_expr, relay.Call | relay.Var | relay.Constant):
            return field_expr
    raise PartitionLabError(f"cannot bind {type(inner).__name__}[{expr.index}] in {graph.name}")


def _check_binding(node: OpNode, refs: Sequence[ArgRef]) -> None:
    n_weights = sum(ref.kind == "weight" for ref in refs)
    if len(refs) != len(node.args) or n_weights != len(node.weights):
        raise PartitionLabError(
            f"node {node.name}: bound {len(refs)} args ({n_weights} weights) but the graph "
            f"records {len(node.args)} ({len(node.weights)} weights)")


def weights_from_relay(result: Any) -> dict[int, list[np.ndarray]]:
    """The constant arguments of every node of a :class:`PartitionResult`, in weight order.

    ``result.relay.calls[node]`` holds them as Relay constants (params were bound). Returns
    ``{node id: [array, ...]}`` for nodes with weights.
    """
    from tvm import relay

    weights: dict[int, list[np.ndarray]] = {}
    graph_inputs = result.graph.graph_inputs
    for node_id, call in enumerate(result.relay.calls):
        arrays: list[np.ndarray] = []
        for leaf in _leaves(call.args):
            if isinstance(leaf, relay.Constant):
                arrays.append(leaf.data.numpy())
            elif isinstance(leaf, relay.Var) and leaf.name_hint not in graph_inputs:
                raise PartitionLabError(
                    f"parameter {leaf.name_hint} of {result.graph[node_id].name} is not bound: "
                    "partition with params=... so that weights are constants")
        if arrays:
            weights[node_id] = arrays
    return weights


# ---------------------------------------------------------------------------- (de)serialisation
def graph_to_dict(graph: OpGraph) -> dict[str, Any]:
    """A JSON-ready description of ``graph`` (inverse: :func:`graph_from_dict`)."""
    edges = []
    for tensor in graph.tensors:
        if tensor.producer is not None:
            edges.extend([tensor.producer, tensor.index, c] for c in tensor.consumers)
    return {
        "name": graph.name,
        "nodes": [_node_to_dict(node) for node in graph.nodes],
        "edges": edges,
        "inputs": {name: {**_type_to_dict(t.spec), "consumers": list(t.consumers)}
                   for name, t in graph.graph_inputs.items()},
        "outputs": [list(out) for out in graph.outputs],
    }


class BundleFieldError(ValueError):
    """A field of a bundle holds what no bundle writer writes (``where`` names it)."""

    def __init__(self, where: str, expected: str, value: Any) -> None:
        super().__init__(f"{where} must be {expected}, got {_short(value)}")


#: The most elements a tensor of a bundle's graph may have (the frontends' input limit).
MAX_TENSOR_ELEMENTS = 2**32
#: The most FLOPs one op of a bundle's graph may count (the profile cache's limit for amounts).
MAX_OP_FLOPS = 1e18


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def graph_from_dict(data: Mapping[str, Any]) -> OpGraph:
    """The OpGraph described by :func:`graph_to_dict`'s output.

    Raises
    ------
    BundleFieldError
        A shape that is not a list of non-negative ints (or has more than
        :data:`MAX_TENSOR_ELEMENTS` elements), a dtype outside
        :data:`~partition_lab.core.graph.DTYPE_BYTES`, or a FLOP count that is not a finite number in
        [0, :data:`MAX_OP_FLOPS`]: such numbers would price an op as NaN, infinite or negative.
    """
    nodes = [_node_from_dict(raw, f"graph.nodes[{i}]") for i, raw in enumerate(data["nodes"])]
    inputs = {name: (_type_from_dict(raw, f"graph.inputs[{name!r}]"), raw["consumers"])
              for name, raw in data["inputs"].items()}
    edges = [tuple(edge) for edge in data["edges"]]
    return OpGraph(nodes, edges, inputs, [tuple(out) for out in data["outputs"]], data["name"])


def _node_to_dict(node: OpNode) -> dict[str, Any]:
    return {
        "id": node.id, "op": node.op, "name": node.name, "source_name": node.source_name,
        "inputs": [_type_to_dict(t) for t in node.inputs],
        "outputs": [_type_to_dict(t) for t in node.outputs],
        "weights": [_type_to_dict(t) for t in node.weights],
        "args": [_type_to_dict(t) for t in node.args],
        "attrs": _jsonable(dict(node.attrs)), "flops": node.flops,
    }


def _node_from_dict(raw: Mapping[str, Any], where: str = "node") -> OpNode:
    def types(key: str) -> tuple[TensorType, ...]:
        return tuple(_type_from_dict(t, f"{where}.{key}[{i}]") for i, t in enumerate(raw[key]))

    flops = raw["flops"]
    if isinstance(flops, bool) or not isinstance(flops, int | float) \
            or not 0 <= flops <= MAX_OP_FLOPS:  # NaN fails the comparison too
        raise BundleFieldError(f"{where}.flops", f"a number in [0, {MAX_OP_FLOPS:g}]", flops)
    return OpNode(
        id=raw["id"], op=raw["op"], name=raw["name"], source_name=raw["source_name"],
        inputs=types("inputs"), outputs=types("outputs"), weights=types("weights"),
        attrs=_tuples(raw["attrs"]), flops=float(flops), args=types("args"),
    )


def _type_to_dict(spec: TensorType) -> dict[str, Any]:
    return {"shape": list(spec.shape), "dtype": spec.dtype}


def _type_from_dict(raw: Mapping[str, Any], where: str = "tensor") -> TensorType:
    shape = raw["shape"]
    if not isinstance(shape, list) or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise BundleFieldError(f"{where}.shape", "a list of non-negative integers", shape)
    if math.prod(shape) > MAX_TENSOR_ELEMENTS:
        raise BundleFieldError(f"{where}.shape", "a shape of at most 2**32 elements", shape)
    if not isinstance(raw["dtype"], str) or raw["dtype"] not in DTYPE_BYTES:
        # an unknown dtype would be priced as 4 bytes an element without a word
        raise BundleFieldError(f"{where}.dtype", f"one of {', '.join(DTYPE_BYTES)}", raw["dtype"])
    return TensorType(tuple(shape), raw["dtype"])


def _jsonable(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value


def _tuples(value: Any) -> Any:
    """JSON lists back to the tuples that Relay attributes were converted to."""
    if isinstance(value, list):
        return tuple(_tuples(v) for v in value)
    if isinstance(value, dict):
        return {k: _tuples(v) for k, v in value.items()}
    return value


# ---------------------------------------------------------------------------- platforms
def platform_to_dict(platform: Platform) -> dict[str, Any]:
    """The devices of ``platform`` as data (inverse: :func:`platform_from_dict`).

    Support rules are code and do not travel: every plan carries its own per-device verdicts.
    """
    return {
        "name": platform.name, "description": platform.description,
        "devices": [{"name": d.name, "role": d.role, "memory": d.memory, "compiler": d.compiler,
                     "precision": d.precision, "preference": d.preference, "colour": d.colour,
                     "profile": d.profile, "matrix_engine": d.matrix_engine,
                     "description": d.description, **device_patterns(d)}
                    for d in platform.devices],
        "links": [{"memories": sorted(lk.memories), "profile": lk.profile}
                  for lk in platform.links],
    }


def platform_from_dict(data: Mapping[str, Any]) -> Platform:
    """The platform :func:`platform_to_dict` described: same device names, roles, memory
    spaces, precisions and preferences; each non-host device's target accepts every op (a plan's
    own verdicts say what it may hold). Needs no TVM.

    >>> from partition_lab.targets import get_platform
    >>> back = platform_from_dict(platform_to_dict(get_platform("tensorcore")))
    >>> [(d.name, d.memory, d.precision) for d in back.devices]
    [('tensorcore', 'gpu', 'as-prepared'), ('cuda', 'gpu', 'as-prepared'), ('cpu', 'host', 'float32')]
    """
    devices = []
    for index, entry in enumerate(data["devices"]):
        where = f"platform.devices[{index}]"
        precision = entry.get("precision", AS_PREPARED)
        if precision not in PRECISIONS:
            raise BundleFieldError(f"{where}.precision", f"one of {list(PRECISIONS)}", precision)
        preference = entry["preference"]
        if isinstance(preference, bool) or not isinstance(preference, int) \
                or abs(preference) > 2**31:
            raise BundleFieldError(f"{where}.preference", "an integer", preference)
        matrix_engine = entry.get("matrix_engine", True)
        if not isinstance(matrix_engine, bool):
            raise BundleFieldError(f"{where}.matrix_engine", "true or false", matrix_engine)
        if entry["role"] not in ("byoc", "main", "host"):
            raise BundleFieldError(f"{where}.role", "byoc, main or host", entry["role"])
        name, memory = entry["name"], entry["memory"]
        if not isinstance(memory, str) or not memory:
            raise BundleFieldError(f"{where}.memory", "a memory space name", memory)
        if entry["role"] == "host":
            host = host_device(precision)
            if name != host.name:  # was renamed to the host's name without a word
                raise BundleFieldError(f"{where}.name", f"{host.name!r} (the host)", name)
            devices.append(Device(host.name, host.target, role="host", memory=memory,
                                  precision=precision, preference=preference,
                                  colour=entry.get("colour") or host.colour,
                                  description=entry.get("description", host.description)))
            continue
        if not isinstance(name, str) or not name or name.lower() != name.strip().lower() \
                or name.lower() in ("cpu", "host", "llvm"):
            raise BundleFieldError(f"{where}.name", "a device name other than cpu, host and "
                                   "llvm", name)
        compiler = entry.get("compiler")
        if compiler is not None and not (isinstance(compiler, str)
                                         and COMPILER_NAME.match(compiler)):
            raise BundleFieldError(f"{where}.compiler", "a name of letters, digits and _",
                                   compiler)
        devices.append(Device(
            name, AcceptsAll(name, patterns=frozenset(entry.get("patterns", ()))),
            role=entry["role"],
            memory=memory, compiler=compiler, precision=precision,
            preference=preference, colour=entry.get("colour", ""),
            profile=entry.get("profile"), matrix_engine=matrix_engine,
            description=entry.get("description", "")))
    memories = {d.memory for d in devices}
    links = []
    for index, lk in enumerate(data.get("links", [])):
        pair = lk["memories"]
        if not isinstance(pair, list) or len(pair) != 2 or len(set(map(str, pair))) != 2 \
                or not set(pair) <= memories:
            raise BundleFieldError(f"platform.links[{index}].memories",
                                   f"two of the devices' memories {sorted(memories)}", pair)
        links.append(Link(frozenset(pair), lk.get("profile")))
    links = tuple(links)
    return Platform(str(data["name"]), tuple(devices), links,
                    description=str(data.get("description", "")))


# ---------------------------------------------------------------------------- bundle files
def write_bundle(path: str | Path, bundle: Bundle) -> Path:
    """Write ``bundle`` as gzip-compressed JSON (see the module docstring)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    platforms = {plan.platform.name for plan in bundle.plans.values()}
    if bundle.platform is not None and platforms - {bundle.platform.name}:
        raise PartitionLabError(f"bundle plans are for {sorted(platforms)}, the bundle's platform "
                                f"is {bundle.platform.name!r}")
    payload = {
        "schema": SCHEMA,
        "meta": _jsonable(bundle.meta),
        "platform": platform_to_dict(bundle.platform) if bundle.platform is not None else None,
        "graph": graph_to_dict(bundle.graph),
        "bindings": [[ref.to_json() for ref in refs] for refs in bundle.bindings],
        "plans": {name: plan.to_dict() for name, plan in bundle.plans.items()},
    }
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        json.dump(payload, handle, separators=(",", ":"))
    return path


def read_bundle(path: str | Path) -> Bundle:
    """Read a file written by :func:`write_bundle`.

    Raises
    ------
    PartitionLabError
        If the file is missing, not a bundle, or its bindings do not fit its graph.
    """
    path = Path(path)
    check_regular_file(path, "bundle", PartitionLabError)
    if not path.is_file():
        raise PartitionLabError(f"bundle {path} does not exist")
    data = _bundle_json(path)
    if not isinstance(data, dict) or data.get("schema") not in SCHEMAS:
        raise PartitionLabError(f"bundle {path}: 'schema' must be one of {SCHEMAS}")
    try:
        return _bundle_from_dict(data, path)
    except PlanError as err:
        raise PlanError(f"bundle {path}: {err}") from None
    except BundleFieldError as err:
        raise PartitionLabError(f"bundle {path}: {err}; export it again (docs/guide/"
                                "profiling.md: profiling a bundle)") from None
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as err:
        # Hand-edited or cut JSON: say where, in one line, instead of a bare KeyError.
        what = f"key {err}" if isinstance(err, KeyError) else str(err).splitlines()[0]
        raise PartitionLabError(f"bundle {path} is malformed ({type(err).__name__}: {what}); "
                                "write it again with 'partition-lab profile'") from None


#: The most bytes a bundle may inflate to: a bundle holds a graph and its bindings, no weights
#: (a 20,000-op graph is tens of MB), so more is a damaged or hostile file, refused before it
#: fills memory.
MAX_BUNDLE_BYTES = 256 * 2**20


def _bundle_json(path: Path) -> Any:
    """The bundle's JSON, inflated at most :data:`MAX_BUNDLE_BYTES`."""
    try:
        text = read_gzip_limited(path, MAX_BUNDLE_BYTES).decode("utf-8")
        return json.loads(text)
    except ValueError as err:  # JSONDecodeError and UnicodeDecodeError are ValueErrors too
        if isinstance(err, json.JSONDecodeError | UnicodeDecodeError):
            raise PartitionLabError(f"bundle {path} is not gzip-compressed JSON: {err}") from None
        raise PartitionLabError(f"bundle {path} is not a bundle: {err}, more than any bundle "
                                "holds (a damaged file?); write it again with "
                                "'partition-lab profile'") from None
    except GZIP_ERRORS as err:
        raise PartitionLabError(f"bundle {path} is not gzip-compressed JSON: {err}") from None
    except RecursionError:
        raise PartitionLabError(f"bundle {path} nests its JSON too deeply to be a bundle; "
                                "write it again with 'partition-lab profile'") from None


def _registered_rules(platform: Platform | None) -> Platform | None:
    """The registered platform of the bundle's platform name, with its real support rules, when
    its verdicts can be computed again from the bundle's graph: same devices (names and
    precisions) and no preparation steps. A platform that prepares the graph (layouts, mixed
    precision) judged ops that the bundle does not keep, so its rules cannot be re-run here;
    None then, and only the plan's invariants are checked."""
    if platform is None:
        return None
    try:
        registered = get_platform(platform.name)
    except PartitionLabError:
        return None
    same = [(d.name, d.precision) for d in registered.devices] == \
        [(d.name, d.precision) for d in platform.devices]
    return registered if same and not registered.prepare_steps() else None


def _bundle_from_dict(data: Mapping[str, Any], path: Path) -> Bundle:
    """The bundle in ``data``; every plan checked against the graph (see plan_validation)."""
    graph = graph_from_dict(data["graph"])
    bindings = tuple(tuple(ArgRef.from_json(ref) for ref in refs) for refs in data["bindings"])
    if len(bindings) != len(graph):
        raise PartitionLabError(f"bundle {path}: {len(bindings)} bindings for {len(graph)} nodes")
    for node, refs in zip(graph.nodes, bindings, strict=True):
        _check_binding(node, refs)
    platform = platform_from_dict(data["platform"]) if data.get("platform") else None
    rules = _registered_rules(platform)
    plans = {}
    for name, raw in data["plans"].items():
        try:
            plans[name] = PartitionPlan.from_dict(graph, raw, platform=platform)
            if rules is not None:
                check_verdicts(plans[name].graph, plans[name].support, rules)
        except PlanError as err:
            raise PlanError(f"plan {name!r}: {err}") from None
    return Bundle(graph, bindings, plans, dict(data.get("meta", {})), platform)
