"""Fold calls on constants in numpy, before support is judged.

Two kinds of constant computation reach us. ConvertLayout and ToMixedPrecision wrap weights in
``layout_transform``, ``expand_dims`` and ``cast``. And exporters leave data built from
constants in the graph: Swin's shifted-window attention mask is ``scatter_nd`` on zeros,
``strided_slice``, ``reshape``, ``equal``, ``where`` (18 calls in the small variant, 90 in
Swin-T); judged as ops they made host islands, while ``relay.build`` (FoldConstant) computes them
once at compile time. TVM's FoldConstant evaluates each such expression by compiling it with
LLVM, which took about 40 s on ResNet-50 here; these ops are exact in numpy, in milliseconds.
A call on constants whose op has no folder here, or whose operands a folder does not handle
(an ``image.resize2d`` of a model's all-ones mask, an integer division), is evaluated by TVM
itself: FoldConstant on that one call, which is what ``relay.build`` computes for it
(:func:`_tvm_value`); only calls TVM would not fold either (annotations, random numbers, results
that are not one tensor) stay as they are. Judged as ops, such calls made host islands computed
only from constants (DETR's mask: resize, ``cumsum``, ``logical_and``).

Folding is also where a weight meets the dtype a target computes in: ToMixedPrecision wraps
each weight in ``cast(..., "float16")``, and a value past float16's 65504 (a BatchNorm
variance of 9.8e7) becomes inf here. numpy's "overflow encountered in cast" named nothing;
instead each op that uses such a value is recorded as a
:class:`~partition_lab.core.hazards.NumericHazard`, and with ``keep_fp32`` it computes in
float32 (its float16 operands cast up, the overflowed ones taken at their float32 value, its
results cast back to float16).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
import tvm
from tvm import relay

from ...core.hazards import NumericHazard
from ..frontends._spans import make_span, span_name
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


def _copy(expr: relay.Call, data: np.ndarray) -> np.ndarray:
    """``copy`` (ONNX Identity): the value itself."""
    return data.copy()


def _take(expr: relay.Call, data: np.ndarray, indices: np.ndarray) -> np.ndarray | None:
    attrs = expr.attrs
    axis = 0 if attrs.axis is None else int(attrs.axis)
    if int(attrs.batch_dims) != 0 or indices.dtype.kind not in "iu" or \
            (indices.size and (indices.min() < 0 or indices.max() >= data.shape[axis])):
        return None  # clip/wrap/fast differ only out of range: leave those to TVM
    return np.take(data, indices, axis=axis)


def _gather_nd(expr: relay.Call, data: np.ndarray, indices: np.ndarray) -> np.ndarray | None:
    """Relay's gather_nd: ``out[y, ...] = data[indices[0, y], ..., indices[M-1, y], ...]``."""
    if int(expr.attrs.batch_dims) != 0 or indices.dtype.kind not in "iu" or \
            (indices.size and (indices.min() < 0 or any(
                indices[i].max() >= data.shape[i] for i in range(indices.shape[0])))):
        return None
    return data[tuple(indices[i] for i in range(indices.shape[0]))]


def _cumsum(expr: relay.Call, data: np.ndarray) -> np.ndarray | None:
    """cumsum and cumprod: a running sum (product) in order along one axis, as TVM's scan
    computes it (numpy's accumulate is sequential too, in the result's dtype)."""
    attrs = expr.attrs
    if attrs.exclusive is not None and bool(attrs.exclusive):
        return None
    dtype = str(expr.checked_type.dtype)
    if attrs.axis is None:
        data, axis = data.reshape(-1), 0
    else:
        axis = int(attrs.axis)
    ufunc = np.multiply if expr.op.name == "cumprod" else np.add
    return ufunc.accumulate(data.astype(dtype), axis=axis, dtype=dtype)


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
    "copy": _copy,
    "take": _take,
    "gather_nd": _gather_nd,
    "cumsum": _cumsum,
    "cumprod": _cumsum,
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
    "logical_xor": _elementwise(np.logical_xor),
    "where": _elementwise(np.where),
}


def _shape(expr: relay.Expr) -> tuple[int, ...]:
    return tuple(int(d) for d in expr.checked_type.shape)


