"""Run a partition plan on real devices with PyTorch: each plan device's regions where its
memory space lives (a GPU, or the host CPU), real copies and casts between them, every region
and crossing timed.

This is a stand-in, said plainly: the TVM wheel partition_lab depends on has no CUDA backend (and
cannot be installed on the GPU machine at all), so GPU regions run each Relay op as the matching
PyTorch op, through cuDNN/cuBLAS. With the ``tensorcore`` target's fp16 graphs and NHWC
convolutions held in channels-last memory, cuDNN and cuBLAS run them on Tensor Cores, which is
what TVM's CUDA tensor-core templates would use. Regions on the platform's ``cuda`` device (the
GPU's CUDA cores in TVM) run the same PyTorch ops: PyTorch cannot be told to keep an fp16
convolution off the Tensor Cores, so here the two GPU devices differ only in what the plan puts
on them. Host islands run with PyTorch's CPU kernels, not TVM's llvm code (TVM does not run
there either). Ops run one by one, eagerly: nothing is fused as TVM would fuse elementwise ops
into their producers.

Devices and places (:func:`places_of`): every plan device maps to a place by its memory space
(the host's memory -> the CPU; any other memory -> the executor's GPU) and its precision. Devices
of one place share tensors for free (``tensorcore`` and ``cuda`` regions on one GPU); a tensor
that leaves its place is moved once per destination place, as
:meth:`~partition_lab.core.plan.PartitionPlan.crossing_tensors` prices it: cast to the graph dtype
where it is, copied, cast to the destination's compute dtype there.

Without a GPU (``device="cpu"``) every region runs on the CPU and no copy happens; CI tests that
path against TVM's own llvm build of the same module. ``separate_memories=True`` keeps each
memory space a place of its own on the CPU, so a plan's crossings run as real copies
(``clone``) and casts, with the same bookkeeping, in the same region order as on a GPU.

Precision: tensors are computed in their graph dtype on the GPU. On the CPU, and on a plan
device whose precision is ``"float32"`` (the host of ``tensorcore``), float16 graph tensors are
computed in float32 (PyTorch's CPU float16 kernels are slow or missing); they cross as float16,
so the copied bytes are the graph's and the casts are part of the timed crossing.
``dtype="float32"`` computes every float16 tensor in float32 everywhere and moves it as float32
(a reference run: nothing rounds).

>>> import numpy as np                                                     # doctest: +SKIP
>>> outputs, timings = run_plan(graph, plan, inputs, weights, bindings=bindings,
...                             device="cuda")                             # doctest: +SKIP

Main entry points: :func:`run_plan`, :class:`PlanExecutor` (prepare once, run and time many
times), :func:`synthetic_weights` and :func:`calibrate_batch_norm` (weights on a machine without
the model's parameters), :data:`KERNELS` (the op translations; :func:`check_kernels` lists every
op of a graph that has none, or whose attribute values its kernel does not take, before anything
runs: an op is never skipped).

Coverage: every op the MXNet and ONNX frontends produce on the zoo and evaluation models, on every
built-in platform's prepared module, has a kernel (``tests/test_torch_exec.py`` checks it; the
list is in ``bench/eval_models.md``). Detection post-processing (``vision.get_valid_counts``,
``vision.non_max_suppression``) follows TVM's own algorithm row for row; its sequential walk over
the score-sorted boxes runs on the host.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from ..core.graph import OpGraph, OpNode, TensorType
from ..core.plan import CPU, PartitionPlan
from ..core.platform import AS_PREPARED, Platform
from ..errors import PartitionLabError
from .graph_io import ArgRef, Bindings

_TORCH_DTYPES = {
    "float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
    "float64": torch.float64, "int64": torch.int64, "int32": torch.int32, "int16": torch.int16,
    "int8": torch.int8, "uint8": torch.uint8, "bool": torch.bool,
}
_HALF = ("float16", "bfloat16")
DTYPE_MODES = ("graph", "float32")


class UnsupportedKernelError(PartitionLabError):
    """Ops (or attribute values of them) that the PyTorch executor does not translate.

    ``missing`` maps each such op to ``{problem: [node names]}`` (empty when raised by a kernel
    at run time); executors raise it before running anything, listing every op at once.
    """

    def __init__(self, message: str, missing: Mapping[str, Mapping[str, list[str]]] | None = None
                 ) -> None:
        super().__init__(message)
        self.missing = {op: dict(problems) for op, problems in (missing or {}).items()}

    @classmethod
    def listing(cls, missing: Mapping[str, Mapping[str, list[str]]], what: str
                ) -> UnsupportedKernelError:
        no_kernel = sorted(op for op, problems in missing.items() if "no kernel" in problems)
        lines = [f"the PyTorch executor cannot run {len(missing)} op(s) of {what}; nothing was "
                 f"run. No PyTorch translation for: {', '.join(no_kernel) or 'none'}."]
        for op in sorted(missing):
            for problem, names in missing[op].items():
                lines.append(f"  {op}: {problem} ({_names(names)})")
        lines.append("Add a kernel with partition_lab.executors.torch_exec.kernel(...), or keep "
                     "these ops out of the graph.")
        return cls("\n".join(lines), missing)


# ---------------------------------------------------------------------------- dtype policy
def wire_dtype(graph_dtype: str, mode: str = "graph") -> str:
    """The dtype a tensor of ``graph_dtype`` crosses between devices in.

    The graph's own dtype (float16 tensors cost float16 bytes), except in ``"float32"`` mode,
    the reference run, where half tensors cross as float32 so that no copy rounds them.
    """
    return "float32" if mode == "float32" and graph_dtype in _HALF else graph_dtype


def compute_dtype(graph_dtype: str, device: str, mode: str = "graph",
                  precision: str = AS_PREPARED) -> torch.dtype:
    """The torch dtype a tensor of ``graph_dtype`` is computed in on torch ``device``.

    float16/bfloat16 stay as they are on CUDA in ``"graph"`` mode and become float32 on the CPU,
    in ``"float32"`` mode and on a plan device whose ``precision`` is ``"float32"``.
    """
    if mode not in DTYPE_MODES:
        raise PartitionLabError(f"dtype must be one of {DTYPE_MODES}, not {mode!r}")
    if graph_dtype in _HALF and (mode == "float32" or precision == "float32"
                                 or not device.startswith("cuda")):
        return torch.float32
    try:
        return _TORCH_DTYPES[graph_dtype]
    except KeyError:
        raise UnsupportedKernelError(f"no torch dtype for {graph_dtype!r}") from None


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


# ---------------------------------------------------------------------------- kernels
@dataclass(frozen=True)
class Kernel:
    """One op's translation: ``run(node, args, prepared)`` returns a tensor or a tuple.

    ``args`` are the flattened call arguments in call order (activations and weights alike).
    ``prepare(node, args)``, if given, runs once when an executor is built, with the weights
    filled in and activations as None; what it returns is passed to every ``run`` (for example a
    kernel permuted to OIHW and held in channels-last memory, or batch norm folded to a scale
    and a shift), so the timed runs do no weight work. ``check(node)``, if given, returns why
    the kernel cannot run this node's attributes (None if it can): executors ask every node
    before they run anything (:func:`check_kernels`).
    """

    run: Callable[[OpNode, list[Any], Any], Any]
    prepare: Callable[[OpNode, list[Any]], Any] | None = None
    check: Callable[[OpNode], str | None] | None = None


KERNELS: dict[str, Kernel] = {}


def kernel(*ops: str, prepare: Callable[[OpNode, list[Any]], Any] | None = None,
           check: Callable[[OpNode], str | None] | None = None
           ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``run`` as the kernel of ``ops``."""
    def register(run: Callable[..., Any]) -> Callable[..., Any]:
        for op in ops:
            KERNELS[op] = Kernel(run, prepare, check)
        return run
    return register


