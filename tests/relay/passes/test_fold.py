"""fold_constant_calls: calls on constants (weight casts, layout transforms, masks) become
constants; nothing else changes."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from tvm import relay

import partition_lab
from partition_lab.relay.passes.fold import _FOLDERS, fold_constant_calls
from partition_lab.relay.passes.prepare import prepare_passes
from partition_lab.relay.runtime import RegionExecutor, run_module


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


def op_names(mod: tvm.IRModule) -> list[str]:
    calls: list[str] = []
    relay.analysis.post_order_visit(mod["main"].body, lambda e: calls.append(e.op.name)
                                    if isinstance(e, relay.Call) else None)
    return calls


def test_integer_division_and_reversed_slices_are_folded_by_tvm_itself() -> None:
    """No numpy folder takes these (Relay's integer division truncates, a reversed slice clamps
    its own way): TVM evaluates them, so the constants are exactly what relay.build computes."""
    x = relay.var("x", shape=(4,), dtype="int32")
    quotient = relay.divide(relay.const(np.array([7, -7, 5, 1], "int32")), relay.const(2))
    reversed_ = relay.strided_slice(relay.const(np.arange(4, dtype="int32")), [3], [-5], [-1])
    mod = relay.transform.InferType()(tvm.IRModule.from_expr(
        relay.Function([x], x + quotient + reversed_)))
    folded = fold_constant_calls(mod)
    assert op_names(folded) == ["add", "add"]
    inputs = {"x": np.arange(4, dtype="int32")}
    np.testing.assert_array_equal(run_module(folded, inputs)[0], run_module(mod, inputs)[0])
    # x + (7, -7, 5, 1) / 2 truncated (3, -3, 2, 0) + (3, 2, 1, 0)
    np.testing.assert_array_equal(run_module(folded, inputs)[0], [6, 0, 5, 3])


def detr_mask_module() -> tvm.IRModule:
    """DETR's position embedding on its default all-ones pixel mask, as the exporter writes it:
    the mask (a weight) resized to the feature map, cast to bool, its batch taken, cumsum along
    height and width (normalised), and an attention mask built with logical_and; every call
    reads only constants, so nothing of it should be judged."""
    x = relay.var("x", shape=(1, 4, 4, 4), dtype="float32")
    ones = relay.const(np.ones((1, 1, 16, 16), "float32"))
    small = relay.image.resize2d(ones, (4, 4), method="nearest_neighbor",
                                 coordinate_transformation_mode="asymmetric",
                                 rounding_method="floor")
    mask = relay.take(relay.cast(small, "bool"), relay.const(0, "int64"), axis=0)
    rows = relay.cumsum(relay.cast(mask, "float32"), axis=1)
    cols = relay.cumsum(relay.cast(mask, "float32"), axis=2)
    pos = relay.expand_dims(rows / relay.strided_slice(rows, [-1], [4], axes=[1])
                            + cols / relay.const(4.0), 0)
    keep = relay.logical_and(relay.const(np.array([True, True, False, True]).reshape(1, 1, 4, 1)),
                             relay.expand_dims(mask, 0))
    out = relay.where(keep, x + pos, relay.const(-1.0))
    return relay.transform.InferType()(tvm.IRModule.from_expr(relay.Function([x], out)))


def zeroed_bias_module() -> tvm.IRModule:
    """A qkv projection whose bias has its k part zeroed (``bias.clone()``, then ``zero_()`` on
    a slice): ONNX Identity (Relay ``copy``) and ScatterND on the bias, a weight."""
    rng = np.random.default_rng(0)
    x = relay.var("x", shape=(8, 16), dtype="float32")
    weight = relay.const(rng.standard_normal((48, 16)).astype("float32"))
    bias = relay.copy(relay.const(rng.standard_normal(48).astype("float32")))
    zeroed = relay.scatter_nd(bias, relay.const(np.arange(16, 32).reshape(1, 16)),
                              relay.const(np.zeros(16, "float32")))
    out = relay.add(relay.nn.dense(x, weight), zeroed)
    return relay.transform.InferType()(tvm.IRModule.from_expr(relay.Function([x], out)))


@pytest.mark.parametrize(("build", "shape"), [(detr_mask_module, (1, 4, 4, 4)),
                                              (zeroed_bias_module, (8, 16))])
def test_data_built_from_constants_leaves_no_host_island(build, shape) -> None:
    mod = build()
    result = partition_lab.partition(mod, "neuron", strategy="greedy")
    result.plan.validate()
    assert result.plan.cpu_regions == [], result.plan.summary()
    assert not {"image.resize2d", "cumsum", "logical_and", "copy", "scatter_nd", "take"} & {
        node.op for node in result.graph}
    inputs = {"x": np.random.default_rng(1).standard_normal(shape).astype("float32")}
    got = RegionExecutor(result, opt_level=0).run(inputs)
    for g, e in zip(got, run_module(mod, inputs, opt_level=0), strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_running_sums_fold_to_what_tvm_computes(op, dtype) -> None:
    data = np.random.default_rng(2).uniform(0.5, 1.5, (3, 5, 7)).astype(dtype)
    x = relay.var("x", shape=(3, 5, 7), dtype=dtype)
    running = getattr(relay, op)(relay.const(data), axis=1, exclusive=False)
    mod = relay.transform.InferType()(tvm.IRModule.from_expr(relay.Function([x], x + running)))
    folded = fold_constant_calls(mod)
    assert op_names(folded) == ["add"]
    assert folded["main"].body.args[1].data.dtype == dtype
    inputs = {"x": np.zeros((3, 5, 7), dtype)}
    np.testing.assert_array_equal(run_module(folded, inputs)[0], run_module(mod, inputs)[0])
