"""The Relax adapter (apache-tvm >= 0.20): import, partition on every platform, numerics on llvm,
RunCodegen, bad input (the comparison with the Relay plans: test_routes.py). Run in .venv-relax
(make test-relax)."""

from __future__ import annotations

import json
import os
from functools import cache

import models
import numpy as np
import pytest
import tvm
import tvm_ffi
from relay_plans import PLATFORMS, devices_by_source
from tvm import relax

import partition_lab
from partition_lab.api import PartitionResult
from partition_lab.errors import SymbolicShapeError
from partition_lab.relax import op_map
from partition_lab.relax.runtime import run_llvm

os.environ.setdefault("TOPHUB_LOCATION", "NONE")


@cache
def load(name: str) -> tvm.IRModule:
    mod, params = partition_lab.load_model(models.MODELS[name]())
    assert params == {}
    return mod


@cache
def partitioned(name: str, platform: str, strategy: str = "greedy") -> PartitionResult:
    return partition_lab.partition(load(name), platform, strategy=strategy)


def test_builtin_platforms_are_the_ones_tested():
    assert sorted(PLATFORMS) == sorted(partition_lab.targets.available_targets())


@pytest.mark.parametrize("name", sorted(models.MODELS))
def test_every_op_is_mapped_or_host_only(name):
    result = partitioned(name, "neuron")
    unknown = {op for op in result.relax.relax_ops
               if not op_map.is_mapped(op) and op not in op_map.HOST_ONLY}
    assert not unknown, f"add these Relax ops to relax/op_map.py: {sorted(unknown)}"


@pytest.mark.parametrize("platform", PLATFORMS)
@pytest.mark.parametrize("name", sorted(models.MODELS))
def test_partitions_on_every_platform(name, platform):
    result = partitioned(name, platform)
    plan = result.plan
    plan.validate()
    nodes = json.loads(result.to_json())["nodes"]
    assert len(nodes) == len(result.graph)
    assert all(node["reason"] for node in nodes), "the plan JSON keeps every decision's reason"
    byoc = [r for r in plan.regions if result.plan.platform.device(r.device).outlined]
    codegen = [gv.name_hint for gv, f in result.mod.functions.items()
               if f.attrs is not None and "Codegen" in f.attrs.keys()]
    assert len(codegen) == len(byoc) == len(result.functions)
    relax.analysis.well_formed(result.mod)


