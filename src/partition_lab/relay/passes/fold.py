"""Fold calls on constants in numpy, before support is judged.

Two kinds of constant computation reach us. ConvertLayout and ToMixedPrecision wrap weights in
``layout_transform``, ``expand_dims`` and ``cast``. And exporters leave data built from
constants in the graph: Swin's shifted-window attention mask is ``scatter_nd`` on zeros,
``strided_slice``, ``reshape``, ``equal``, ``where`` (18 calls in the small variant, 90 in
Swin-T); judged as ops they made host islands, while ``relay.build`` (FoldConstant) computes them
once at compile time. TVM's FoldConstant evaluates each such expression by compiling it with
LLVM, which took about 40 s on ResNet-50 here; these ops are exact in numpy, in milliseconds.
A call whose op has no folder here, or whose operands a folder does not handle, stays as it is.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import tvm
from tvm import relay

from ..relay_graph import array_items, object_key


def _layout_transform(expr: relay.Call, data: np.ndarray) -> np.ndarray | None:
    src, dst = str(expr.attrs.src_layout), str(expr.attrs.dst_layout)
    if sorted(src) != sorted(dst) or not src.isalpha() or not src.isupper():
        return None  # split layouts such as NCHW4c: leave them to TVM
    return np.ascontiguousarray(np.transpose(data, [src.index(axis) for axis in dst]))


def _transpose(expr: relay.Call, data: np.ndarray) -> np.ndarray:
    axes = None if expr.attrs.axes is None else [int(a) for a in expr.attrs.axes]
    return np.ascontiguousarray(np.transpose(data, axes))


def _to_result_shape(expr: relay.Call, data: np.ndarray) -> np.ndarray:
    """reshape, expand_dims, squeeze, broadcast_to: the values in the shape type inference gave
    the call (Relay's special reshape codes need no re-implementing)."""
    return np.ascontiguousarray(np.broadcast_to(data, _shape(expr)).copy()
                                if expr.op.name == "broadcast_to" else data.reshape(_shape(expr)))


def _cast(expr: relay.Call, data: np.ndarray) -> np.ndarray:
    return data.astype(str(expr.attrs.dtype))


def _strided_slice(expr: relay.Call, data: np.ndarray) -> np.ndarray | None:
    attrs = expr.attrs
    if str(attrs.slice_mode) != "end":
        return None
    begin, end = [int(b) for b in attrs.begin], [int(e) for e in attrs.end]
    strides = [int(s) for s in attrs.strides] if attrs.strides else [1] * len(begin)
    strides += [strides[-1]] * (len(begin) - len(strides))
    axes = [int(a) for a in attrs.axes] if attrs.axes is not None else list(range(len(begin)))
    if any(stride < 0 for stride in strides):
        return None  # reversed slices clamp differently; leave them to TVM
    index = [slice(None)] * data.ndim
    for axis, b, e, stride in zip(axes, begin, end, strides, strict=False):
        index[axis] = slice(b, e, stride)
    result = data[tuple(index)]
    return np.ascontiguousarray(result) if result.shape == _shape(expr) else None


def _scatter_nd(expr: relay.Call, data: np.ndarray, indices: np.ndarray,
                updates: np.ndarray) -> np.ndarray | None:
    """Relay's scatter_nd: ``out[indices[0, y], ..., indices[M-1, y], ...] = updates[y, ...]``."""
    out = data.copy()
    where = tuple(indices[i] for i in range(indices.shape[0]))
    if str(expr.attrs.mode) == "add":
        np.add.at(out, where, updates)
    elif str(expr.attrs.mode) == "update":
        out[where] = updates
    else:
        return None
    return out


def _elementwise(function: Callable[..., np.ndarray]) -> Callable[..., np.ndarray | None]:
    def fold(expr: relay.Call, *args: np.ndarray) -> np.ndarray | None:
        if function is np.true_divide and any(a.dtype.kind in "iub" for a in args):
            return None  # Relay's integer division truncates; leave it to TVM
        return function(*args)
    return fold


#: Ops folded in numpy when every operand is a constant: ``folder(call, *operand arrays)`` ->
#: the value, or None to leave the call to TVM.
_FOLDERS: dict[str, Callable[..., np.ndarray | None]] = {
    "layout_transform": _layout_transform,
    "cast": _cast,
    "transpose": _transpose,
    "expand_dims": _to_result_shape,
    "squeeze": _to_result_shape,
    "reshape": _to_result_shape,
    "broadcast_to": _to_result_shape,
    "strided_slice": _strided_slice,
    "scatter_nd": _scatter_nd,
    "add": _elementwise(np.add),
    "subtract": _elementwise(np.subtract),
    "multiply": _elementwise(np.multiply),
    "divide": _elementwise(np.true_divide),
    "negative": _elementwise(np.negative),
    "equal": _elementwise(np.equal),
    "not_equal": _elementwise(np.not_equal),
    "less": _elementwise(np.less),
    "greater": _elementwise(np.greater),
    "less_equal": _elementwise(np.less_equal),
    "greater_equal": _elementwise(np.greater_equal),
    "logical_not": _elementwise(np.logical_not),
    "logical_and": _elementwise(np.logical_and),
    "logical_or": _elementwise(np.logical_or),
    "where": _elementwise(np.where),
}


def _shape(expr: relay.Expr) -> tuple[int, ...]:
    return tuple(int(d) for d in expr.checked_type.shape)


def fold_constant_calls(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` (type-checked) with every call of :data:`_FOLDERS` on constants replaced by its
    value, to a fixed point (a chain folds from its first call on); ``mod`` itself if none."""
    func = mod["main"]
    replaced: dict[int, relay.Expr] = {}  # object_key(old expression) -> its replacement
    exprs: list[relay.Expr] = []
    relay.analysis.post_order_visit(func.body, exprs.append)
    if any(isinstance(e, (relay.Let, relay.If, relay.Function)) for e in exprs):
        return mod  # not a dataflow graph: relay_graph rejects it with the reason
    for expr in exprs:
        new = _rebuilt(expr, replaced)
        if new is not None:
            replaced[object_key(expr)] = new
    if not replaced:
        return mod
    body = replaced.get(object_key(func.body), func.body)
    folded = relay.Function(func.params, body, func.ret_type, func.type_params, func.attrs)
    return relay.transform.InferType()(tvm.IRModule.from_expr(folded))


def _fold(expr: relay.Call, operands: list[np.ndarray]) -> np.ndarray | None:
    """The call's value in numpy, in the dtype and shape its type says, or None."""
    try:
        value = _FOLDERS[expr.op.name](expr, *operands)
    except (ValueError, IndexError, TypeError, AttributeError, tvm.TVMError):
        return None  # an operand or attribute this folder does not handle: TVM keeps the call
    if value is None:
        return None
    dtype = str(expr.checked_type.dtype)
    value = np.asarray(value)
    return value.astype(dtype) if value.shape == _shape(expr) else None


def _rebuilt(expr: relay.Expr, replaced: dict[int, relay.Expr]) -> relay.Expr | None:
    """The replacement of ``expr`` given its operands' replacements, or None if it is unchanged.

    A post-order rebuild keyed by object handle: TVM's Python ExprMutator reads every field of
    every node and hashes TVM objects through foreign calls, which took 1.9 s on DenseNet-201;
    this touches each node once and rebuilds only what changed.
    """
    if isinstance(expr, relay.Call):
        args = array_items(expr.args)
        new_args = [replaced.get(object_key(a), a) for a in args]
        op = expr.op
        if (isinstance(op, tvm.ir.Op) and op.name in _FOLDERS and new_args
                and all(isinstance(a, relay.Constant) for a in new_args)):
            folded = _fold(expr, [a.data.numpy() for a in new_args])
            if folded is not None:
                return relay.const(folded)
        if any(object_key(a) in replaced for a in args):
            return relay.Call(op, new_args, expr.attrs, None, expr.span)
        return None
    if isinstance(expr, relay.Tuple):
        fields = array_items(expr.fields)
        if any(object_key(f) in replaced for f in fields):
            return relay.Tuple([replaced.get(object_key(f), f) for f in fields], expr.span)
        return None
    if isinstance(expr, relay.TupleGetItem):
        value = expr.tuple_value
        if object_key(value) in replaced:
            return relay.TupleGetItem(replaced[object_key(value)], expr.index)
        return None
    return None
