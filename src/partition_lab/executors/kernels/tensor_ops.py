"""Kernels of the dense tensor ops: elementwise, shape and layout, reductions, matrix products,
convolutions, normalisation, pooling and resizing.

Each ``@kernel`` runs one Relay op as eager PyTorch calls on tensors in the op's own layout (NHWC
data viewed as NCHW keeps channels-last strides, which cuDNN keeps). Importing
:mod:`partition_lab.executors.kernels` registers them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from ...core.graph import OpNode
from .registry import KERNELS, Kernel, UnsupportedKernelError, kernel


# ---------------------------------------------------------------------------- layout helpers
def _perm(src: str, dst: str) -> list[int]:
    """Axis permutation taking a tensor in layout ``src`` to layout ``dst`` (same letters)."""
    if sorted(src) != sorted(dst) or not src.isupper():
        raise UnsupportedKernelError(f"layout {src} -> {dst} is not a plain permutation")
    return [src.index(axis) for axis in dst]


def _to_nchw(x: torch.Tensor, layout: str) -> torch.Tensor:
    # NHWC data viewed as NCHW has channels-last strides: no copy, and cuDNN keeps it that way.
    return x if layout == "NCHW" else x.permute(_perm(layout, "NCHW"))


def _from_nchw(x: torch.Tensor, layout: str) -> torch.Tensor:
    return x if layout == "NCHW" else x.permute(_perm("NCHW", layout))


def _split_padding(padding: Sequence[int]) -> tuple[tuple[int, int], tuple[int, int] | None]:
    """Relay 2-D padding (1, 2 or 4 values) -> symmetric (h, w), or None plus the explicit pad."""
    pad = list(padding)
    if len(pad) == 1:
        pad = pad * 4
    elif len(pad) == 2:
        pad = [pad[0], pad[1], pad[0], pad[1]]
    top, left, bottom, right = pad
    if top == bottom and left == right:
        return (top, left), None
    return (0, 0), (left, right, top, bottom)


# ---------------------------------------------------------------- elementwise, shape, reductions
def _elementwise(fn: Callable[..., torch.Tensor]) -> Callable[[OpNode, list[Any], Any], Any]:
    return lambda node, args, prepared: fn(*args)


def _round_half_away(x: torch.Tensor) -> torch.Tensor:
    # TVM rounds halves away from zero (llvm.round); torch.round rounds them to even.
    whole = torch.trunc(x)
    return torch.where((x - whole).abs() == 0.5, whole + torch.sign(x), torch.round(x))


def _divide(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    # Relay divides integers by truncation (TIR's truncdiv), floats exactly.
    integers = not (a.dtype.is_floating_point or b.dtype.is_floating_point)
    return torch.div(a, b, rounding_mode="trunc") if integers else torch.div(a, b)


for _op, _fn in {
    "add": torch.add, "subtract": torch.sub, "multiply": torch.mul, "divide": _divide,
    "power": torch.pow, "maximum": torch.maximum, "minimum": torch.minimum,
    "nn.relu": F.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh, "exp": torch.exp,
    "log": torch.log, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "erf": torch.erf,
    "negative": torch.neg, "abs": torch.abs, "floor_divide": torch.floor_divide,
    # Relay's mod truncates (C fmod, TIR truncmod); floor_mod takes the divisor's sign.
    "mod": torch.fmod, "floor_mod": torch.remainder,
    "floor": torch.floor, "ceil": torch.ceil, "trunc": torch.trunc, "sign": torch.sign,
    "round": _round_half_away,
    "equal": torch.eq, "not_equal": torch.ne, "less": torch.lt, "less_equal": torch.le,
    "greater": torch.gt, "greater_equal": torch.ge,
    "logical_and": torch.logical_and, "logical_or": torch.logical_or,
    "logical_xor": torch.logical_xor, "logical_not": torch.logical_not, "isnan": torch.isnan,
}.items():
    KERNELS[_op] = Kernel(_elementwise(_fn))


@kernel("copy", "cast", "cast_like", "nn.dropout", "stop_gradient")
def _identity(node: OpNode, args: list[Any], prepared: Any) -> Any:
    # cast, cast_like: the executor casts every output to its graph type after the kernel.
    # dropout: inference is the identity; its second output (the mask) is never used.
    return (args[0], args[0]) if len(node.outputs) == 2 else args[0]


@kernel("reshape", "contrib_reverse_reshape", "nn.batch_flatten", "squeeze", "expand_dims")
def _reshape(node: OpNode, args: list[Any], prepared: Any) -> Any:
    # The graph knows every output shape; Relay's reshape codes (0, -1, -2...) need no decoding.
    return args[0].reshape(node.outputs[0].shape)


@kernel("transpose")
def _transpose(node: OpNode, args: list[Any], prepared: Any) -> Any:
    axes = node.attrs.get("axes")
    axes = list(reversed(range(args[0].dim()))) if not axes else list(axes)
    # TVM writes a transposed copy; so do we, or later ops would see strided views for free.
    return args[0].permute(axes).contiguous()


def _check_layout_transform(node: OpNode) -> str | None:
    src, dst = node.attrs.get("src_layout", ""), node.attrs.get("dst_layout", "")
    if sorted(src) != sorted(dst) or not src.isupper():
        return f"layout {src} -> {dst} is not a plain permutation"
    return None


@kernel("layout_transform", check=_check_layout_transform)
def _layout_transform(node: OpNode, args: list[Any], prepared: Any) -> Any:
    perm = _perm(node.attrs["src_layout"], node.attrs["dst_layout"])
    return args[0].permute(perm).contiguous()


@kernel("nn.leaky_relu")
def _leaky_relu(node: OpNode, args: list[Any], prepared: Any) -> Any:
    return F.leaky_relu(args[0], float(node.attrs.get("alpha", 0.01)))


@kernel("nn.prelu")
def _prelu(node: OpNode, args: list[Any], prepared: Any) -> Any:
    x, alpha = args[0], args[1]
    shape = [1] * x.dim()
    shape[int(node.attrs.get("axis", 1)) % x.dim()] = -1
    return torch.where(x >= 0, x, x * alpha.reshape(shape))


@kernel("clip")
def _clip(node: OpNode, args: list[Any], prepared: Any) -> Any:
    return torch.clamp(args[0], float(node.attrs["a_min"]), float(node.attrs["a_max"]))


@kernel("nn.softmax", "nn.log_softmax")
def _softmax(node: OpNode, args: list[Any], prepared: Any) -> Any:
    fn = F.softmax if node.op == "nn.softmax" else F.log_softmax
    return fn(args[0], dim=int(node.attrs.get("axis", -1)))


@kernel("concatenate")
def _concatenate(node: OpNode, args: list[Any], prepared: Any) -> Any:
    return torch.cat(args, dim=int(node.attrs.get("axis", 0)))


@kernel("split")
def _split(node: OpNode, args: list[Any], prepared: Any) -> Any:
    axis = int(node.attrs.get("axis", 0))
    sizes = [out.shape[axis] for out in node.outputs]
    return tuple(torch.split(args[0], sizes, dim=axis))


@kernel("strided_slice")
def _strided_slice(node: OpNode, args: list[Any], prepared: Any) -> Any:
    x = args[0]
    begin, end = list(node.attrs["begin"]), list(node.attrs["end"])
    strides = list(node.attrs.get("strides") or [1] * len(begin))
    axes = node.attrs.get("axes") or range(len(begin))
    index: list[Any] = [slice(None)] * x.dim()
    for i, axis in enumerate(axes):
        stride = strides[i] if i < len(strides) else strides[-1]
        stop = end[i]
        if node.attrs.get("slice_mode") == "size":
            stop = x.shape[axis] if stop < 0 else begin[i] + stop
        index[axis] = slice(begin[i], min(stop, x.shape[axis]), stride)
    return x[tuple(index)]


def _reduce_axes(node: OpNode, ndim: int) -> list[int]:
    axis = node.attrs.get("axis")
    axes = list(range(ndim)) if axis is None else [a % ndim for a in (
        axis if isinstance(axis, tuple) else (axis,))]
    if node.attrs.get("exclude"):
        axes = [a for a in range(ndim) if a not in axes]
    return axes


@kernel("mean", "sum", "max", "min")
def _reduce(node: OpNode, args: list[Any], prepared: Any) -> Any:
    x = args[0]
    axes = _reduce_axes(node, x.dim())
    keep = bool(node.attrs.get("keepdims", False))
    if node.op in ("mean", "sum"):
        return (torch.mean if node.op == "mean" else torch.sum)(x, dim=axes, keepdim=keep)
    fn = torch.amax if node.op == "max" else torch.amin
    return fn(x, dim=axes, keepdim=keep)


@kernel("variance")
def _variance(node: OpNode, args: list[Any], prepared: Any) -> Any:
    """Relay's variance(data, mean): the mean of (data - mean)^2 over the axes (N - 1 in the
    denominator when ``unbiased``); LayerNorm as TVM's ONNX importer writes it."""
    x, mean = args[0], args[1]
    axes = _reduce_axes(node, x.dim())
    keep = bool(node.attrs.get("keepdims", False))
    squares = torch.sum((x - mean) ** 2, dim=axes, keepdim=keep)
    count = math.prod(x.shape[a] for a in axes)
    return squares / max(count - 1 if node.attrs.get("unbiased") else count, 1)


