"""Position and head-sharing constructs of decoders: rotary embedding and grouped-query
attention's ``repeat_kv``, as ``torch.export`` -> ONNX -> Relay writes them for Llama, Phi and
Gemma (``transformers``' ``rotate_half`` and ``repeat_kv``).

Rotary embedding (RoFormer, Su et al. 2021, eq. 34; ``transformers``'
``apply_rotary_pos_emb``): ``x * cos + rotate_half(x) * sin`` with ``rotate_half(x) =
concatenate(-x[..., d/2:], x[..., :d/2])``; Phi rotates only the first ``rotary_dim`` channels
and concatenates the rest back unchanged (``partial_rotary_factor``). ``cos`` and ``sin`` are
constants where the positions are (a fixed-shape example: TVM folds them) or tensors computed in
the graph. No Relay op and no MXNet op on neuron-cc's list is a rotary embedding, so the unit
stands for no single op: it is accepted where each of its ops is.

``repeat_kv`` (``transformers``: "the equivalent of torch.repeat_interleave(x, dim=1,
repeats=n_rep)"): ``expand_dims`` at axis ``k``, ``broadcast_to`` ``n`` copies there and a
``reshape`` that merges axes ``k-1`` and ``k``, which is Relay ``repeat(x, n, axis=k-1)`` (MXNet
``repeat``); the shapes are checked, so no other expand-and-reshape is taken for one.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..graph import OpGraph, OpNode
from ..patterns import Arg, Pattern, Step


def rotary(partial: bool, tables: str) -> Pattern:
    """``x * cos + concatenate(-x2, x1) * sin``; ``partial``: of ``x[..., :r]``, concatenated
    with ``x[..., r:]`` (Phi); ``tables`` ``"constant"`` (cos and sin folded) or ``"tensor"``."""
    cos: tuple[Arg, ...] = ("cos",) if tables == "tensor" else ()
    sin: tuple[Arg, ...] = ("sin",) if tables == "tensor" else ()
    steps = [Step.of("strided_slice", "x")] if partial else []
    x: Arg = 0 if partial else "x"
    first = len(steps)
    steps += [Step.of("multiply", x, *cos), Step.of("strided_slice", x),
              Step.of("negative", first + 1), Step.of("strided_slice", x),
              Step.of("concatenate", first + 2, first + 3),
              Step.of("multiply", first + 4, *sin), Step.of("add", first, first + 5)]
    if partial:
        steps += [Step.of("strided_slice", "x"), Step.of("concatenate", first + 6, first + 7)]
    form = ", ".join(filter(None, [partial and "partial", f"{tables} cos/sin"]))
    return Pattern("rotary", tuple(steps), (), form,
                   "rotary position embedding: x * cos + rotate_half(x) * sin",
                   check=_partial_rotary_shapes if partial else _rotary_shapes)


def repeat_kv() -> Pattern:
    steps = (Step.of("expand_dims", "x"), Step.of("broadcast_to", 0), Step.of("reshape", 1))
    return Pattern("repeat_kv", steps, ("repeat",), "expand_dims, broadcast_to, reshape",
                   "grouped-query attention's repeat_kv: repeat(x, n_rep, axis=1)",
                   check=_repeat_shapes)


def _in_shape(node: OpNode) -> tuple[int, ...]:
    return tuple(node.inputs[0].shape) if node.inputs else ()


def _out_shape(node: OpNode) -> tuple[int, ...]:
    return tuple(node.outputs[0].shape) if node.outputs else ()


def _rotary_shapes(graph: OpGraph, nodes: Sequence[int]) -> bool:
    """The two slices halve ``x``'s last axis, the negated one is the upper half, and the
    concatenation, both products and the sum have ``x``'s shape."""
    cos, upper, _, lower, cat, sin, out = (graph[n] for n in nodes)
    return _halves(_in_shape(upper), upper, lower) and all(
        _out_shape(node) == _in_shape(upper) for node in (cos, cat, sin, out))


def _partial_rotary_shapes(graph: OpGraph, nodes: Sequence[int]) -> bool:
    """The rotated part is a rotary embedding of ``x[..., :r]`` and the last two steps put
    ``x[..., r:]`` back: the result has ``x``'s shape."""
    head, rest, out = graph[nodes[0]], graph[nodes[8]], graph[nodes[9]]
    shape = _in_shape(head)
    if not shape or _slice_start(head, len(shape) - 1) != 0 or _out_shape(out) != shape:
        return False
    rotated = _out_shape(head)[-1]
    return (_slice_start(rest, len(shape) - 1) == rotated
            and _out_shape(rest) == shape[:-1] + (shape[-1] - rotated,)
            and _rotary_shapes(graph, nodes[1:8]))


def _halves(shape: tuple[int, ...], upper: OpNode, lower: OpNode) -> bool:
    if not shape or shape[-1] % 2:
        return False
    half = shape[:-1] + (shape[-1] // 2,)
    last = len(shape) - 1
    return (_out_shape(upper) == half == _out_shape(lower)
            and _slice_start(upper, last) == shape[-1] // 2 and _slice_start(lower, last) == 0)


def _slice_start(node: OpNode, axis: int) -> int | None:
    """Where a ``strided_slice`` starts on ``axis`` (None: its attributes do not say)."""
    begin, axes = node.attrs.get("begin"), node.attrs.get("axes")
    if begin is None:
        return None
    begin = tuple(begin)
    if axes is not None:
        axes = [a % len(_in_shape(node)) for a in axes]
        return int(begin[axes.index(axis)]) if axis in axes else 0
    return int(begin[axis]) if axis < len(begin) else 0


def _repeat_shapes(graph: OpGraph, nodes: Sequence[int]) -> bool:
    """expand_dims at ``k`` >= 1, ``n`` copies there, axes ``k-1`` and ``k`` merged."""
    expand, broadcast, reshape = (graph[n] for n in nodes)
    shape = _in_shape(expand)
    out = _out_shape(expand)
    if len(out) != len(shape) + 1:
        return False
    axis = expand.attrs.get("axis")
    k = int(axis) % len(out) if isinstance(axis, int) else None
    if not k or out[k] != 1 or out[:k] + out[k + 1:] != shape:
        return False
    copies = _out_shape(broadcast)
    if len(copies) != len(out) or copies[:k] + copies[k + 1:] != shape:
        return False
    return _out_shape(reshape) == shape[:k - 1] + (shape[k - 1] * copies[k],) + shape[k:]
