"""Attention in the forms vision and decoder models give it (core/pattern_library/attention.py):
shifted-window attention with its two adds (Swin's relative position bias and shift mask, with
the reshapes between them), on graphs built by hand as TVM's ONNX importer gives torchvision's
``shifted_window_attention`` (read off ``tv:swin_t``). No TVM."""

from __future__ import annotations

import pytest

from partition_lab.core.graph import OpGraph, OpGraphBuilder, TensorType
from partition_lab.core.pattern_library import PATTERNS
from partition_lab.core.patterns import find_units
from partition_lab.targets import get_platform
from partition_lab.targets.annotate import support_table

WINDOWS, HEADS, TOKENS, DIM = 4, 2, 16, 8


def shaped(*shape: int) -> list[TensorType]:
    return [TensorType(tuple(shape), "float32")]


def window_attention(shifted: bool = True, mask_input: bool = False, scale: str = "",
                     mask_read_outside: bool = False) -> OpGraph:
    """q k^T per window and head, + relative position bias, [+ shift mask per window], softmax,
    times v; ``mask_input``: the shift mask is a graph input, not a folded constant."""
    b = OpGraphBuilder("swin_attention")
    q = b.input("q", TensorType((WINDOWS * HEADS, TOKENS, DIM), "float32"))
    k = b.input("k", TensorType((WINDOWS * HEADS, TOKENS, DIM), "float32"))
    v = b.input("v", TensorType((WINDOWS * HEADS, DIM, TOKENS), "float32"))
    scores = b.op("nn.batch_matmul", [q, k], outputs=shaped(WINDOWS * HEADS, TOKENS, TOKENS),
                  name="attn/bmm")
    x = b.op("reshape", [scores], outputs=shaped(WINDOWS, HEADS, TOKENS, TOKENS), name="attn/r")
    if scale:
        x = b.op(scale, [x], weights=shaped(), name="attn/scale")
    x = b.op("add", [x], weights=shaped(HEADS, TOKENS, TOKENS), name="attn/bias")
    mask = None
    if shifted:
        per_window = b.op("reshape", [x], outputs=shaped(1, WINDOWS, HEADS, TOKENS, TOKENS),
                          name="attn/view")
        if mask_input:
            mask = b.input("mask", TensorType((1, WINDOWS, 1, TOKENS, TOKENS), "float32"))
            masked = b.op("add", [per_window, mask], name="attn/mask")
        else:
            masked = b.op("add", [per_window], weights=shaped(1, WINDOWS, 1, TOKENS, TOKENS),
                          name="attn/mask")
        x = b.op("reshape", [masked], outputs=shaped(WINDOWS, HEADS, TOKENS, TOKENS),
                 name="attn/view#2")
    p = b.op("nn.softmax", [x], attrs={"axis": 3}, name="attn/softmax")
    flat = b.op("reshape", [p], outputs=shaped(WINDOWS * HEADS, TOKENS, TOKENS), name="attn/r#2")
    out = b.op("nn.batch_matmul", [flat, v], outputs=shaped(WINDOWS * HEADS, TOKENS, DIM),
               name="attn/bmm#2")
    outputs = [b.op("nn.relu", [out], name="after")]
    if mask_read_outside:
        outputs.append(b.op("nn.relu", [(3 if scale else 2, 0)], name="reads_the_bias"))
    return b.build(outputs=outputs)


def attention_units(graph: OpGraph) -> list[tuple[str, int]]:
    return [(u.pattern.form, len(u.nodes)) for u in find_units(graph, PATTERNS)
            if u.name == "attention"]


@pytest.mark.parametrize("scale", ["", "multiply", "divide"])
def test_shifted_window_attention_with_bias_and_mask_is_one_unit(scale: str) -> None:
    form = ", ".join(filter(None, [scale and f"{scale} scale",
                                   "position bias, constant shift mask, 4-d reshapes"]))
    assert attention_units(window_attention(scale=scale)) == [(form, 9 + bool(scale))]


def test_a_shift_mask_that_is_an_input_is_one_unit_too() -> None:
    assert attention_units(window_attention(mask_input=True)) == [
        ("position bias, tensor shift mask, 4-d reshapes", 9)]


def test_an_unshifted_window_block_is_attention_with_a_constant_mask() -> None:
    """The first block of a Swin stage adds the bias only: the plain form's one constant add."""
    assert attention_units(window_attention(shifted=False)) == [
        ("constant mask, 4-d reshapes", 6)]


def test_window_attention_whose_bias_sum_is_read_outside_is_no_unit() -> None:
    assert attention_units(window_attention(mask_read_outside=True)) == []


@pytest.mark.parametrize("platform", ["neuron", "neuron@2020", "tensorcore"])
def test_the_window_unit_is_judged_as_batch_matmul(platform: str) -> None:
    graph = window_attention()
    accelerator = get_platform(platform).devices[0].name
    verdicts = support_table(graph, get_platform(platform)).of(accelerator)
    assert "attention (9 ops: nn.batch_matmul, reshape, add, nn.softmax)" in verdicts[0].reason
    assert len({verdicts[n] for n in range(9)}) == 1  # one verdict for the whole unit


def test_attention_whose_queries_are_a_constant_is_one_unit_on_neuron() -> None:
    """DETR's first decoder layer computes its queries from learned embeddings and a zero target
    alone, so folding leaves them a constant: the first product reads one tensor (the keys).
    The unit is still attention, and its ``isnan`` guard is no host island of its own."""
    b = OpGraphBuilder("constant_query_attention")
    k = b.input("k", TensorType((HEADS, TOKENS, DIM), "float32"))
    v = b.input("v", TensorType((HEADS, DIM, TOKENS), "float32"))
    scores = b.op("nn.batch_matmul", [k], weights=shaped(HEADS, TOKENS, DIM),
                  outputs=shaped(HEADS, TOKENS, TOKENS), name="attn/bmm")
    scaled = b.op("multiply", [scores], weights=shaped(), name="attn/scale")
    p = b.op("nn.softmax", [scaled], attrs={"axis": 2}, name="attn/softmax")
    nan = b.op("isnan", [p], outputs=[TensorType((HEADS, TOKENS, TOKENS), "bool")],
               name="attn/isnan")
    guarded = b.op("where", [nan, p], weights=shaped(), outputs=shaped(HEADS, TOKENS, TOKENS),
                   name="attn/where")
    out = b.op("nn.batch_matmul", [guarded, v], outputs=shaped(HEADS, TOKENS, DIM),
               name="attn/bmm#2")
    graph = b.build(outputs=[b.op("nn.relu", [out], name="after")])
    (unit,) = find_units(graph, PATTERNS)
    assert unit.name == "attention" and "constant query" in unit.pattern.form
    assert len(unit.nodes) == len(graph) - 1
    verdicts = support_table(graph, get_platform("neuron")).of("neuron")
    isnan = next(n.id for n in graph if n.op == "isnan")
    assert verdicts[isnan].supported  # isnan alone is not on neuron's list
