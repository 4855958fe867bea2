"""The op vocabulary every layer shares: which Relay ops multiply-accumulate, run on a matrix
engine, only move data, or take their operands as one tuple; op classes; FLOP counts.

One place for these, so that the frontend, the no_mac strategy, the cost models, region
formation and the synthetic graphs agree on what an op is and what it computes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .graph import OpNode, TensorType

#: Ops that do multiply-accumulate work (what TVM's ``remove_no_mac_subgraphs`` counts).
MAC_OPS = frozenset({
    "nn.conv1d", "nn.conv2d", "nn.conv3d", "nn.conv1d_transpose", "nn.conv2d_transpose",
    "nn.conv3d_transpose", "nn.dense", "nn.matmul", "nn.batch_matmul",
})

#: Ops that run on a matrix engine (Tensor Cores, a systolic array, AVX-512 FMA in GEMM form).
MATRIX_OPS = MAC_OPS | {"nn.contrib_conv2d_winograd_without_weight_transform",
                        "nn.contrib_dense_pack"}

#: Ops that only move or reinterpret data (their time is memory traffic).
DATA_OPS = frozenset({
    "reshape", "reverse_reshape", "transpose", "layout_transform", "concatenate", "split",
    "strided_slice", "squeeze", "expand_dims", "nn.batch_flatten", "copy", "stack", "take",
    "gather", "gather_nd", "nn.pad", "slice_like", "reverse", "tile", "repeat", "broadcast_to",
    "broadcast_to_like", "cast", "nn.space_to_depth", "nn.depth_to_space", "nn.dropout",
    "zeros", "ones", "zeros_like", "ones_like", "full", "full_like", "arange",
})

#: Relay ops whose operands arrive as one ``Tuple`` argument (``concatenate((a, b))``). TVM gives
#: that tuple a region of its own, which changes merging when the fields' devices differ.
TUPLE_ARG_OPS = frozenset({"concatenate", "stack", "meshgrid", "einsum"})


def op_class(node: OpNode) -> str:
    """``"matrix"``, ``"vector"`` or ``"data"``: which engine and efficiency an op gets.

    Grouped and depthwise convolutions count as vector work: a systolic array or Tensor Core
    GEMM cannot fill its tiles with them. A composite (a pattern's unit priced as one op,
    :func:`~.patterns.composite_node`) is matrix work if one of its members is (attention).
    """
    members = node.attrs.get("members")
    if members is not None and node.op.startswith("composite:"):
        return "matrix" if MATRIX_OPS.intersection(members) else "vector"
    if node.op in MATRIX_OPS:
        groups = node.attrs.get("groups", 1)
        return "vector" if isinstance(groups, int) and groups > 1 else "matrix"
    if node.op in DATA_OPS:
        return "data"
    return "vector"


#: The op classes (:func:`op_class`), in the order reports list them.
OP_CLASSES = ("matrix", "vector", "data")

#: FLOPs per output element of elementwise-like ops (others count 1).
ELEMENTWISE_FLOPS = {"nn.batch_norm": 4, "nn.softmax": 5, "nn.log_softmax": 5, "nn.layer_norm": 8,
                     "erf": 8, "exp": 4, "sigmoid": 4, "tanh": 4, "image.resize2d": 8}

#: Ops counted as 0 FLOPs (they only move or reinterpret data).
ZERO_FLOP_OPS = frozenset({
    "reshape", "transpose", "squeeze", "expand_dims", "nn.batch_flatten", "concatenate",
    "split", "strided_slice", "layout_transform", "copy", "nn.dropout", "reverse_reshape",
    "take", "stack", "tile", "repeat", "cast", "nn.pad", "broadcast_to",
})


def estimate_flops(op: str, args: tuple[TensorType, ...], outputs: tuple[TensorType, ...],
                   attrs: Mapping[str, Any]) -> float:
    """FLOPs of one call (a multiply-add counts 2). Ops that only move data count 0.

    >>> t = TensorType((128, 768), "float16")
    >>> estimate_flops("nn.dense", (t, TensorType((3072, 768), "float16")),
    ...                (TensorType((128, 3072), "float16"),), {})
    603979776.0
    """
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
    if op in ZERO_FLOP_OPS:
        return 0.0
    # Elementwise-like: the first output is the result (batch_norm also returns mean/var).
    return float(outputs[0].numel * ELEMENTWISE_FLOPS.get(op, 1)) if outputs else 0.0


def _axis_size(shape: tuple[int, ...], layout: str, axis: str) -> int:
    if layout and len(layout) == len(shape) and axis in layout:
        return shape[layout.index(axis)]
    return shape[1] if len(shape) > 1 else 1