@kernel("argmax", "argmin")
def _arg_reduce(node: OpNode, args: list[Any], prepared: Any) -> Any:
    x = args[0]
    axes = _reduce_axes(node, x.dim())
    if len(axes) != 1:
        flat = x.reshape(-1)
        index = flat.argmax() if node.op == "argmax" else flat.argmin()
        return index.reshape([1] * x.dim() if node.attrs.get("keepdims") else [])
    keep = bool(node.attrs.get("keepdims", False))
    if node.attrs.get("select_last_index"):
        flipped = x.flip(axes[0])
        index = flipped.argmax(axes[0], keep) if node.op == "argmax" else \
            flipped.argmin(axes[0], keep)
        return x.shape[axes[0]] - 1 - index
    return x.argmax(axes[0], keep) if node.op == "argmax" else x.argmin(axes[0], keep)


@kernel("prod")
def _prod(node: OpNode, args: list[Any], prepared: Any) -> Any:
    x = args[0]
    keep = bool(node.attrs.get("keepdims", False))
    for axis in sorted(_reduce_axes(node, x.dim()), reverse=True):
        x = torch.prod(x, dim=axis, keepdim=keep)
    return x


def _check_pad(node: OpNode) -> str | None:
    mode = node.attrs.get("pad_mode", "constant")
    return None if mode == "constant" else f"pad_mode {mode!r}"


