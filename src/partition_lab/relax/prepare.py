"""Relax preparation: weights bound as constants, then the steps a platform asks for.

The step names are :data:`~partition_lab.core.platform.PREPARE_STEPS`, the same the Relay adapter
runs (``relay/passes/prepare.py``); here each one is the Relax pass of the same meaning.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import tvm
from tvm import relax

from ..core.platform import PREPARE_STEPS
from ..errors import PartitionLabError, TargetSpecError

#: How each preparation step runs in Relax. ToMixedPrecision keeps fp32 accumulation (its
#: default): convolutions and matmuls read float16 operands, which is what the rules check.
RELAX_PASSES: dict[str, Callable[[], tvm.transform.Pass]] = {
    # HWIO: the kernel layout Relay's ConvertLayout picks for NHWC ("default"), which the
    # tensorcore rules ask for.
    "convert_layout:NHWC": lambda: relax.transform.ConvertLayout(
        {"relax.nn.conv2d": ["NHWC", "HWIO"]}),
    "mixed_precision:float16": lambda: tvm.transform.Sequential(
        [_clip_as_min_max(), relax.transform.ToMixedPrecision()]),
}


def _clip_as_min_max() -> tvm.transform.Pass:
    """``relax.clip(x, lo, hi)`` as ``minimum(maximum(x, lo), hi)`` with scalar constants.

    ToMixedPrecision (TVM 0.27) casts every argument of an op it lets follow its input's dtype
    and fails on clip's bounds, which are ``PrimValue`` s, not tensors ("Expected TensorType,
    but got T.int64": HardSwish, ReLU6); maximum and minimum of scalar constants it casts."""

    maximum, minimum = tvm.ir.Op.get("relax.maximum"), tvm.ir.Op.get("relax.minimum")

    @relax.expr_functor.mutator
    class Rewriter(relax.PyExprMutator):
        def visit_call_(self, call: relax.Call) -> relax.Expr:
            call = super().visit_call_(call)
            if not (isinstance(call.op, tvm.ir.Op) and call.op.name == "relax.clip"):
                return call
            x, low, high = call.args
            dtype = x.ty.dtype
            low, high = (relax.const(float(getattr(b.value, "value", b.value)), dtype)
                         for b in (low, high))
            # both calls keep the clip's span (its ONNX node's name)
            inner = self.builder_.emit(relax.Call(maximum, [x, low], span=call.span))
            return relax.Call(minimum, [inner, high], span=call.span)

    @relax.transform.function_pass(opt_level=0, name="ClipAsMinMax")
    class ClipAsMinMax:
        def transform_function(self, func: relax.Function, mod: tvm.IRModule, _ctx: Any
                               ) -> relax.Function:
            return Rewriter(mod).visit_expr(func)

    return ClipAsMinMax()


def bind_params(mod: tvm.IRModule, params: Mapping[str, Any] | None = None) -> tvm.IRModule:
    """``mod`` with its weights as constants: ``params`` by name, and the values a frontend
    kept in ``main``'s ``params`` attribute (``from_onnx(keep_params_in_input=True)``)."""
    func = mod["main"]
    bound: dict[str, Any] = dict(params or {})
    attrs = func.attrs
    if attrs is not None and "params" in attrs.keys() and "num_input" in attrs.keys():
        num_input = int(attrs["num_input"])
        for var, value in zip(func.params[num_input:], attrs["params"], strict=False):
            bound.setdefault(var.name, value)
    if bound:
        known = {p.name for p in func.params}
        unknown = sorted(set(bound) - known)
        if unknown:
            raise PartitionLabError(f"params {', '.join(map(repr, unknown))} are not parameters "
                                    f"of main ({', '.join(sorted(known))})")
        mod = relax.transform.BindParams("main", bound)(mod)
        mod = _without_attr(mod, "params")
    return mod


def _without_attr(mod: tvm.IRModule, key: str) -> tvm.IRModule:
    func = mod["main"]
    if func.attrs is None or key not in func.attrs.keys():
        return mod
    mod = mod.clone() if hasattr(mod, "clone") else tvm.IRModule(dict(mod.functions.items()))
    mod["main"] = func.without_attr(key)
    return mod


def prepare(mod: tvm.IRModule, steps: Sequence[str]) -> tvm.IRModule:
    """Run the named steps on ``mod``, with constant folding before (data built from constants,
    such as an importer's reshaped biases) and after (the casts and layout transforms of
    weights the steps add), as ``tvm.compile``'s pipeline would fold them."""
    for step in steps:
        if step not in PREPARE_STEPS or step not in RELAX_PASSES:
            raise TargetSpecError(f"unknown preparation step {step!r}; known steps: "
                                  f"{', '.join(PREPARE_STEPS)}")
    passes = [relax.transform.Normalize(), relax.transform.FoldConstant()]
    for step in steps:
        passes += [RELAX_PASSES[step](), relax.transform.FoldConstant()]
    with tvm.transform.PassContext(opt_level=3):
        try:
            return tvm.transform.Sequential(passes)(mod)
        except (RuntimeError, ValueError, TypeError) as exc:  # TVM errors are RuntimeErrors
            first = (str(exc).strip().splitlines() or [""])[-1]
            raise PartitionLabError(f"preparing the Relax module ({', '.join(steps) or 'folding'})"
                                    f" failed in TVM: {first}") from exc