def supported_ops() -> list[str]:
    """Relay op names the executor can run."""
    return sorted(KERNELS)


def node_problem(node: OpNode) -> str | None:
    """Why the executor cannot run ``node`` (no kernel for its op, or an attribute value its
    kernel does not translate), or None if it can."""
    kern = KERNELS.get(node.op)
    if kern is None:
        return "no kernel"
    return kern.check(node) if kern.check is not None else None


def unsupported_nodes(nodes: Sequence[OpNode]) -> dict[str, dict[str, list[str]]]:
    """``{op: {problem: [node names]}}`` for every node the executor cannot run."""
    found: dict[str, dict[str, list[str]]] = {}
    for node in nodes:
        problem = node_problem(node)
        if problem is not None:
            found.setdefault(node.op, {}).setdefault(problem, []).append(node.name)
    return found


def check_kernels(nodes: Sequence[OpNode], what: str = "the graph") -> None:
    """Raise :class:`UnsupportedKernelError` naming every op of ``nodes`` the executor cannot
    run, all at once (op, how many nodes, the first node names, and why), before anything runs.
    """
    found = unsupported_nodes(nodes)
    if found:
        raise UnsupportedKernelError.listing(found, what)


def _names(names: list[str], shown: int = 3) -> str:
    more = f", ... ({len(names)} nodes)" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


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
    "logical_xor": torch.logical_xor, "logical_not": torch.logical_not,
}.items():
    KERNELS[_op] = Kernel(_elementwise(_fn))


@kernel("copy", "cast", "nn.dropout", "stop_gradient")
def _identity(node: OpNode, args: list[Any], prepared: Any) -> Any:
    # cast: the executor casts every output to its graph type after the kernel.
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


def _conv_weight(node: OpNode, weight: torch.Tensor) -> torch.Tensor:
    target = "OIHW" if node.op == "nn.conv2d" else "IOHW"
    default = "OIHW" if node.op == "nn.conv2d" else "IOHW"
    layout = node.attrs.get("kernel_layout") or default
    weight = weight.permute(_perm(layout, target))
    # Channels-last weights let cuDNN pick its NHWC Tensor Core kernels without a conversion.
    return weight.contiguous(memory_format=torch.channels_last)


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


# --- shape-like, index and comparison ops (detectors' post-processing, attention glue)
@kernel("zeros_like", "ones_like")
def _fill_like(node: OpNode, args: list[Any], prepared: Any) -> Any:
    return (torch.zeros_like if node.op == "zeros_like" else torch.ones_like)(args[0])


@kernel("shape_of")
def _shape_of(node: OpNode, args: list[Any], prepared: Any) -> Any:
    return torch.tensor(args[0].shape, dtype=_TORCH_DTYPES[node.outputs[0].dtype],
                        device=args[0].device)


@kernel("reshape_like")
def _reshape_like(node: OpNode, args: list[Any], prepared: Any) -> Any:
    return args[0].reshape(node.outputs[0].shape)


@kernel("broadcast_to", "broadcast_to_like")
def _broadcast_to(node: OpNode, args: list[Any], prepared: Any) -> Any:
    # TVM writes the broadcast tensor out; so do we (an expanded view would be free).
    return args[0].expand(node.outputs[0].shape).contiguous()


@kernel("slice_like")
def _slice_like(node: OpNode, args: list[Any], prepared: Any) -> Any:
    # The output shape says where each sliced axis ends; slice_like always starts at 0.
    return args[0][tuple(slice(0, size) for size in node.outputs[0].shape)]


@kernel("tile")
def _tile(node: OpNode, args: list[Any], prepared: Any) -> Any:
    return torch.tile(args[0], tuple(int(r) for r in node.attrs["reps"]))


@kernel("repeat")
def _repeat(node: OpNode, args: list[Any], prepared: Any) -> Any:
    return torch.repeat_interleave(args[0], int(node.attrs["repeats"]),
                                   dim=int(node.attrs.get("axis", 0)))


@kernel("arange")
def _arange(node: OpNode, args: list[Any], prepared: Any) -> Any:
    # start + i * step for i < the (static) output length; stop only fixed that length.
    start, step = args[0], args[2]
    count = node.outputs[0].shape[0]
    return start + step * torch.arange(count, device=start.device, dtype=start.dtype)


@kernel("where")
def _where(node: OpNode, args: list[Any], prepared: Any) -> Any:
    condition = args[0] if args[0].dtype == torch.bool else args[0] != 0
    return torch.where(condition, args[1], args[2])


@kernel("take")
def _take(node: OpNode, args: list[Any], prepared: Any) -> Any:
    data, indices = args[0], args[1].long()
    axis = node.attrs.get("axis")
    mode = node.attrs.get("mode", "clip")
    size = data.numel() if axis is None else data.shape[int(axis)]
    indices = indices.clamp(0, size - 1) if mode == "clip" else indices.remainder(size)
    if axis is None:
        return data.reshape(-1)[indices]
    return torch.index_select(data, int(axis), indices.reshape(-1)).reshape(
        node.outputs[0].shape)


def _check_take(node: OpNode) -> str | None:
    mode = node.attrs.get("mode", "clip")
    return None if mode in ("clip", "wrap") else f"mode {mode!r}"


KERNELS["take"] = Kernel(_take, None, _check_take)