@kernel("nn.pad", check=_check_pad)
def _pad(node: OpNode, args: list[Any], prepared: Any) -> Any:
    if node.attrs.get("pad_mode", "constant") != "constant":
        raise UnsupportedKernelError(f"nn.pad mode {node.attrs['pad_mode']!r}")
    pads: list[int] = []
    for before, after in reversed(node.attrs["pad_width"]):
        pads += [int(before), int(after)]
    value = float(args[1]) if len(args) > 1 else float(node.attrs.get("pad_value", 0.0))
    return F.pad(args[0], pads, value=value)


# --- matrix ops
@kernel("nn.dense")
def _dense(node: OpNode, args: list[Any], prepared: Any) -> Any:
    return F.linear(args[0], args[1])


@kernel("nn.matmul")
def _matmul(node: OpNode, args: list[Any], prepared: Any) -> Any:
    a, b = args[0], args[1]
    a = a.transpose(-1, -2) if node.attrs.get("transpose_a") else a
    b = b.transpose(-1, -2) if node.attrs.get("transpose_b") else b
    return torch.matmul(a, b)


@kernel("nn.batch_matmul")
def _batch_matmul(node: OpNode, args: list[Any], prepared: Any) -> Any:
    a, b = args[0], args[1]
    a = a.transpose(-1, -2) if node.attrs.get("transpose_a") else a
    # Relay's default is transpose_b=True (x * y^T); cuBLAS reads the transposed view as is.
    b = b.transpose(-1, -2) if node.attrs.get("transpose_b", True) else b
    return torch.matmul(a, b)


