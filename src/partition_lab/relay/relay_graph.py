"""Relay function -> OpGraph, keeping the link from every node back to its Relay call.

One traversal in post-order: each ``Call`` of a primitive op becomes a node; ``Tuple`` and
``TupleGetItem`` are folded into their producers and consumers (see ``graph.py``). Bound
constants and parameter variables are weights; other free variables are graph inputs.

Every read of a TVM object's field is a foreign-function call (about 10 us with TVM's ctypes
FFI), and reading attributes field by field took 60k of them on DenseNet-201. So the reader
touches each expression only for its structure (op, arguments) and fetches every call's type,
attributes and span in one ``tvm.ir.save_json`` of an array of those objects, decoded here
(:class:`_JsonValues`). Constants stay out of that array: their data would be serialized too.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import tvm
from tvm import relay

from .._audience import shapes_hint
from ..core.graph import OpGraph, OpNode, TensorType
from ..core.ops import estimate_flops
from ..core.provenance import recorded_exporter
from ..errors import InputShapeError, PartitionLabError

TensorRef = tuple[int, int]  # (node id, output index)
ArgRef = tuple[TensorRef | tuple[str, str] | None, TensorType]  # None: a weight


@dataclass(frozen=True)
class CallParts:
    """The pieces of one Relay call, read once so that rewriting it costs no further reads."""

    op: tvm.ir.Op
    args: tuple[relay.Expr, ...]
    attrs: Any
    span: Any


@dataclass
class RelayGraph:
    """An OpGraph plus the Relay calls its nodes came from (``calls[node_id]``, and their
    pieces in ``parts[node_id]``)."""

    graph: OpGraph
    function: relay.Function
    calls: list[relay.Call]
    input_vars: dict[str, relay.Var]
    parts: list[CallParts]
    node_by_key: dict[int, int]  # object_key(call) -> node id

    def node_of(self, expr: relay.Expr) -> int | None:
        """The node id of a call of this graph, or None for any other expression."""
        return self.node_by_key.get(object_key(expr))


def graph_from_relay(
    mod: tvm.IRModule | relay.Function,
    params: Mapping[str, Any] | None = None,
    name: str = "",
) -> OpGraph:
    """The OpGraph of ``mod["main"]`` (or of a function). Parameters named in ``params`` are weights."""
    return relay_graph(mod, params, name).graph


def relay_graph(
    mod: tvm.IRModule | relay.Function,
    params: Mapping[str, Any] | None = None,
    name: str = "",
) -> RelayGraph:
    """Like :func:`graph_from_relay`, also returning the node -> Relay call mapping."""
    if isinstance(mod, relay.Function):
        mod = tvm.IRModule.from_expr(mod)
    func = mod["main"]
    if not _is_typed(func):
        func = relay.transform.InferType()(mod)["main"]
    return _Builder(func, set(params or ()), name).build()


def _is_typed(func: relay.Function) -> bool:
    """Whether type inference already ran on ``func`` (nodes are immutable: a typed body was
    typed together with everything below it)."""
    try:
        func.body.checked_type  # noqa: B018 - raises when the type checker has not run
    except ValueError:
        return False
    return True


def object_key(obj: Any) -> int:
    """Identity of a TVM object without a foreign call (``hash``/``==`` on them are FFI calls)."""
    return obj.handle.value


def array_items(array: Any) -> tuple[Any, ...]:
    """The elements of a TVM Array in ``len + 1`` foreign calls (Array has no ``__iter__``, and
    indexing one checks its length each time: iterating costs two calls per element)."""
    get_item = tvm.runtime._ffi_api.ArrayGetItem
    return tuple(get_item(array, i) for i in range(len(array)))


class _Builder:
    """Reads the function's structure expression by expression, then all types, attributes
    and spans in one batch (see the module docstring)."""

    def __init__(self, func: relay.Function, param_names: set[str], name: str) -> None:
        self.func = func
        self.param_names = param_names
        self.name = name
        self.calls: list[relay.Call] = []
        self.ops: list[tvm.ir.Op] = []
        self.op_names: list[str] = []
        self.call_args: list[tuple[Any, ...]] = []
        self.call_attrs: list[Any] = []
        self.call_spans: list[Any] = []
        self.node_of: dict[int, int] = {}  # call handle -> node id
        self.refs_of: dict[int, list[ArgRef]] = {}  # handle of a Tuple/TupleGetItem/Var/Constant
        self.pending: list[tuple[int, Any, str]] = []  # (handle, expr, kind) typed after the batch
        self.input_vars: dict[str, relay.Var] = {}
        self.input_users: dict[str, list[int]] = {}
        self.input_types: dict[str, TensorType] = {}
        self.edges: list[tuple[int, int, int]] = []
        self.name_of_op: dict[int, str] = {}  # object_key(op) -> name, one read per op kind

    def build(self) -> RelayGraph:
        exprs: list[Any] = list(self.func.params)  # first: graph inputs keep the params' order
        relay.analysis.post_order_visit(self.func.body, exprs.append)
        for expr in exprs:
            self._visit(expr)
        batch = self._read_batch()
        n = len(self.calls)
        self._type_leaves(batch)  # first: a dynamic input is named, not the first op using it
        outputs = [tuple(_flat_types(self._call_type(batch, i))) for i in range(n)]
        attrs = batch.attrs_dicts(range(n, 2 * n), self.call_attrs)
        sources = [batch.source_name(2 * n + i) for i in range(n)]
        proto = [self._node_parts(i, outputs, attrs[i], sources[i]) for i in range(n)]
        names = _unique_names([(p["op"], p["source_name"]) for p in proto])
        nodes = [OpNode(id=i, name=names[i], **p) for i, p in enumerate(proto)]
        graph_outputs = [ref for ref, _ in self._refs(self.func.body, outputs)
                         if ref is not None and ref[0] != "input"]
        graph_inputs = {n: (self.input_types[n], self.input_users[n]) for n in self.input_types}
        graph = OpGraph(nodes, self.edges, graph_inputs, graph_outputs, self.name,
                        recorded_exporter(self.func))
        parts = [CallParts(*p) for p in zip(self.ops, self.call_args, self.call_attrs,
                                             self.call_spans, strict=True)]
        return RelayGraph(graph, self.func, self.calls, self.input_vars, parts, self.node_of)

    # ------------------------------------------------------------------ structure
    def _visit(self, expr: Any) -> None:
        if isinstance(expr, relay.Call):
            op = expr.op
            if not isinstance(op, tvm.ir.Op):
                raise PartitionLabError(
                    f"cannot partition a call to {op}: only calls of primitive Relay ops are "
                    "supported (was the module already partitioned or fused?)")
            op_key = object_key(op)
            if op_key not in self.name_of_op:
                self.name_of_op[op_key] = op.name
            self.node_of[object_key(expr)] = len(self.calls)
            self.calls.append(expr)
            self.ops.append(op)
            self.op_names.append(self.name_of_op[op_key])
            self.call_args.append(array_items(expr.args))
            self.call_attrs.append(expr.attrs)
            self.call_spans.append(expr.span)
        elif isinstance(expr, (relay.Var, relay.Constant)):
            handle = object_key(expr)
            if handle not in self.refs_of:
                self.refs_of[handle] = []  # typed after the batch read
                self.pending.append((handle, expr, type(expr).__name__))
        elif isinstance(expr, (relay.Tuple, relay.TupleGetItem, tvm.ir.Op)):
            pass  # resolved on demand from their fields
        elif isinstance(expr, (relay.Let, relay.If, relay.expr.RefCreate, relay.Function)) and (
                expr is not self.func):
            raise PartitionLabError(
                f"cannot partition a graph with {type(expr).__name__} expressions: partition_lab "
                "handles dataflow graphs (no control flow, closures or references)")

    def _read_batch(self) -> _JsonValues:
        """Types, attributes and spans of all calls, and types of the leaves, in one FFI call."""
        objects = ([call.checked_type for call in self.calls] + self.call_attrs + self.call_spans
                   + [expr.checked_type for _, expr, _ in self.pending])
        return _JsonValues(tvm.ir.save_json(tvm.runtime.convert(objects)))

    def _call_type(self, batch: _JsonValues, i: int) -> Any:
        try:
            return batch.value(i)
        except _DynamicShape as shape:
            op = self.op_names[i]
            raise PartitionLabError(
                f"the output of {op} has a dynamic shape {shape}: partitioning needs static "
                f"shapes, and {op} computes its output's shape from the data") from None

    def _type_leaves(self, batch: _JsonValues) -> None:
        first = 3 * len(self.calls)
        for k, (handle, expr, kind) in enumerate(self.pending):
            try:
                spec = _single_type(batch.value(first + k))
            except _DynamicShape as shape:
                if kind == "Var" and expr.name_hint not in self.param_names:
                    example = shapes_hint({expr.name_hint: shape.example()})
                    raise InputShapeError(
                        f"input {expr.name_hint!r} has a dynamic shape {shape}; give it a "
                        f"static one when loading the model, e.g. {example}") from None
                raise PartitionLabError(f"a weight has a dynamic shape {shape}") from None
            if kind == "Var":
                name = expr.name_hint
                if name not in self.param_names:
                    self.input_types[name] = spec
                    self.input_users[name] = []
                    self.input_vars[name] = expr
                    self.refs_of[handle] = [(("input", name), spec)]
                    continue
            self.refs_of[handle] = [(None, spec)]

    def _refs(self, expr: Any, outputs: list[tuple[TensorType, ...]]) -> list[ArgRef]:
        """The tensors an argument expression denotes, with their types.

        A reference is ``(node, output index)``, ``("input", name)``, or None for a weight.
        """
        handle = object_key(expr)
        node = self.node_of.get(handle)
        if node is not None:
            return [((node, i), spec) for i, spec in enumerate(outputs[node])]
        if handle in self.refs_of:
            return self.refs_of[handle]
        if isinstance(expr, relay.TupleGetItem):
            refs = [self._refs(expr.tuple_value, outputs)[expr.index]]
        elif isinstance(expr, relay.Tuple):
            refs = [ref for field in array_items(expr.fields) for ref in self._refs(field, outputs)]
        else:
            raise PartitionLabError(f"unsupported Relay expression {type(expr).__name__}")
        self.refs_of[handle] = refs
        return refs

    def _node_parts(self, node_id: int, outputs: list[tuple[TensorType, ...]],
                    attrs: dict[str, Any], source: str | None) -> dict[str, Any]:
        op = self.op_names[node_id]
        call_args = self.call_args[node_id]
        inputs: list[TensorType] = []
        weights: list[TensorType] = []
        args: list[TensorType] = []
        for arg in call_args:
            for ref, spec in self._refs(arg, outputs):
                args.append(spec)
                if ref is None:
                    weights.append(spec)
                    continue
                inputs.append(spec)
                if ref[0] == "input":
                    users = self.input_users[ref[1]]
                    if node_id not in users:
                        users.append(node_id)
                else:
                    self.edges.append((ref[0], ref[1], node_id))
        return dict(
            op=op, source_name=source, inputs=tuple(inputs), outputs=outputs[node_id],
            weights=tuple(weights), attrs=attrs, args=tuple(args),
            flops=estimate_flops(op, tuple(args), outputs[node_id], attrs),
        )


class _JsonValues:
    """Plain Python values of the objects in one ``tvm.ir.save_json`` document.

    The document is TVM's object graph: a list of nodes, each with a ``type_key`` and either
    ``attrs`` (field name -> string), ``data`` (element node indices) or ``repr_str``. In
    ``attrs`` an object field holds a node index and a plain field (int, bool, double,
    DataType, std::string) its value, so attribute nodes are decoded with their field types
    from ``list_field_info`` (asked once per attribute type).
    """

    # Plain (non-object) field types as list_field_info names them, and how TVM's Python
    # getter returns them (bool as 0/1, void DataType as "").
    _PLAIN = {"int": int, "bool": int, "double": float, "float": float, "str": str,
              "DataType": lambda text: "" if text == "void" else text}

    def __init__(self, text: str) -> None:
        document = json.loads(text)
        self.nodes: list[dict[str, Any]] = document["nodes"]
        self.root: list[int] = self.nodes[document["root"]]["data"]
        self.memo: dict[int, Any] = {}
        self.fields: dict[str, dict[str, Any]] = {}

    def value(self, position: int) -> Any:
        """The value of the root array's element ``position``."""
        return self._decode(self.root[position])

    def source_name(self, position: int) -> str | None:
        span = self.nodes[self.root[position]]
        if span.get("type_key") != "Span":
            return None
        name = self.nodes[int(span["attrs"]["source_name"])]
        return name.get("repr_str") or None

    def attrs_dicts(self, positions: range, objects: list[Any]) -> list[dict[str, Any]]:
        """Attribute dicts (as :func:`attrs_to_dict` gives) for root elements ``positions``;
        ``objects`` are the same attribute objects, asked for field types on first sight."""
        result = []
        for position, obj in zip(positions, objects, strict=True):
            node = self.nodes[self.root[position]]
            type_key = node.get("type_key", "")
            if not type_key or "attrs" not in node:
                result.append({} if obj is None or not hasattr(obj, "keys")
                              else attrs_to_dict(obj))
                continue
            if type_key not in self.fields:
                self.fields[type_key] = {f.name: str(f.type_info).split(",")[0]
                                         for f in obj.list_field_info()}
            kinds = self.fields[type_key]
            decoded = {name: self._field(node["attrs"][name], kind) for name, kind in kinds.items()}
            if any(_has_unsupported(value) for value in decoded.values()):
                decoded = attrs_to_dict(obj)  # an object kind not decoded here: read it via TVM
            result.append(decoded)
        return result

    def _field(self, text: str, kind: str) -> Any:
        plain = self._PLAIN.get(kind)
        return plain(text) if plain is not None else self._decode(int(text))

    def _decode(self, index: int) -> Any:
        if index in self.memo:
            return self.memo[index]
        node = self.nodes[index]
        key = node.get("type_key", "")
        if not key:
            value: Any = None
        elif key == "Array":
            value = tuple(self._decode(i) for i in node.get("data", ()))
        elif key == "Map":
            data = [self._decode(i) for i in node.get("data", ())]
            if "keys" in node:
                value = dict(zip(node["keys"], data, strict=True))
            else:
                value = {str(data[i]): data[i + 1] for i in range(0, len(data), 2)}
        elif key == "runtime.String":
            value = node.get("repr_str", "")
        elif key == "runtime.BoxInt":
            value = int(node["repr_str"])
        elif key == "runtime.BoxFloat":
            value = float(node["repr_str"])
        elif key == "runtime.BoxBool":
            value = node["repr_str"] == "true"
        elif key == "IntImm":
            number = int(node["attrs"]["value"])
            value = bool(number) if node["attrs"]["dtype"] == "bool" else number
        elif key == "FloatImm":
            value = float(node["attrs"]["value"])
        elif key == "relay.TensorType":
            value = self._tensor_type(node)
        elif key == "TupleType":
            value = tuple(self._decode(i) for i in self.nodes[int(node["attrs"]["fields"])]["data"])
        else:
            value = _Unsupported(key)
        self.memo[index] = value
        return value

    def _tensor_type(self, node: dict[str, Any]) -> TensorType:
        dtype = node["attrs"]["dtype"]
        dims = [self.nodes[i] for i in self.nodes[int(node["attrs"]["shape"])].get("data", ())]
        if any(dim.get("type_key") != "IntImm" for dim in dims):
            raise _DynamicShape(dims)
        return TensorType(tuple(int(dim["attrs"]["value"]) for dim in dims), dtype)


