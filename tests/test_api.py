"""partition(): plans validate, partitioned programs compute what the originals compute, and the
field reports' stories come out as the reports tell them."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tvm

import partition_lab
from partition_lab import synthetic, zoo
from partition_lab.api import analyze, bind_params
from partition_lab.core.support import Verdict
from partition_lab.errors import ExclusionError, PartitionLabError, UnknownTargetError
from partition_lab.relay.passes import (
    LEGACY_PLAN_ATTR,
    PLAN_ATTR,
    AnnotateSupport,
    FormRegions,
    OutlineRegions,
    PrepareForTarget,
)
from partition_lab.relay.passes.tvm_reference import tvm_chain_regions
from partition_lab.relay.runtime import RegionExecutor, run_module
from partition_lab.strategies import get_strategy
from partition_lab.targets import get_platform
from repo_paths import REPO_ROOT


def _compiler_functions(mod: tvm.IRModule) -> list:
    return [mod[g] for g in mod.get_global_vars()
            if mod[g].attrs is not None and "Compiler" in mod[g].attrs.keys()]


@pytest.mark.parametrize("predicate", ["neuron@2020", "random-70%"])
@pytest.mark.parametrize("frontend", ["mxnet", "onnx"])
@pytest.mark.parametrize("model", zoo.names())
def test_greedy_matches_tvm_byoc_chain(model: str, frontend: str, predicate: str) -> None:
    """Same op-support predicate, same regions as TVM's three passes.

    ``neuron@2020`` is the real target's predicate; ``random-70%`` marks a seeded random 70% of
    the ops supported, which splits the graph into many regions and exercises the cycle rules.
    """
    mod, params = zoo.load(model, frontend=frontend, small=True)
    analysis = analyze(mod, "neuron@2020", params=params)
    supported = [v.supported for v in analysis.verdicts]
    if predicate == "random-70%":
        rng = np.random.default_rng(len(supported))
        supported = list(rng.random(len(supported)) < 0.7)
    verdicts = [Verdict(ok, "test predicate") for ok in supported]
    plan = get_strategy("greedy").run(analysis.graph, synthetic.one_accelerator(verdicts, "neuron@2020"))
    ours = sorted((frozenset(r.nodes) for r in plan.accelerator_regions), key=min)
    reference = tvm_chain_regions(analysis.relay, supported)
    assert ours == reference.regions


def test_passes_compose_with_tvm_sequential() -> None:
    mod, params = zoo.load("simple_pose_resnet152_v1b", small=True)
    bound = bind_params(mod, params)
    platform = get_platform("neuron@2020")
    seq = tvm.transform.Sequential([
        PrepareForTarget(platform),
        AnnotateSupport(platform),
        FormRegions("greedy"),
        OutlineRegions(),
    ])
    with tvm.transform.PassContext(opt_level=3):
        partitioned = seq(bound)
    direct = partition_lab.partition(mod, "neuron@2020", params=params)
    assert len(_compiler_functions(partitioned)) == len(direct.plan.accelerator_regions) > 1
    assert tvm.ir.structural_equal(partitioned, direct.mod, map_free_vars=True)


def test_the_plan_attribute_is_written_under_one_key_and_read_under_both() -> None:
    """FormRegions writes ``partition_lab.plan``; OutlineRegions also reads the key a release
    wrote by mistake (``partition_lab.core.plan``), and gives the same module from it."""
    mod, params = zoo.load("simple_pose_resnet152_v1b", small=True)
    platform = get_platform("neuron@2020")
    prepare = tvm.transform.Sequential([PrepareForTarget(platform), AnnotateSupport(platform),
                                        FormRegions("greedy")])
    with tvm.transform.PassContext(opt_level=3):
        planned = prepare(bind_params(mod, params))
    keys = set(planned.attrs.keys())
    assert PLAN_ATTR == "partition_lab.plan" and PLAN_ATTR in keys and LEGACY_PLAN_ATTR not in keys
    legacy = tvm.IRModule(planned.functions, attrs={
        **{k: planned.attrs[k] for k in keys if k != PLAN_ATTR},
        LEGACY_PLAN_ATTR: planned.attrs[PLAN_ATTR]})
    assert PLAN_ATTR not in legacy.attrs.keys()
    outlined = OutlineRegions()(planned)
    assert tvm.ir.structural_equal(OutlineRegions()(legacy), outlined, map_free_vars=True)
    assert len(_compiler_functions(outlined)) == 4  # the field report's 4 accelerator subgraphs
    without = tvm.IRModule(planned.functions, attrs={k: planned.attrs[k] for k in keys
                                                     if k != PLAN_ATTR})
    with pytest.raises(PartitionLabError, match="needs the module attribute 'partition_lab.plan'"):
        OutlineRegions()(without)


def test_every_preparation_step_has_one_relay_implementation() -> None:
    from partition_lab.core.platform import PREPARE_STEPS
    from partition_lab.relay.passes.prepare import RELAY_PASSES, prepare_passes

    assert set(RELAY_PASSES) == set(PREPARE_STEPS)
    assert len(prepare_passes(list(PREPARE_STEPS))) == 2 * len(PREPARE_STEPS)  # + InferType each
    with pytest.raises(PartitionLabError, match="unknown preparation step 'convert_layout:NCHW'"):
        prepare_passes(["convert_layout:NCHW"])


# ----------------------------------------------------------------------------- the stories
def _bn_relu_only(plan) -> list:
    return [r for r in plan.accelerator_regions
            if {plan.graph[n].op for n in r.nodes} <= {"nn.batch_norm", "nn.relu"}]


def test_simple_pose_on_neuron_2020_splits_in_four_and_exclusion_gives_two() -> None:
    mod, params = zoo.load("simple_pose_resnet152_v1b")
    result = partition_lab.partition(mod, "neuron@2020", params=params)
    plan = result.plan
    assert len(plan.accelerator_regions) == 4
    lonely = _bn_relu_only(plan)
    assert len(lonely) == 2
    deconvs = [n for n in result.graph if n.op == "nn.conv2d_transpose"]
    assert len(deconvs) == 3
    for node in deconvs:
        assert plan.device_of(node.id) == "cpu"
        assert "Deconvolution" in plan.decisions[node.id].reason
    names = [result.graph[n].source_name for r in lonely for n in r.nodes]
    # The report's excl_node_names: batchnormcudnnoff0_fwd, relu0_fwd, batchnormcudnnoff1_fwd, relu1_fwd.
    assert sorted(names) == sorted(
        ["batchnormcudnnoff0_fwd", "relu0_fwd", "batchnormcudnnoff1_fwd", "relu1_fwd"])
    excluded = partition_lab.partition(mod, "neuron@2020", params=params, excl_node_names=names)
    assert len(excluded.plan.accelerator_regions) == 2
    for name in names:
        node = excluded.graph.nodes_with_source_name(name)[0]
        assert excluded.plan.device_of(node.id) == "cpu"
        assert "excl_node_names" in excluded.plan.decisions[node.id].reason


def test_fcn_resize_ops_stay_on_cpu_with_reason() -> None:
    mod, params = zoo.load("fcn_resnet101_ade")
    result = partition_lab.partition(mod, "neuron", params=params)
    resizes = [n for n in result.graph if n.op == "image.resize2d"]
    assert len(resizes) == 2
    for node in resizes:
        decision = result.plan.decisions[node.id]
        assert decision.device == "cpu"
        assert "_contrib_BilinearResize2D" in decision.reason
    assert result.cost is not None
    cut_into_resize = [c for c in result.cost.cuts
                       if any(result.graph[n].op == "image.resize2d" for n in c.consumers)]
    assert cut_into_resize and all(c.src == "neuron" and c.time > 0 for c in cut_into_resize)


@pytest.mark.parametrize(("model", "eligible"), [("resnet50_v1", False), ("resnet50_v1_b32", True)])
def test_resnet50_tensorcore_eligibility_depends_on_batch(model: str, eligible: bool) -> None:
    mod, params = zoo.load(model)
    result = partition_lab.partition(mod, "tensorcore", params=params)
    convs = [n for n in result.graph if n.op == "nn.conv2d"]
    assert len(convs) == 53
    on_tensor_cores = [n for n in convs if result.plan.device_of(n.id) == "tensorcore"]
    # A conv the Tensor Core rules reject still runs on the GPU, on its CUDA cores.
    assert all(result.plan.device_of(n.id) == "cuda" for n in convs if n not in on_tensor_cores)
    if eligible:
        # Every conv but the RGB stem (cin 3) runs on the Tensor Cores at batch 32.
        assert len(on_tensor_cores) == 52
        stem = result.plan.decisions[convs[0].id]
        assert stem.device == "cuda" and "cin 3" in stem.reason
    else:
        assert on_tensor_cores == []
        for node in convs:
            assert "batch 1 is not a multiple" in result.plan.decisions[node.id].reason or (
                "cin 3" in result.plan.decisions[node.id].reason)


def test_an_item_of_a_tuple_literal_is_outlined_as_what_it_holds() -> None:
    """ToMixedPrecision writes ``%t = (c, %x); concatenate((%t.0, f(%t.1)))`` (ViT's class token
    at batch 8 on tensorcore): the region of the concatenate reads ``c`` alone, not ``%x``,
    which another region computes."""
    from tvm import relay

    x = relay.var("x", shape=(1, 4, 8), dtype="float32")
    token = relay.const(np.arange(32, dtype="float32").reshape(1, 4, 8))
    pair = relay.Tuple([token, relay.nn.relu(x)])
    body = relay.concatenate([relay.TupleGetItem(pair, 0),
                              relay.sigmoid(relay.TupleGetItem(pair, 1))], axis=1)
    mod = tvm.IRModule.from_expr(relay.Function([x], body))
    result = partition_lab.partition(mod, "neuron", exclude_ops=("nn.relu",), strategy="greedy")
    result.plan.validate()
    placed = {node.op: result.plan.device_of(node.id) for node in result.graph}
    assert placed == {"nn.relu": "cpu", "sigmoid": "neuron", "concatenate": "neuron"}
    inputs = {"x": np.random.default_rng(0).standard_normal((1, 4, 8)).astype("float32")}
    got = RegionExecutor(result, opt_level=0).run(inputs)
    np.testing.assert_allclose(got[0], run_module(mod, inputs, opt_level=0)[0], rtol=1e-6)


# ----------------------------------------------------------------------------- bad input
def test_unknown_target_lists_known_ones() -> None:
    mod, params = zoo.load("resnet50_v1", small=True)
    with pytest.raises(UnknownTargetError, match="neuron@2020"):
        partition_lab.partition(mod, "tpu", params=params)


def test_exclusion_naming_no_node_lists_names() -> None:
    mod, params = zoo.load("resnet50_v1", small=True)
    with pytest.raises(ExclusionError, match="no node named 'relu_99_fwd'"):
        partition_lab.partition(mod, "neuron", params=params, excl_node_names=["relu_99_fwd"])
    with pytest.raises(ExclusionError, match="its ops are"):
        partition_lab.partition(mod, "neuron", params=params, exclude_ops=["nn.lstm"])


def test_plan_json_round_trips() -> None:
    mod, params = zoo.load("fcn_resnet101_ade", small=True)
    result = partition_lab.partition(mod, "neuron", params=params)
    data = json.loads(result.plan.to_json())
    again = partition_lab.PartitionPlan.from_dict(result.graph, data)
    assert again.regions == result.plan.regions
    assert again.decisions == result.plan.decisions
    assert data["schema"] == "partition_lab.plan/2"
    assert [d["name"] for d in data["devices"]] == ["neuron", "cpu"]


@pytest.mark.slow
def test_the_default_strategy_is_cost_with_a_profile_and_greedy_without(tmp_path) -> None:
    import lzma

    from partition_lab.cost_models.profiled import ProfiledCostModel

    # the zoo's H200 profile cache, as measured (kept xz-compressed beside the experiments)
    measured = REPO_ROOT / "experiments" / "data" / \
        "gpu_ingraph_cache.json.xz"
    cache = tmp_path / "gpu_ingraph_cache.json"
    cache.write_bytes(lzma.decompress(measured.read_bytes()))
    mod, params = zoo.load("resnet50_v1", small=True)
    profiled = partition_lab.partition(mod, "tensorcore", params=params, profile_cache=cache)
    assert profiled.plan.strategy == "cost"
    assert isinstance(profiled.cost_model, ProfiledCostModel)
    # tensorcore ships the project's H200 profile: without a profile of one's own, cost on it
    roofline = partition_lab.partition(mod, "tensorcore", params=params, shipped_profile=False)
    assert roofline.plan.strategy == "greedy"
    assert not isinstance(roofline.cost_model, ProfiledCostModel)
    assert partition_lab.partition(mod, "neuron", params=params).plan.strategy == "greedy"
    named = partition_lab.partition(mod, "tensorcore", params=params, strategy="greedy",
                                    profile_cache=cache)
    assert named.plan.strategy == "greedy"


@pytest.mark.slow
def test_tensorcore_without_a_profile_is_priced_by_the_shipped_h200_profile() -> None:
    from partition_lab.cost_models import SHIPPED
    from partition_lab.cost_models.profiled import ProfiledCostModel

    mod, params = zoo.load("resnet50_v1", small=True)
    result = partition_lab.partition(mod, "tensorcore", params=params)
    assert result.plan.strategy == "cost"
    assert isinstance(result.cost_model, ProfiledCostModel)
    shipped = SHIPPED["tensorcore"]
    assert "shipped profile measured 2026-12-01" in result.summary()  # labelled, with its date
    assert "H200" in shipped.label and "not your machine" in shipped.label
    assert result.cost_model.binding == {
        "cpu": "torch-cpu|Intel(R) Xeon(R) Processor|torch 2.11.0+cu130|threads 16",
        "cuda": "torch-cuda|NVIDIA H200|torch 2.11.0+cu130|cudnn 91900",
        "tensorcore": "torch-cuda|NVIDIA H200|torch 2.11.0+cu130|cudnn 91900"}
    # a named hardware profile asks for the roofline, and so does shipped_profile=False
    for kwargs in ({"cost_model": "v100"}, {"shipped_profile": False}):
        other = partition_lab.partition(mod, "tensorcore", params=params, **kwargs)
        assert other.cost_model.name.startswith("roofline("), kwargs
        assert other.plan.strategy == "greedy", kwargs
    # target options keep it (fp32 ops the profile did not time are fitted)
    fp32 = partition_lab.partition(mod, "tensorcore", params=params, precision="fp32")
    assert isinstance(fp32.cost_model, ProfiledCostModel)


def test_the_shipped_profile_applies_only_to_the_built_in_platform_it_measured() -> None:
    from partition_lab.core.platform import Platform
    from partition_lab.cost_models import SHIPPED, shipped_profile
    from partition_lab.targets import get_platform

    assert shipped_profile(get_platform("tensorcore")) is SHIPPED["tensorcore"]
    for name in ("neuron", "neuron@2020", "cpu"):
        assert shipped_profile(get_platform(name)) is None, name
    built_in = get_platform("tensorcore")
    # a platform that reuses the name with other devices is other hardware
    renamed = Platform("tensorcore", tuple(d for d in built_in.devices if d.name != "cuda"))
    assert shipped_profile(renamed) is None


@pytest.mark.slow
def test_the_shipped_sigmas_are_what_the_shipped_data_gives() -> None:
    """The cross-validated sigmas ship precomputed (``python bench/ship_profile.py`` writes both files);
    computed again from the shipped measurements they must agree, or the files are stale."""
    import json

    from partition_lab.cost_models import SHIPPED
    from partition_lab.cost_models.profiled import ProfiledCostModel
    from partition_lab.targets import get_platform

    shipped = SHIPPED["tensorcore"]
    fresh = ProfiledCostModel(shipped.cache(), get_platform("tensorcore"))
    stored = json.loads(shipped.sigma_path.read_text(encoding="utf-8"))
    assert set(stored) == set(fresh.binding.values())
    for key, sigmas in stored.items():
        assert fresh.fitted_sigma(key) == pytest.approx(sigmas, rel=1e-9), key
