"""Normalisations as importers decompose them: LayerNorm and RMSNorm."""

from __future__ import annotations

from ..patterns import Pattern, Step


def layer_norm(form: str, divide_by_std: bool, affine: bool) -> Pattern:
    steps = [Step.of("mean", "x"), Step.of("subtract", "x", 0), Step.of("variance", "x", 0),
             Step.of("add", 2), Step.of("sqrt", 3)]
    if divide_by_std:  # (x - mean) / sqrt(var + eps)
        steps.append(Step.of("divide", 1, 4))
    else:  # (x - mean) * (1 / sqrt(var + eps))
        steps += [Step.of("divide", 4), Step.of("multiply", 1, 5)]
    if affine:
        steps += [Step.of("multiply", len(steps) - 1), Step.of("add", len(steps))]
    return Pattern("layer_norm", tuple(steps), ("nn.layer_norm",), form,
                   "LayerNorm decomposed: mean, subtract, variance, add eps, sqrt, divide...")


def rms_norm(form: str, affine: bool) -> Pattern:
    steps = [Step.of("multiply", "x", "x") if form == "x*x" else Step.of("power", "x"),
             Step.of("mean", 0), Step.of("add", 1), Step.of(("sqrt", "rsqrt"), 2)]
    steps += [Step.of(("divide", "multiply"), "x", 3)]
    if affine:
        steps.append(Step.of("multiply", 4))
    return Pattern("rms_norm", tuple(steps), (), f"{form}{', affine' if affine else ''}",
                   "RMSNorm decomposed: x squared, mean, add eps, (r)sqrt, scale")
