"""Relay preparation steps a target asks for before its support is checked.

Targets name the steps (``TargetSpec.prepare_steps()``, names from ``core.platform.PREPARE_STEPS``);
this module runs them. Each step keeps
the source-name spans, so exclusions by node name still work after it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import tvm
from tvm import relay

from ...core.platform import PREPARE_STEPS
from ...errors import TargetSpecError
from .fold import fold_constant_calls


def _convert_layout(layout: str) -> tvm.transform.Pass:
    # "default" picks the kernel layout matching the data layout (HWIO for NHWC).
    return relay.transform.ConvertLayout({"nn.conv2d": [layout, "default"]})


#: How each step of :data:`~partition_lab.core.platform.PREPARE_STEPS` (the one list of step
#: names) runs in Relay.
RELAY_PASSES: dict[str, Callable[[], tvm.transform.Pass]] = {
    "convert_layout:NHWC": lambda: _convert_layout("NHWC"),
    "mixed_precision:float16": lambda: relay.transform.ToMixedPrecision("float16"),
}


def prepare_passes(steps: Sequence[str]) -> list[tvm.transform.Pass]:
    """The TVM passes for step names like ``"convert_layout:NHWC"``, each followed by type inference."""
    passes: list[tvm.transform.Pass] = []
    for step in steps:
        if step not in PREPARE_STEPS or step not in RELAY_PASSES:
            raise TargetSpecError(f"unknown preparation step {step!r}; known steps: "
                                  f"{', '.join(PREPARE_STEPS)}")
        passes += [RELAY_PASSES[step](), relay.transform.InferType()]
    return passes


def prepare(mod: tvm.IRModule, steps: Sequence[str]) -> tvm.IRModule:
    """Run the named preparation steps on ``mod`` (opt_level 3, as relay.build would), then fold
    calls on constants (:func:`~.fold.fold_constant_calls`), with or without steps."""
    # Data built from constants (masks) folds away before the steps (so ToMixedPrecision does
    # not cast it) and the weight casts and layout transforms the steps add fold after them, as
    # relay.build's FoldConstant would fold both.
    mod = fold_constant_calls(relay.transform.InferType()(mod))
    passes = prepare_passes(steps)
    if not passes:
        return mod
    with tvm.transform.PassContext(opt_level=3):
        mod = tvm.transform.Sequential(passes)(mod)
    return fold_constant_calls(mod)
