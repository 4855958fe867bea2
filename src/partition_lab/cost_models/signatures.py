"""The op-signature codec: one text key per op, and an op rebuilt from its key.

:func:`op_signature` names "this op with these operands and attributes" (the key of every
profile cache); :func:`node_from_signature` turns such a key back into an :class:`OpNode`
(output types inferred, FLOPs counted as the frontend counts them), for caches that hold
signatures without graphs.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..core.graph import OpNode, TensorType
from ..core.ops import ZERO_FLOP_OPS, estimate_flops
from ..errors import ProfileError


def op_signature(node: OpNode) -> str:
    """A stable text key for "this op with these operands and attributes".

    Two nodes with the same signature take the same time on a device: op name, every argument's
    dtype and shape in call order (weights included), and the call attributes sorted by name.
    Names and graph positions are left out, so the key is the same across models and runs.

    >>> from partition_lab.core.graph import OpNode, TensorType
    >>> t = TensorType((1, 8), "float32")
    >>> op_signature(OpNode(0, "nn.relu", "relu0", None, (t,), (t,), args=(t,)))
    'nn.relu(float32[1,8])'
    """
    args = node.args or node.inputs + node.weights
    text = f"{node.op}({','.join(str(a) for a in args)})"
    if node.attrs:
        attrs = ",".join(f"{k}={_attr_text(v)}" for k, v in sorted(node.attrs.items()))
        text += "{" + attrs + "}"
    return text


def _attr_text(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_attr_text(v) for v in value) + "]"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def node_from_signature(signature: str) -> OpNode:
    """An :class:`OpNode` rebuilt from an :func:`op_signature` text (for caches with no graph).

    Arguments become inputs (weights are not told apart); outputs and FLOPs are inferred for
    convolutions, dense/matmul, pools, resize, concatenate and elementwise ops, counting FLOPs
    like the Relay frontend (a MAC is 2). Anything else keeps the first argument's shape.

    >>> n = node_from_signature("nn.dense(float16[128,768],float16[3072,768]){units=3072}")
    >>> n.outputs[0], n.flops
    (TensorType(shape=(128, 3072), dtype='float16'), 603979776.0)
    """
    match = re.fullmatch(r"([^()]+)\((.*?)\)(\{.*\})?", signature)
    if match is None:
        raise ProfileError(f"not an op signature: {signature!r}")
    op, arg_text, attr_text = match.group(1), match.group(2), match.group(3)
    args = tuple(_parse_type(t) for t in _split(arg_text)) if arg_text else ()
    attrs = _parse_attrs(attr_text[1:-1]) if attr_text else {}
    outputs = _infer(op, args, attrs)
    return OpNode(0, op, op, None, args, outputs, (), attrs,
                  estimate_flops(op, args, outputs, attrs), args)


def _split(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in parts if p != ""]


def _parse_type(text: str) -> TensorType:
    match = re.fullmatch(r"(\w+)\[([0-9,]*)\]", text.strip())
    if match is None:
        raise ProfileError(f"not a tensor type in an op signature: {text!r}")
    dims = tuple(int(d) for d in match.group(2).split(",") if d)
    return TensorType(dims, match.group(1))


def _parse_value(text: str) -> Any:
    if text.startswith("[") and text.endswith("]"):
        return tuple(_parse_value(v) for v in _split(text[1:-1]))
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def _parse_attrs(text: str) -> dict[str, Any]:
    attrs = {}
    for item in _split(text):
        key, _, value = item.partition("=")
        attrs[key] = _parse_value(value)
    return attrs


def _pair(value: Any, n: int = 2) -> tuple[int, ...]:
    if isinstance(value, (int, float)):
        return (int(value),) * n
    value = tuple(int(v) for v in value)
    return value if len(value) == n else (value * n)[:n]


def _pads(value: Any) -> tuple[int, int, int, int]:
    """(top, left, bottom, right) from Relay's 1, 2 or 4 paddings."""
    if isinstance(value, (int, float)):
        return (int(value),) * 4  # type: ignore[return-value]
    p = tuple(int(v) for v in value)
    if len(p) == 4:
        return p  # type: ignore[return-value]
    if len(p) == 2:
        return p[0], p[1], p[0], p[1]
    return (p[0],) * 4 if p else (0, 0, 0, 0)  # type: ignore[return-value]


def _spatial(layout: str, shape: tuple[int, ...]) -> tuple[int, int, int, int] | None:
    """(N, C, H, W) of a 4-d tensor in ``layout`` (default NCHW)."""
    layout = layout if len(layout) == 4 and len(shape) == 4 else "NCHW"
    if len(shape) != 4 or not set("NCHW") <= set(layout):
        return None
    return tuple(shape[layout.index(a)] for a in "NCHW")  # type: ignore[return-value]


def _shape_in(layout: str, n: int, c: int, h: int, w: int) -> tuple[int, ...]:
    layout = layout if len(layout) == 4 and set(layout) == set("NCHW") else "NCHW"
    values = {"N": n, "C": c, "H": h, "W": w}
    return tuple(values[a] for a in layout)


