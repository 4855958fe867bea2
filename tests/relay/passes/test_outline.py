"""Relay outputs of N-device plans: Compiler functions per BYOC device, host islands marked for
TVM's heterogeneous execution on GPU platforms, and the llvm stand-in running every region of a
three-device plan to the unpartitioned module's outputs."""

from __future__ import annotations

import collections

import numpy as np
import pytest
import tvm
from tvm import relay

import partition_lab
from partition_lab import zoo
from partition_lab.api import analyze, bind_params
from partition_lab.cost_models import get_cost_model
from partition_lab.relay.passes import (
    AnnotateSupport,
    FormRegions,
    OutlineRegions,
    PrepareForTarget,
)
from partition_lab.relay.passes.outline import outline, outline_regions
from partition_lab.relay.runtime import RegionExecutor, run_module
from partition_lab.targets import get_platform
from repo_paths import REPO_ROOT

EXAMPLE = REPO_ROOT / "examples" / "platforms" / "npu_dsp_cpu.toml"
# float32 plans against the unpartitioned float32 module (as tests/relay/test_runtime.py).
RTOL, ATOL = 1e-4, 1e-4
# float16 plans (tensorcore): against the unpartitioned float16 module built by TVM.
FP16_RTOL, FP16_ATOL = 2e-2, 2e-2

ON_DEVICE = tvm.ir.Op.get("on_device")
DEVICE_COPY = tvm.ir.Op.get("device_copy")
CPU_TYPE, CUDA_TYPE = tvm.cpu(0).device_type, tvm.cuda(0).device_type


def _compilers(mod: tvm.IRModule) -> dict[str, list[str]]:
    """Global symbols of the Compiler functions, by Compiler."""
    found: dict[str, list[str]] = collections.defaultdict(list)
    for gvar in mod.get_global_vars():
        attrs = mod[gvar].attrs
        if attrs is not None and "Compiler" in attrs.keys():
            assert str(attrs["global_symbol"]) == gvar.name_hint
            assert int(attrs["Primitive"]) == 1 and int(attrs["Inline"]) == 1
            found[str(attrs["Compiler"])].append(gvar.name_hint)
    return {k: sorted(v) for k, v in found.items()}


def _calls(expr: relay.Expr) -> list[relay.Call]:
    calls: list[relay.Call] = []
    relay.analysis.post_order_visit(expr, lambda e: calls.append(e) if isinstance(e, relay.Call)
                                    else None)
    return calls


def _op_name(call: relay.Call) -> str:
    return call.op.name_hint if isinstance(call.op, tvm.ir.GlobalVar) else call.op.name


def _expected_copies(plan) -> collections.Counter:
    """(src side, dst side) per tensor the plan copies between the host and the GPU: produced by
    a node on one side and read on the other, once per direction (graph inputs and outputs are
    the executor's to move)."""
    host = [d.device == "cpu" for d in plan.decisions]
    copies: collections.Counter = collections.Counter()
    for tensor in plan.graph.tensors:
        if tensor.producer is None:
            continue
        src = host[tensor.producer]
        if any(host[c] != src for c in tensor.consumers):
            copies[(CPU_TYPE, CUDA_TYPE) if src else (CUDA_TYPE, CPU_TYPE)] += 1
    return copies


def _planned_placement(mod: tvm.IRModule) -> tuple[collections.Counter, collections.Counter]:
    """Where PlanDevices' output runs each call of ``main``: (op or function, device type), and
    its copies (src, dst). The device of an expression follows from the function's result
    device down through on_device (a constrained body), device_copy (its source) and the
    parameter devices of called functions."""
    placed: collections.Counter = collections.Counter()
    copies: collections.Counter = collections.Counter()
    seen: set = set()

    def visit(expr: relay.Expr, device: int) -> None:
        key = (expr.handle.value, device)
        if key in seen:
            return
        seen.add(key)
        if isinstance(expr, relay.Tuple):
            for field in expr.fields:
                visit(field, device)
        elif isinstance(expr, relay.TupleGetItem):
            visit(expr.tuple_value, device)
        elif isinstance(expr, relay.Call) and expr.op == ON_DEVICE:
            attrs = expr.attrs
            visit(expr.args[0], attrs.virtual_device.device_type_int if attrs.constrain_body
                  else device)
        elif isinstance(expr, relay.Call) and expr.op == DEVICE_COPY:
            src = expr.attrs.src_virtual_device.device_type_int
            assert expr.attrs.dst_virtual_device.device_type_int == device
            copies[(src, device)] += 1
            visit(expr.args[0], src)
        elif isinstance(expr, relay.Call) and isinstance(expr.op, tvm.ir.GlobalVar):
            placed[(expr.op.name_hint, device)] += 1
            for arg, param in zip(expr.args, mod[expr.op].params, strict=True):
                param_device = param.virtual_device_
                visit(arg, param_device.device_type_int
                      if param_device is not None and param_device.device_type_int > 0 else device)
        elif isinstance(expr, relay.Call):
            placed[(expr.op.name, device)] += 1
            for arg in expr.args:
                visit(arg, device)

    main = mod["main"]
    visit(main.body, main.virtual_device_.device_type_int)
    return placed, copies


