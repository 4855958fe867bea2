"""The op vocabulary every layer shares: which Relay ops multiply-accumulate, run on a matrix
engine, only move data, or take their operands as one tuple.

One place for these sets, so that the no_mac strategy, the cost models, region formation and the
synthetic graphs agree on what an op is.
"""

from __future__ import annotations

from .graph import OpNode

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
    GEMM cannot fill its tiles with them.
    """
    if node.op in MATRIX_OPS:
        groups = node.attrs.get("groups", 1)
        return "vector" if isinstance(groups, int) and groups > 1 else "matrix"
    if node.op in DATA_OPS:
        return "data"
    return "vector"