def _check_gather_nd(node: OpNode) -> str | None:
    batch_dims = int(node.attrs.get("batch_dims", 0) or 0)
    return None if batch_dims == 0 else f"batch_dims={batch_dims}"


@kernel("gather_nd", check=_check_gather_nd)
def _gather_nd(node: OpNode, args: list[Any], prepared: Any) -> Any:
    data, indices = args[0], args[1].long()
    # indices (M, Y...): out[y...] = data[indices[0, y...], ..., indices[M-1, y...], :...]
    return data[tuple(indices[i] for i in range(indices.shape[0]))]


@kernel("topk")
def _topk(node: OpNode, args: list[Any], prepared: Any) -> Any:
    x = args[0]
    axis = int(node.attrs.get("axis", -1))
    k = int(node.attrs["k"])
    k = x.shape[axis] if k < 1 else k
    # TVM sorts stably (equal values keep their order); torch.topk does not promise that.
    values, indices = torch.sort(x, dim=axis, descending=not node.attrs.get("is_ascend"),
                                 stable=True)
    values, indices = values.narrow(axis, 0, k), indices.narrow(axis, 0, k)
    ret_type = node.attrs.get("ret_type", "both")
    return (values, indices) if ret_type == "both" else values if ret_type == "values" \
        else indices


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


@kernel("nn.prelu")
def _prelu(node: OpNode, args: list[Any], prepared: Any) -> Any:
    x, alpha = args[0], args[1]
    shape = [1] * x.dim()
    shape[int(node.attrs.get("axis", 1)) % x.dim()] = -1
    return torch.where(x >= 0, x, x * alpha.reshape(shape))


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


# --- detection post-processing (TVM's vision ops, as mxnet's box_nms becomes them)
@kernel("vision.get_valid_counts")
def _get_valid_counts(node: OpNode, args: list[Any], prepared: Any) -> Any:
    """Boxes whose score beats the threshold (and whose class id is >= 0) moved to the top in
    their order, the rest -1; with their count and their original indices (-1 below)."""
    data = args[0]
    threshold = args[1] if len(args) > 1 else node.attrs.get("score_threshold") or 0.0
    id_index, score_index = int(node.attrs.get("id_index", 0)), int(node.attrs.get("score_index", 1))
    valid = data[:, :, score_index] > threshold
    if id_index >= 0:
        valid &= data[:, :, id_index] >= 0
    count = valid.sum(dim=1)
    # A stable sort of "not valid" puts valid boxes first, each group in its original order.
    order = torch.sort((~valid).to(torch.int8), dim=1, stable=True).indices
    positions = torch.arange(data.shape[1], device=data.device)
    below = positions[None, :] >= count[:, None]
    boxes = torch.gather(data, 1, order[:, :, None].expand_as(data)).masked_fill(
        below[:, :, None], -1)
    indices = order.masked_fill(below, -1)
    return count.to(torch.int32), boxes, indices.to(torch.int32)


@kernel("vision.non_max_suppression")
def _non_max_suppression(node: OpNode, args: list[Any], prepared: Any) -> Any:
    """TVM's greedy NMS (topi.vision.non_max_suppression), row for row: the valid boxes sorted by
    score (stably), at most ``top_k`` of them; walking down, a box with a positive score is kept
    unless a kept box of its class (any class with ``force_suppress``) overlaps it with IoU >=
    the threshold, else its row becomes -1; rows with a score <= 0 stay as they are; after
    ``max_output_size`` kept boxes every row is -1. The IoU matrix is computed on the tensors'
    device, the sequential walk on the host."""
    data, valid_count, indices = args[0], args[1], args[2]
    attrs = node.attrs
    max_output = int(args[3]) if len(args) > 3 else int(attrs.get("max_output_size", -1))
    iou_threshold = float(args[4]) if len(args) > 4 else float(attrs["iou_threshold"])
    top_k = int(attrs.get("top_k", -1))
    score_index = int(attrs.get("score_index", 1))
    batch, anchors, _ = data.shape
    out = torch.full_like(data, -1)
    box_indices = torch.full((batch, anchors), -1, dtype=torch.int64, device=data.device)
    for i, count in enumerate(int(c) for c in valid_count.reshape(-1).cpu()):
        count = min(count, anchors)
        if count <= 0:
            continue
        if iou_threshold <= 0:
            out[i, :count] = data[i, :count]
            box_indices[i, :count] = torch.arange(count, device=data.device)
            continue
        order = torch.sort(data[i, :count, score_index], descending=True, stable=True).indices
        order = order[:top_k] if 0 < top_k < count else order
        rows = data[i, order]
        stays = _nms_walk(rows, iou_threshold, max_output, attrs)
        out[i, :len(order)] = torch.where(stays[:, None], rows, torch.full_like(rows, -1))
        box_indices[i, :len(order)] = torch.where(stays, order, torch.full_like(order, -1))
    if attrs.get("return_indices"):
        originals = torch.where(box_indices >= 0, torch.gather(
            indices.long(), 1, box_indices.clamp(min=0)), box_indices)
        compact, number = _valid_to_top(originals, originals >= 0)
        return compact, number[:, None]
    if attrs.get("invalid_to_bottom"):
        out, _ = _valid_to_top(out, out[:, :, 0] >= 0)
    return out


