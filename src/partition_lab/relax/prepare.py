"""Relax preparation: weights bound as constants, then the steps a platform asks for.

The step names are :data:`~partition_lab.core.platform.PREPARE_STEPS`, the same the Relay adapter
runs (``relay/passes/prepare.py``); here each one is the Relax pass of the same meaning.

A weight that ToMixedPrecision casts to float16 past its 65504 becomes ``inf`` when the cast
folds; as on Relay, each op left using such a constant is recorded as a
:class:`~partition_lab.core.hazards.NumericHazard` (:func:`overflow_hazards`). Relax's
ToMixedPrecision keeps ``nn.batch_norm`` in float32 (its policy), so a BatchNorm variance past
float16 is no hazard here, while Relay's casts it.

The passes rebuild the calls they change without their spans; :func:`names_kept` puts the
source names back after each one, so that a node excluded by name stays excluded after
preparation. Ops TVM 0.27 gives no layout inference or mixed-precision policy get the ones
Relay's passes apply to them (:data:`_MISSING_LAYOUTS`, :data:`_MISSING_POLICIES`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import tvm
from tvm import relax

from ..core.hazards import NumericHazard
from ..core.names import carried_names
from ..core.platform import PREPARE_STEPS
from ..errors import ArgumentError, PartitionLabError, TargetSpecError
from .graph import _span_name, is_tensor_constant

#: How each preparation step runs in Relax. ToMixedPrecision keeps fp32 accumulation (its
#: default): convolutions and matmuls read float16 operands, which is what the rules check.
RELAX_PASSES: dict[str, Callable[[], tvm.transform.Pass]] = {
    # HWIO: the kernel layout Relay's ConvertLayout picks for NHWC ("default"), which the
    # tensorcore rules ask for.
    "convert_layout:NHWC": lambda: relax.transform.ConvertLayout(
        {"relax.nn.conv2d": ["NHWC", "HWIO"]}),
    "mixed_precision:float16": lambda: relax.transform.ToMixedPrecision(),
}


#: ``TMixedPrecisionPolicy`` values (``relax/transform/infer_amp_utils.h``).
_FOLLOW = 1
#: Ops TVM 0.27 registers no mixed-precision policy for, with the one Relay's
#: ``ToMixedPrecision`` gives them. Without one, ToMixedPrecision treats the op as "never" and
#: tries to cast every argument, which fails on ``relax.clip``'s bounds (PrimValues, "Expected
#: TensorType"): MobileNet's ReLU6 could not be prepared for ``tensorcore``.
_MISSING_POLICIES = {"relax.clip": _FOLLOW}


#: Ops TVM 0.27 registers no layout inference for, with an op whose inference fits them:
#: without one, ConvertLayout keeps the op in NCHW and transposes around it, where Relay's
#: follows the layout (``relax.clip``: MobileNet's ReLU6 and hard-swish, two transposes each).
_MISSING_LAYOUTS = {"relax.clip": "relax.nn.relu"}  # elementwise on its one tensor


def _register_missing_policies() -> None:
    for name, policy in _MISSING_POLICIES.items():
        op = tvm.ir.Op.get(name)
        if op.get_attr("TMixedPrecisionPolicy") is None:  # a TVM that has one keeps its own
            tvm.ir.register_op_attr(name, "TMixedPrecisionPolicy", policy)


def _register_missing_layouts() -> None:
    for name, like in _MISSING_LAYOUTS.items():
        op = tvm.ir.Op.get(name)
        if op.get_attr("FRelaxInferLayout") is None:  # a TVM that has one keeps its own
            tvm.ir.register_op_attr(name, "FRelaxInferLayout",
                                    tvm.ir.Op.get(like).get_attr("FRelaxInferLayout"))


def bind_params(mod: tvm.IRModule, params: Mapping[str, Any] | None = None) -> tvm.IRModule:
    """``mod`` with its weights as constants: ``params`` by name, and the values a frontend
    kept in ``main``'s ``params`` attribute (``from_onnx(keep_params_in_input=True)``)."""
    if params is not None and not isinstance(params, Mapping):
        raise ArgumentError(f"params must map parameter names to arrays (as load_model returns "
                            f"them), not {type(params).__name__}")
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
            raise ArgumentError(f"params {', '.join(map(repr, unknown[:5]))} are not "
                                f"parameters of main ({', '.join(sorted(known)[:8])}); check "
                                "the names, or pass the params load_model returned with this "
                                "module")
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
    if "mixed_precision:float16" in steps:
        _register_missing_policies()
    if "convert_layout:NHWC" in steps:
        _register_missing_layouts()
    passes = [relax.transform.Normalize(), relax.transform.FoldConstant(), _FoldLeftovers(),
              relax.transform.FoldConstant()]
    for step in steps:
        passes += [RELAX_PASSES[step](), relax.transform.FoldConstant()]
    with tvm.transform.PassContext(opt_level=3):
        try:
            for one in passes:
                mod = names_kept(mod, one(mod))
            return mod
        except (RuntimeError, ValueError, TypeError) as exc:  # TVM errors are RuntimeErrors
            first = (str(exc).strip().splitlines() or [""])[-1]
            raise PartitionLabError(f"preparing the Relax module ({', '.join(steps) or 'folding'})"
                                    f" failed in TVM: {first}") from exc