@dataclass
class _Overflow:
    """A folded constant with values that became inf in its dtype: the largest such magnitude,
    and the value in float32 (None where it cannot be computed)."""

    value: float
    dtype: str
    wide: np.ndarray | None


@dataclass
class _Folding:
    """One run of :func:`fold_constant_calls`: replacements by object key, the overflowed
    constants among them, and the hazards found."""

    keep_fp32: bool
    names: Mapping[tuple[str, float], str]
    replaced: dict[int, relay.Expr] = field(default_factory=dict)
    overflowed: dict[int, _Overflow] = field(default_factory=dict)
    hazards: list[NumericHazard] = field(default_factory=list)


def fold_constant_calls(mod: tvm.IRModule, hazards: list[NumericHazard] | None = None,
                        keep_fp32: bool = False,
                        names: Mapping[tuple[str, float], str] | None = None) -> tvm.IRModule:
    """``mod`` (type-checked) with every call on constants replaced by its value (computed by
    :data:`_FOLDERS`, else by TVM: :func:`_tvm_value`), to a fixed point (a chain folds from
    its first call on); ``mod`` itself if none.

    Each op left using a folded value that overflowed its dtype is appended to ``hazards``
    (when given); with ``keep_fp32`` that op computes in float32 instead.
    """
    func = mod["main"]
    state = _Folding(keep_fp32, names or {})
    exprs: list[relay.Expr] = []
    relay.analysis.post_order_visit(func.body, exprs.append)
    if any(isinstance(e, (relay.Let, relay.If, relay.Function)) for e in exprs):
        return mod  # not a dataflow graph: relay_graph rejects it with the reason
    for expr in exprs:
        new = _rebuilt(expr, state)
        if new is not None:
            state.replaced[object_key(expr)] = new
    if hazards is not None:
        hazards.extend(state.hazards)
    if not state.replaced:
        return mod
    body = state.replaced.get(object_key(func.body), func.body)
    folded = relay.Function(func.params, body, func.ret_type, func.type_params, func.attrs)
    return relay.transform.InferType()(tvm.IRModule.from_expr(folded))


def _fold(expr: relay.Call, operands: list[np.ndarray]) -> np.ndarray | None:
    """The call's value in numpy, in the dtype and shape its type says, or None."""
    try:
        # An overflow is reported by name (_overflow), not by numpy's anonymous warning.
        with np.errstate(over="ignore", invalid="ignore"):
            value = _FOLDERS[expr.op.name](expr, *operands)
            if value is None:
                return None
            dtype = str(expr.checked_type.dtype)
            value = np.asarray(value)
            return value.astype(dtype) if value.shape == _shape(expr) else None
    except (ValueError, IndexError, TypeError, AttributeError, tvm.TVMError):
        return None  # an operand or attribute this folder does not handle: TVM keeps the call


def _wide(expr: relay.Call, operands: list[np.ndarray]) -> np.ndarray | None:
    """The call's value computed in float32 from float32 operands (a cast: its operand), or
    None where the folder cannot."""
    wide = [a.astype("float32") if a.dtype.kind == "f" else a for a in operands]
    if expr.op.name == "cast":
        return wide[0]
    try:
        with np.errstate(over="ignore", invalid="ignore"):
            value = _FOLDERS[expr.op.name](expr, *wide)
    except (ValueError, IndexError, TypeError, AttributeError, tvm.TVMError):
        return None
    return None if value is None else np.asarray(value)


def _overflow(expr: relay.Call, operands: list[np.ndarray],
              folded: np.ndarray) -> _Overflow | None:
    """How ``folded`` overflowed (infinities where every operand was finite), or None."""
    if folded.dtype.kind != "f":
        return None
    finite = all(np.isfinite(a).all() for a in operands if a.dtype.kind == "f")
    lost = ~np.isfinite(folded)
    if not finite or not lost.any():
        return None
    wide = _wide(expr, operands)
    if wide is None or wide.shape != folded.shape:  # the largest operand stands for the value
        largest = max(float(np.abs(a).max(initial=0.0)) for a in operands if a.dtype.kind == "f")
        return _Overflow(largest, str(folded.dtype), None)
    return _Overflow(float(np.abs(wide[lost & np.isfinite(wide)]).max(initial=0.0)),
                     str(folded.dtype), wide)