@kernel("einsum")
def _einsum(node: OpNode, args: list[Any], prepared: Any) -> Any:
    # The einsums preparation leaves (not a batched matrix product); torch reads Relay's
    # equations, ellipses and implicit outputs included.
    return torch.einsum(str(node.attrs["equation"]), *args)


@kernel("nn.bias_add")
def _bias_add(node: OpNode, args: list[Any], prepared: Any) -> Any:
    x, bias = args[0], args[1]
    axis = int(node.attrs.get("axis", 1)) % x.dim()
    shape = [1] * x.dim()
    shape[axis] = -1
    return x + bias.reshape(shape)


def _conv_prepare(node: OpNode, args: list[Any]) -> Any:
    weight = args[1]
    if weight is None:
        return None
    return _conv_weight(node, weight)


#: The weight layout each convolution's torch function takes (TVM's default kernel layouts too).
_TORCH_KERNEL_LAYOUT = {"nn.conv1d": "OIW", "nn.conv2d": "OIHW", "nn.conv2d_transpose": "IOHW"}


def _conv_weight(node: OpNode, weight: torch.Tensor) -> torch.Tensor:
    target = _TORCH_KERNEL_LAYOUT[node.op]
    layout = node.attrs.get("kernel_layout") or target
    weight = weight.permute(_perm(layout, target))
    if weight.dim() != 4:
        return weight.contiguous()
    # Channels-last weights let cuDNN pick its NHWC Tensor Core kernels without a conversion.
    return weight.contiguous(memory_format=torch.channels_last)


@kernel("nn.conv1d", prepare=_conv_prepare)
def _conv1d(node: OpNode, args: list[Any], prepared: Any) -> Any:
    layout = node.attrs.get("data_layout") or "NCW"
    weight = prepared if prepared is not None else _conv_weight(node, args[1])
    x = args[0] if layout == "NCW" else args[0].permute(_perm(layout, "NCW"))
    pad = [int(p) for p in node.attrs.get("padding", (0, 0))]
    left, right = (pad[0], pad[0]) if len(pad) == 1 else (pad[0], pad[1])
    if left != right:  # torch pads both sides alike; an asymmetric pad goes first
        x, left = F.pad(x, (left, right)), 0
    y = F.conv1d(x, weight, None, tuple(node.attrs.get("strides", (1,))), left,
                 tuple(node.attrs.get("dilation", (1,))), int(node.attrs.get("groups", 1)))
    out_layout = node.attrs.get("out_layout") or layout
    return y if out_layout == "NCW" else y.permute(_perm("NCW", out_layout))


@kernel("nn.conv2d", prepare=_conv_prepare)
def _conv2d(node: OpNode, args: list[Any], prepared: Any) -> Any:
    layout = node.attrs.get("data_layout") or "NCHW"
    weight = prepared if prepared is not None else _conv_weight(node, args[1])
    x = _to_nchw(args[0], layout)
    padding, explicit = _split_padding(node.attrs.get("padding", (0, 0)))
    if explicit is not None:
        x = F.pad(x, explicit)
    y = F.conv2d(x, weight, None, tuple(node.attrs.get("strides", (1, 1))), padding,
                 tuple(node.attrs.get("dilation", (1, 1))), int(node.attrs.get("groups", 1)))
    return _from_nchw(y, node.attrs.get("out_layout") or layout)


