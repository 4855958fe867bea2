"""Rotary embedding and grouped-query attention's repeat_kv as units (core/pattern_library/
positional.py), on graphs built by hand in the forms TVM's ONNX importer gives
``torch.export``ed Llama, Phi and Gemma (read off a real import: ``rotate_half``'s slices,
negate, concatenate, the cos and sin products; ``repeat_kv``'s expand_dims, broadcast_to,
reshape). No TVM.

Oracles: the construct's definition (RoFormer eq. 34; ``repeat_interleave`` on the head axis)
decides which shapes are a unit; the op tables of the targets decide the verdicts."""

from __future__ import annotations

import pytest

from partition_lab.core.graph import OpGraph, OpGraphBuilder, TensorType
from partition_lab.core.pattern_library import PATTERNS
from partition_lab.core.patterns import find_units
from partition_lab.targets import get_platform
from partition_lab.targets.annotate import support_table
from partition_lab.targets.devices import without_patterns

END = 9223372036854775807  # what the importer writes for "to the end"
HEADS = TensorType((1, 4, 16, 16), "float32")  # (batch, heads, sequence, head_dim)
TABLE = TensorType((1, 1, 16, 16), "float32")  # cos or sin, broadcast over the heads


def shaped(shape: tuple[int, ...]) -> list[TensorType]:
    return [TensorType(shape, "float32")]


def rotate(b: OpGraphBuilder, x, dim: int, cos=None, sin=None,  # noqa: ANN001, ANN201
           upper: int | None = None):
    """``x * cos + concatenate(-x[..., d/2:], x[..., :d/2]) * sin`` on the last axis of x (of
    size ``dim``); ``upper`` where the negated slice starts (d/2 unless told)."""
    shape = b._inputs[x[1]][0].shape if x[0] == "input" else b._nodes[x[0]].outputs[0].shape
    half, upper = dim // 2, dim // 2 if upper is None else upper
    cut = shape[:-1] + (half,)
    times_cos = b.op("multiply", [x, cos] if cos else [x], weights=[] if cos else [TABLE],
                     name="mul", outputs=shaped(shape))
    hi = b.op("strided_slice", [x], name="slice#2", outputs=shaped(shape[:-1] + (dim - upper,)),
              attrs={"begin": (upper,), "end": (END,), "strides": (1,), "axes": (3,)})
    neg = b.op("negative", [hi], name="neg")
    lo = b.op("strided_slice", [x], name="slice", outputs=shaped(cut),
              attrs={"begin": (0,), "end": (half,), "strides": (1,), "axes": (3,)})
    cat = b.op("concatenate", [neg, lo], name="cat",
               attrs={"axis": -1}, outputs=shaped(shape))
    times_sin = b.op("multiply", [cat, sin] if sin else [cat], weights=[] if sin else [TABLE],
                     name="mul#2", outputs=shaped(shape))
    return b.op("add", [times_cos, times_sin], name="add", outputs=shaped(shape))


def full_rotary(**kw) -> OpGraph:  # noqa: ANN003
    b = OpGraphBuilder("rope")
    x = b.input("q", HEADS)
    out = rotate(b, x, 16, **kw)
    return b.build(outputs=[b.op("nn.relu", [out], name="after")])


def partial_rotary(rotated: int = 8) -> OpGraph:
    """Phi: the first ``rotated`` channels rotated, the rest put back."""
    b = OpGraphBuilder("partial_rope")
    x = b.input("q", HEADS)
    head = b.op("strided_slice", [x], outputs=shaped((1, 4, 16, rotated)), name="slice_rot",
                attrs={"begin": (0,), "end": (rotated,), "strides": (1,), "axes": (3,)})
    out = rotate(b, head, rotated)
    rest = b.op("strided_slice", [x], outputs=shaped((1, 4, 16, 16 - rotated)), name="pass",
                attrs={"begin": (rotated,), "end": (END,), "strides": (1,), "axes": (3,)})
    cat = b.op("concatenate", [out, rest], outputs=shaped((1, 4, 16, 16)), name="cat#3",
               attrs={"axis": -1})
    return b.build(outputs=[b.op("nn.relu", [cat], name="after")])


