"""Cost models: profiles as data, the roofline against the field report, op signatures."""

from __future__ import annotations

import doctest
from pathlib import Path

import pytest

from partition_lab import synthetic
from partition_lab.core.graph import OpGraph, OpNode, TensorType
from partition_lab.cost_models import (
    ProfiledCostModel,
    RooflineCostModel,
    available_profiles,
    evaluate,
    get_cost_model,
    load_profile,
    op_class,
    op_signature,
)
from partition_lab.errors import ProfileError
from partition_lab.targets import TargetSpec, get_platform

SHIPPED = ["h200", "inferentia1", "local_cpu", "t4", "v100", "xeon_gold_6130"]


def all_on_accel(graph: OpGraph, profile: str) -> float:
    """Every op on one accelerator priced with ``profile``; the host as prepared (no casts)."""
    verdicts = synthetic.verdicts_by_op(graph)
    plan = synthetic.plan_on(graph, synthetic.one_accelerator(verdicts, "acc"), "test", range(len(graph)))
    return evaluate(plan, get_cost_model(plan.platform, accel_profile=profile)).total


# ---------------------------------------------------------------------------- profiles
def test_every_shipped_profile_loads_and_sources_every_number() -> None:
    assert available_profiles() == SHIPPED
    for name in SHIPPED:
        profile = load_profile(name)
        assert profile.name == name
        figures = list(profile.figures.values()) + list(profile.achieved_matrix_flops.values())
        if profile.host_link:
            figures += list(profile.host_link.figures.values())
        assert figures and all(len(f.source) > 10 for f in figures), name
        assert (profile.kind == "accel") == (profile.host_link is not None)


def test_inferentia_matrix_efficiency_is_the_seed_matmul_arithmetic() -> None:
    # The value must be what its source says it was set from: 100 fp16 1024^3 matmuls (2 FLOP
    # per MAC) in 17.1 ms on one NeuronCore, over the profile's own matrix peak.
    figures = load_profile("inferentia1").figures
    achieved = 100 * 2 * 1024 ** 3 / 17.1e-3
    expected = achieved / figures["matrix_flops"].value
    assert figures["matrix_efficiency"].value == pytest.approx(expected, abs=5e-4)
    assert "17.1 ms" in figures["matrix_efficiency"].source


def test_unknown_profile_lists_the_shipped_ones() -> None:
    with pytest.raises(ProfileError, match="available: h200, inferentia1"):
        load_profile("a100")


GOOD = """
schema = "partition_lab.profile/1"
name = "mine"
kind = "accel"
[figures]
matrix_flops = { value = 1e12, unit = "FLOP/s", source = "made up for a test" }
vector_flops = { value = 1e11, unit = "FLOP/s", source = "made up for a test" }
memory_bandwidth = { value = 1e10, unit = "B/s", source = "made up for a test" }
matrix_efficiency = { value = 0.5, unit = "1", source = "made up for a test" }
vector_efficiency = { value = 0.5, unit = "1", source = "made up for a test" }
data_efficiency = { value = 0.5, unit = "1", source = "made up for a test" }
op_overhead = { value = 1e-6, unit = "s", source = "made up for a test" }
region_overhead = { value = 1e-5, unit = "s", source = "made up for a test" }
[host_link]
name = "a wire"
bandwidth = { value = 1e9, unit = "B/s", source = "made up for a test" }
latency = { value = 1e-6, unit = "s", source = "made up for a test" }
"""


@pytest.mark.parametrize(("edit", "message"), [
    (lambda t: t.replace('schema = "partition_lab.profile/1"', ""), "schema"),
    (lambda t: t.replace('kind = "accel"', 'kind = "gpu"'), "kind"),
    (lambda t: t.replace("matrix_flops = { value = 1e12", "matrix_flopz = { value = 1e12"),
     "unknown figure"),
    (lambda t: t.replace('source = "made up for a test" }\nvector',
                         'source = "" }\nvector'), "source"),
    (lambda t: t.replace("value = 1e11", "value = -1"), "> 0"),
    (lambda t: t.replace("matrix_efficiency = { value = 0.5", "matrix_efficiency = { value = 2"),
     "fraction"),
    (lambda t: t.split("[host_link]")[0], "host_link"),
    (lambda t: t + "\n[oops", "not valid TOML"),
    (lambda t: t.replace("value = 1e10", 'value = "fast"'), "finite number"),
])
def test_malformed_profiles_are_rejected_with_the_key(tmp_path: Path, edit, message: str) -> None:
    good = tmp_path / "good.toml"
    good.write_text(GOOD)
    assert load_profile(good).name == "mine"
    bad = tmp_path / "bad.toml"
    bad.write_text(edit(GOOD))
    with pytest.raises(ProfileError, match=message):
        load_profile(bad)


