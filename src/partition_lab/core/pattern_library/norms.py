"""Normalisations as importers decompose them: LayerNorm, RMSNorm and GroupNorm."""

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


def rms_norm(form: str, affine: bool | str, reciprocal: bool = False) -> Pattern:
    """x * (r)sqrt(mean(x^2) + eps) [* w].

    ``form`` is how x is squared (``"x*x"`` or ``"power"``); ``reciprocal`` writes ``rsqrt`` as
    ``divide(1, sqrt(.))``, as ``torch.export`` -> ONNX writes ``torch.rsqrt`` (Sqrt, Reciprocal:
    Llama, Gemma); ``affine`` is ``"w"`` (or True: a weight; Gemma's ``1 + w`` arrives folded into
    one on the Relay and Relax routes, whose preparation folds constants), ``"1 + w"`` (Gemma's
    ``x * (1 + w)`` where nothing folded the ``1 + w``: an ``add`` that reads no tensor, as
    ``torch.export`` -> Relax writes it before folding) or empty.
    """
    scale = "w" if affine is True else affine or ""
    steps = [Step.of("multiply", "x", "x") if form == "x*x" else Step.of("power", "x"),
             Step.of("mean", 0), Step.of("add", 1)]
    if reciprocal:
        steps += [Step.of("sqrt", 2), Step.of("divide", 3)]
    else:
        steps.append(Step.of(("sqrt", "rsqrt"), 2))
    steps.append(Step.of(("divide", "multiply"), "x", len(steps) - 1))
    if scale == "w":
        steps.append(Step.of("multiply", len(steps) - 1))
    elif scale == "1 + w":
        steps += [Step.of("add"), Step.of("multiply", len(steps) - 1, len(steps))]
    names = [form, "1/sqrt" if reciprocal else "", {"w": "affine", "1 + w": "* (1 + w)"}.get(scale)]
    return Pattern("rms_norm", tuple(steps), (), ", ".join(filter(None, names)),
                   "RMSNorm decomposed: x squared, mean, add eps, (r)sqrt, scale")


def group_norm(affine: str) -> Pattern:
    """GroupNorm as TVM's ONNX importer gives ``torch.onnx``'s export of ``nn.GroupNorm``:
    reshape to (N, groups, -1), ``nn.instance_norm`` (unit scale, zero bias), reshape back, then
    the per-channel weight and bias; ``affine`` is ``"cast_like"`` (the weight and bias each
    ``CastLike`` the activation first, as ``torch.export`` writes them: Wav2Vec2's feature
    extractor), ``"plain"`` (constant weight and bias) or empty.
    """
    steps = [Step.of("reshape", "x"), Step.of("nn.instance_norm", 0), Step.of("reshape", 1)]
    if affine == "cast_like":
        steps += [Step.of("cast_like", 2), Step.of("multiply", 2, 3), Step.of("cast_like", 4),
                  Step.of("add", 4, 5)]
    elif affine == "plain":
        steps += [Step.of("multiply", 2), Step.of("add", 3)]
    return Pattern("group_norm", tuple(steps), ("nn.group_norm",),
                   f"instance_norm{', ' + affine + ' affine' if affine else ''}",
                   "GroupNorm decomposed: reshape, instance_norm, reshape, [scale, shift]")