def repeat(kv_heads: int = 2, copies: int = 2, axis: int = 2,
           merged: tuple[int, ...] | None = None) -> OpGraph:
    """``repeat_kv``: (1, kv_heads, 16, 16) -> expand at ``axis`` -> ``copies`` there -> merged."""
    b = OpGraphBuilder("repeat_kv")
    shape = (1, kv_heads, 16, 16)
    x = b.input("k", TensorType(shape, "float32"))
    expanded = shape[:axis] + (1,) + shape[axis:]
    broadcast = shape[:axis] + (copies,) + shape[axis:]
    e = b.op("expand_dims", [x], outputs=shaped(expanded), attrs={"axis": axis}, name="unsqueeze")
    c = b.op("broadcast_to", [e], outputs=shaped(broadcast), attrs={"shape": broadcast},
             name="expand")
    merged = merged or (1, kv_heads * copies, 16, 16)
    r = b.op("reshape", [c], outputs=shaped(merged), attrs={"newshape": merged},
             name="_unsafe_view")
    return b.build(outputs=[b.op("nn.relu", [r], name="after")])


def units(graph: OpGraph) -> list[tuple[str, str, list[str]]]:
    return [(u.name, u.pattern.form, [graph[n].name for n in u.nodes])
            for u in find_units(graph, PATTERNS)]


ROTATE = ["mul", "slice#2", "neg", "slice", "cat", "mul#2", "add"]


def test_rotate_half_with_folded_cos_and_sin_is_one_rotary_unit() -> None:
    assert units(full_rotary()) == [("rotary", "constant cos/sin", ROTATE)]


def test_rotary_with_cos_and_sin_computed_in_the_graph_is_one_unit() -> None:
    b = OpGraphBuilder("rope_tables")
    x, cos, sin = b.input("q", HEADS), b.input("cos", TABLE), b.input("sin", TABLE)
    out = rotate(b, x, 16, cos=cos, sin=sin)
    graph = b.build(outputs=[b.op("nn.relu", [out], name="after")])
    assert units(graph) == [("rotary", "tensor cos/sin", ROTATE)]


def test_phis_partial_rotary_is_one_unit_with_the_slices_around_it() -> None:
    assert units(partial_rotary()) == [
        ("rotary", "partial, constant cos/sin", ["slice_rot", *ROTATE, "pass", "cat#3"])]


@pytest.mark.parametrize("graph", [
    full_rotary(upper=6),  # the negated slice is not the upper half
    partial_rotary(rotated=7),  # an odd rotated width has no halves
], ids=["not halves", "odd width"])
def test_slices_that_are_not_halves_are_no_rotary(graph: OpGraph) -> None:
    assert [u for u in units(graph) if u[0] == "rotary"] == []


def test_repeat_kv_is_one_unit_and_stands_for_repeat() -> None:
    assert units(repeat()) == [("repeat_kv", "expand_dims, broadcast_to, reshape",
                                ["unsqueeze", "expand", "_unsafe_view"])]
    (pattern,) = {p for p in PATTERNS if p.name == "repeat_kv"}
    assert pattern.stands_for == ("repeat",)


@pytest.mark.parametrize("graph", [
    repeat(axis=1),  # copies before the heads: a tile of the whole, not repeat(axis=0)...
    repeat(merged=(1, 2, 32, 16)),  # the copies merged with the sequence, not the heads
], ids=["axis 1 then merged with the batch", "merged with the wrong axis"])
def test_an_expand_and_reshape_that_is_no_repeat_is_no_unit(graph: OpGraph) -> None:
    assert units(graph) == []


@pytest.mark.parametrize("platform", ["neuron", "neuron@2020", "tensorcore"])
def test_repeat_kv_is_judged_as_repeat_and_rotary_by_its_ops(platform: str) -> None:
    """neuron-cc lists MXNet repeat from its first release (1.0.4680.0), but broadcast_axis, what
    broadcast_to comes from, only from 1.0.24045.0: op by op, neuron@2020 leaves broadcast_to on
    the host (tensorcore has no broadcast_to either: the CUDA cores); as a unit, repeat_kv is
    one repeat (a broadcast schedule in TVM, riding along on tensorcore)."""
    graph = repeat()
    accelerator = get_platform(platform).devices[0].name
    support = support_table(graph, get_platform(platform))
    verdicts = support.of(accelerator)
    assert all(verdicts[n].supported for n in range(3)), [verdicts[n].reason for n in range(3)]
    assert verdicts[0].reason.startswith("repeat_kv (3 ops: expand_dims, broadcast_to, reshape) "
                                         "is repeat as one op: ")
    op_by_op = support_table(graph, without_patterns(get_platform(platform))).of(accelerator)
    assert op_by_op[1].supported == (platform == "neuron"), op_by_op[1].reason
    rope = full_rotary()
    verdicts = support_table(rope, get_platform(platform)).of(accelerator)
    assert all(verdicts[n].supported for n in range(7))
    assert verdicts[0].reason.startswith("rotary (7 ops: multiply, strided_slice, negative, "
                                         "concatenate, ... (1 more)) as one unit: ")