def _running(function: Any) -> Callable[..., np.ndarray | None]:
    def fold(call: Any, data: np.ndarray) -> np.ndarray | None:
        if call.attrs.exclusive is not None and bool(call.attrs.exclusive):
            return None
        dtype = str(call.ty.dtype)
        axis = call.attrs.axis
        if axis is None:
            data, axis = data.reshape(-1), 0
        return function.accumulate(data.astype(dtype), axis=int(axis), dtype=dtype)
    return fold


#: Ops on constants that Relax's FoldConstant leaves (TVM 0.27 has no legalization for them),
#: folded in numpy as Relay's preparation folds them (``relay/passes/fold.py``), so both routes
#: judge the same ops: DETR's position embedding is ``cumsum`` of its constant pixel mask.
_LEFTOVER_FOLDERS: dict[str, Callable[..., np.ndarray | None]] = {
    "relax.cumsum": _running(np.add),
    "relax.cumprod": _running(np.multiply),
}


def _FoldLeftovers() -> Callable[[tvm.IRModule], tvm.IRModule]:  # noqa: N802 - a pass
    """A pass-like callable: ``main``'s calls of :data:`_LEFTOVER_FOLDERS` on constants
    replaced by their values (FoldConstant then folds what reads them)."""
    def run(mod: tvm.IRModule) -> tvm.IRModule:
        func = mod["main"]
        blocks, changed = [], False
        for block in func.body.blocks:
            bindings = []
            for binding in block.bindings:
                value = getattr(binding, "value", None)
                folder = (_LEFTOVER_FOLDERS.get(str(value.op.name))
                          if isinstance(value, tvm.ir.Call) and isinstance(value.op, tvm.ir.Op)
                          else None)
                if folder is not None and value.args and all(
                        is_tensor_constant(a) for a in value.args):
                    folded = folder(value, *[a.value.numpy() for a in value.args])
                    if folded is not None and folded.shape == tuple(
                            int(d) for d in value.ty.shape):
                        binding = relax.VarBinding(binding.var, relax.const(folded),
                                                   binding.span)
                        changed = True
                bindings.append(binding)
            blocks.append(type(block)(bindings, block.span))
        if not changed:
            return mod
        body = relax.SeqExpr(blocks, func.body.body, func.body.span)
        new = relax.Function(func.params, body, func.ret_ty, func.is_pure, func.attrs, func.span)
        mod = mod.clone() if hasattr(mod, "clone") else tvm.IRModule(dict(mod.functions.items()),
                                                                      attrs=mod.attrs)
        mod["main"] = new
        return relax.transform.Normalize()(mod)
    return run


def names_kept(before: tvm.IRModule, after: tvm.IRModule) -> tvm.IRModule:
    """``after`` (``before`` through one pass) with the source names put back on the calls the
    pass rebuilt without their span (:func:`~partition_lab.core.names.carried_names`)."""
    calls = [(place, op, name) for place, (op, name) in _calls(after)]
    found = carried_names([call for _, call in _calls(before)],
                          [(op, name) for _, op, name in calls])
    fixes = {calls[index][0]: name for index, name in found.items()}
    return _with_names(after, fixes) if fixes else after