@pytest.mark.parametrize("platform", ["neuron", "tensorcore", "neuron@2020"])
@pytest.mark.parametrize("name", ["convnet", "mlp", "resblock", "branches", "upsample"])
def test_partitioned_computes_what_the_prepared_module_does(name, platform):
    result = partitioned(name, platform)
    x = {p.name: np.random.default_rng(1).standard_normal(
        [int(d) for d in p.ty.shape.values]).astype("float32") for p in load(name)["main"].params}
    want = run_llvm(result.prepared_mod, x)
    got = run_llvm(result.mod, x)
    assert len(want) == len(got)
    for a, b in zip(want, got, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_run_codegen_consumes_the_partitioned_module():
    """A Python codegen registered as relax.ext.<name> receives our Codegen functions."""
    received = []

    def codegen(funcs, options, constant_names):
        modules = []
        for func in funcs:
            symbol = str(func.attrs["global_symbol"])
            received.append((symbol, _composites(func)))
            modules.append(tvm.get_global_func("runtime.CSourceModuleCreate")(
                f"// {symbol}\n", "c", [symbol], []))
        return modules

    tvm_ffi.register_global_func("relax.ext.pl_test", codegen, override=True)
    result = partition_lab.partition(load("convnet"), "neuron", compiler="pl_test")
    assert list(result.functions) == ["pl_test_region_0"]
    out = relax.transform.RunCodegen()(result.mod)
    assert [s for s, _ in received] == ["pl_test_region_0"]
    assert "pl_test.nn.conv2d" in received[0][1]
    assert len(out.attrs["external_mods"]) == 1
    text = out.script(show_meta=False)
    assert 'R.call_dps_packed("pl_test_region_0"' in text
    assert not [gv for gv, f in out.functions.items()
                if f.attrs is not None and "Codegen" in f.attrs.keys()]


def _composites(func) -> list[str]:
    found: list[str] = []

    def visit(expr):
        if isinstance(expr, relax.Function) and expr.attrs is not None:
            found.append(str(expr.attrs["Composite"]))

    relax.analysis.post_order_visit(func.body, visit)
    return found


def test_pattern_units_become_composites():
    result = partitioned("attention", "neuron")
    names = [unit.name for unit in result.plan.support.units]
    text = result.mod.script(show_meta=False)
    for name in names:
        assert f'"Composite": "neuron.{name}"' in text


def test_exclusion_by_onnx_node_name():
    result = partition_lab.partition(load("convnet"), "neuron", excl_node_names=["conv2"])
    devices = devices_by_source(result)
    assert devices["conv2"] == ["cpu"] and devices["conv1"] == ["neuron"]
    assert "excluded by name 'conv2'" in result.to_json()


def test_matmul_is_mapped_by_rank():
    ops = {node.op for node in partitioned("attention", "neuron").graph}
    assert {"nn.dense", "nn.batch_matmul", "nn.layer_norm", "transpose"} <= ops
    assert "nn.global_avg_pool2d" in {n.op for n in partitioned("convnet", "neuron").graph}


def test_symbolic_shape_is_one_line_naming_the_dimension():
    mod, _ = partition_lab.load_model(models.symbolic_batch())
    with pytest.raises(SymbolicShapeError) as info:
        partition_lab.partition(mod, "neuron")
    message = str(info.value)
    assert "\n" not in message and "'N'" in message and "BindSymbolicVars" in message
    bound = relax.transform.BindSymbolicVars({"N": 16})(mod)
    assert partition_lab.partition(bound, "neuron").plan.accelerator_regions


def test_symbolic_shape_bound_when_loading():
    mod, _ = partition_lab.load_model(models.symbolic_batch(), {"x": (16, 16, 16, 16)})
    assert partition_lab.partition(mod, "tensorcore").plan.accelerator_regions


def test_load_model_reads_onnx_files(tmp_path):
    import onnx

    path = tmp_path / "mlp.onnx"
    onnx.save(models.mlp(), str(path))
    mod, _ = partition_lab.load_model(str(path))
    result = partition_lab.analyze(mod, "neuron")
    assert result.graph.name == "mlp" and len(result.graph) == 5


@pytest.mark.parametrize("name", ["relu6", "resize_sizes", "shape_reshape"])
def test_importer_repairs_compute_what_onnxruntime_does(name):
    """The loader's repairs of TVM 0.27's ONNX import (Clip as one relax.clip, Resize with an
    empty scales tensor, shape computations folded) keep the model's function."""
    import onnxruntime

    model = models.MODELS[name]()
    x = {i.name: np.random.default_rng(2).standard_normal(
        [d.dim_value for d in i.type.tensor_type.shape.dim]).astype("float32")
        for i in model.graph.input}
    want = onnxruntime.InferenceSession(model.SerializeToString()).run(None, x)
    mod, _ = partition_lab.load_model(model)  # this model: each build draws new weights
    got = run_llvm(mod, x)
    for a, b in zip(want, got, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


def test_clip_is_one_relax_clip_the_rules_can_place():
    """TVM's converter writes Clip as two call_tir; as relax.clip it is Relay's clip, on the
    accelerator, and ToMixedPrecision (tensorcore) passes it."""
    assert "call_tir" not in load("relu6").script(show_meta=False)
    for platform in ("neuron", "tensorcore"):
        result = partitioned("relu6", platform)
        (clip,) = [n for n in result.graph if n.op == "clip"]
        assert clip.source_name == "relu6" and clip.attrs["a_max"] == 6.0
        assert result.plan.decisions[clip.id].device != "cpu"


def test_shape_computations_are_folded():
    ops = [n.op for n in partitioned("shape_reshape", "neuron").graph]
    assert ops == ["reshape", "nn.dense", "reshape"]


def test_call_tir_stays_on_the_host_and_its_function_goes_along():
    """A call_tir (an importer's emit_te) partitions as a host op; the PrimFunc it calls is kept
    in the partitioned module, which computes what the prepared one does."""
    from tvm import topi

    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((16, 16, 8, 8), "float32"))
    weight = relax.const(np.random.default_rng(3).standard_normal((16, 16, 3, 3)).astype("float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            conv = bb.emit(relax.op.nn.conv2d(x, weight))
            floor = bb.emit_te(topi.maximum, conv, 0.5)
            out = bb.emit_output(relax.op.nn.conv2d(floor, weight))
        bb.emit_func_output(out)
    result = partition_lab.partition(bb.get(), "neuron", strategy="greedy")
    devices = [result.plan.decisions[n.id].device for n in result.graph]
    assert [n.op for n in result.graph] == ["nn.conv2d", "relax.call_tir", "nn.conv2d"]
    assert devices == ["neuron", "cpu", "neuron"]
    data = {"x": np.random.default_rng(4).standard_normal((16, 16, 8, 8)).astype("float32")}
    np.testing.assert_allclose(run_llvm(result.mod, data)[0],
                               run_llvm(result.prepared_mod, data)[0], rtol=1e-5, atol=1e-4)


def test_running_sums_of_constants_fold_as_on_relay() -> None:
    """Relax's FoldConstant leaves cumsum on a constant (no legalization in TVM 0.27); the
    preparation folds it, as Relay's does, so a mask's position embedding is no host island."""
    from partition_lab.relax.prepare import prepare

    x = relax.Var("x", relax.TensorType((1, 4, 4), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            mask = relax.const(np.ones((1, 4, 4), "float32"))
            rows = bb.emit(relax.op.cumsum(mask, axis=1))
            out = bb.emit_output(bb.emit(relax.op.add(x, rows)))
        bb.emit_func_output(out)
    prepared = prepare(bb.get(), [])
    ops = [str(b.value.op.name) for block in prepared["main"].body.blocks for b in block.bindings
           if isinstance(b.value, relax.Call) and isinstance(b.value.op, tvm.ir.Op)]
    assert ops == ["relax.add"]
    const = next(b.value.args[1] for block in prepared["main"].body.blocks
                 for b in block.bindings if isinstance(b.value, relax.Call))
    np.testing.assert_array_equal(const.value.numpy()[0, :, 0], [1, 2, 3, 4])