def test_missing_profile_file() -> None:
    with pytest.raises(ProfileError, match="does not exist"):
        load_profile("/nonexistent/profile.toml")


# ---------------------------------------------------------------------------- roofline
def test_inferentia_matmul_benchmark_is_within_25_percent_of_the_report() -> None:
    # The profile's matrix efficiency was set from this figure; the test guards that the model
    # (overheads and host copies included) still lands near it.
    graph = synthetic.matmul_chain(100, 1024, "float16")
    predicted = all_on_accel(graph, "inferentia1")
    assert abs(predicted - 17.1e-3) / 17.1e-3 < 0.25, predicted


@pytest.mark.parametrize(("profile", "report_s"), [("t4", 5.98e-3), ("v100", 3.75e-3)])
def test_gpu_matmul_benchmarks_are_within_25_percent(profile: str, report_s: float) -> None:
    graph = synthetic.matmul_chain(100, 1024, "float16")
    predicted = all_on_accel(graph, profile)
    assert abs(predicted - report_s) / report_s < 0.25, predicted


def test_inferentia_resnet152_against_a_figure_not_used_to_set_the_profile() -> None:
    # The report measured ResNet-152 v1 (batch 1, FP32, 224x224) at 9.30 ms on one NeuronCore.
    # Nothing in inferentia1.toml was set from it. The roofline predicts about 1.7x that: it
    # charges every BatchNorm/ReLU/add a DRAM round trip that neuron-cc fuses away.
    graph = synthetic.resnet_v1((3, 8, 36, 3))
    assert 22e9 < sum(n.flops for n in graph) < 24e9  # 11.5 GMAC, as published
    predicted = all_on_accel(graph, "inferentia1")
    assert 9.30e-3 / 2 < predicted < 9.30e-3 * 2, predicted


def test_cpu_fp16_matmul_uses_the_achieved_rate() -> None:
    graph = synthetic.matmul_chain(100, 1024, "float16")
    verdicts = synthetic.verdicts_by_op(graph)
    plan = synthetic.plan_on(graph, synthetic.one_accelerator(verdicts, "acc"), "test", [])
    total = evaluate(plan, get_cost_model(get_platform("neuron"))).total
    assert total == pytest.approx(5.55, rel=0.01)  # the report's 5.55 s (38.7 GFLOPS)


def test_explain_names_the_bound() -> None:
    model = get_cost_model(get_platform("neuron"))
    graph = synthetic.matmul_chain(1, 1024, "float16")
    assert model.explain(graph[0], "accel").bound == "compute"
    relu = synthetic.chain(["nn.relu"])[0]
    estimate = model.explain(relu, "accel")
    assert estimate.bound == "memory" and estimate.op_class == "vector"
    assert "memory-bound" in str(estimate)
    assert model.op_time(relu, "accel") == estimate.total_s


def test_op_classes() -> None:
    b = synthetic.chain(["nn.conv2d", "reshape", "nn.relu"])
    assert [op_class(n) for n in b] == ["matrix", "data", "vector"]
    t = TensorType((1, 8, 4, 4), "float32")
    depthwise = OpNode(0, "nn.conv2d", "dw", None, (t,), (t,), attrs={"groups": 8})
    assert op_class(depthwise) == "vector"


def test_fp32_traffic_counts_two_bytes_on_inferentia_only() -> None:
    conv = synthetic.chain(["nn.conv2d"])[0]
    neuron, tensorcore = get_cost_model(get_platform("neuron")), get_cost_model(get_platform("tensorcore"))
    assert neuron.explain(conv, "accel").nbytes == pytest.approx(conv.bytes_moved / 2)
    assert tensorcore.explain(conv, "accel").nbytes == conv.bytes_moved
    assert neuron.explain(conv, "cpu").nbytes == conv.bytes_moved


def test_transfers_and_overheads() -> None:
    model = get_cost_model(get_platform("neuron"))
    link = load_profile("inferentia1").host_link
    assert model.transfer_time(1e6, "cpu", "accel") == pytest.approx(link.latency + 1e6 / link.bandwidth)
    assert model.transfer_time(1e6, "accel", "cpu") == model.transfer_time(1e6, "cpu", "accel")
    assert model.transfer_time(1e6, "cpu", "cpu") == 0.0
    assert model.region_overhead("cpu") == 0.0
    assert model.region_overhead("accel") == load_profile("inferentia1").region_overhead