def _rebuilt(expr: relay.Expr, state: _Folding) -> relay.Expr | None:
    """The replacement of ``expr`` given its operands' replacements, or None if it is unchanged.

    A post-order rebuild keyed by object handle: TVM's Python ExprMutator reads every field of
    every node and hashes TVM objects through foreign calls, which took 1.9 s on DenseNet-201;
    this touches each node once and rebuilds only what changed.
    """
    replaced = state.replaced
    if isinstance(expr, relay.Call):
        return _rebuilt_call(expr, state)
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


def _rebuilt_call(expr: relay.Call, state: _Folding) -> relay.Expr | None:
    """A call folded to a constant, rebuilt on replaced operands (in float32 where it uses an
    overflowed value and ``keep_fp32``), or None if it is unchanged."""
    args = array_items(expr.args)
    new_args = [state.replaced.get(object_key(a), a) for a in args]
    overflowed = [state.overflowed.get(object_key(a)) for a in new_args]
    op = expr.op
    if (isinstance(op, tvm.ir.Op) and op.name in _FOLDERS and new_args
            and all(isinstance(a, relay.Constant) for a in new_args)):
        operands = [a.data.numpy() for a in new_args]
        folded = _fold(expr, operands)
        if folded is not None:
            const = relay.const(folded)
            record = _overflow_of(expr, operands, overflowed, folded)
            if record is not None:
                state.overflowed[object_key(const)] = record
            return const
    if all(o is None for o in overflowed) and _tvm_folds(expr, new_args):
        value = _tvm_value(expr, new_args)
        if value is not None:
            return value
    if any(o is not None for o in overflowed):
        return _hazard_use(expr, args, new_args, overflowed, state)
    if any(object_key(a) in state.replaced for a in args):
        return relay.Call(op, new_args, expr.attrs, None, expr.span)
    return None


#: Op name prefixes TVM's evaluation is not asked to fold: annotations and device placement,
#: random numbers, memory and VM builtins, quantized ops (FoldConstant leaves QNN ops too).
_NOT_FOLDED = ("annotation.", "random.", "memory.", "vm.", "qnn.", "device_copy", "on_device",
               "nn.dropout")

#: The largest result (elements) a call is folded to: a constant larger than this stays a call.
_MAX_FOLDED_ELEMENTS = 1 << 24


def _tvm_folds(expr: relay.Call, args: list[relay.Expr]) -> bool:
    """Whether ``expr`` (its operands now ``args``) is a call on constants only (a tuple of
    constants counts: concatenate) whose one tensor result TVM's FoldConstant may compute."""
    ty = expr.checked_type
    if not isinstance(expr.op, tvm.ir.Op) or not args or not isinstance(ty, relay.TensorType) \
            or expr.op.name.startswith(_NOT_FOLDED):
        return False
    if not all(isinstance(a, relay.Constant) or (isinstance(a, relay.Tuple) and all(
            isinstance(f, relay.Constant) for f in a.fields)) for a in args):
        return False
    try:
        return int(np.prod(_shape(expr))) <= _MAX_FOLDED_ELEMENTS
    except (TypeError, ValueError):  # a dynamic shape
        return False


def _tvm_value(expr: relay.Call, args: list[relay.Expr]) -> relay.Constant | None:
    """``expr`` on the constants ``args`` evaluated by TVM (FoldConstant on this one call, as
    ``relay.build`` folds it), or None where TVM leaves it a call or cannot evaluate it."""
    call = relay.Call(expr.op, args, expr.attrs, expr.type_args)
    try:
        mod = relay.transform.InferType()(tvm.IRModule.from_expr(relay.Function([], call)))
        with tvm.transform.PassContext(opt_level=3):
            body = relay.transform.FoldConstant()(mod)["main"].body
    except tvm.TVMError:
        return None
    if not isinstance(body, relay.Constant):
        return None
    value = body.data.numpy()
    if value.shape != _shape(expr) or str(value.dtype) != str(expr.checked_type.dtype):
        return None
    return relay.const(value)