def _valid_to_top(x: torch.Tensor, valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows of ``x`` (along axis 1) where ``valid``, moved to the top in their order; the rows
    below filled with -1. Also the number of valid rows per batch."""
    order = torch.sort((~valid).to(torch.int8), dim=1, stable=True).indices
    moved = torch.gather(x, 1, order.reshape(*order.shape, *[1] * (x.dim() - 2)).expand_as(x))
    number = valid.sum(dim=1)
    below = torch.arange(x.shape[1], device=x.device)[None, :] >= number[:, None]
    return moved.masked_fill(below.reshape(*below.shape, *[1] * (x.dim() - 2)), -1), number


def _nms_walk(rows: torch.Tensor, threshold: float, max_output: int,
              attrs: Mapping[str, Any]) -> torch.Tensor:
    """Per score-sorted row, whether it stays (kept, or left alone with a score <= 0)."""
    coord, score_index = int(attrs.get("coord_start", 2)), int(attrs.get("score_index", 1))
    id_index = int(attrs.get("id_index", 0))
    boxes = rows[:, coord:coord + 4]
    left = torch.minimum(boxes[:, 0], boxes[:, 2])
    top = torch.minimum(boxes[:, 1], boxes[:, 3])
    right = torch.maximum(boxes[:, 0], boxes[:, 2])
    bottom = torch.maximum(boxes[:, 1], boxes[:, 3])
    width = (torch.minimum(right[:, None], right[None, :])
             - torch.maximum(left[:, None], left[None, :])).clamp(min=0)
    height = (torch.minimum(bottom[:, None], bottom[None, :])
              - torch.maximum(top[:, None], top[None, :])).clamp(min=0)
    overlap = width * height
    area = (right - left) * (bottom - top)
    union = area[:, None] + area[None, :] - overlap
    iou = torch.where(union > 0, overlap / torch.where(union > 0, union, torch.ones_like(union)),
                      torch.zeros_like(union))
    suppresses = iou >= threshold  # [k, j]: kept box k drops the later box j
    if id_index >= 0:
        ids = rows[:, id_index]
        suppresses &= (ids >= 0)[:, None]
        if not attrs.get("force_suppress"):
            suppresses &= ids[:, None] == ids[None, :]
    positive = (rows[:, score_index] > 0).cpu().numpy()
    suppresses_host = suppresses.cpu().numpy()
    kept = np.zeros(len(positive), dtype=bool)
    stays = np.zeros(len(positive), dtype=bool)
    number = 0
    for j in range(len(positive)):
        if number == max_output:
            break  # every later row becomes -1
        if not positive[j]:
            stays[j] = True
        elif not (suppresses_host[:j, j] & kept[:j]).any():
            kept[j] = stays[j] = True
            number += 1
    return torch.from_numpy(stays).to(rows.device)



# ---------------------------------------------------------------------------- weights
def synthetic_weights(graph: OpGraph, bindings: Bindings, seed: int = 0
                      ) -> dict[int, list[np.ndarray]]:
    """Random weights for every node, reproducible from ``seed`` and the graph alone.

    Each node's stream is seeded by ``(seed, node id)``, so the same graph gives the same
    weights on any machine (numpy's generator, not torch's). Scales keep activations finite in
    float16: convolution kernels He-initialised from their fan-in, batch norm with
    gamma near 1, beta and mean near 0 and variance 1 (see :func:`calibrate_batch_norm`), other
    constants near 1 (multipliers, divisors) or near 0 (biases, addends); dense and matmul
    weights with variance 1/fan-in.
    """
    return {node.id: synthetic_node_weights(node, refs, seed)
            for node, refs in zip(graph.nodes, bindings, strict=True) if node.weights}


def synthetic_node_weights(node: OpNode, refs: Sequence[ArgRef], seed: int = 0
                           ) -> list[np.ndarray]:
    """One node's weights as :func:`synthetic_weights` makes them (stream ``(seed, node.id)``)."""
    rng = np.random.default_rng([seed, node.id])
    return [_synthetic_array(node, position, node.args[position], rng)
            for position, ref in enumerate(refs) if ref.kind == "weight"]


def sample_inputs(graph: OpGraph, seed: int = 0) -> dict[str, np.ndarray]:
    """Standard-normal graph inputs from ``seed``, drawn as ``partition_lab.zoo.sample_inputs``
    draws them (one generator, inputs in order), so both give the same arrays."""
    rng = np.random.default_rng(seed)
    return {name: rng.standard_normal(t.spec.shape).astype(t.spec.dtype)
            for name, t in graph.graph_inputs.items()}


def _synthetic_array(node: OpNode, position: int, spec: TensorType,
                     rng: np.random.Generator) -> np.ndarray:
    shape = spec.shape
    fixed = _fixed_argument(node, position)
    if fixed is not None:
        return np.full(shape, fixed, dtype="float32" if spec.dtype == "bfloat16" else spec.dtype)
    if not spec.dtype.startswith(("float", "bfloat")):
        return np.zeros(shape, dtype=spec.dtype)
    dtype = "float32" if spec.dtype == "bfloat16" else spec.dtype
    matrix = node.op.startswith("nn.conv") or node.op in ("nn.dense", "nn.matmul", "nn.batch_matmul")
    if matrix and position == 1:
        # He init where a ReLU follows (convolutions); variance-preserving 1/fan_in for matrix
        # products, which often follow each other with no activation (100 chained matmuls).
        gain = 2.0 if node.op.startswith("nn.conv") else 1.0
        fan_in = _fan_in(node, shape)
        return (rng.standard_normal(shape) * math.sqrt(gain / fan_in)).astype(dtype)
    if node.op == "nn.batch_norm":
        # gamma, beta, mean, var
        value = {1: 1.0 + 0.1 * rng.standard_normal(shape), 2: 0.1 * rng.standard_normal(shape),
                 3: 0.1 * rng.standard_normal(shape), 4: np.ones(shape)}.get(position)
        if value is not None:
            return np.asarray(value).astype(dtype)
    if node.op in ("nn.layer_norm",) and position == 1:
        return (1.0 + 0.1 * rng.standard_normal(shape)).astype(dtype)
    if node.op in ("multiply", "divide", "power"):
        return rng.uniform(0.5, 1.5, shape).astype(dtype)
    return (0.1 * rng.standard_normal(shape)).astype(dtype)


def _fixed_argument(node: OpNode, position: int) -> float | None:
    """Scalar arguments that random values would make meaningless: what the frontends write
    (arange from 0 by 1; box_nms: score threshold 0, no output limit, IoU threshold 0.5)."""
    if node.op == "arange":
        return {0: 0.0, 1: float(node.outputs[0].shape[0]), 2: 1.0}.get(position)
    if node.op == "vision.get_valid_counts" and position == 1:
        return 0.0
    if node.op == "vision.non_max_suppression":
        return {3: -1.0, 4: 0.5}.get(position)
    return None


def _activation(node: OpNode, position: int, spec: TensorType,
                generator: torch.Generator) -> torch.Tensor:
    """A random activation for timing ``node`` alone; integer ones are zeros, except the box
    count and indices of an NMS (all boxes valid), which zeros would make a no-op."""
    if node.op == "vision.non_max_suppression" and position in (1, 2):
        anchors = node.args[0].shape[1]
        if position == 1:
            return torch.full(spec.shape, anchors)
        return torch.arange(anchors).expand(spec.shape)
    if _TORCH_DTYPES.get(spec.dtype, torch.float32).is_floating_point:
        return torch.randn(spec.shape, generator=generator)
    return torch.zeros(spec.shape)


def _fan_in(node: OpNode, shape: tuple[int, ...]) -> int:
    if node.op in ("nn.conv2d", "nn.conv1d", "nn.conv3d"):
        layout = node.attrs.get("kernel_layout") or "OIHW"
        out_axis = layout.index("O") if "O" in layout else 0
        return max(1, math.prod(shape) // max(shape[out_axis], 1))
    if node.op.endswith("_transpose"):
        layout = node.attrs.get("kernel_layout") or "IOHW"
        in_axis = layout.index("I") if "I" in layout else 0
        return max(1, math.prod(shape) // max(shape[in_axis], 1))
    if node.op == "nn.batch_matmul":
        transpose_b = node.attrs.get("transpose_b", True)
        return shape[-1] if transpose_b else shape[-2]
    return shape[-1]


def calibrate_batch_norm(graph: OpGraph, bindings: Bindings, weights: dict[int, list[np.ndarray]],
                         inputs: Mapping[str, np.ndarray], device: str = "cpu") -> None:
    """Set every batch norm's moving mean and variance to its input's statistics, in place.

    Random weights make activations grow layer after layer (residual adds double the variance
    each block); with each batch norm normalising its actual input, a deep network stays in
    float16 range, as a trained one does. Runs the whole graph once in float32 on ``device``.
    """
    def record(node: OpNode, args: list[Any]) -> None:
        if node.op != "nn.batch_norm":
            return
        x = args[0].float()
        axis = int(node.attrs.get("axis", 1)) % x.dim()
        dims = [d for d in range(x.dim()) if d != axis]
        var, mean = torch.var_mean(x, dim=dims, correction=0)
        refs = bindings[node.id]
        for position, value in ((3, mean), (4, var)):
            ref = refs[position]
            if ref.kind == "weight":
                arrays = weights[node.id]
                arrays[ref.index] = value.cpu().numpy().astype(arrays[ref.index].dtype)
                args[position] = value.to(args[position].dtype)

    interpreter = PlanExecutor(graph, None, bindings, weights, device=device, dtype="float32")
    interpreter.run(inputs, before_node=record, prepare_weights=False)


def op_callable(node: OpNode, refs: Sequence[ArgRef], *, device: str, dtype: str = "graph",
                seed: int = 0) -> Callable[[], Any]:
    """A zero-argument function running one op as the executor runs it, for timing it alone.

    Activations are random tensors of the node's argument types (integer ones zeros, but an
    NMS sees every box valid), weights are :func:`synthetic_node_weights` and prepared once; each call runs the kernel and the casts
    of its outputs to their compute dtype, nothing else (no synchronisation).
    """
    check_kernels([node], f"node {node.name}")
    generator = torch.Generator().manual_seed(seed)
    args: list[Any] = []
    weights = iter(synthetic_node_weights(node, refs, seed))
    for spec, ref in zip(node.args, refs, strict=True):
        torch_dtype = compute_dtype(spec.dtype, device, dtype)
        if ref.kind == "weight":
            value = torch.as_tensor(next(weights))
        else:
            value = _activation(node, len(args), spec, generator)
        args.append(value.to(device=device, dtype=torch_dtype))
    kern = KERNELS[node.op]
    weight_args = [a if r.kind == "weight" else None for a, r in zip(args, refs, strict=True)]
    prepared = kern.prepare(node, weight_args) if kern.prepare else None
    wanted = [compute_dtype(spec.dtype, device, dtype) for spec in node.outputs]

    def call() -> Any:
        result = kern.run(node, args, prepared)
        results = result if isinstance(result, tuple) else (result,)
        return [r if r.dtype == w else r.to(w) for r, w in zip(results, wanted, strict=True)]

    return call


# ---------------------------------------------------------------------------- timings
@dataclass
class RunTimings:
    """Times of one run (seconds). ``regions`` by label; ``copies`` one row per copied tensor."""

    total_s: float
    regions: dict[str, float] = field(default_factory=dict)
    copies: list[dict[str, Any]] = field(default_factory=list)
    devices: dict[str, str] = field(default_factory=dict)  # region label -> plan device

    @property
    def copy_s(self) -> float:
        return sum(c["time_s"] for c in self.copies)

    def to_dict(self) -> dict[str, Any]:
        return {"total_s": self.total_s, "regions": dict(self.regions), "copies": list(self.copies),
                "copy_s": self.copy_s, "devices": dict(self.devices)}


@dataclass
class Benchmark:
    """Repeated timings of a plan: end-to-end runs and separately synchronised breakdown runs."""

    end_to_end_s: list[float]
    breakdowns: list[RunTimings]

    @property
    def median_s(self) -> float:
        return statistics.median(self.end_to_end_s)

    def median_breakdown(self) -> dict[str, Any]:
        """Per region and per copy, the median over the breakdown runs."""
        if not self.breakdowns:
            return {}
        regions = {label: statistics.median(b.regions[label] for b in self.breakdowns)
                   for label in self.breakdowns[0].regions}
        copies = []
        for i, row in enumerate(self.breakdowns[0].copies):
            copies.append({**row, "time_s": statistics.median(b.copies[i]["time_s"]
                                                                for b in self.breakdowns)})
        return {"total_s": statistics.median(b.total_s for b in self.breakdowns),
                "regions": regions, "devices": dict(self.breakdowns[0].devices), "copies": copies,
                "copy_s": sum(c["time_s"] for c in copies)}

    def to_dict(self) -> dict[str, Any]:
        return {"median_s": self.median_s, "end_to_end_s": self.end_to_end_s,
                "breakdown": self.median_breakdown()}


# ---------------------------------------------------------------------------- places
@dataclass(frozen=True)
class Place:
    """Where a run keeps tensors: a torch device, and whether half tensors are computed in
    float32 there.

    Every plan device maps to one place: its memory space gives the torch device (the host's
    memory -> ``"cpu"``, any other -> the executor's GPU), its precision the float32 flag. Devices
    of one place share tensors for free (Tensor Core and CUDA-core regions on one GPU); a tensor
    that leaves its place is copied and/or cast once per destination place.
    """

    name: str
    torch_device: str
    float32: bool
    memory: str

    def dtype(self, graph_dtype: str) -> torch.dtype:
        """The torch dtype a tensor of ``graph_dtype`` is computed in here."""
        if graph_dtype in _HALF and self.float32:
            return torch.float32
        try:
            return _TORCH_DTYPES[graph_dtype]
        except KeyError:
            raise UnsupportedKernelError(f"no torch dtype for {graph_dtype!r}") from None


def places_of(platform: Platform, *, device: str = "cuda", dtype: str = "graph",
              device_map: Mapping[str, str] | None = None,
              separate_memories: bool = False) -> dict[str, Place]:
    """The place of each device of ``platform`` (by device name).

    ``device_map`` maps a memory space to a torch device (default: the host's memory ->
    ``"cpu"``, every other memory -> ``device``). A device computes half tensors in float32 when
    its precision is ``"float32"`` (the host of ``tensorcore``), on the CPU (PyTorch's CPU
    float16 kernels are slow or missing) and in ``dtype="float32"`` mode. Devices whose torch
    device and float32 flag agree share a place, unless ``separate_memories``: then each
    (memory space, precision) domain of the platform is its own place, even where two share a
    torch device, so crossings are exactly :meth:`PartitionPlan.crossing_tensors`.

    >>> from partition_lab.core.platform import get_platform
    >>> places = places_of(get_platform("tensorcore"), device="cuda")
    >>> places["tensorcore"] == places["cuda"], places["cpu"].torch_device
    (True, 'cpu')
    """
    if dtype not in DTYPE_MODES:
        raise PartitionLabError(f"dtype must be one of {DTYPE_MODES}, not {dtype!r}")
    mapping = dict(device_map or {})
    memories = {d.memory for d in platform.devices}
    unknown = sorted(set(mapping) - memories)
    if unknown:
        raise PartitionLabError(f"device_map names memory spaces {unknown} that platform "
                                f"{platform.name!r} does not have ({', '.join(sorted(memories))})")
    host_memory = platform.host.memory
    places: dict[str, Place] = {}
    for d in platform.devices:
        torch_device = mapping.get(d.memory) or ("cpu" if d.memory == host_memory else device)
        on_gpu = not torch_device.startswith("cpu")
        float32 = dtype == "float32" or d.precision == "float32" or not on_gpu
        if separate_memories:
            name = d.memory if d.precision == AS_PREPARED else f"{d.memory}:{d.precision}"
        else:
            usual = dtype == "float32" or not on_gpu
            name = torch_device if float32 == usual else f"{torch_device}:float32"
        places[d.name] = Place(name, torch_device, float32, d.memory)
    return places


def _single_place(device: str, dtype: str) -> Place:
    on_gpu = not device.startswith("cpu")
    return Place(device, device, dtype == "float32" or not on_gpu, "device" if on_gpu else "host")


# ---------------------------------------------------------------------------- executor
@dataclass(frozen=True)
class _Step:
    """One region to run, or one tensor to move to another place (copy and/or cast)."""

    kind: str  # "region" or "copy"
    label: str
    place: str  # where the region runs / where the tensor goes
    device: str  # the plan device of the region / of the tensor's first consumer there
    nodes: tuple[int, ...] = ()
    tensor: str = ""
    src: str = ""  # the source place
    src_device: str = ""
    graph_dtype: str = ""
    nbytes: float = 0.0
    what: str = ""  # "copy", "cast" or "copy+cast"
    moves: bool = False


class PlanExecutor:
    """Runs one plan of one graph, many times, on real devices.

    Parameters
    ----------
    graph, plan, bindings:
        The OpGraph, a :class:`PartitionPlan` of it (None: the whole graph as one region on
        ``device``, the unpartitioned reference) and the call-argument bindings
        (:func:`partition_lab.executors.graph_io.bindings_from_relay` or a bundle's).
    weights:
        ``{node id: [array per weight]}`` (:func:`~partition_lab.executors.graph_io.weights_from_relay`
        or :func:`synthetic_weights`). They are placed on their region's device once, as an
        accelerator keeps them resident; copies of weights are never timed.
    device:
        The torch device of every non-host memory space of the plan's platform: ``"cuda"``
        (Tensor Core and CUDA-core regions on the GPU, host islands on the CPU) or ``"cpu"``
        (everything on the CPU; no copies unless ``separate_memories``).
    dtype:
        ``"graph"`` or ``"float32"`` (the reference run: half tensors computed and moved in
        float32 everywhere).
    device_map, separate_memories:
        See :func:`places_of`. ``separate_memories=True`` on the CPU runs a plan's crossings as
        real copies (``clone``) with the same bookkeeping as on a GPU: CI's way to exercise
        copies, casts and island order without one.

    Raises
    ------
    UnsupportedKernelError
        Before anything runs, listing every op of the graph without a translation
        (:func:`supported_ops`) or with attribute values its kernel does not translate.
    """

    def __init__(self, graph: OpGraph, plan: PartitionPlan | None, bindings: Bindings,
                 weights: Mapping[int, Sequence[np.ndarray]], *, device: str = "cuda",
                 dtype: str = "graph", device_map: Mapping[str, str] | None = None,
                 separate_memories: bool = False) -> None:
        if dtype not in DTYPE_MODES:
            raise PartitionLabError(f"dtype must be one of {DTYPE_MODES}, not {dtype!r}")
        check_kernels(graph.nodes, f"graph {graph.name!r}" if graph.name else "the graph")
        self.graph, self.plan, self.bindings = graph, plan, bindings
        self.device, self.dtype = device, dtype
        if plan is None:
            main = _single_place(device, dtype)
            host = main if main.torch_device == "cpu" else _single_place("cpu", dtype)
            self.device_places = {device: main, CPU: host}
            self.node_device = [device] * len(graph)
        else:
            self.device_places = places_of(plan.platform, device=device, dtype=dtype,
                                           device_map=device_map,
                                           separate_memories=separate_memories)
            self.node_device = [plan.device_of(n) for n in range(len(graph))]
        self.host_place = self.device_places[CPU]
        self.places = {p.name: p for p in self.device_places.values()}
        self.node_place = [self.device_places[d] for d in self.node_device]
        self._cuda = any(not p.torch_device.startswith("cpu") for p in self.places.values())
        if self._cuda and not torch.cuda.is_available():
            raise PartitionLabError(f"device {device!r} asked for but torch sees no CUDA device")
        self.steps = self._schedule()
        self._weights = weights
        self._args: dict[int, list[Any]] = {}
        self._prepared: dict[int, Any] = {}
        self._last_use = self._last_uses()
        self._output_keys = {f"{graph[n].name}:{i}" for n, i in graph.outputs}

    # ------------------------------------------------------------------ schedule
    def _schedule(self) -> list[_Step]:
        """Regions in a topological order (ties: the region with the lowest node first), each
        followed by the moves of its outputs to the other places that read them."""
        import networkx as nx

        if self.plan is None:
            kind = "cpu" if self.device.startswith("cpu") else "accel"
            groups = [(f"{kind}0", tuple(range(len(self.graph))))]
        else:
            quotient = self.plan.region_graph()
            first = {r.id: min(r.nodes) for r in self.plan.regions}
            order = nx.lexicographical_topological_sort(quotient, key=lambda r: first[r])
            groups = [(self.plan.regions[r].label, self.plan.regions[r].nodes) for r in order]
        steps = list(self._moves_of_inputs())
        for label, nodes in groups:
            members = tuple(sorted(nodes))
            place = self.node_place[members[0]]
            steps.append(_Step("region", label, place.name, self.node_device[members[0]],
                               members))
            steps.extend(self._moves_after(members, place))
        return steps

    def _destinations(self, tensor: Any) -> dict[str, str]:
        """Places that read ``tensor`` -> the device of its first consumer there (the host
        for graph outputs), as :meth:`PartitionPlan.crossing_tensors` names them."""
        places: dict[str, str] = {}
        for c in tensor.consumers:
            places.setdefault(self.node_place[c].name, self.node_device[c])
        if tensor.is_output:
            places[self.host_place.name] = CPU
        return places

    def _move(self, tensor: Any, src: Place, src_device: str, dst_name: str,
              dst_device: str) -> _Step:
        dst = self.places[dst_name]
        moves = src.torch_device != dst.torch_device or src.memory != dst.memory
        wire = _TORCH_DTYPES.get(wire_dtype(tensor.spec.dtype, self.dtype))
        casts = src.dtype(tensor.spec.dtype) != wire or wire != dst.dtype(tensor.spec.dtype)
        what = "copy+cast" if moves and casts else "copy" if moves else "cast"
        return _Step("copy", f"{tensor.key}->{dst_device}", dst_name, dst_device,
                     tensor=tensor.key, src=src.name, src_device=src_device,
                     graph_dtype=tensor.spec.dtype, nbytes=tensor.nbytes, what=what,
                     moves=moves)

    def _moves_of_inputs(self) -> list[_Step]:
        steps = []
        for tensor in self.graph.graph_inputs.values():
            for dst, dst_device in sorted(self._destinations(tensor).items()):
                if dst != self.host_place.name:
                    steps.append(self._move(tensor, self.host_place, CPU, dst, dst_device))
        return steps

    def _moves_after(self, nodes: Sequence[int], place: Place) -> list[_Step]:
        members = set(nodes)
        steps = []
        for tensor in self.graph.tensors:
            if tensor.producer in members:
                for dst, dst_device in sorted(self._destinations(tensor).items()):
                    if dst != place.name:
                        steps.append(self._move(tensor, place, self.node_device[tensor.producer],
                                                dst, dst_device))
        return steps

    def crossings(self) -> list[dict[str, Any]]:
        """Every move a run makes, in order: tensor, devices, places, what and bytes."""
        return [{"tensor": s.tensor, "src": s.src_device, "dst": s.device, "src_place": s.src,
                 "dst_place": s.place, "kind": s.what, "nbytes": s.nbytes}
                for s in self.steps if s.kind == "copy"]

    def region_order(self) -> list[str]:
        """Region labels in the order a run executes them."""
        return [s.label for s in self.steps if s.kind == "region"]

    def _last_uses(self) -> dict[tuple[str, str], int]:
        """Per (tensor, place), the last step that reads it, so it can be freed after."""
        last: dict[tuple[str, str], int] = {}
        refs_of = {n: [r.key for r in refs if r.kind == "tensor"]
                   for n, refs in enumerate(self.bindings)}
        for i, step in enumerate(self.steps):
            if step.kind == "region":
                for n in step.nodes:
                    for key in refs_of[n]:
                        last[(key, step.place)] = i
            else:
                last[(step.tensor, step.src)] = i
        return last

    # ------------------------------------------------------------------ weights
    def _node_args(self, node_id: int, prepare: bool) -> tuple[list[Any], Any]:
        """The node's weight arguments in its place (activations None) and its prepared state."""
        if node_id not in self._args:
            node = self.graph[node_id]
            place = self.node_place[node_id]
            arrays = self._weights.get(node_id, ())
            if len(arrays) != len(node.weights):
                raise PartitionLabError(f"node {node.name} needs {len(node.weights)} weights, "
                                        f"got {len(arrays)}")
            args: list[Any] = [None] * len(node.args)
            for position, ref in enumerate(self.bindings[node_id]):
                if ref.kind == "weight":
                    spec = node.args[position]
                    args[position] = torch.as_tensor(np.asarray(arrays[ref.index])).to(
                        device=place.torch_device, dtype=place.dtype(spec.dtype))
            kern = KERNELS[node.op]
            self._args[node_id] = args
            self._prepared[node_id] = kern.prepare(node, args) if (prepare and kern.prepare) else None
        return self._args[node_id], self._prepared[node_id]

    def prepare(self) -> None:
        """Place every weight on its device and run the kernels' ``prepare`` (done on first run)."""
        for node in self.graph.nodes:
            self._node_args(node.id, prepare=True)
        self._sync_all()

    # ------------------------------------------------------------------ running
    def run(self, inputs: Mapping[str, np.ndarray], *, timings: RunTimings | None = None,
            before_node: Callable[[OpNode, list[Any]], None] | None = None,
            prepare_weights: bool = True,
            after_region: Callable[[str], None] | None = None) -> list[np.ndarray]:
        """The graph's outputs (as numpy arrays, in graph output order) for ``inputs``.

        With ``timings``, every region and move is synchronised and timed into it (slower: use
        :meth:`benchmark` for end-to-end times). ``before_node(node, args)`` is called before
        each op (used by :func:`calibrate_batch_norm`), ``after_region(label)`` after each
        region's last op is issued (before its outputs move).
        """
        values = self._start(inputs)
        for i, step in enumerate(self.steps):
            start = self._clock() if timings is not None else 0.0
            if step.kind == "region":
                self._run_region(step, values, before_node, prepare_weights)
                if after_region is not None:
                    after_region(step.label)
            else:
                self._copy(step, values)
            if timings is not None:
                elapsed = self._clock() - start
                if step.kind == "region":
                    timings.regions[step.label] = elapsed
                    timings.devices[step.label] = step.device
                else:
                    timings.copies.append({"tensor": step.tensor, "src": step.src_device,
                                           "dst": step.device, "src_place": step.src,
                                           "dst_place": step.place, "kind": step.what,
                                           "nbytes": step.nbytes, "time_s": elapsed})
            self._free(values, i)
        return self._finish(values)

    def _start(self, inputs: Mapping[str, np.ndarray]) -> dict[str, dict[str, Any]]:
        values: dict[str, dict[str, Any]] = {}
        for name, tensor in self.graph.graph_inputs.items():
            if name not in inputs:
                raise PartitionLabError(f"missing input {name!r}; the graph needs "
                                        f"{', '.join(self.graph.graph_inputs)}")
            array = np.asarray(inputs[name])
            if tuple(array.shape) != tensor.spec.shape:
                raise PartitionLabError(f"input {name!r} has shape {array.shape}, the graph "
                                        f"expects {tensor.spec.shape}")
            dtype = self.host_place.dtype(tensor.spec.dtype)
            values[tensor.key] = {self.host_place.name: torch.from_numpy(
                np.ascontiguousarray(array)).to(dtype)}
        return values

    def _run_region(self, step: _Step, values: dict[str, dict[str, Any]],
                    before_node: Callable[[OpNode, list[Any]], None] | None,
                    prepare_weights: bool) -> None:
        place = self.places[step.place]
        for node_id in step.nodes:
            node = self.graph[node_id]
            weight_args, prepared = self._node_args(node_id, prepare_weights)
            args = list(weight_args)
            for position, ref in enumerate(self.bindings[node_id]):
                if ref.kind == "tensor":
                    args[position] = values[ref.key][place.name]
            if before_node is not None:
                before_node(node, args)
            result = KERNELS[node.op].run(node, args, prepared)
            self._store(node, result, place, values)

    def _store(self, node: OpNode, result: Any, place: Place,
               values: dict[str, dict[str, Any]]) -> None:
        results = result if isinstance(result, tuple) else (result,)
        if len(results) != len(node.outputs):
            raise PartitionLabError(f"{node.op} kernel gave {len(results)} outputs, the graph "
                                    f"has {len(node.outputs)} ({node.name})")
        for index, (value, spec) in enumerate(zip(results, node.outputs, strict=True)):
            key = f"{node.name}:{index}"
            if tuple(value.shape) != spec.shape:
                raise PartitionLabError(f"{node.op} kernel gave shape {tuple(value.shape)} for "
                                        f"{node.name}, the graph says {spec.shape}")
            wanted = place.dtype(spec.dtype)
            values.setdefault(key, {})[place.name] = value if value.dtype == wanted else \
                value.to(wanted)

    def _copy(self, step: _Step, values: dict[str, dict[str, Any]]) -> None:
        source = values[step.tensor][step.src]
        dst = self.places[step.place]
        values[step.tensor][step.place] = transfer(
            source, dst.torch_device, wire_dtype(step.graph_dtype, self.dtype),
            dst.dtype(step.graph_dtype), copy=step.moves)

    def _free(self, values: dict[str, dict[str, Any]], step_index: int) -> None:
        step = self.steps[step_index]
        keys = [(r.key, step.place) for n in step.nodes for r in self.bindings[n]
                if r.kind == "tensor"] if step.kind == "region" else [(step.tensor, step.src)]
        for key, place in keys:
            if self._last_use.get((key, place)) == step_index and key not in self._output_keys:
                values.get(key, {}).pop(place, None)

    def _finish(self, values: dict[str, dict[str, Any]]) -> list[np.ndarray]:
        outputs = [values[f"{self.graph[node_id].name}:{index}"][self.host_place.name]
                   for node_id, index in self.graph.outputs]
        self._sync_all()
        return [o.numpy() for o in outputs]

    def _sync_all(self) -> None:
        if self._cuda:
            torch.cuda.synchronize()

    def _clock(self) -> float:
        self._sync_all()
        return time.perf_counter()

    # ------------------------------------------------------------------ timing
    def benchmark(self, inputs: Mapping[str, np.ndarray], *, warmup: int = 2, repeats: int = 10,
                  max_seconds: float = 5.0, min_repeats: int = 3,
                  breakdown_repeats: int = 3) -> Benchmark:
        """Median end-to-end time over ``repeats`` runs (fewer if ``max_seconds`` is reached,
        never under ``min_repeats``), plus ``breakdown_repeats`` synchronised breakdown runs.

        End-to-end runs synchronise only where the program must (a copy to the host, the end),
        as a deployed runtime would.
        """
        self.prepare()
        for _ in range(warmup):
            self.run(inputs)
        times: list[float] = []
        budget_start = time.perf_counter()
        while len(times) < repeats:
            start = self._clock()
            self.run(inputs)
            times.append(self._clock() - start)
            if len(times) >= min_repeats and time.perf_counter() - budget_start > max_seconds:
                break
        breakdowns = []
        for _ in range(breakdown_repeats):
            timing = RunTimings(0.0)
            start = self._clock()
            self.run(inputs, timings=timing)
            timing.total_s = self._clock() - start
            breakdowns.append(timing)
        return Benchmark(times, breakdowns)


def transfer(tensor: torch.Tensor, device: str, wire_dtype: str,
             dst_dtype: torch.dtype, *, copy: bool = False) -> torch.Tensor:
    """Move ``tensor`` to ``device`` as the executor does: cast to the graph's dtype
    (``wire_dtype``) where it is, copy from pageable host memory (what TVM's runtime copies
    from), then cast to the destination's compute dtype there. Synchronous, like ``cudaMemcpy``.

    ``copy``: the tensor changes memory space even if ``device`` is its own torch device (the
    CPU stand-in of a plan's copies): a real copy is made.
    """
    wire = _TORCH_DTYPES[wire_dtype]
    moved = tensor.to(wire).to(device)
    if copy and moved is tensor:
        moved = tensor.clone()
    return moved if moved.dtype == dst_dtype else moved.to(dst_dtype)


def run_plan(graph: OpGraph, plan: PartitionPlan | None, inputs: Mapping[str, np.ndarray],
             weights: Mapping[int, Sequence[np.ndarray]], *, bindings: Bindings,
             device: str = "cuda", dtype: str = "graph", timed: bool = False,
             device_map: Mapping[str, str] | None = None, separate_memories: bool = False
             ) -> tuple[list[np.ndarray], RunTimings | None]:
    """Run ``plan`` once; returns ``(outputs, timings)`` (timings None unless ``timed``).

    A one-call wrapper around :class:`PlanExecutor` (see it for the parameters). For repeated
    timings build the executor once and call :meth:`PlanExecutor.benchmark`.
    """
    executor = PlanExecutor(graph, plan, bindings, weights, device=device, dtype=dtype,
                            device_map=device_map, separate_memories=separate_memories)
    timings = RunTimings(0.0) if timed else None
    start = time.perf_counter()
    outputs = executor.run(inputs, timings=timings)
    if timings is not None:
        timings.total_s = time.perf_counter() - start
    return outputs, timings


__all__ = [
    "ArgRef", "Benchmark", "KERNELS", "Kernel", "Place", "PlanExecutor", "RunTimings",
    "UnsupportedKernelError", "calibrate_batch_norm", "check_kernels", "compute_dtype",
    "node_problem", "op_callable", "places_of", "run_plan", "sample_inputs", "supported_ops",
    "synthetic_node_weights", "synthetic_weights", "transfer", "unsupported_nodes", "wire_dtype",
]
