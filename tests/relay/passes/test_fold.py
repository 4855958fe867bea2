"""fold_constant_calls: calls on constants (weight casts, layout transforms, masks) become
constants; nothing else changes."""

from __future__ import annotations

import numpy as np
import tvm
from tvm import relay

from partition_lab.relay.passes.fold import _FOLDERS, fold_constant_calls
from partition_lab.relay.passes.prepare import prepare_passes
from partition_lab.relay.runtime import run_module


def conv_bn_module() -> tvm.IRModule:
    """NCHW conv2d -> batch_norm (a tuple, read through TupleGetItem) -> relu, weights constant."""
    rng = np.random.default_rng(0)
    x = relay.var("x", shape=(1, 3, 8, 8))
    conv = relay.nn.conv2d(x, relay.const(rng.standard_normal((4, 3, 3, 3)).astype("float32")),
                           padding=(1, 1), channels=4, kernel_size=(3, 3))
    stats = [relay.const(v.astype("float32")) for v in
             (rng.uniform(0.5, 1.5, 4), rng.standard_normal(4), rng.standard_normal(4),
              rng.uniform(0.5, 1.5, 4))]
    bn = relay.nn.batch_norm(conv, *stats)[0]
    out = relay.Tuple([relay.nn.relu(bn), conv])
    return relay.transform.InferType()(tvm.IRModule.from_expr(relay.Function([x], out)))


def transforms_on_constants(mod: tvm.IRModule) -> list[str]:
    found: list[str] = []

    def visit(expr: relay.Expr) -> None:
        if (isinstance(expr, relay.Call) and isinstance(expr.op, tvm.ir.Op)
                and expr.op.name in _FOLDERS
                and all(isinstance(a, relay.Constant) for a in expr.args)):
            found.append(expr.op.name)

    relay.analysis.post_order_visit(mod["main"].body, visit)
    return found


def test_folding_removes_weight_transforms_and_keeps_outputs() -> None:
    mod = conv_bn_module()
    with tvm.transform.PassContext(opt_level=3):
        prepared = tvm.transform.Sequential(
            prepare_passes(["convert_layout:NHWC", "mixed_precision:float16"]))(mod)
    assert transforms_on_constants(prepared)  # ConvertLayout/ToMixedPrecision wrapped the weights
    folded = fold_constant_calls(prepared)
    assert transforms_on_constants(folded) == []
    inputs = {"x": np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype("float32")}
    for got, want in zip(run_module(folded, inputs), run_module(prepared, inputs), strict=True):
        np.testing.assert_array_equal(got, want)  # the same arithmetic, only done ahead of time


def test_nothing_to_fold_returns_the_module_itself() -> None:
    mod = conv_bn_module()
    assert fold_constant_calls(mod) is mod


def shifted_window_mask_module() -> tvm.IRModule:
    """x + mask, the mask built from constants the way Swin's export builds it: scatter_nd on
    zeros, strided_slice, reshape, not_equal, where."""
    x = relay.var("x", shape=(4, 4), dtype="float32")
    zeros = relay.const(np.zeros((8, 8), "float32"))
    indices = relay.const(np.array([[0, 2]], "int64"))
    updates = relay.const(np.full((2, 8), 2.0, "float32"))
    regions = relay.scatter_nd(zeros, indices, updates, mode="update")
    window = relay.reshape(relay.strided_slice(regions, [0, 0], [8, 8], [2, 2]), (4, 4))
    mask = relay.where(relay.not_equal(window, relay.const(0.0)), relay.const(-100.0),
                       relay.const(0.0))
    return relay.transform.InferType()(tvm.IRModule.from_expr(relay.Function([x], x + mask)))


def test_a_mask_built_from_constants_folds_to_one_constant() -> None:
    mod = shifted_window_mask_module()
    folded = fold_constant_calls(mod)
    calls: list[str] = []
    relay.analysis.post_order_visit(folded["main"].body, lambda e: calls.append(e.op.name)
                                    if isinstance(e, relay.Call) else None)
    assert calls == ["add"]  # x + the folded mask
    inputs = {"x": np.random.default_rng(2).standard_normal((4, 4)).astype("float32")}
    (got,), (want,) = run_module(folded, inputs), run_module(mod, inputs)
    np.testing.assert_array_equal(got, want)
    assert (got - inputs["x"]).min() == -100.0  # the scattered rows are masked


def test_integer_division_and_reversed_slices_are_left_to_tvm() -> None:
    x = relay.var("x", shape=(4,), dtype="int32")
    quotient = relay.divide(relay.const(np.array([7, -7, 5, 1], "int32")), relay.const(2))
    reversed_ = relay.strided_slice(relay.const(np.arange(4, dtype="int32")), [3], [-5], [-1])
    mod = relay.transform.InferType()(tvm.IRModule.from_expr(
        relay.Function([x], x + quotient + reversed_)))
    assert fold_constant_calls(mod) is mod
