"""Relax function -> OpGraph, keeping the link from every node back to its Relax binding.

Each binding of an op call in ``main``'s dataflow block becomes a node, under its Relay name
(:mod:`.op_map`). Bindings of tuples, tuple items and aliases are not nodes: as in the Relay
reader, a tuple-producing op (``batch_norm``, ``split``) is one node with several outputs and a
consumer lists the fields it reads. Tensor constants are weights; ``main``'s parameters are the
graph inputs (bind weights passed as parameters first: :func:`.prepare.bind_params`).

Names: the call's span carries the source node name where the frontend set one (our ONNX loader
does, :mod:`.frontends`); otherwise the node is named after its binding variable (``lv3``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import tvm
from tvm import relax

from .._audience import is_command_line, shapes_hint
from ..core.graph import OpGraph, OpNode, TensorType
from ..core.ops import estimate_flops
from ..core.provenance import recorded_exporter
from ..errors import PartitionLabError, SymbolicShapeError
from .op_map import Operand, RelayView, relay_view

TensorRef = tuple[int, int]  # (node id, output index)
Ref = tuple[Any, TensorType]  # (TensorRef | ("input", name) | None for a weight, type)


@dataclass
class RelaxGraph:
    """An OpGraph plus the Relax bindings its nodes came from.

    ``bindings[node_id]`` is the node's ``VarBinding``; ``views[node_id]`` how the targets read
    it (Relay name, attributes, operands); ``function`` the ``main`` it was read from and
    ``module`` its module.
    """

    graph: OpGraph
    module: tvm.IRModule
    function: relax.Function
    bindings: list[Any]
    views: list[RelayView]
    node_of_var: dict[Any, int]
    glue: dict[Any, Any]  # var -> value of a binding that is not a node (tuple, item, alias)

    @property
    def relax_ops(self) -> list[str]:
        """The Relax op of every node, in node order."""
        return [str(b.value.op.name) for b in self.bindings]


def graph_from_relax(mod: tvm.IRModule, name: str = "") -> OpGraph:
    """The OpGraph of ``mod["main"]`` (static shapes, weights bound as constants)."""
    return relax_graph(mod, name).graph


def relax_graph(mod: tvm.IRModule, name: str = "",
                hints: list[tuple[str, str | None]] | None = None) -> RelaxGraph:
    """Like :func:`graph_from_relax`, also returning the node -> Relax binding mapping.

    ``hints`` are :func:`source_names` of the module before preparation: Relax's ConvertLayout
    and ToMixedPrecision rebuild calls without their spans, so names are carried over by op
    order where the passes left an op's count unchanged (see :func:`_fill_names`).
    """
    if "main" not in [gv.name_hint for gv in mod.functions.keys()]:
        raise PartitionLabError("the Relax module has no function 'main' to partition")
    func = mod["main"]
    check_static(func)
    return _Reader(mod, func, name, hints or []).read()


def source_names(mod: tvm.IRModule) -> list[tuple[str, str | None]]:
    """``(relax op, source name)`` of every op call in ``main``, in binding order."""
    found = []
    for block in mod["main"].body.blocks:
        for binding in block.bindings:
            value = binding.value
            if isinstance(value, tvm.ir.Call) and isinstance(value.op, tvm.ir.Op):
                found.append((str(value.op.name), _span_name(value)))
    return found


# ---------------------------------------------------------------------------- shapes
def check_static(func: relax.Function) -> None:
    """Raise :class:`SymbolicShapeError` (one line) for the first symbolic dimension of a
    parameter of ``func``, naming it and how to bind it."""
    for param in func.params:
        dims = _dims(param.ty)
        symbolic = [d for d in dims if not _is_int(d)]
        if symbolic:
            raise SymbolicShapeError(_symbolic_message(param.name, dims, symbolic[0]))


def _symbolic_message(input_name: str, dims: list[Any], dim: Any) -> str:
    shape = "(" + ", ".join(str(_int(d)) if _is_int(d) else str(d) for d in dims) + ")"
    example = tuple(_int(d) if _is_int(d) else 1 for d in dims)
    start = (f"input {input_name!r} has the symbolic dimension {str(dim)!r} (shape {shape}); "
             "partitioning needs static shapes: ")
    if is_command_line():  # the command line loads the model: a shape at load is the fix
        return start + f"pass {shapes_hint({input_name: example})} (the size you want)"
    return start + (f"bind it, e.g. mod = tvm.relax.transform.BindSymbolicVars("
                    f"{{{str(dim)!r}: 1}})(mod), or load the model with a static shape: "
                    f"load_model(path, {{{input_name!r}: {example}}})")


def _dims(ty: Any) -> list[Any]:
    if isinstance(ty, relax.TensorType):
        if ty.shape is None:
            return [_Unknown()] * max(ty.ndim, 1)
        return list(ty.shape.values)
    if isinstance(ty, relax.TupleType):
        return [d for field in ty.fields for d in _dims(field)]
    return []


class _Unknown:
    def __str__(self) -> str:
        return "?"


def _is_int(dim: Any) -> bool:
    return isinstance(dim, (int, tvm.tirx.IntImm))


def _int(dim: Any) -> int:
    return int(dim) if isinstance(dim, int) else int(dim.value)


def tensor_types(ty: Any, what: str) -> tuple[TensorType, ...]:
    """The tensor types of a value (a tuple's fields flattened); symbolic shapes raise."""
    if isinstance(ty, relax.TupleType):
        return tuple(t for field in ty.fields for t in tensor_types(field, what))
    if not isinstance(ty, relax.TensorType):
        raise PartitionLabError(f"{what} is a {type(ty).__name__}, not a tensor: partition_lab "
                                "reads dataflow graphs of tensors")
    dims = _dims(ty)
    symbolic = [d for d in dims if not _is_int(d)]
    if symbolic:
        raise SymbolicShapeError(
            f"{what} has the symbolic dimension {str(symbolic[0])!r}; partitioning needs static "
            "shapes: bind it with tvm.relax.transform.BindSymbolicVars({name: value})(mod)")
    return (TensorType(tuple(_int(d) for d in dims), str(ty.dtype)),)


# ---------------------------------------------------------------------------- values
def plain(value: Any) -> Any:
    """A TVM attribute or argument value as a plain Python value."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, tvm.tirx.IntImm):
        return bool(value.value) if str(value.ty) == "bool" else int(value.value)
    if isinstance(value, tvm.tirx.FloatImm):
        return float(value.value)
    if isinstance(value, tvm.ir.expr.StringImm):
        return str(value.value)
    if isinstance(value, relax.ShapeExpr):
        return tuple(plain(v) for v in value.values)
    if isinstance(value, (list, tuple, tvm_ffi_array())):
        return tuple(plain(v) for v in value)
    return str(value)


def tvm_ffi_array() -> type:
    import tvm_ffi

    return tvm_ffi.Array


def attrs_dict(attrs: Any) -> dict[str, Any]:
    """A call's attributes as ``{name: plain value}`` (empty for an op without attributes)."""
    if attrs is None:
        return {}
    info = getattr(type(attrs), "__tvm_ffi_type_info__", None)
    names = [f.name for f in info.fields] if info is not None else []
    return {name: plain(getattr(attrs, name)) for name in names}


def is_tensor_constant(expr: Any) -> bool:
    return isinstance(expr, tvm.ir.expr.Constant) and isinstance(expr.ty, relax.TensorType)


# ---------------------------------------------------------------------------- reader
class _Reader:
    def __init__(self, mod: tvm.IRModule, func: relax.Function, name: str,
                 hints: list[tuple[str, str | None]]) -> None:
        self.mod, self.func, self.name, self.hints = mod, func, name, hints
        self.params = {p: p.name for p in func.params}
        self.input_types = {p.name: tensor_types(p.ty, f"input {p.name!r}")[0]
                            for p in func.params}
        self.input_users: dict[str, list[int]] = {n: [] for n in self.input_types}
        self.bindings: list[Any] = []
        self.node_of_var: dict[Any, int] = {}
        self.glue: dict[Any, Any] = {}
        self.outputs: list[tuple[TensorType, ...]] = []
        self.edges: list[tuple[int, int, int]] = []

    def read(self) -> RelaxGraph:
        body = self.func.body
        if not isinstance(body, relax.SeqExpr):
            raise PartitionLabError("main's body is not a sequence of bindings")
        protos = []
        for block in body.blocks:
            for binding in block.bindings:
                proto = self._binding(binding)
                if proto is not None:
                    protos.append(proto)
        _fill_names(protos, self.hints)
        names = _unique_names([(p["op"], p["source_name"], p["var"]) for p in protos])
        nodes = []
        views = []
        for i, proto in enumerate(protos):
            views.append(proto.pop("view"))
            proto.pop("var")
            nodes.append(OpNode(id=i, name=names[i], **proto))
        outputs = [ref for ref, _ in self.refs(body.body) if ref is not None and ref[0] != "input"]
        inputs = {n: (self.input_types[n], self.input_users[n]) for n in self.input_types}
        graph = OpGraph(nodes, self.edges, inputs, outputs, self.name,
                        recorded_exporter(self.func))
        return RelaxGraph(graph, self.mod, self.func, self.bindings, views, self.node_of_var,
                          self.glue)

    def _binding(self, binding: Any) -> dict[str, Any] | None:
        if not isinstance(binding, relax.VarBinding):
            raise PartitionLabError(f"cannot partition a {type(binding).__name__} binding "
                                    "(match_cast): bind symbolic shapes first")
        value, var = binding.value, binding.var
        if not (isinstance(value, tvm.ir.Call) and isinstance(value.op, tvm.ir.Op)):
            if isinstance(value, tvm.ir.Call):
                raise PartitionLabError(
                    f"cannot partition a call to {value.op}: only calls of Relax ops are "
                    "supported (was the module already partitioned or fused?)")
            if isinstance(value, (relax.If, relax.Function)):
                raise PartitionLabError(f"cannot partition a graph with {type(value).__name__} "
                                        "expressions: partition_lab handles dataflow graphs")
            self.glue[var] = value  # a tuple, a tuple item, an alias or a constant
            return None
        node_id = len(self.bindings)
        self.bindings.append(binding)
        self.node_of_var[var] = node_id
        relax_op = str(value.op.name)
        outputs = tensor_types(value.ty, f"the output of {relax_op} ({var.name})")
        self.outputs.append(outputs)
        operands: list[Operand] = []
        values: dict[int, Any] = {}
        for index, arg in enumerate(value.args):
            refs = self._tensor_refs(arg)
            if refs is None:
                values[index] = plain(arg)
                continue
            for ref, spec in refs:
                operands.append(Operand(spec, ref is None))
                self._use(ref, node_id)
        view = relay_view(relax_op, attrs_dict(value.attrs), operands, values)
        args = tuple(o.spec for o in view.operands)
        inputs = tuple(o.spec for o in view.operands if not o.weight)
        weights = tuple(o.spec for o in view.operands if o.weight)
        return dict(op=view.op, source_name=_span_name(value), inputs=inputs, outputs=outputs,
                    weights=weights, attrs=view.attrs, args=args,
                    flops=estimate_flops(view.op, args, outputs, view.attrs), view=view,
                    var=var.name)

    def _use(self, ref: Any, node_id: int) -> None:
        if ref is None:
            return
        if ref[0] == "input":
            users = self.input_users[ref[1]]
            if node_id not in users:
                users.append(node_id)
        else:
            self.edges.append((ref[0], ref[1], node_id))

    def _tensor_refs(self, arg: Any) -> list[Ref] | None:
        """The tensors an argument denotes, or None for a non-tensor value (a shape, a scalar)."""
        if isinstance(arg, (relax.ShapeExpr, tvm.ir.expr.StringImm)) or tvm.ir.is_prim_expr(arg):
            return None
        if isinstance(arg, tvm.ir.GlobalVar):  # the function a call_tir calls: code, no data
            return None
        if isinstance(arg, tvm.ir.expr.Constant) and not isinstance(arg.ty, relax.TensorType):
            return None
        if isinstance(arg, relax.Tuple) and arg.fields and all(
                tvm.ir.is_prim_expr(f) for f in arg.fields):  # a tuple of sizes (T.int64(1), ...)
            return None
        return self.refs(arg)

    def refs(self, expr: Any) -> list[Ref]:
        """``(ref, type)`` for each tensor ``expr`` denotes: ``(node, index)``, ``("input",
        name)`` or None for a weight."""
        if is_tensor_constant(expr):
            return [(None, tensor_types(expr.ty, "a constant")[0])]
        if isinstance(expr, relax.Tuple):
            return [r for field in expr.fields for r in self.refs(field)]
        if isinstance(expr, relax.TupleGetItem):
            return [self.refs(expr.tuple_value)[expr.index]]
        if expr in self.node_of_var:
            node = self.node_of_var[expr]
            return [((node, i), spec) for i, spec in enumerate(self.outputs[node])]
        if expr in self.params:
            name = self.params[expr]
            return [(("input", name), self.input_types[name])]
        if expr in self.glue:
            return self.refs(self.glue[expr])
        raise PartitionLabError(f"unsupported Relax expression {type(expr).__name__}: {expr}")


def _fill_names(protos: list[dict[str, Any]], hints: list[tuple[str, str | None]]) -> None:
    """Source names for nodes whose call lost its span in preparation, by op order: the k-th
    call of an op takes the name of the k-th call of that op before preparation, where the
    passes left the count of that op unchanged (they rebuild calls without spans; the casts and
    transposes they insert stay unnamed, as Relay's passes leave theirs).
    """
    mine: dict[str, list[int]] = {}
    for i, proto in enumerate(protos):
        mine.setdefault(proto["view"].relax_op, []).append(i)
    theirs: dict[str, list[str | None]] = {}
    for op, source in hints:
        theirs.setdefault(op, []).append(source)
    for op, ids in mine.items():
        if len(theirs.get(op, ())) == len(ids):
            for i, source in zip(ids, theirs[op], strict=True):
                if protos[i]["source_name"] is None:
                    protos[i]["source_name"] = source


def _span_name(call: Any) -> str | None:
    span = call.span
    if span is None or span.source_name is None:
        return None
    name = str(span.source_name.name)
    return name or None


def _unique_names(parts: list[tuple[str, str | None, str]]) -> list[str]:
    """Source name where unique; ``<source>/<op>`` for one source node that became several
    calls; the binding variable's name where there is no source name."""
    by_source = Counter(src for _, src, _ in parts if src)
    names: list[str] = []
    taken: Counter[str] = Counter()
    for op, src, var in parts:
        if src and by_source[src] == 1:
            candidate = src
        elif src:
            candidate = f"{src}/{op}"
        else:
            candidate = var or op
        taken[candidate] += 1
        names.append(candidate if taken[candidate] == 1 else f"{candidate}#{taken[candidate]}")
    return names


def input_types_of(mod: tvm.IRModule) -> Mapping[str, TensorType]:
    """``{input name: type}`` of ``main``'s parameters."""
    return {p.name: tensor_types(p.ty, f"input {p.name!r}")[0] for p in mod["main"].params}
