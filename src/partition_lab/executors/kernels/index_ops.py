"""Kernels of the shape-like, index and sort ops (``shape_of``, ``where``, ``take``,
``gather_nd``, ``topk``...) and of TVM's detection post-processing (``vision.get_valid_counts``,
``vision.non_max_suppression``, as MXNet's ``box_nms`` becomes them).

The detection kernels follow TVM's own algorithm row for row; the NMS computes its IoU matrix on
the tensors' device and walks the score-sorted boxes on the host. Importing
:mod:`partition_lab.executors.kernels` registers them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from ...core.graph import OpNode
from .registry import KERNELS, TORCH_DTYPES, Kernel, kernel


# --- shape-like, index and comparison ops (detectors' post-processing, attention glue)
@kernel("zeros_like", "ones_like")
def _fill_like(node: OpNode, args: list[Any], prepared: Any) -> Any:
    return (torch.zeros_like if node.op == "zeros_like" else torch.ones_like)(args[0])


@kernel("shape_of")
def _shape_of(node: OpNode, args: list[Any], prepared: Any) -> Any:
    return torch.tensor(args[0].shape, dtype=TORCH_DTYPES[node.outputs[0].dtype],
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
