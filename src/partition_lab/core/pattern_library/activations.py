"""Activations as importers decompose them: GELU (exact and tanh), SiLU, hard-sigmoid, hard-swish."""

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


def gelu_tanh() -> Pattern:
    # 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
    steps = (Step.of("power", "x"), Step.of("multiply", 0), Step.of("add", "x", 1),
             Step.of("multiply", 2), Step.of("tanh", 3), Step.of("add", 4),
             Step.of("multiply", "x", 5), Step.of("multiply", 6))
    return Pattern("gelu", steps, ("tanh",), "tanh", "GELU, tanh approximation")


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