def _assert_outputs_equal(got, expected, rtol: float, atol: float, what: str) -> None:
    assert len(got) == len(expected), what
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g.astype("float32"), e.astype("float32"), rtol=rtol, atol=atol,
                                   err_msg=what)


# ----------------------------------------------------------------------------- the example file
def test_example_platform_file_has_an_npu_a_dsp_and_the_host() -> None:
    platform = get_platform(EXAMPLE)
    assert platform.name == "npu_dsp_cpu"
    assert platform.names == ["npu", "dsp", "cpu"]
    npu, dsp, cpu = platform.devices
    assert (npu.role, npu.compiler, npu.memory) == ("byoc", "npu", "npu")
    assert (dsp.role, dsp.compiler, dsp.memory) == ("byoc", "dsp", "npu")
    assert cpu.is_host and platform.main is cpu
    assert npu.target.anchors == {"nn.conv2d", "nn.dense"} and not dsp.target.anchors
    model = get_cost_model(platform)
    # The DSP shares the NPU's memory: no copy between them, a priced copy to the host.
    assert model.transfer_time(1e6, "npu", "dsp") == 0
    assert model.transfer_time(1e6, "npu", "cpu") > 0


def _soc_cost_model(platform):
    """The example's profiles with this machine's 2-core CPU as the host (an SoC's host is a
    small CPU; with the default 32-core Xeon host the cost strategy keeps the small test models
    wholly on the host, as it should there)."""
    return get_cost_model(platform, cpu_profile="local_cpu")


@pytest.mark.parametrize("strategy", ["greedy", "cost"])
def test_three_device_platform_partitions_and_runs_as_the_original(strategy: str) -> None:
    model = "resnet50_v1"
    mod, params = zoo.load(model, small=True)
    platform = get_platform(EXAMPLE)
    result = partition_lab.partition(mod, EXAMPLE, params=params, strategy=strategy,
                                     cost_model=_soc_cost_model(platform), name=model)
    plan = result.plan
    plan.validate()
    counts = plan.ops_per_device()
    assert counts["npu"] > 0 and counts["dsp"] > 0, counts
    # Each BYOC device's regions are functions of its own Compiler, numbered per Compiler.
    compilers = _compilers(result.mod)
    for device in ("npu", "dsp"):
        n = len(plan.regions_on(device))
        assert compilers.get(device) == sorted(f"tvmgen_default_{device}_main_{i}" for i in range(n))
    assert set(compilers) == {"npu", "dsp"}
    # Host islands stay inline in main, unannotated: the host is this platform's main target.
    ops_in_main = [_op_name(c) for c in _calls(result.mod["main"].body)]
    assert ON_DEVICE.name not in ops_in_main and DEVICE_COPY.name not in ops_in_main
    host_ops = sorted(result.graph[n].op for r in plan.regions_on("cpu") for n in r.nodes)
    assert sorted(op for op in ops_in_main if not op.startswith("tvmgen_")) == host_ops
    assert isinstance(result.mod["main"].checked_type, relay.FuncType)

    inputs = zoo.sample_inputs(model, small=True)
    executor = RegionExecutor(result, opt_level=0)
    got = executor.run(inputs)
    by_device = collections.Counter(r.device for r in executor.regions.values())
    assert by_device == collections.Counter(r.device for r in plan.regions)
    assert set(executor.times_per_device()) == {"npu", "dsp", "cpu"}
    expected = run_module(result.prepared_mod, inputs, opt_level=0)
    _assert_outputs_equal(got, expected, RTOL, ATOL, f"{model} {strategy}")


def test_passes_pipeline_takes_a_platform_file() -> None:
    mod, params = zoo.load("fcn_resnet101_ade", small=True)
    bound = bind_params(mod, params)
    seq = tvm.transform.Sequential([
        PrepareForTarget(get_platform(EXAMPLE)), AnnotateSupport(get_platform(EXAMPLE)),
        FormRegions("greedy"),
        OutlineRegions(),
    ])
    with tvm.transform.PassContext(opt_level=3):
        partitioned = seq(bound)
    direct = partition_lab.partition(mod, EXAMPLE, params=params)
    assert set(_compilers(partitioned)) == {"npu", "dsp"}
    assert tvm.ir.structural_equal(partitioned, direct.mod, map_free_vars=True)


# ----------------------------------------------------------------------------- tensorcore
@pytest.fixture(scope="module")
def tensorcore_result():
    """resnet50_v1_b32 (small: batch 8) on tensorcore with two host islands forced by
    exclusion (the stem's max-pool and a relu between Tensor Core regions): all three devices."""
    mod, params = zoo.load("resnet50_v1_b32", small=True)
    analysis = analyze(mod, "tensorcore", params=params)
    graph = analysis.graph
    pool = next(n.source_name for n in graph if n.op == "nn.max_pool2d")
    relu = [n.source_name for n in graph if n.op == "nn.relu"][3]
    result = partition_lab.partition(mod, "tensorcore", params=params,
                                     excl_node_names=[pool, relu], name="resnet50_v1_b32")
    counts = result.plan.ops_per_device()
    assert counts["tensorcore"] > 0 and counts["cuda"] > 0 and counts["cpu"] == 2, counts
    return result


