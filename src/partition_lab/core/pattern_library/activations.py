"""Activations as importers decompose them: GELU (exact and tanh), QuickGELU, SiLU, hard-sigmoid,
hard-swish."""

from __future__ import annotations

from ..patterns import Pattern, Step


def gelu_erf(form: str) -> Pattern:
    scale = "divide" if form == "x/sqrt2" else "multiply"
    steps = (Step.of(scale, "x"), Step.of("erf", 0), Step.of("add", 1),
             Step.of("multiply", 2), Step.of("multiply", "x", 3))
    return Pattern("gelu", steps, ("erf",), f"erf, {form}",
                   "GELU, exact: x * 0.5 * (1 + erf(x / sqrt 2))")


def gelu_erf_half_first() -> Pattern:
    steps = (Step.of(("divide", "multiply"), "x"), Step.of("erf", 0), Step.of("add", 1),
             Step.of("multiply", "x"), Step.of("multiply", 3, 2))
    return Pattern("gelu", steps, ("erf",), "erf, (x * 0.5) * (1 + erf)",
                   "GELU, exact: (0.5 * x) * (1 + erf(x / sqrt 2))")


def gelu_tanh(half: str = "last") -> Pattern:
    """GELU, tanh approximation: ``power``, ``multiply``, ``add(x, .)``, ``multiply``, ``tanh``,
    ``add`` (1 + tanh) and the two multiplies by x and 0.5, in the order ``half`` says:
    ``"last"`` (x * (1 + tanh)) * 0.5; ``"x first"`` (0.5 * x) * (1 + tanh), as
    ``transformers``' ``NewGELUActivation`` writes it (Phi); ``"before x"`` x * ((1 + tanh) * 0.5),
    what ``torch.export`` -> ONNX makes of ``F.gelu(approximate="tanh")`` (Gemma).
    """
    steps = [Step.of("power", "x"), Step.of("multiply", 0), Step.of("add", "x", 1),
             Step.of("multiply", 2), Step.of("tanh", 3), Step.of("add", 4)]
    if half == "last":
        steps += [Step.of("multiply", "x", 5), Step.of("multiply", 6)]
    elif half == "x first":
        steps += [Step.of("multiply", "x"), Step.of("multiply", 6, 5)]
    else:
        steps += [Step.of("multiply", 5), Step.of("multiply", "x", 6)]
    return Pattern("gelu_tanh", tuple(steps), ("tanh",), f"0.5 {half}",
                   "GELU, tanh approximation: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))")


def quick_gelu() -> Pattern:
    # x * sigmoid(1.702 * x) (QuickGELU, Hendrycks & Gimpel 2016, section 2). The matcher does
    # not read constants, so any x * sigmoid(c * x) (Swish-beta) is this unit too: the same ops.
    steps = (Step.of("multiply", "x"), Step.of("sigmoid", 0), Step.of("multiply", "x", 1))
    return Pattern("quick_gelu", steps, (), "x * sigmoid(1.702 x)",
                   "QuickGELU: x * sigmoid(1.702 * x), a sigmoid approximation of GELU")


def silu() -> Pattern:
    return Pattern("silu", (Step.of("sigmoid", "x"), Step.of("multiply", "x", 0)), (),
                   "x * sigmoid(x)", "SiLU (swish)")


def hard_sigmoid() -> Pattern:
    steps = (Step.of(("multiply", "divide"), "x"), Step.of("add", 0), Step.of("clip", 1))
    return Pattern("hard_sigmoid", steps, (), "clip(x / 6 + 0.5, 0, 1)", "hard-sigmoid")


def hard_swish() -> Pattern:
    steps = (Step.of(("multiply", "divide"), "x"), Step.of("add", 0), Step.of("clip", 1),
             Step.of("multiply", "x", 2))
    return Pattern("hard_swish", steps, (), "x * hard_sigmoid(x)", "hard-swish")