def _overflow_of(expr: relay.Call, operands: list[np.ndarray],
                 overflowed: list[_Overflow | None], folded: np.ndarray) -> _Overflow | None:
    """The overflow ``folded`` carries: on from an overflowed operand (a layout_transform of
    the cast weight, its float32 value transformed alike), or new (:func:`_overflow`)."""
    inherited = [o for o in overflowed if o is not None]
    if not inherited:
        return _overflow(expr, operands, folded)
    wide = _wide(expr, [o.wide if o is not None and o.wide is not None else a
                        for a, o in zip(operands, overflowed, strict=True)])
    return _Overflow(max(o.value for o in inherited), inherited[0].dtype, wide)


def _hazard_use(expr: relay.Call, args: tuple[relay.Expr, ...], new_args: list[relay.Expr],
                overflowed: list[_Overflow | None], state: _Folding) -> relay.Expr:
    """Record that ``expr`` uses an overflowed constant, and rebuild it (in float32 when asked
    and possible)."""
    records = [o for o in overflowed if o is not None]
    op_name = expr.op.name if isinstance(expr.op, tvm.ir.Op) else "call"
    value = max(o.value for o in records)
    name = span_name(expr) or state.names.get((op_name, value), "")
    span = expr.span if span_name(expr) or not name else make_span(name)
    kept = None
    if state.keep_fp32 and all(o.wide is not None for o in records):
        kept = _in_float32(expr, args, new_args, overflowed, span)
    state.hazards.append(NumericHazard(op_name, name, value, records[0].dtype,
                                       kept_fp32=kept is not None))
    return kept if kept is not None else relay.Call(expr.op, new_args, expr.attrs, None, span)


def _in_float32(expr: relay.Call, args: tuple[relay.Expr, ...], new_args: list[relay.Expr],
                overflowed: list[_Overflow | None], span: tvm.ir.Span | None) -> relay.Expr | None:
    """``expr`` computing in float32: float16 operands cast up (constants converted, the
    overflowed ones at their float32 value), results cast back to float16 for its users; None
    for a call this cannot rewrite (a tuple operand, a result that is not tensors)."""
    types = [a.checked_type for a in args] + [expr.checked_type]
    if not all(isinstance(t, relay.TensorType) for t in types[:-1]) or \
            not _tensors(expr.checked_type):
        return None
    up = []
    for _arg, new, record, ty in zip(args, new_args, overflowed, types, strict=False):
        if record is not None:
            up.append(relay.const(record.wide.astype("float32")))
        elif str(ty.dtype) != "float16":
            up.append(new)
        elif isinstance(new, relay.Constant):
            up.append(relay.const(new.data.numpy().astype("float32")))
        else:
            up.append(relay.cast(new, "float32"))
    call = relay.Call(expr.op, up, _float32_attrs(expr.attrs), None, span)
    return _back_to_float16(call, expr.checked_type)


def _tensors(ty: relay.Type) -> bool:
    """Whether ``ty`` is a tensor or a tuple of tensors."""
    if isinstance(ty, relay.TensorType):
        return True
    return isinstance(ty, relay.TupleType) and all(isinstance(f, relay.TensorType)
                                                   for f in ty.fields)


def _float32_attrs(attrs: tvm.ir.Attrs | None) -> tvm.ir.Attrs | None:
    """``attrs`` with an ``out_dtype`` of float16 (ToMixedPrecision sets it) made float32."""
    if attrs is None or "out_dtype" not in attrs.keys() or str(attrs.out_dtype) != "float16":
        return attrs
    fields = {key: attrs[key] for key in attrs.keys()}
    fields["out_dtype"] = "float32"
    return tvm.ir.make_node(attrs.type_key, **fields)


def _back_to_float16(call: relay.Expr, ty: relay.Type) -> relay.Expr:
    """``call``'s results cast to float16 where the original's were (its users expect it)."""
    if isinstance(ty, relay.TensorType):
        return relay.cast(call, "float16") if str(ty.dtype) == "float16" else call
    items = [relay.TupleGetItem(call, i) for i in range(len(ty.fields))]
    return relay.Tuple([relay.cast(item, "float16") if str(f.dtype) == "float16" else item
                        for item, f in zip(items, ty.fields, strict=True)])