def test_the_model_is_deterministic() -> None:
    graph = synthetic.simple_pose_like()
    first = [get_cost_model(get_platform("neuron")).op_time(n, k) for n in graph for k in ("cpu", "accel")]
    second = [get_cost_model(get_platform("neuron")).op_time(n, k) for n in graph for k in ("cpu", "accel")]
    assert first == second


# ---------------------------------------------------------------------------- get_cost_model
def _spec(name: str, default_profile: str | None) -> TargetSpec:
    return TargetSpec(name, supports_all=True, default_profile=default_profile)


def test_default_pairings() -> None:
    tensorcore = "roofline(tensorcore=t4 + cuda=t4 + cpu=xeon_gold_6130"
    assert get_cost_model(get_platform("tensorcore")).name.startswith(tensorcore)
    assert get_cost_model(get_platform("neuron@2020")).name.startswith(
        "roofline(neuron@2020=inferentia1 + cpu=xeon_gold_6130")
    assert get_cost_model(get_platform(_spec("mine", "v100"))).name.startswith("roofline(mine=v100")
    assert get_cost_model(get_platform("tensorcore"), accel_profile="h200").name.startswith(
        "roofline(tensorcore=h200 + cuda=h200")
    cpu_only = get_cost_model(get_platform("cpu"))
    assert cpu_only.transfer_time(1e9, "cpu", "cpu") == 0.0


@pytest.mark.parametrize("not_a_platform", [None, "tensorcore", _spec("mine", "v100")])
def test_cost_models_take_a_platform_not_a_name(not_a_platform) -> None:
    with pytest.raises(TypeError, match="takes a Platform"):
        get_cost_model(not_a_platform)
    with pytest.raises(TypeError, match="ProfiledCostModel takes a Platform"):
        ProfiledCostModel({"schema": "partition_lab.profile_cache/1", "devices": {}},
                          not_a_platform)


def test_tensorcore_prices_cuda_cores_without_tensor_cores_and_host_islands_in_fp32() -> None:
    model = get_cost_model(get_platform("tensorcore"))
    matmul = synthetic.matmul_chain(1, 1024, "float16")[0]
    # CUDA cores run the matmul on the vector units: slower than the Tensor Cores.
    assert model.op_time(matmul, "cuda") > 2 * model.op_time(matmul, "tensorcore")
    # Same GPU memory and precision: no copy; to the host: a PCIe copy plus a cast to float32.
    assert model.transfer_time(2e6, "tensorcore", "cuda") == 0.0
    link = model.link.transfer_time(2e6)
    assert model.transfer_time(2e6, "cuda", "cpu") > link
    # The host computes float16 tensors in float32: twice the bytes of an fp16 device.
    relu = OpNode(0, "nn.relu", "r", None, (TensorType((1, 1 << 20), "float16"),),
                  (TensorType((1, 1 << 20), "float16"),), args=(TensorType((1, 1 << 20), "float16"),))
    fp32_host = model.explain(relu, "cpu").nbytes
    as_prepared = get_cost_model(get_platform("neuron")).explain(relu, "cpu").nbytes
    assert fp32_host == pytest.approx(2 * as_prepared)


def test_a_target_without_a_profile_needs_one() -> None:
    with pytest.raises(ProfileError, match="names no hardware profile"):
        get_cost_model(get_platform(_spec("my_npu", None)))
    assert isinstance(get_cost_model(get_platform(_spec("my_npu", None)), accel_profile="t4"),
                      RooflineCostModel)


# ---------------------------------------------------------------------------- op signatures
def _node(shape: tuple[int, ...], op: str = "nn.relu", **attrs) -> OpNode:
    t = TensorType(shape, "float32")
    return OpNode(7, op, "x", None, (t,), (t,), attrs=attrs, args=(t,))


def test_op_signature_is_stable_and_specific() -> None:
    assert op_signature(_node((1, 8))) == "nn.relu(float32[1,8])"
    assert op_signature(_node((1, 8))) == op_signature(_node((1, 8)))
    assert op_signature(_node((1, 9))) != op_signature(_node((1, 8)))
    a = op_signature(_node((1, 8), "nn.softmax", axis=1))
    b = op_signature(_node((1, 8), "nn.softmax", axis=-1))
    assert a != b and a.endswith("{axis=1}")
    assert op_signature(_node((1, 8), "x", b=(1, 2), a=0.5)) == "x(float32[1,8]){a=0.5,b=[1,2]}"


def test_docstring_examples_run() -> None:
    from partition_lab import cost_models
    from partition_lab.cost_models import profiles, roofline, signatures

    for module in (cost_models, profiles, roofline, signatures):
        result = doctest.testmod(module)
        assert result.attempted > 0 and result.failed == 0, module.__name__