def _infer(op: str, args: tuple[TensorType, ...], attrs: Mapping[str, Any]
           ) -> tuple[TensorType, ...]:
    """Output types of a call known only by its signature."""
    if not args:
        return ()
    first = args[0]
    dtype = str(attrs.get("out_dtype") or "") or first.dtype
    if op == "cast":
        dtype = str(attrs.get("dtype") or first.dtype)
    layout = str(attrs.get("data_layout") or attrs.get("layout") or "NCHW")
    out_layout = str(attrs.get("out_layout") or "") or layout
    nchw = _spatial(layout, first.shape)

    def out(shape: Sequence[int]) -> tuple[TensorType, ...]:
        return (TensorType(tuple(int(s) for s in shape), dtype),)

    if op == "nn.conv2d" and len(args) >= 2 and nchw:
        n, _, h, w = nchw
        kernel_layout = str(attrs.get("kernel_layout") or "OIHW")
        k = args[1].shape
        kh, kw = (_pair(attrs["kernel_size"]) if "kernel_size" in attrs else
                  (k[kernel_layout.index("H")], k[kernel_layout.index("W")]))
        channels = int(attrs.get("channels") or k[kernel_layout.index("O")])
        sh, sw = _pair(attrs.get("strides", 1))
        dh, dw = _pair(attrs.get("dilation", 1))
        pt, pl, pb, pr = _pads(attrs.get("padding", 0))
        oh = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
        ow = (w + pl + pr - dw * (kw - 1) - 1) // sw + 1
        return out(_shape_in(out_layout, n, channels, oh, ow))
    if op == "nn.conv2d_transpose" and len(args) >= 2 and nchw:
        n, c, h, w = nchw
        k = args[1].shape
        kh, kw = _pair(attrs["kernel_size"]) if "kernel_size" in attrs else k[-2:]
        channels = int(attrs.get("channels") or k[1])
        sh, sw = _pair(attrs.get("strides", 1))
        dh, dw = _pair(attrs.get("dilation", 1))
        oph, opw = _pair(attrs.get("output_padding", 0))
        pt, pl, pb, pr = _pads(attrs.get("padding", 0))
        oh = (h - 1) * sh - pt - pb + dh * (kh - 1) + oph + 1
        ow = (w - 1) * sw - pl - pr + dw * (kw - 1) + opw + 1
        return out(_shape_in(out_layout, n, channels, oh, ow))
    if op in ("nn.dense", "nn.matmul") and len(args) >= 2:
        units = attrs.get("units")
        units = int(units) if isinstance(units, int) else (
            args[1].shape[0] if op == "nn.dense" or attrs.get("transpose_b") else
            args[1].shape[-1])
        return out((*first.shape[:-1], units))
    if op == "nn.batch_matmul" and len(args) >= 2:
        a, b = first.shape, args[1].shape
        m = a[-1] if attrs.get("transpose_a") else a[-2]
        n_ = b[-2] if attrs.get("transpose_b", 1) else b[-1]
        return out((max(a[0], b[0]), m, n_))
    if op.endswith("pool2d") and nchw:
        n, c, h, w = nchw
        if "global" in op or "adaptive" in op:
            size = _pair(attrs.get("output_size") or 1)
            return out(_shape_in(out_layout, n, c, *size))
        ph, pw = _pair(attrs.get("pool_size", 1))
        sh, sw = _pair(attrs.get("strides", 1))
        dh, dw = _pair(attrs.get("dilation", 1))
        pt, pl, pb, pr = _pads(attrs.get("padding", 0))
        rnd = math.ceil if attrs.get("ceil_mode") else math.floor
        oh = int(rnd((h + pt + pb - dh * (ph - 1) - 1) / sh)) + 1
        ow = int(rnd((w + pl + pr - dw * (pw - 1) - 1) / sw)) + 1
        return out(_shape_in(out_layout, n, c, oh, ow))
    if op == "image.resize2d" and nchw and "size" in attrs:
        n, c, _, _ = nchw
        return out(_shape_in(out_layout, n, c, *_pair(attrs["size"])))
    if op in ("concatenate", "stack"):
        axis = int(attrs.get("axis", 0))
        shape = list(first.shape)
        if op == "stack":
            shape.insert(axis % (len(shape) + 1), len(args))
        else:
            shape[axis] = sum(a.shape[axis] for a in args)
        return out(shape)
    if op == "nn.batch_norm":
        channels = first.shape[int(attrs.get("axis", 1))]
        stats = TensorType((channels,), dtype)
        return TensorType(first.shape, dtype), stats, stats
    if op == "nn.dropout":  # Relay's dropout also returns its mask
        return out(first.shape) * 2
    if op in ("sum", "mean", "max", "min"):
        return out((1,))
    if op in ZERO_FLOP_OPS:
        return out(first.shape)
    try:
        return out(np.broadcast_shapes(*(a.shape for a in args)))
    except ValueError:
        return out(max((a.shape for a in args), key=math.prod))
