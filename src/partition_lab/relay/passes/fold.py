"""Fold weight casts and layout transforms in numpy.

ConvertLayout and ToMixedPrecision wrap weights in ``layout_transform``, ``expand_dims`` and
``cast``.
TVM's FoldConstant evaluates each such expression by compiling it with LLVM, which takes about
40 s on ResNet-50 here; these few data-movement ops are exact in numpy, in milliseconds.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import tvm
from tvm import relay

from ..relay_graph import array_items, object_key


def _layout_transform(data: np.ndarray, attrs) -> np.ndarray | None:
    src, dst = str(attrs.src_layout), str(attrs.dst_layout)
    if sorted(src) != sorted(dst) or not src.isalpha() or not src.isupper():
        return None  # split layouts such as NCHW4c: leave them to TVM
    return np.ascontiguousarray(np.transpose(data, [src.index(axis) for axis in dst]))


def _cast(data: np.ndarray, attrs) -> np.ndarray:
    return data.astype(str(attrs.dtype))


def _transpose(data: np.ndarray, attrs) -> np.ndarray:
    axes = None if attrs.axes is None else [int(a) for a in attrs.axes]
    return np.ascontiguousarray(np.transpose(data, axes))


def _expand_dims(data: np.ndarray, attrs) -> np.ndarray:
    axis = int(attrs.axis)
    axis = axis if axis >= 0 else data.ndim + axis + 1
    return data.reshape(data.shape[:axis] + (1,) * int(attrs.num_newaxis) + data.shape[axis:])


def _squeeze(data: np.ndarray, attrs) -> np.ndarray:
    axes = None if attrs.axis is None else tuple(int(a) for a in attrs.axis)
    return np.squeeze(data, axis=axes)


_FOLDERS: dict[str, Callable[[np.ndarray, object], np.ndarray | None]] = {
    "layout_transform": _layout_transform,
    "cast": _cast,
    "transpose": _transpose,
    "expand_dims": _expand_dims,
    "squeeze": _squeeze,
}


def fold_weight_transforms(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` with those data-movement ops on constants replaced by their values."""
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
        if (isinstance(op, tvm.ir.Op) and op.name in _FOLDERS and len(new_args) == 1
                and isinstance(new_args[0], relay.Constant)):
            folded = _FOLDERS[op.name](new_args[0].data.numpy(), expr.attrs)
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
