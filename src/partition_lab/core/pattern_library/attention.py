"""Attention and its pieces: softmax decomposed, a cast scale, scaled dot-product attention."""

from __future__ import annotations

from ..patterns import Pattern, Step


def softmax() -> Pattern:
    steps = (Step.of("max", "x"), Step.of("subtract", "x", 0), Step.of("exp", 1),
             Step.of("sum", 2), Step.of("divide", 2, 3))
    return Pattern("softmax", steps, ("nn.softmax",), "exp / sum(exp)", "softmax decomposed")


def cast_scale() -> Pattern:
    # torch's scaled_dot_product_attention scales by a constant cast to the operand's dtype.
    return Pattern("cast_scale", (Step.of("cast_like", "x"), Step.of("multiply", "x", 0)),
                   ("multiply",), "x * cast_like(c, x)",
                   "a constant scale cast to its operand's dtype (folds into the multiply)")


def attention(scale: str, mask: str, reshape: bool, guard: bool,
              constant_query: bool = False) -> Pattern:
    """batch_matmul(q, k) [reshape] [* or / scale] [+ mask] softmax [NaN guard] [reshape]
    batch_matmul(., v).

    ``mask`` is ``"tensor"`` (an input), ``"constant"`` (folded into the graph, as a model with a
    fixed-shape input gets it) or empty; ``guard`` is ``where(isnan(p), 0, p)`` after the softmax,
    what ``torch.export`` writes for a masked ``scaled_dot_product_attention``.
    ``constant_query``: the queries are a constant (folded: DETR's first decoder layer computes
    them from its learned query embeddings and a zero target alone), so the first product has
    one tensor argument.
    """
    steps = [Step.of("nn.batch_matmul", "k") if constant_query
             else Step.of("nn.batch_matmul", "q", "k")]
    if reshape:
        steps.append(Step.of("reshape", len(steps) - 1))
    if scale:
        steps.append(Step.of(scale, len(steps) - 1))
    if mask == "tensor":
        steps.append(Step.of("add", len(steps) - 1, "mask"))
    elif mask == "constant":
        steps.append(Step.of("add", len(steps) - 1))
    steps.append(Step.of("nn.softmax", len(steps) - 1))
    if guard:
        probabilities = len(steps) - 1
        steps += [Step.of("isnan", probabilities), Step.of("where", probabilities + 1,
                                                           probabilities)]
    if reshape:
        steps.append(Step.of("reshape", len(steps) - 1))
    steps.append(Step.of("nn.batch_matmul", len(steps) - 1, "v"))
    form = ", ".join(filter(None, [constant_query and "constant query",
                                   scale and f"{scale} scale", mask and f"{mask} mask",
                                   guard and "NaN guard", reshape and "4-d reshapes"])) or "plain"
    return Pattern("attention", tuple(steps), ("nn.batch_matmul", "nn.softmax"), form,
                   "scaled dot-product attention: softmax(q k^T [scale] [+ mask]) v")


def window_attention(scale: str, mask: str) -> Pattern:
    """Shifted-window attention (Swin, Liu et al. 2021, eq. 4 and section 3.2): ``softmax(q k^T
    [scale] + B)`` with the relative position bias ``B`` added per head and, in a shifted block,
    the shift mask added per window between two reshapes (``(nW*b, h, N, N)`` to ``(b, nW, h,
    N, N)`` and back), as torchvision's ``shifted_window_attention`` and ``transformers``'
    ``SwinSelfAttention`` write it. ``mask``: ``"constant"`` (folded) or ``"tensor"``."""
    steps = [Step.of("nn.batch_matmul", "q", "k"), Step.of("reshape", 0)]
    if scale:
        steps.append(Step.of(scale, len(steps) - 1))
    steps.append(Step.of("add", len(steps) - 1))  # the relative position bias, a constant
    steps.append(Step.of("reshape", len(steps) - 1))
    steps.append(Step.of("add", len(steps) - 1, *(("mask",) if mask == "tensor" else ())))
    steps.append(Step.of("reshape", len(steps) - 1))
    steps.append(Step.of("nn.softmax", len(steps) - 1))
    steps.append(Step.of("reshape", len(steps) - 1))
    steps.append(Step.of("nn.batch_matmul", len(steps) - 1, "v"))
    form = ", ".join(filter(None, [scale and f"{scale} scale", "position bias",
                                   f"{mask} shift mask", "4-d reshapes"]))
    return Pattern("attention", tuple(steps), ("nn.batch_matmul", "nn.softmax"), form,
                   "shifted-window attention: softmax(q k^T [scale] + bias + shift mask) v")
