"""Relay function -> OpGraph, keeping the link from every node back to its Relay call.

One traversal in post-order: each ``Call`` of a primitive op becomes a node; ``Tuple`` and
``TupleGetItem`` are folded into their producers and consumers (see ``graph.py``). Bound
constants and parameter variables are weights; other free variables are graph inputs.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import tvm
from tvm import relay

from .errors import PartitionLabError
from .graph import OpGraph, OpNode, TensorType

TensorRef = tuple[int, int]  # (node id, output index); node id -1 for graph inputs


@dataclass
class RelayGraph:
    """An OpGraph plus the Relay calls its nodes came from (``calls[node_id]``)."""

    graph: OpGraph
    function: relay.Function
    calls: list[relay.Call]
    input_vars: dict[str, relay.Var]


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
    mod = relay.transform.InferType()(mod)
    func = mod["main"]
    return _Builder(func, set(params or ()), name).build()


class _Builder:
    def __init__(self, func: relay.Function, param_names: set[str], name: str) -> None:
        self.func = func
        self.param_names = param_names
        self.name = name
        self.calls: list[relay.Call] = []
        self.node_of: dict[relay.Call, int] = {}
        self.edges: list[tuple[int, int, int]] = []
        self.input_users: dict[str, list[int]] = {}
        self.input_types: dict[str, TensorType] = {}
        self.input_vars: dict[str, relay.Var] = {}
        self.outputs: list[tuple[TensorType, ...]] = []  # per node, filled in topological order

    def build(self) -> RelayGraph:
        for var in self.func.params:
            name = var.name_hint
            if name not in self.param_names:
                self.input_types[name] = tensor_type(var.checked_type)
                self.input_users[name] = []
                self.input_vars[name] = var
        relay.analysis.post_order_visit(self.func.body, self._collect)
        proto = [self._node_parts(i, call) for i, call in enumerate(self.calls)]
        names = _unique_names([(p["op"], p["source_name"]) for p in proto])
        nodes = [OpNode(id=i, name=names[i], **p) for i, p in enumerate(proto)]
        outputs = [ref for ref, _ in self._refs(self.func.body)
                   if ref is not None and ref[0] != "input"]
        graph_inputs = {n: (self.input_types[n], self.input_users[n]) for n in self.input_types}
        graph = OpGraph(nodes, self.edges, graph_inputs, outputs, self.name)
        return RelayGraph(graph, self.func, self.calls, self.input_vars)

    def _collect(self, expr: relay.Expr) -> None:
        if isinstance(expr, relay.Call):
            if not isinstance(expr.op, tvm.ir.Op):
                raise PartitionLabError(
                    f"cannot partition a call to {expr.op}: only calls of primitive Relay ops are "
                    "supported (was the module already partitioned or fused?)")
            self.node_of[expr] = len(self.calls)
            self.calls.append(expr)
        elif isinstance(expr, (relay.Let, relay.If, relay.expr.RefCreate, relay.Function)) and (
                expr is not self.func):
            raise PartitionLabError(
                f"cannot partition a graph with {type(expr).__name__} expressions: partition_lab "
                "handles dataflow graphs (no control flow, closures or references)")

    def _refs(self, expr: relay.Expr) -> list[tuple[TensorRef | tuple[str, str] | None, TensorType]]:
        """The tensors an argument expression denotes, with their types.

        A reference is ``(node, output index)``, ``("input", name)``, or None for a weight.
        Types of node outputs come from the cache filled in topological order, so each Relay
        type is converted once (every TVM attribute read is a foreign-function call).
        """
        if isinstance(expr, relay.Call):
            node = self.node_of[expr]
            return [((node, i), spec) for i, spec in enumerate(self.outputs[node])]
        if isinstance(expr, relay.TupleGetItem):
            return [self._refs(expr.tuple_value)[expr.index]]
        if isinstance(expr, relay.Tuple):
            return [ref for field in expr.fields for ref in self._refs(field)]
        if isinstance(expr, relay.Var):
            name = expr.name_hint
            if name in self.input_types:
                return [(("input", name), self.input_types[name])]
            return [(None, tensor_type(expr.checked_type))]
        if isinstance(expr, relay.Constant):
            data = expr.data
            return [(None, TensorType(tuple(int(d) for d in data.shape), str(data.dtype)))]
        raise PartitionLabError(f"unsupported Relay expression {type(expr).__name__}")

    def _node_parts(self, node_id: int, call: relay.Call) -> dict[str, Any]:
        inputs: list[TensorType] = []
        weights: list[TensorType] = []
        args: list[TensorType] = []
        for arg in call.args:
            for ref, spec in self._refs(arg):
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
        outputs = tuple(_flat_types(call.checked_type))
        self.outputs.append(outputs)
        attrs = attrs_to_dict(call.attrs)
        op = call.op.name
        return dict(
            op=op, source_name=source_name(call), inputs=tuple(inputs), outputs=outputs,
            weights=tuple(weights), attrs=attrs, args=tuple(args),
            flops=estimate_flops(op, tuple(args), outputs, attrs),
        )


# ---------------------------------------------------------------------------- helpers
def source_name(call: relay.Call) -> str | None:
    span = call.span
    if span is None or span.source_name is None:
        return None
    name = span.source_name.name
    return str(name) if name else None


def tensor_type(ty: Any) -> TensorType:
    if not isinstance(ty, relay.TensorType):
        raise PartitionLabError(f"expected a tensor type, got {ty}")
    shape = []
    for dim in ty.shape:
        if not isinstance(dim, tvm.tir.IntImm):
            raise PartitionLabError(
                f"dynamic dimension {dim} in {ty}: give static input shapes (input_shapes=...)")
        shape.append(int(dim))
    return TensorType(tuple(shape), str(ty.dtype))


def _flat_types(ty: Any) -> list[TensorType]:
    if isinstance(ty, relay.TupleType):
        return [t for field in ty.fields for t in _flat_types(field)]
    return [tensor_type(ty)]


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


def _axis_size(shape: tuple[int, ...], layout: str, axis: str) -> int:
    if layout and len(layout) == len(shape) and axis in layout:
        return shape[layout.index(axis)]
    return shape[1] if len(shape) > 1 else 1


_ELEMENTWISE_COST = {"nn.batch_norm": 4, "nn.softmax": 5, "nn.log_softmax": 5, "nn.layer_norm": 8,
                     "erf": 8, "exp": 4, "sigmoid": 4, "tanh": 4, "image.resize2d": 8}


def estimate_flops(op: str, args: tuple[TensorType, ...], outputs: tuple[TensorType, ...],
                   attrs: Mapping[str, Any]) -> float:
    """FLOPs of one call (a multiply-add counts 2). Ops that only move data count 0."""
    out_numel = sum(t.numel for t in outputs)
    if op in ("nn.conv2d", "nn.conv1d", "nn.conv3d") and len(args) >= 2:
        layout = attrs.get("out_layout") or attrs.get("data_layout") or ""
        out_channels = _axis_size(outputs[0].shape, layout, "C")
        return 2.0 * outputs[0].numel * args[1].numel / max(out_channels, 1)
    if op.startswith("nn.conv") and op.endswith("_transpose") and len(args) >= 2:
        in_channels = _axis_size(args[0].shape, attrs.get("data_layout", ""), "C")
        return 2.0 * args[0].numel * args[1].numel / max(in_channels, 1)
    if op in ("nn.dense", "nn.matmul") and len(args) >= 2:
        k = args[0].shape[-1] if not attrs.get("transpose_a") else args[0].shape[-2]
        return 2.0 * outputs[0].numel * k
    if op == "nn.batch_matmul" and len(args) >= 2:
        k = args[0].shape[-2] if attrs.get("transpose_a") else args[0].shape[-1]
        return 2.0 * outputs[0].numel * k
    if op.endswith("pool2d") and "global" not in op:
        window = math.prod(attrs.get("pool_size", (1, 1)))
        return float(out_numel * window)
    if op.startswith("nn.global") or op in ("sum", "mean", "max", "min", "nn.adaptive_avg_pool2d"):
        return float(sum(a.numel for a in args[:1]))
    if op in ("reshape", "transpose", "squeeze", "expand_dims", "nn.batch_flatten", "concatenate",
              "split", "strided_slice", "layout_transform", "copy", "nn.dropout", "reverse_reshape",
              "take", "stack", "tile", "repeat", "cast", "nn.pad", "broadcast_to"):
        return 0.0
    # Elementwise-like: the first output is the result (batch_norm also returns mean/var).
    return float(outputs[0].numel * _ELEMENTWISE_COST.get(op, 1)) if outputs else 0.0