class _DynamicShape(Exception):
    """A tensor type with a dynamic dimension met while decoding; :class:`_Builder` reports it
    with the input or op it belongs to."""

    def __init__(self, dims: list[dict[str, Any]]) -> None:
        self.sizes = [int(dim["attrs"]["value"]) if dim.get("type_key") == "IntImm" else None
                      for dim in dims]
        super().__init__(f"({', '.join('?' if d is None else str(d) for d in self.sizes)})")

    def example(self) -> tuple[int, ...]:
        """The shape with 1 for each dynamic dimension, as an example of a static one."""
        return tuple(1 if d is None else d for d in self.sizes)


@dataclass(frozen=True)
class _Unsupported:
    """A decoded object of a kind the reader has no plain form for (kept as its type key)."""

    type_key: str

    def __str__(self) -> str:
        return self.type_key


def _has_unsupported(value: Any) -> bool:
    if isinstance(value, _Unsupported):
        return True
    if isinstance(value, tuple):
        return any(_has_unsupported(v) for v in value)
    if isinstance(value, dict):
        return any(_has_unsupported(v) for v in value.values())
    return False


def _single_type(value: Any) -> TensorType:
    if not isinstance(value, TensorType):
        raise PartitionLabError(f"expected a tensor type, got {value}")
    return value