def _calls(mod: tvm.IRModule) -> list[tuple[tuple[int, int], tuple[str, str | None]]]:
    """``((block, binding), (relax op, source name))`` of every op call in ``main``."""
    return [((b, i), (str(binding.value.op.name), _span_name(binding.value)))
            for b, block in enumerate(mod["main"].body.blocks)
            for i, binding in enumerate(block.bindings)
            if isinstance(binding.value, tvm.ir.Call) and isinstance(binding.value.op, tvm.ir.Op)]


def _with_names(mod: tvm.IRModule, names: Mapping[tuple[int, int], str]) -> tvm.IRModule:
    """``mod`` with ``main``'s call at (block, binding) given the source name ``names`` holds."""
    func = mod["main"]
    blocks = []
    for b, block in enumerate(func.body.blocks):
        bindings = []
        for i, binding in enumerate(block.bindings):
            name = names.get((b, i))
            if name is not None:
                value = binding.value
                span = tvm.ir.Span(tvm.ir.SourceName(name), 0, 0, 0, 0)
                call = relax.Call(value.op, value.args, value.attrs, value.ty_args, span)
                relax.expr._update_type(call, value.ty)
                binding = relax.VarBinding(binding.var, call, binding.span)
            bindings.append(binding)
        blocks.append(type(block)(bindings, block.span))
    body = relax.SeqExpr(blocks, func.body.body, func.body.span)
    relax.expr._update_type(body, func.body.ty)
    named = relax.Function(func.params, body, func.ret_ty, func.is_pure, func.attrs, func.span)
    mod = mod.clone() if hasattr(mod, "clone") else tvm.IRModule(dict(mod.functions.items()),
                                                                  attrs=mod.attrs)
    mod["main"] = named
    return mod


# ---------------------------------------------------------------------------- numeric hazards
#: float16's largest finite value: a weight past it becomes inf when its cast folds.
FLOAT16_MAX = float(np.finfo(np.float16).max)


#: What a Relax user can do about an overflowed weight (keep_fp32_on_overflow is Relay's).
RELAX_REMEDY = ("scale the weight into float16's range, or partition with precision='fp32' "
                "(keep_fp32_on_overflow is implemented on Relay only)")


def large_constants(mod: tvm.IRModule) -> list[tuple[str, str | None, float]]:
    """``(relax op, source name, largest magnitude)`` of every call in ``main`` with a float
    constant operand whose finite values go past float16's range, in binding order (what a
    float16 step would overflow; taken before the steps, which fold the casts away)."""
    found = []
    for call in _op_calls(mod):
        biggest = 0.0
        for arg in call.args:
            if is_tensor_constant(arg) and str(arg.value.dtype).startswith("float"):
                data = np.abs(arg.value.numpy().astype("float64"))
                big = data[np.isfinite(data) & (data > FLOAT16_MAX)]
                biggest = max(biggest, float(big.max())) if big.size else biggest
        if biggest:
            found.append((str(call.op.name), _span_name(call), biggest))
    return found


def overflow_hazards(rg: Any, large: Sequence[tuple[str, str | None, float]]
                     ) -> list[NumericHazard]:
    """One :class:`NumericHazard` per node of the prepared graph ``rg`` (a ``RelaxGraph``) that
    reads a float16 constant holding inf where the module before the steps had a finite value
    past float16 (``large``: :func:`large_constants`, matched by source name, else by op in
    order); an inf the model had itself is no hazard. The node and device are filled in later
    (:func:`partition_lab.pipeline.options.placed_hazards`)."""
    left = list(large)
    hazards = []
    for node in rg.graph:
        call = rg.bindings[node.id].value
        if not any(_holds_float16_inf(arg) for arg in call.args):
            continue
        relax_op = str(call.op.name)
        match = next((item for item in left if node.source_name and item[1] == node.source_name),
                     None) or next((item for item in left if item[0] == relax_op), None)
        if match is None:
            continue
        left.remove(match)
        hazards.append(NumericHazard(node.op, node.source_name or "", match[2], "float16",
                                     remedy=RELAX_REMEDY))
    return hazards


def _holds_float16_inf(arg: Any) -> bool:
    return (is_tensor_constant(arg) and str(arg.value.dtype) == "float16"
            and bool(np.isinf(arg.value.numpy()).any()))


def _op_calls(mod: tvm.IRModule) -> Iterator[Any]:
    for block in mod["main"].body.blocks:
        for binding in block.bindings:
            value = binding.value
            if isinstance(value, tvm.ir.Call) and isinstance(value.op, tvm.ir.Op):
                yield value