@kernel("nn.conv2d_transpose", prepare=_conv_prepare)
def _conv2d_transpose(node: OpNode, args: list[Any], prepared: Any) -> Any:
    layout = node.attrs.get("data_layout") or "NCHW"
    weight = prepared if prepared is not None else _conv_weight(node, args[1])
    x = _to_nchw(args[0], layout)
    out_shape = _to_nchw(torch.empty(node.outputs[0].shape, device="meta"),
                         node.attrs.get("out_layout") or layout).shape
    pad = list(node.attrs.get("padding", (0, 0, 0, 0)))
    pad = pad * 4 if len(pad) == 1 else pad + pad if len(pad) == 2 else pad
    # Full transposed convolution, then crop: handles asymmetric padding and output_padding.
    y = F.conv_transpose2d(x, weight, None, tuple(node.attrs.get("strides", (1, 1))), 0,
                           tuple(node.attrs.get("output_padding", (0, 0))),
                           int(node.attrs.get("groups", 1)), tuple(node.attrs.get("dilation", (1, 1))))
    y = y[:, :, pad[0]:pad[0] + out_shape[2], pad[1]:pad[1] + out_shape[3]]
    return _from_nchw(y, node.attrs.get("out_layout") or layout)


# --- normalisation
def _channel_shape(node: OpNode, ndim: int) -> list[int]:
    shape = [1] * ndim
    shape[int(node.attrs.get("axis", 1)) % ndim] = -1
    return shape


def _batch_norm_prepare(node: OpNode, args: list[Any]) -> Any:
    gamma, beta, mean, var = args[1:5]
    if any(a is None for a in (gamma, beta, mean, var)):
        return None
    return _fold_batch_norm(node, gamma, beta, mean, var)


def _fold_batch_norm(node: OpNode, gamma: Any, beta: Any, mean: Any, var: Any) -> Any:
    # Inference batch norm is one multiply-add per element: fold it once into scale and shift.
    eps = float(node.attrs.get("epsilon", 1e-5))
    inv = torch.rsqrt(var.float() + eps)
    scale = gamma.float() * inv if node.attrs.get("scale", True) else inv
    shift = (beta.float() if node.attrs.get("center", True) else 0) - mean.float() * scale
    shape = _channel_shape(node, len(node.args[0].shape))
    return scale.to(gamma.dtype).reshape(shape), shift.to(gamma.dtype).reshape(shape)


@kernel("nn.batch_norm", prepare=_batch_norm_prepare)
def _batch_norm(node: OpNode, args: list[Any], prepared: Any) -> Any:
    scale, shift = prepared if prepared is not None else _fold_batch_norm(node, *args[1:5])
    return torch.addcmul(shift, args[0], scale), args[3], args[4]


@kernel("nn.layer_norm")
def _layer_norm(node: OpNode, args: list[Any], prepared: Any) -> Any:
    x, gamma, beta = args[0], args[1], args[2]
    axis = int(node.attrs.get("axis", -1)) % x.dim()
    eps = float(node.attrs.get("epsilon", 1e-5))
    gamma = gamma if node.attrs.get("scale", True) else None
    beta = beta if node.attrs.get("center", True) else None
    if axis == x.dim() - 1:
        return F.layer_norm(x, (x.shape[-1],), gamma, beta, eps)
    mean = x.mean(dim=axis, keepdim=True)
    var = x.var(dim=axis, keepdim=True, correction=0)
    y = (x - mean) * torch.rsqrt(var + eps)
    shape = _channel_shape(node, x.dim())
    y = y * gamma.reshape(shape) if gamma is not None else y
    return y + beta.reshape(shape) if beta is not None else y


def _affine(node: OpNode, y: torch.Tensor, gamma: Any, beta: Any) -> torch.Tensor:
    """``y * gamma + beta`` on the node's channel axis, each where the node's scale/center says."""
    shape = _channel_shape(node, y.dim())
    y = y * gamma.reshape(shape) if node.attrs.get("scale", True) else y
    return y + beta.reshape(shape) if node.attrs.get("center", True) else y


