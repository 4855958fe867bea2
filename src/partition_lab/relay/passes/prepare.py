"""Relay preparation steps a target asks for before its support is checked.

Targets name the steps (``TargetSpec.prepare_steps()``, names from ``core.platform.PREPARE_STEPS``);
this module runs them. Each step keeps the source-name spans, so exclusions by node name still
work after it: TVM's ConvertLayout rebuilds the calls it converts (a BatchNorm, a split, a bias
add it turns into ``add``) without their spans, and :func:`names_kept` puts them back. Before
any step, whatever the target, einsums that are batched matrix products become
``nn.batch_matmul`` (:mod:`.einsum`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import tvm
from tvm import relay

from ...core.hazards import NumericHazard
from ...core.names import carried_names
from ...core.platform import PREPARE_STEPS
from ...errors import TargetSpecError
from ..frontends._spans import calls_in_order, make_span, span_name
from .einsum import batch_matmul_of
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


def prepare(mod: tvm.IRModule, steps: Sequence[str], hazards: list[NumericHazard] | None = None,
            keep_fp32: bool = False) -> tvm.IRModule:
    """Run the named preparation steps on ``mod`` (opt_level 3, as relay.build would), then fold
    calls on constants (:func:`~.fold.fold_constant_calls`), with or without steps; einsums that
    are batched matrix products become ``nn.batch_matmul`` first (:func:`einsums_as_batch_matmul`).

    Ops left using a constant that overflowed its new dtype (a weight cast to float16) are
    appended to ``hazards``; with ``keep_fp32`` they compute in float32."""
    # Data built from constants (masks) folds away before the steps (so ToMixedPrecision does
    # not cast it) and the weight casts and layout transforms the steps add fold after them, as
    # relay.build's FoldConstant would fold both.
    found: list[NumericHazard] = []
    mod = einsums_as_batch_matmul(relay.transform.InferType()(mod))
    mod = fold_constant_calls(mod, found, keep_fp32)
    passes = prepare_passes(steps)
    if passes:
        names = _named_large_constants(mod, steps)
        with tvm.transform.PassContext(opt_level=3):
            # One Sequential: ConvertLayout run on its own leaves a bias add in NCHW.
            mod = names_kept(mod, tvm.transform.Sequential(passes)(mod))
        mod = fold_constant_calls(mod, found, keep_fp32, names)
    if hazards is not None:
        hazards.extend(found)
    return mod


def _named_large_constants(mod: tvm.IRModule, steps: Sequence[str]) -> dict[tuple[str, float],
                                                                            str]:
    """``{(op, largest magnitude): source name}`` of the calls with a constant operand past the
    float16 range, where a step converts to float16: ConvertLayout rebuilds some calls without
    their span (nn.batch_norm), so the op of a hazard found after the steps gets its name back
    from this."""
    if not any(step.endswith(":float16") for step in steps):
        return {}
    limit = float(np.finfo(np.float16).max)
    names: dict[tuple[str, float], str] = {}
    for call in calls_in_order(mod["main"].body):
        name = span_name(call)
        if name is None or not isinstance(call.op, tvm.ir.Op):
            continue
        for arg in call.args:
            if isinstance(arg, relay.Constant) and arg.data.dtype.startswith("float"):
                data = np.abs(arg.data.numpy())
                big = data[np.isfinite(data) & (data > limit)]
                if big.size:
                    names.setdefault((call.op.name, float(big.max())), name)
    return names


def names_kept(before: tvm.IRModule, after: tvm.IRModule) -> tvm.IRModule:
    """``after`` (``before`` through one pass) with the source names put back on the calls the
    pass rebuilt without their span (:func:`~partition_lab.core.names.carried_names`)."""
    calls = [c for c in calls_in_order(after["main"].body) if isinstance(c.op, tvm.ir.Op)]
    found = carried_names(
        [(c.op.name, span_name(c)) for c in calls_in_order(before["main"].body)
         if isinstance(c.op, tvm.ir.Op)],
        [(c.op.name, span_name(c)) for c in calls])
    if not found:
        return after
    names = {calls[index]: name for index, name in found.items()}

    def renamed(call: relay.Call, args: list[relay.Expr]) -> relay.Expr | None:
        name = names.get(call)
        return None if name is None else \
            relay.Call(call.op, args, call.attrs, call.type_args, make_span(name))

    return _with_body(after, _rebuilt_calls(after["main"].body, renamed))


def einsums_as_batch_matmul(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` (type-checked) with every einsum that is a batched matrix product rewritten as
    ``nn.batch_matmul`` (:func:`~.einsum.batch_matmul_of`), each new call keeping the einsum's
    source name; ``mod`` itself if none is."""
    return _with_body(mod, _rebuilt_calls(mod["main"].body, batch_matmul_of))


def _with_body(mod: tvm.IRModule, body: relay.Expr | None) -> tvm.IRModule:
    """``mod`` with ``main``'s body replaced (type-checked again); ``mod`` for None or the same."""
    func = mod["main"]
    if body is None or body.same_as(func.body):
        return mod
    rebuilt = relay.Function(func.params, body, func.ret_type, func.type_params, func.attrs)
    fixed = tvm.IRModule(dict(mod.functions.items()), dict(mod.type_definitions.items()),
                         attrs=mod.attrs)
    fixed["main"] = rebuilt
    return relay.transform.InferType()(fixed)


def _rebuilt_calls(body: relay.Expr,
                   rewrite: Callable[[relay.Call, list[relay.Expr]], relay.Expr | None]
                   ) -> relay.Expr | None:
    """``body`` with each call that ``rewrite(call, rebuilt args)`` replaces (it returns None
    to keep the call) replaced, and the expressions above them rebuilt on them; None for a body
    of other than calls, tuples, variables and constants (control flow, local functions), left
    as it is.

    Bottom-up over TVM's post-order visit, without recursion: a chain of thousands of calls is
    as deep as Python's stack allows (Relay's ExprMutator recurses per call)."""
    order: list[relay.Expr] = []
    relay.analysis.post_order_visit(body, order.append)
    memo: dict[relay.Expr, relay.Expr] = {}
    for expr in order:
        if isinstance(expr, relay.Call):
            args = [memo.get(a, a) for a in expr.args]
            new = rewrite(expr, args)
            if new is not None:
                memo[expr] = new
            elif any(not n.same_as(a) for n, a in zip(args, expr.args, strict=True)):
                memo[expr] = relay.Call(expr.op, args, expr.attrs, expr.type_args, expr.span)
        elif isinstance(expr, relay.Tuple):
            fields = [memo.get(f, f) for f in expr.fields]
            if any(not n.same_as(f) for n, f in zip(fields, expr.fields, strict=True)):
                memo[expr] = relay.Tuple(fields, expr.span)
        elif isinstance(expr, relay.TupleGetItem):
            value = memo.get(expr.tuple_value, expr.tuple_value)
            if not value.same_as(expr.tuple_value):
                memo[expr] = relay.TupleGetItem(value, expr.index)
        elif not isinstance(expr, (relay.Var, relay.Constant, tvm.ir.Op)):
            return None
    return memo.get(body, body)
