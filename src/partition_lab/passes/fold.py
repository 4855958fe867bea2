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
from tvm.relay.expr_functor import ExprMutator


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


class _WeightFolder(ExprMutator):
    def visit_call(self, call: relay.Call) -> relay.Expr:
        new = super().visit_call(call)
        if (isinstance(new.op, tvm.ir.Op) and new.op.name in _FOLDERS and len(new.args) == 1
                and isinstance(new.args[0], relay.Constant)):
            folded = _FOLDERS[new.op.name](new.args[0].data.numpy(), new.attrs)
            if folded is not None:
                return relay.const(folded)
        return new


def fold_weight_transforms(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` with those data-movement ops on constants replaced by their values."""
    func = mod["main"]
    folded = _WeightFolder().visit(func)
    return relay.transform.InferType()(tvm.IRModule.from_expr(folded))