def test_tensorcore_host_islands_are_marked_on_the_cpu(tensorcore_result) -> None:
    result = tensorcore_result
    plan = result.plan
    assert _compilers(result.mod) == {"tensorcore": [
        f"tvmgen_default_tensorcore_main_{i}" for i in range(len(plan.regions_on("tensorcore")))]}
    calls = _calls(result.mod["main"].body)
    marks = [c for c in calls if c.op == ON_DEVICE]
    # on_device with the CPU exactly around the host-island calls, nothing else.
    host_ops = sorted(result.graph[n].op for r in plan.regions_on("cpu") for n in r.nodes)
    assert sorted(_op_name(m.args[0]) for m in marks) == host_ops
    for mark in marks:
        assert mark.attrs.virtual_device.device_type_int == CPU_TYPE
        assert mark.attrs.constrain_body and not mark.attrs.constrain_result
    # One explicit copy per tensor and direction crossing between the host and the GPU.
    copies = collections.Counter(
        (c.attrs.src_virtual_device.device_type_int, c.attrs.dst_virtual_device.device_type_int)
        for c in calls if c.op == DEVICE_COPY)
    assert copies == _expected_copies(plan)
    assert copies[(CUDA_TYPE, CPU_TYPE)] > 0 and copies[(CPU_TYPE, CUDA_TYPE)] > 0


def test_plan_devices_places_exactly_the_host_islands_on_the_cpu(tensorcore_result) -> None:
    """TVM's PlanDevices (llvm + cuda targets, the GPU as the default device; the CUDA target is
    only a description here, nothing is built for it) accepts the module and keeps the plan."""
    result = tensorcore_result
    host = tvm.target.Target("llvm")
    targets = [tvm.target.Target("llvm", host=host), tvm.target.Target("cuda", host=host)]
    context = tvm.transform.PassContext(config={"relay.fallback_device_type": CUDA_TYPE})
    config = tvm.target.make_compilation_config(context, targets)
    with context:
        planned = relay.transform.PlanDevices(config)(result.mod)
    placed, copies = _planned_placement(planned)
    expected: collections.Counter = collections.Counter()
    for region in result.plan.regions:
        if region.device == "tensorcore":
            continue
        for node in region.nodes:
            expected[(result.graph[node].op, CPU_TYPE if region.device == "cpu" else CUDA_TYPE)] += 1
    symbols = _compilers(result.mod)["tensorcore"]
    assert len(symbols) == len(result.plan.regions_on("tensorcore"))
    expected.update((symbol, CUDA_TYPE) for symbol in symbols)
    assert placed == expected
    assert copies == _expected_copies(result.plan)  # PlanDevices added no copy of its own


def test_tensorcore_plan_runs_region_by_region_as_the_original(tensorcore_result) -> None:
    result = tensorcore_result
    module, functions = outline_regions(result.relay, result.plan, outline_cpu=True)
    by_device = collections.Counter(f.device.name for f in functions.values())
    assert by_device == collections.Counter(r.device for r in result.plan.regions)
    assert all(name.startswith("cpu_island_") for name, f in functions.items()
               if f.device.is_host)
    assert all(name.startswith("cuda_region_") for name, f in functions.items()
               if f.device.name == "cuda")
    # The host islands are called through on_device in this form too.
    marked = [c.args[0].op.name_hint for c in _calls(module["main"].body) if c.op == ON_DEVICE]
    assert sorted(marked) == sorted(n for n, f in functions.items() if f.device.is_host)

    inputs = zoo.sample_inputs("resnet50_v1_b32", small=True)
    executor = RegionExecutor(result, opt_level=0)
    # The host computes in float32 on tensorcore: its islands are compiled in float32.
    for region in executor.regions.values():
        if region.device == "cpu":
            assert region.precision == "float32" and set(region.input_dtypes) == {"float32"}
        elif region.device == "tensorcore":
            assert region.precision == "as-prepared" and "float16" in region.input_dtypes
    assert executor.notes == []
    got = executor.run(inputs)
    assert set(executor.times_per_device()) == {"tensorcore", "cuda", "cpu"}
    expected = run_module(result.prepared_mod, inputs, opt_level=0)
    _assert_outputs_equal(got, expected, FP16_RTOL, FP16_ATOL, "resnet50_v1_b32 tensorcore")


def test_one_accelerator_platforms_get_no_device_marks() -> None:
    mod, params = zoo.load("resnet50_v1", small=True)
    excluded = ["resnetv10_relu0_fwd"]
    result = partition_lab.partition(mod, "neuron@2020", params=params,
                                     excl_node_names=excluded)
    assert result.plan.regions_on("cpu")
    assert set(_compilers(result.mod)) == {"neuron_2020"}
    ops = {_op_name(c) for c in _calls(result.mod["main"].body)}
    assert ON_DEVICE.name not in ops and DEVICE_COPY.name not in ops
    assert tvm.ir.structural_equal(outline(result.relay, result.plan), result.mod)
