"""Relax op names -> the Relay op names our targets, rules, patterns and cost models use.

This is the one table of the mapping. Targets are written in Relay's vocabulary (``nn.conv2d``,
``nn.dense``, ``add``) because that is what the Relay frontends produce; a Relax call becomes a
node under its Relay name, with its attributes renamed where the rules read them, so that support
rules, patterns, strategies and cost models run unchanged on a Relax model.

Three kinds of entries:

* :data:`RENAMED`: the same op under another name (``relax.permute_dims`` -> ``transpose``);
* :data:`BY_SHAPE`: ops whose Relay counterpart depends on their operands: ``relax.matmul`` is
  ``nn.dense`` (a 2-D right operand, which Relay's importers write as ``dense(a, transpose(b))``),
  ``nn.batch_matmul`` (same-rank batched operands, in Relay's NT form) or ``nn.matmul``;
  ``relax.mean`` over H and W of a 4-D tensor with ``keepdims`` is ``nn.global_avg_pool2d``
  (what Relay's ONNX importer makes of ``GlobalAveragePool``);
* :data:`HOST_ONLY`: Relax ops with no Relay op that a target lists; they keep their Relax name,
  which no accelerator rule knows, so they stay on the host (the reason says so).

An op in none of them also keeps its Relax name (and so stays on the host); the tests check that
every op their models produce is mapped or listed as host-only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.graph import TensorType

#: Relax op -> Relay op of the same meaning.
RENAMED: Mapping[str, str] = {
    # convolutions and pooling
    "relax.nn.conv1d": "nn.conv1d", "relax.nn.conv2d": "nn.conv2d", "relax.nn.conv3d": "nn.conv3d",
    "relax.nn.conv1d_transpose": "nn.conv1d_transpose",
    "relax.nn.conv2d_transpose": "nn.conv2d_transpose",
    "relax.nn.max_pool2d": "nn.max_pool2d", "relax.nn.avg_pool2d": "nn.avg_pool2d",
    "relax.nn.max_pool3d": "nn.max_pool3d", "relax.nn.avg_pool3d": "nn.avg_pool3d",
    "relax.nn.adaptive_avg_pool2d": "nn.adaptive_avg_pool2d",
    # normalization and activations
    "relax.nn.batch_norm": "nn.batch_norm", "relax.nn.layer_norm": "nn.layer_norm",
    "relax.nn.group_norm": "nn.group_norm", "relax.nn.instance_norm": "nn.instance_norm",
    "relax.nn.softmax": "nn.softmax", "relax.nn.log_softmax": "nn.log_softmax",
    "relax.nn.relu": "nn.relu", "relax.nn.leakyrelu": "nn.leaky_relu", "relax.nn.prelu": "nn.prelu",
    "relax.nn.dropout": "nn.dropout", "relax.nn.pad": "nn.pad",
    # data movement
    "relax.permute_dims": "transpose", "relax.concat": "concatenate", "relax.astype": "cast",
    "relax.reshape": "reshape", "relax.split": "split", "relax.strided_slice": "strided_slice",
    "relax.squeeze": "squeeze", "relax.expand_dims": "expand_dims", "relax.flatten": "reshape",
    "relax.take": "take", "relax.broadcast_to": "broadcast_to", "relax.tile": "tile",
    "relax.repeat": "repeat", "relax.where": "where", "relax.image.resize2d": "image.resize2d",
    "relax.layout_transform": "layout_transform", "relax.flip": "reverse",
    "relax.gather_elements": "gather", "relax.gather_nd": "gather_nd",
    # reductions
    "relax.sum": "sum", "relax.max": "max", "relax.min": "min", "relax.prod": "prod",
    "relax.variance": "variance", "relax.argmax": "argmax", "relax.argmin": "argmin",
    # elementwise (same name without the prefix)
    **{f"relax.{name}": name for name in (
        "add", "subtract", "multiply", "divide", "floor_divide", "power", "maximum", "minimum",
        "mod", "floor_mod", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "abs",
        "negative", "floor", "ceil", "round", "sign", "sin", "cos", "clip", "equal", "not_equal",
        "greater", "greater_equal", "less", "less_equal", "logical_and", "logical_or",
        "logical_not", "isnan", "isinf")},
}

#: Relax ops with no Relay op a target lists: kept under their Relax name, hence on the host.
HOST_ONLY: frozenset[str] = frozenset({
    # TE/TIR calls some importers emit (the ONNX Clip with tensor bounds): opaque to the rules
    "relax.call_tir", "relax.call_dps_packed", "relax.call_pure_packed",
    # composite activations Relay spells as several ops (its importers decompose them)
    "relax.nn.gelu", "relax.nn.gelu_tanh", "relax.nn.silu",
    # shape computations (a static model has none after constant folding)
    "relax.shape_of", "relax.tensor_to_shape", "relax.shape_to_tensor",
})

#: Call arguments that Relax passes as values (a ShapeExpr, a PrimValue) where Relay has an
#: attribute: ``{op: {argument index: Relay attribute}}``.
ARGUMENT_ATTRS: Mapping[str, Mapping[int, str]] = {
    "relax.reshape": {1: "newshape"},
    "relax.broadcast_to": {1: "shape"},
    "relax.image.resize2d": {1: "size"},
    "relax.clip": {1: "a_min", 2: "a_max"},
    "relax.nn.pad": {1: "pad_value"},
}

#: Attribute renames ``{relax op: {relax attribute: relay attribute}}`` where the rules read them.
ATTR_RENAMES: Mapping[str, Mapping[str, str]] = {
    "relax.nn.layer_norm": {"axes": "axis"},
    "relax.nn.group_norm": {"axes": "axis"},
    "relax.nn.instance_norm": {"axes": "axis"},
    "relax.nn.leakyrelu": {"alpha": "alpha"},
    "relax.expand_dims": {"axis": "axis"},
}


@dataclass(frozen=True)
class Operand:
    """One tensor argument of a Relax call: its type and whether it is a weight (a constant)."""

    spec: TensorType
    weight: bool


@dataclass(frozen=True)
class RelayView:
    """A Relax call as the targets read it: Relay op name, Relay attributes and the tensor
    operands in Relay's order and shapes (``nn.dense``'s weight as ``[units, in]``)."""

    op: str
    attrs: dict[str, Any]
    operands: tuple[Operand, ...]
    relax_op: str = ""
    notes: tuple[str, ...] = field(default=())


def is_mapped(relax_op: str) -> bool:
    """Whether ``relax_op`` has a Relay counterpart in this table (renamed or by shape)."""
    return relax_op in RENAMED or relax_op in BY_SHAPE


def relay_view(relax_op: str, attrs: Mapping[str, Any], operands: Sequence[Operand],
               values: Mapping[int, Any] | None = None) -> RelayView:
    """The Relay form of one Relax call.

    ``attrs`` are the call's attributes as plain values, ``operands`` its tensor arguments and
    ``values`` its non-tensor arguments by position (shapes as tuples, PrimValues as numbers).
    """
    plain = {name: _relay_value(value) for name, value in attrs.items()}
    renames = ATTR_RENAMES.get(relax_op, {})
    plain = {renames.get(name, name): value for name, value in plain.items()}
    for index, name in ARGUMENT_ATTRS.get(relax_op, {}).items():
        if values and index in values:
            plain[name] = values[index]
    if relax_op in BY_SHAPE:
        return BY_SHAPE[relax_op](relax_op, plain, tuple(operands))
    op = RENAMED.get(relax_op, relax_op)
    if op in ("nn.layer_norm", "nn.group_norm", "nn.instance_norm"):
        plain["axis"] = _single_axis(plain.get("axis"))
    return RelayView(op, plain, tuple(operands), relax_op)


def _relay_value(value: Any) -> Any:
    # Relax leaves an unset out_dtype as None where Relay has "" (void).
    return "" if value is None else value


def _single_axis(axis: Any) -> Any:
    """Relay's layer_norm has one ``axis``; Relax's ``axes`` list holds one for the models
    Relay could import."""
    if isinstance(axis, tuple) and len(axis) == 1:
        return axis[0]
    return axis


def _transposed_last_two(spec: TensorType) -> TensorType:
    shape = spec.shape
    return TensorType((*shape[:-2], shape[-1], shape[-2]), spec.dtype)


def _matmul(relax_op: str, attrs: dict[str, Any], operands: tuple[Operand, ...]) -> RelayView:
    """``relax.matmul`` as the Relay op an importer would have written for it."""
    a, b = operands
    extra = {"out_dtype": attrs.get("out_dtype", "")}
    if len(b.spec.shape) == 2 and len(a.spec.shape) >= 2:
        # Relay's importers write dense(reshape(a, [M, K]), transpose(b)) (reshaped back after):
        # the data as 2-D [M, K], the weight as [units, in]; a constant b is one weight.
        rows = math.prod(a.spec.shape[:-1])
        data = Operand(TensorType((rows, a.spec.shape[-1]), a.spec.dtype), a.weight)
        weight = Operand(_transposed_last_two(b.spec), b.weight)
        return RelayView("nn.dense", {"units": b.spec.shape[1], **extra}, (data, weight),
                         relax_op, ("presented as Relay's dense: data [M, K], weight [units, in]",))
    rank = len(a.spec.shape)
    if rank >= 3 and len(b.spec.shape) == rank and a.spec.shape[:-2] == b.spec.shape[:-2]:
        batch = math.prod(a.spec.shape[:-2])
        lhs = Operand(TensorType((batch, *a.spec.shape[-2:]), a.spec.dtype), a.weight)
        rhs = Operand(TensorType((batch, b.spec.shape[-1], b.spec.shape[-2]), b.spec.dtype),
                      b.weight)
        return RelayView("nn.batch_matmul", {"transpose_a": False, "transpose_b": True, **extra},
                         (lhs, rhs), relax_op,
                         ("NT form, as Relay's importers write batch_matmul(a, transpose(b))",))
    return RelayView("nn.matmul", {"transpose_a": False, "transpose_b": False, **extra},
                     operands, relax_op)


def _mean(relax_op: str, attrs: dict[str, Any], operands: tuple[Operand, ...]) -> RelayView:
    """``relax.mean`` over the spatial axes of a 4-D tensor, kept 4-D, is a global average pool."""
    (data,) = operands
    rank = len(data.spec.shape)
    axes = tuple(sorted(a % rank for a in (attrs.get("axis") or ()))) if rank else ()
    if rank == 4 and attrs.get("keepdims") and axes in ((2, 3), (1, 2)):
        layout = "NCHW" if axes == (2, 3) else "NHWC"
        return RelayView("nn.global_avg_pool2d", {"layout": layout, "out_layout": ""},
                         operands, relax_op)
    return RelayView("mean", {"axis": attrs.get("axis"), "keepdims": bool(attrs.get("keepdims")),
                              "exclude": False}, operands, relax_op)


#: Relax ops whose Relay counterpart depends on their operands' ranks and kinds.
BY_SHAPE: Mapping[str, Callable[[str, dict[str, Any], tuple[Operand, ...]], RelayView]] = {
    "relax.matmul": _matmul,
    "relax.mean": _mean,
}