def _flat_types(value: Any) -> list[TensorType]:
    if isinstance(value, tuple):
        return [t for field in value for t in _flat_types(field)]
    return [_single_type(value)]


# ---------------------------------------------------------------------------- helpers
def source_name(call: relay.Call) -> str | None:
    span = call.span
    if span is None or span.source_name is None:
        return None
    name = span.source_name.name
    return str(name) if name else None


def attrs_to_dict(attrs: Any) -> dict[str, Any]:
    if attrs is None or not hasattr(attrs, "keys"):
        return {}
    return {str(k): _plain(attrs[k]) for k in attrs.keys()}


def _plain(value: Any) -> Any:
    if isinstance(value, (tvm.tir.IntImm,)):
        return bool(value.value) if value.dtype == "bool" else int(value.value)
    if isinstance(value, tvm.tir.FloatImm):
        return float(value.value)
    if isinstance(value, (tvm.runtime.container.String, str)):
        return str(value)
    if isinstance(value, (tvm.ir.container.Array, list, tuple)):
        return tuple(_plain(v) for v in value)
    if isinstance(value, (int, float, bool)) or value is None:
        return value
    if isinstance(value, tvm.ir.container.Map):
        return {str(k): _plain(v) for k, v in value.items()}
    return str(value)


def _unique_names(parts: list[tuple[str, str | None]]) -> list[str]:
    """Source name where unique; ``<source>/<op>`` for one source node that became several calls."""
    by_source = Counter(src for _, src in parts if src)
    names: list[str] = []
    taken: Counter[str] = Counter()
    for i, (op, src) in enumerate(parts):
        if src and by_source[src] == 1:
            candidate = src
        elif src:
            candidate = f"{src}/{op}"
        else:
            candidate = f"{op}_{i}"
        taken[candidate] += 1
        names.append(candidate if taken[candidate] == 1 else f"{candidate}#{taken[candidate]}")
    return names
