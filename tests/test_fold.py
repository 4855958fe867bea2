"""fold_weight_transforms: weight casts and layout transforms become constants, nothing else changes."""

from __future__ import annotations

import numpy as np
import tvm
from tvm import relay

from partition_lab.relay.passes.fold import _FOLDERS, fold_weight_transforms
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
                and expr.op.name in _FOLDERS and isinstance(expr.args[0], relay.Constant)):
            found.append(expr.op.name)

    relay.analysis.post_order_visit(mod["main"].body, visit)
    return found


def test_folding_removes_weight_transforms_and_keeps_outputs() -> None:
    mod = conv_bn_module()
    with tvm.transform.PassContext(opt_level=3):
        prepared = tvm.transform.Sequential(
            prepare_passes(["convert_layout:NHWC", "mixed_precision:float16"]))(mod)
    assert transforms_on_constants(prepared)  # ConvertLayout/ToMixedPrecision wrapped the weights
    folded = fold_weight_transforms(prepared)
    assert transforms_on_constants(folded) == []
    inputs = {"x": np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype("float32")}
    for got, want in zip(run_module(folded, inputs), run_module(prepared, inputs), strict=True):
        np.testing.assert_array_equal(got, want)  # the same arithmetic, only done ahead of time


def test_nothing_to_fold_returns_the_module_itself() -> None:
    mod = conv_bn_module()
    assert fold_weight_transforms(mod) is mod
