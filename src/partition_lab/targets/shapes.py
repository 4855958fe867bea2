"""Read named dimensions and attributes of an :class:`~partition_lab.core.graph.OpNode`.

Rules talk about ``batch``, ``cin``, ``cout`` or ``units`` rather than ``args[0].shape[3]``, so
that one rule reads the same whatever the layout. This module knows where each name lives for the
ops that matter (convolutions by their layout attrs, dense, batch_matmul) and also accepts a
positional form, ``arg0[1]`` (dimension 1 of argument 0) or ``out0[1]`` (of output 0), for any op.

A missing attribute falls back to Relay's default (a hand-built node often omits them), so a
conv2d without ``data_layout`` is NCHW, as ``relay.nn.conv2d`` would make it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..core.graph import OpNode, TensorType

# Relay's attribute defaults (python/tvm/relay/op/nn/nn.py), for hand-built nodes.
_CONV_DEFAULTS = {"groups": 1, "strides": (1, 1), "dilation": (1, 1), "padding": (0, 0, 0, 0)}
RELAY_ATTR_DEFAULTS: Mapping[str, Mapping[str, Any]] = {
    "nn.conv2d": {**_CONV_DEFAULTS, "data_layout": "NCHW", "kernel_layout": "OIHW"},
    "nn.conv2d_transpose": {**_CONV_DEFAULTS, "data_layout": "NCHW", "kernel_layout": "IOHW"},
    "nn.batch_matmul": {"transpose_a": False, "transpose_b": True},
    "nn.matmul": {"transpose_a": False, "transpose_b": False},
}

CONV_OPS = frozenset({"nn.conv2d", "nn.conv2d_transpose"})
# Dimension names per op family; the first name of each row is the canonical one, the rest are
# aliases a user file may use.
_CONV_DIMS = {
    "batch": ("data", "N"), "n": ("data", "N"),
    "cin": ("data", "C"), "in_channels": ("data", "C"),
    "height": ("data", "H"), "width": ("data", "W"),
    "cout": ("kernel", "O"), "out_channels": ("kernel", "O"), "channels": ("kernel", "O"),
    "kernel_h": ("kernel", "H"), "kernel_w": ("kernel", "W"),
}
_MATMUL_DIMS = ("batch", "m", "rows", "k", "in_features", "n", "units", "out_features")
DIMENSION_NAMES: tuple[str, ...] = tuple(dict.fromkeys([*_CONV_DIMS, *_MATMUL_DIMS]))
_POSITIONAL = re.compile(r"^(arg|out)(\d+)\[(-?\d+)\]$")


def attr(node: OpNode, name: str) -> Any:
    """The attribute ``name`` of ``node``, or Relay's default for the op, or None."""
    if name in node.attrs:
        return node.attrs[name]
    return RELAY_ATTR_DEFAULTS.get(node.op, {}).get(name)


def is_dimension_name(name: str) -> bool:
    """True if ``name`` is a known dimension name or a positional ``argI[J]``/``outI[J]``."""
    return name in DIMENSION_NAMES or _POSITIONAL.match(name) is not None


def data_type(node: OpNode) -> TensorType | None:
    """The first argument of the node (the data operand), or None for a node without one."""
    operands = node.args or node.inputs
    return operands[0] if operands else None


def dimension(node: OpNode, name: str) -> int | None:
    """The size of the named dimension of ``node``, or None where the op has no such dimension.

    >>> from partition_lab.core.graph import OpNode, TensorType
    >>> conv = OpNode(0, "nn.conv2d", "c", None, (), (), attrs={"data_layout": "NHWC",
    ...     "kernel_layout": "HWIO"}, args=(TensorType((8, 56, 56, 64), "float16"),
    ...     TensorType((3, 3, 64, 128), "float16")))
    >>> dimension(conv, "batch"), dimension(conv, "cin"), dimension(conv, "cout")
    (8, 64, 128)
    """
    positional = _POSITIONAL.match(name)
    if positional:
        return _positional(node, positional.group(1), int(positional.group(2)),
                           int(positional.group(3)))
    if node.op in CONV_OPS and name in _CONV_DIMS:
        return _conv_dimension(node, *_CONV_DIMS[name])
    if node.op == "nn.dense":
        return _dense_dimension(node, name)
    if node.op == "nn.batch_matmul":
        return _batch_matmul_dimension(node, name)
    return None


def _positional(node: OpNode, kind: str, index: int, axis: int) -> int | None:
    tensors = (node.args or node.inputs) if kind == "arg" else node.outputs
    if index >= len(tensors) or not -len(tensors[index].shape) <= axis < len(tensors[index].shape):
        return None
    return tensors[index].shape[axis]


def _conv_dimension(node: OpNode, operand: str, letter: str) -> int | None:
    operands = node.args or node.inputs
    index, layout_attr = (0, "data_layout") if operand == "data" else (1, "kernel_layout")
    layout = attr(node, layout_attr)
    if index >= len(operands) or not isinstance(layout, str) or letter not in layout:
        return None
    shape = operands[index].shape
    return shape[layout.index(letter)] if len(shape) == len(layout) else None


def _dense_dimension(node: OpNode, name: str) -> int | None:
    """nn.dense: data [..., K] times weight [N, K]; M is the product of the leading data dims."""
    operands = node.args or node.inputs
    if not operands:
        return None
    data = operands[0].shape
    if name in ("batch", "m", "rows"):
        rows = 1
        for size in data[:-1]:
            rows *= size
        return rows
    if name in ("k", "in_features"):
        return data[-1]
    if name in ("n", "units", "out_features"):
        units = attr(node, "units")
        if isinstance(units, int):
            return units
        return operands[1].shape[0] if len(operands) > 1 else None
    return None


def _batch_matmul_dimension(node: OpNode, name: str) -> int | None:
    """nn.batch_matmul: x [B, M, K] (or [B, K, M]) times y [B, K, N] (or [B, N, K])."""
    operands = node.args or node.inputs
    if len(operands) < 2 or len(operands[0].shape) != 3 or len(operands[1].shape) != 3:
        return None
    x, y = operands[0].shape, operands[1].shape
    m, k = (x[2], x[1]) if attr(node, "transpose_a") else (x[1], x[2])
    n = y[1] if attr(node, "transpose_b") else y[2]
    sizes = {"batch": x[0], "m": m, "rows": m, "k": k, "in_features": k,
             "n": n, "units": n, "out_features": n}
    return sizes.get(name)