@kernel("nn.instance_norm")
def _instance_norm(node: OpNode, args: list[Any], prepared: Any) -> Any:
    # Relay: normalise over every axis but the batch (0) and the channel axis.
    x, gamma, beta = args[0], args[1], args[2]
    axis = int(node.attrs.get("axis", 1)) % x.dim()
    dims = [d for d in range(1, x.dim()) if d != axis]
    var, mean = torch.var_mean(x, dim=dims, keepdim=True, correction=0)
    y = (x - mean) * torch.rsqrt(var + float(node.attrs.get("epsilon", 1e-5)))
    return _affine(node, y, gamma, beta)


@kernel("nn.group_norm")
def _group_norm(node: OpNode, args: list[Any], prepared: Any) -> Any:
    # Relay (SimplifyInference): the channel axis split into (groups, channels per group), then
    # normalised over the group's channels and every axis after them (axis 1: F.group_norm's).
    x, gamma, beta = args[0], args[1], args[2]
    axis = int(node.attrs.get("axis", 1)) % x.dim()
    groups = int(node.attrs.get("num_groups", 1))
    shape = list(x.shape)
    split = x.reshape(shape[:axis] + [groups, shape[axis] // groups] + shape[axis + 1:])
    dims = list(range(axis + 1, split.dim()))
    var, mean = torch.var_mean(split, dim=dims, keepdim=True, correction=0)
    y = (split - mean) * torch.rsqrt(var + float(node.attrs.get("epsilon", 1e-5)))
    return _affine(node, y.reshape(shape), gamma, beta)


def _check_lrn(node: OpNode) -> str | None:
    size = int(node.attrs.get("size", 5))
    return None if size % 2 == 1 else f"even size {size} (TVM requires an odd window)"


@kernel("nn.lrn", check=_check_lrn)
def _lrn(node: OpNode, args: list[Any], prepared: Any) -> Any:
    # TVM: x / (bias + alpha / size * sum of x^2 over the window of channels)^beta, which is
    # PyTorch's local_response_norm with k = bias, on the channel axis.
    x = args[0]
    axis = int(node.attrs.get("axis", 1)) % x.dim()
    moved = x.movedim(axis, 1)
    y = F.local_response_norm(moved, int(node.attrs.get("size", 5)),
                              alpha=float(node.attrs.get("alpha", 1e-4)),
                              beta=float(node.attrs.get("beta", 0.75)),
                              k=float(node.attrs.get("bias", 2.0)))
    return y.movedim(1, axis)


# --- pooling and resizing
def _pool_window(node: OpNode) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    return (tuple(node.attrs.get("pool_size", (1, 1))), tuple(node.attrs.get("strides", (1, 1))),
            tuple(node.attrs.get("dilation", (1, 1))))


@kernel("nn.max_pool2d")
def _max_pool2d(node: OpNode, args: list[Any], prepared: Any) -> Any:
    layout = node.attrs.get("layout") or "NCHW"
    size, strides, dilation = _pool_window(node)
    x = _to_nchw(args[0], layout)
    padding, explicit = _split_padding(node.attrs.get("padding", (0, 0)))
    if explicit is not None or any(2 * p > k for p, k in zip(padding, size, strict=True)):
        x = F.pad(x, explicit or (padding[1], padding[1], padding[0], padding[0]),
                  value=-math.inf)
        padding = (0, 0)
    y = F.max_pool2d(x, size, strides, padding, dilation, bool(node.attrs.get("ceil_mode")))
    return _from_nchw(y, node.attrs.get("out_layout") or layout)


def _check_avg_pool2d(node: OpNode) -> str | None:
    if any(d != 1 for d in node.attrs.get("dilation", (1, 1))):
        return "dilation"
    _, explicit = _split_padding(node.attrs.get("padding", (0, 0)))
    if explicit is not None and not node.attrs.get("count_include_pad", False):
        return "asymmetric padding that is not counted"
    return None


@kernel("nn.avg_pool2d", check=_check_avg_pool2d)
def _avg_pool2d(node: OpNode, args: list[Any], prepared: Any) -> Any:
    layout = node.attrs.get("layout") or "NCHW"
    size, strides, dilation = _pool_window(node)
    if any(d != 1 for d in dilation):
        raise UnsupportedKernelError("nn.avg_pool2d with dilation")
    x = _to_nchw(args[0], layout)
    padding, explicit = _split_padding(node.attrs.get("padding", (0, 0)))
    include_pad = bool(node.attrs.get("count_include_pad", False))
    if explicit is not None:
        if not include_pad:
            raise UnsupportedKernelError("nn.avg_pool2d with asymmetric padding that is not counted")
        x, padding = F.pad(x, explicit), (0, 0)
    y = F.avg_pool2d(x, size, strides, padding, bool(node.attrs.get("ceil_mode")), include_pad)
    return _from_nchw(y, node.attrs.get("out_layout") or layout)


@kernel("nn.global_avg_pool2d", "nn.global_max_pool2d", "nn.adaptive_avg_pool2d",
        "nn.adaptive_max_pool2d")
def _global_pool(node: OpNode, args: list[Any], prepared: Any) -> Any:
    layout = node.attrs.get("layout") or "NCHW"
    x = _to_nchw(args[0], layout)
    out = _to_nchw(torch.empty(node.outputs[0].shape, device="meta"),
                   node.attrs.get("out_layout") or layout).shape
    fn = F.adaptive_max_pool2d if "max" in node.op else F.adaptive_avg_pool2d
    return _from_nchw(fn(x, (out[2], out[3])), node.attrs.get("out_layout") or layout)


def _check_resize2d(node: OpNode) -> str | None:
    method = node.attrs.get("method", "linear")
    transform = node.attrs.get("coordinate_transformation_mode", "half_pixel")
    if (method in ("linear", "bilinear") and transform in ("align_corners", "half_pixel")) or (
            method == "nearest_neighbor" and transform == "asymmetric"):
        return None
    return f"method={method!r} coordinate_transformation_mode={transform!r}"


@kernel("image.resize2d", check=_check_resize2d)
def _resize2d(node: OpNode, args: list[Any], prepared: Any) -> Any:
    layout = node.attrs.get("layout") or "NCHW"
    size = tuple(int(s) for s in node.attrs["size"])
    method = node.attrs.get("method", "linear")
    transform = node.attrs.get("coordinate_transformation_mode", "half_pixel")
    x = _to_nchw(args[0], layout)
    if method in ("linear", "bilinear") and transform in ("align_corners", "half_pixel"):
        y = F.interpolate(x, size, mode="bilinear", align_corners=transform == "align_corners")
    elif method == "nearest_neighbor" and transform == "asymmetric":
        y = F.interpolate(x, size, mode="nearest")
    else:
        raise UnsupportedKernelError(
            f"image.resize2d method={method!r} coordinate_transformation_mode={transform!r}")
    return _from_nchw(y, layout)


def _check_upsampling(node: OpNode) -> str | None:
    method = node.attrs.get("method", "nearest_neighbor")
    if method == "nearest_neighbor" or (method == "bilinear"
                                        and node.attrs.get("align_corners", False)):
        return None
    return f"method={method!r} align_corners={bool(node.attrs.get('align_corners'))}"


@kernel("nn.upsampling", check=_check_upsampling)
def _upsampling(node: OpNode, args: list[Any], prepared: Any) -> Any:
    layout = node.attrs.get("layout") or "NCHW"
    x = _to_nchw(args[0], layout)
    size = _to_nchw(torch.empty(node.outputs[0].shape, device="meta"), layout).shape[2:]
    if node.attrs.get("method", "nearest_neighbor") == "nearest_neighbor":
        y = F.interpolate(x, tuple(size), mode="nearest")
    else:
        y = F.interpolate(x, tuple(size), mode="bilinear", align_corners=True)
    return _from_nchw(y, layout)
