"""ProfiledCostModel: measured ops, a fit for the rest with cross-validated uncertainty, copies,
overheads; the op-signature codec; the old H200 profile converted to the profile cache format
(experiments/gpu_profile_to_cache.py).

The synthetic caches follow a known law per device (floor + bytes / bandwidth + FLOPs / peak,
per op class) with seeded log-normal noise, so the fit can be checked against the truth.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from partition_lab import synthetic
from partition_lab.core.ops import op_class
from partition_lab.cost_models import evaluate, get_cost_model, op_signature
from partition_lab.cost_models.copy_curves import TransferCurve
from partition_lab.cost_models.profile_cache import SCHEMA
from partition_lab.cost_models.profiled import MIN_RATIO, ProfiledCostModel
from partition_lab.cost_models.signatures import node_from_signature
from partition_lab.errors import ProfileError
from partition_lab.strategies import get_strategy
from partition_lab.targets import get_platform
from repo_paths import REPO_ROOT

TENSORCORE = get_platform("tensorcore")
NOISE = 0.05
GPU, CPU = "gpu-key", "cpu-key"
#: (floor s, bytes/s, FLOP/s) per op class and device kind: the generating law.
LAW = {
    "cuda": {"matrix": (5e-6, 2e12, 2e14), "vector": (4e-6, 1.5e12, 2e13),
             "data": (3e-6, 1e12, 1e13)},
    "cpu": {"matrix": (2e-6, 3e10, 1e12), "vector": (1e-6, 2e10, 1e11),
            "data": (1e-6, 1e10, 1e11)},
}
COPIES = [[1e3, 2e-5], [1e5, 3e-5], [1e7, 1e-3]]


def true_time(node, kind: str) -> float:
    floor, bandwidth, peak = LAW[kind][op_class(node)]
    return floor + node.bytes_moved / bandwidth + node.flops / peak


def model_graphs() -> dict:
    """Profiled models: ResNets at several image sizes, chains and diamonds of other shapes."""
    graphs = [synthetic.resnet_v1((1, 1, 1, 1), image=s, name=f"resnet_{s}")
              for s in (64, 96, 128, 160, 224)]
    graphs += [synthetic.chain(["nn.conv2d", "nn.batch_norm", "nn.relu", "layout_transform",
                                "sigmoid", "nn.conv2d_transpose", "reshape", "tanh"],
                               shape=(1, c, s, s), name=f"chain_{c}_{s}")
               for c, s in ((16, 56), (32, 28), (64, 14), (128, 7), (24, 40))]
    graphs += [synthetic.diamond(branches=3, shape=(1, c, s, s), name=f"diamond_{c}_{s}")
               for c, s in ((48, 20), (96, 10))]
    return {g.name: g for g in graphs}


def synthetic_cache(graphs: dict, *, seed: int = 0, island_wakeup: float = 2e-5) -> dict:
    rng = np.random.default_rng(seed)
    devices = {}
    for key, kind in ((GPU, "cuda"), (CPU, "cpu")):
        ops: dict = {}
        for name, graph in graphs.items():
            for node in graph:
                sig = op_signature(node)
                if sig in ops:
                    ops[sig]["models"].append(name)
                    continue
                median = true_time(node, kind) * math.exp(rng.normal(0, NOISE))
                ops[sig] = {"median_s": median, "p10_s": median * 0.98, "p90_s": median * 1.02,
                            "runs": 20, "op": node.op, "class": op_class(node),
                            "flops": node.flops, "bytes": node.bytes_moved,
                            "dtype": node.inputs[0].dtype, "models": [name],
                            "measured_at": "2026-12-01T00:00:00Z"}
        overheads = ({"region_s": 8e-6, "per_op_s": 1e-6, "op_floor_s": 6e-6} if kind == "cuda"
                     else {"region_s": 0.0, "per_op_s": 1.5e-6, "island_wakeup_s": island_wakeup})
        devices[key] = {"runner": "torch", "kind": kind, "name": f"synthetic {kind}",
                        "software": {"torch": "test"}, "ops": ops, "overheads": overheads,
                        "copies": {"host->gpu": COPIES, "gpu->host": COPIES} if kind == "cuda"
                        else {}}
    return {"schema": SCHEMA, "devices": devices,
            "bindings": {"tensorcore": {"tensorcore": GPU, "cuda": GPU, "cpu": CPU}}}


@pytest.fixture(scope="module")
def graphs() -> dict:
    return model_graphs()


@pytest.fixture(scope="module")
def model(graphs) -> ProfiledCostModel:
    return ProfiledCostModel(synthetic_cache(graphs), TENSORCORE)


def unseen_graph():
    """A model nobody profiled: other image size and channel counts."""
    return synthetic.resnet_v1((1, 2, 1, 1), image=192, name="resnet_unseen")


# ---------------------------------------------------------------------------- measured ops
def test_measured_ops_return_their_median_plus_the_in_graph_cost(model, graphs) -> None:
    cache = model.cache["devices"]
    for node in graphs["resnet_128"]:
        sig = op_signature(node)
        gpu, cpu = cache[GPU]["ops"][sig]["median_s"], cache[CPU]["ops"][sig]["median_s"]
        for device in ("tensorcore", "cuda"):
            assert model.is_measured(node, device)
            assert model.op_time(node, device) == pytest.approx(max(gpu, 6e-6))
        assert model.op_time(node, "cpu") == pytest.approx(cpu + 1.5e-6)
        assert "measured" in model.explain(node, "cpu")
        assert "not measured" not in model.explain(node, "cpu")


def test_op_times_batch_equals_op_time(model) -> None:
    graph = unseen_graph()
    for device in ("tensorcore", "cpu"):
        assert model.op_times(graph.nodes, device) == pytest.approx(
            [model.op_time(n, device) for n in graph])


# ---------------------------------------------------------------------------- fitted ops
def test_unmeasured_ops_are_predicted_within_the_noise(model) -> None:
    graph = unseen_graph()
    unmeasured = [n for n in graph if not model.is_measured(n, "cpu")]
    assert len(unmeasured) == 45  # of its 65 ops: the profile holds the other 20's signatures
    for device, kind in (("cuda", "cuda"), ("cpu", "cpu")):
        entry = model.entry_of(device)
        errors = [math.log(entry.alone(n, op_signature(n)) / true_time(n, kind))
                  for n in unmeasured]
        assert np.median(np.abs(errors)) < 2 * NOISE, (device, errors)
        assert np.max(np.abs(errors)) < 6 * NOISE, (device, errors)
        assert all("not measured" in model.explain(n, device) for n in unmeasured)


def test_roofline_fallback_is_not_within_the_noise(model) -> None:
    # The check above can fail: the platform's roofline misses the same law by far more.
    roofline = get_cost_model(TENSORCORE)
    graph = unseen_graph()
    errors = [math.log(roofline.op_time(n, "cpu") / true_time(n, "cpu")) for n in graph]
    assert np.median(np.abs(errors)) > 2 * NOISE


def test_sigma_of_measured_ops_is_below_that_of_fitted_ones(model, graphs) -> None:
    measured = graphs["resnet_64"][5]
    fitted = next(n for n in unseen_graph() if not model.is_measured(n, "cpu"))
    spread = math.log(1.02 / 0.98) / 2.5631
    for device, in_graph in (("tensorcore", 0.05), ("cpu", 0.25)):
        low, high = model.op_sigma(measured, device), model.op_sigma(fitted, device)
        assert low == pytest.approx(math.hypot(spread, in_graph))
        assert high > low
        # The fitted sigma comes from the cross-validated residuals: near the noise, not 1.
        assert high < in_graph + 0.2
    same = ProfiledCostModel(model.cache, TENSORCORE, in_graph_sigma=0.01)
    assert same.op_sigma(measured, "cpu") == pytest.approx(math.hypot(spread, 0.01))


# ---------------------------------------------------------------------------- cross-validation
def test_leave_one_model_out_excludes_the_held_out_models_signatures(model, graphs) -> None:
    held_model = "resnet_64"
    mine = {op_signature(n) for n in graphs[held_model]}
    elsewhere = {op_signature(n) for name, g in graphs.items() if name != held_model
                 for n in g}
    own, shared = mine - elsewhere, mine & elsewhere
    assert own and shared, "the test needs signatures only resnet_64 has, and shared ones"
    for key in (GPU, CPU):
        folds = model.folds(key)
        train, held = set(folds.training[held_model]), set(folds.held_out[held_model])
        assert own <= held and not own & train
        # A signature resnet_64 shares with other models is held out too: M's model saw it.
        assert shared <= held and not shared & train
        assert held == mine
        assert train == elsewhere - mine


def test_cross_validation_reports_errors_per_class_and_per_graph(model, graphs) -> None:
    cv = model.cross_validate(graphs)
    assert cv.protocol.startswith("leave-one-model-out")
    classes = {(e.device, e.group) for e in cv.by_class}
    assert {(GPU, "matrix"), (GPU, "vector"), (CPU, "data"), (CPU, "all")} <= classes
    for e in cv.by_class:
        assert e.median_abs < 2 * NOISE, e
    assert {t.model for t in cv.totals if t.device == CPU} == set(graphs)
    for t in cv.totals:
        assert t.nodes == len(graphs[t.model])
        assert abs(t.log_error) < 0.1, t
    assert {e.device for e in cv.by_graph} == {GPU, CPU}
    # Each prediction belongs to a model that has the signature.
    sigs = {name: {op_signature(n) for n in g} for name, g in graphs.items()}
    assert all(p.signature in sigs[p.model] for p in cv.predictions)
    assert "per held-out model" in cv.format()


def test_an_entry_without_model_names_is_cross_validated_by_folds(graphs) -> None:
    cache = synthetic_cache(graphs)
    for rec in cache["devices"][CPU]["ops"].values():
        rec["models"] = []
    model = ProfiledCostModel(cache, TENSORCORE)
    folds = model.folds(CPU)
    assert len(folds.held_out) == 5
    assert all(not set(folds.training[f]) & set(folds.held_out[f]) for f in folds.held_out)
    assert "5-fold" in model.cross_validate().protocol


# ---------------------------------------------------------------------------- copies, overheads
def test_copies_follow_the_measured_curve_and_casts_the_roofline(model) -> None:
    roofline = get_cost_model(TENSORCORE)
    host = roofline.device_cost("cpu").profile
    cast = 3 * 1e5 / (host.memory_bandwidth * host.efficiency("data"))
    # tensorcore -> cpu leaves GPU memory and the half precision: curve point + roofline cast.
    assert model.transfer_time(1e5, "tensorcore", "cpu") == pytest.approx(3e-5 + cast)
    between = model.transfer_time(5.05e6, "cuda", "cpu") - 3 * 5.05e6 / (
        host.memory_bandwidth * host.efficiency("data"))
    assert between == pytest.approx((3e-5 + 1e-3) / 2)
    beyond = model.transfer_time(2e7, "cpu", "tensorcore") - 3 * 2e7 / (
        host.memory_bandwidth * host.efficiency("data"))
    slope = (1e-3 - 3e-5) / (1e7 - 1e5)  # the last segment, extended
    assert beyond == pytest.approx(1e-3 + slope * (2e7 - 1e7))
    assert model.transfer_time(1e6, "tensorcore", "cuda") == 0.0
    assert model.transfer_sigma(1e6, "tensorcore", "cuda") == 0.0
    assert 0.1 <= model.transfer_sigma(1e5, "cpu", "tensorcore") <= 0.5


def test_a_domain_curve_replaces_copy_plus_cast(graphs) -> None:
    cache = synthetic_cache(graphs)
    cache["devices"][GPU]["copies"]["host:float32->gpu:as-prepared"] = [[1e3, 1e-5],
                                                                          [1e6, 1e-4]]
    model = ProfiledCostModel(cache, TENSORCORE)
    assert model.transfer_time(1e6, "cpu", "tensorcore") == pytest.approx(1e-4)
    assert model.transfer_sigma(1e6, "cpu", "tensorcore") == pytest.approx(0.1)


def test_region_overheads_and_host_island_wakeup(model) -> None:
    assert model.region_overhead("tensorcore") == pytest.approx(8e-6)
    assert model.region_overhead("cpu") == pytest.approx(0.0 + 2e-5)
    assert model.overhead_sigma("cpu") < 1.0


def test_an_unbound_device_uses_the_fallback(graphs) -> None:
    roofline = get_cost_model(TENSORCORE)
    model = ProfiledCostModel(synthetic_cache(graphs), TENSORCORE,
                              binding={"tensorcore": GPU, "cpu": CPU}, fallback=roofline)
    node = graphs["resnet_64"][0]
    assert model.op_time(node, "cuda") == roofline.op_time(node, "cuda")
    assert model.op_sigma(node, "cuda") == 1.0
    assert "no profile entry" in model.explain(node, "cuda")
    assert not model.is_measured(node, "cuda") and model.is_measured(node, "tensorcore")


def test_ambiguous_entries_need_a_binding(graphs) -> None:
    cache = synthetic_cache(graphs)
    del cache["bindings"]
    cache["devices"]["other-gpu"] = dict(cache["devices"][GPU])
    with pytest.raises(ProfileError, match="binding"):
        ProfiledCostModel(cache, TENSORCORE)
    with pytest.raises(ProfileError, match="do not exist"):
        ProfiledCostModel(cache, TENSORCORE, binding={"cpu": "nope"})


# ---------------------------------------------------------------------------- plans
@pytest.mark.parametrize("strategy", ["greedy", "cost", "all_cpu"])
def test_evaluate_a_three_device_tensorcore_plan(model, strategy) -> None:
    from partition_lab.relay.passes.annotate import support_table

    graph = unseen_graph()
    support = support_table(graph, TENSORCORE)
    plan = get_strategy(strategy).run(graph, support, cost_model=model)
    breakdown = evaluate(plan, model)
    assert breakdown.total > 0 and math.isfinite(breakdown.total)
    assert breakdown.node_times == pytest.approx(
        tuple(model.op_time(graph[d.node], d.device) for d in plan.decisions))
    for region in breakdown.regions:
        assert region.overhead == pytest.approx(model.region_overhead(region.device))
    for cut in breakdown.cuts:
        assert cut.time == pytest.approx(model.transfer_time(cut.nbytes, cut.src, cut.dst))
        assert cut.time > 0
    if strategy == "all_cpu":
        assert breakdown.compute_accel == 0.0
        assert breakdown.overhead == pytest.approx(2e-5)  # one host island's wake-up
        assert breakdown.cuts == ()


def test_get_cost_model_with_a_profile(graphs) -> None:
    model = get_cost_model(TENSORCORE, profile=synthetic_cache(graphs))
    assert isinstance(model, ProfiledCostModel)
    node = graphs["resnet_64"][1]
    assert model.is_measured(node, "cpu")


# ---------------------------------------------------------------------------- copy curves
def test_a_transfer_curve_interpolates_and_extends_its_last_segment() -> None:
    curve = TransferCurve.from_points([[1e6, 3e-4], [1000, 2e-5]], "curve")
    assert curve.sizes == (1000, 1e6)  # sorted by size
    assert curve.time(10) == pytest.approx(2e-5)  # the smallest copy
    assert curve.time(500_500) == pytest.approx(1.6e-4)
    assert curve.time(2e6) == pytest.approx(3e-4 + 2.8e-4 / 999e3 * 1e6)
    assert curve.bandwidth() == pytest.approx(1e6 / 3e-4)


def test_transfer_curve_needs_two_points() -> None:
    with pytest.raises(ProfileError):
        TransferCurve.from_points([[10, 1e-6]], "curve")


# ---------------------------------------------------------------------------- old format
def _converter():
    """experiments/gpu_profile_to_cache.py, the converter of the old two-kind profile format."""
    import importlib.util

    path = REPO_ROOT / "experiments" / "gpu_profile_to_cache.py"
    spec = importlib.util.spec_from_file_location("gpu_profile_to_cache", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_converted_h200_profile_prices_its_measured_ops() -> None:
    converter = _converter()
    old = converter.read_profile(converter.DEFAULT_PROFILE)
    cache = converter.cache_from_measured_gpu()
    model = ProfiledCostModel(cache, TENSORCORE)
    assert set(model.binding) == {"tensorcore", "cuda", "cpu"}
    assert model.binding["tensorcore"] == model.binding["cuda"] != model.binding["cpu"]
    floor = old["executor_op_overhead"]["accel"]["host_per_op_s"]
    per_op = old["executor_op_overhead"]["cpu"]["overhead_per_op_s"]
    for sig in sorted(old["ops"]["accel"])[::40]:
        node = node_from_signature(sig)
        assert model.is_measured(node, "cuda")
        assert model.op_time(node, "tensorcore") == pytest.approx(
            max(old["ops"]["accel"][sig], floor))
        if sig in old["ops"]["cpu"]:
            assert model.op_time(node, "cpu") == pytest.approx(old["ops"]["cpu"][sig] + per_op)
    h2d = TransferCurve.from_points(old["transfers"]["h2d"], "h2d")
    d2h = TransferCurve.from_points(old["transfers"]["d2h"], "d2h")
    for nbytes in (300.0, 2e5, 5e8):
        assert model.transfer_time(nbytes, "cpu", "cuda") == pytest.approx(h2d.time(nbytes))
        assert model.transfer_time(nbytes, "tensorcore", "cpu") == pytest.approx(d2h.time(nbytes))
    assert model.region_overhead("cpu") == pytest.approx(old["region_overhead_s"]["cpu"])
    assert model.region_overhead("tensorcore") == pytest.approx(old["region_overhead_s"]["accel"])
    groups = {m for rec in cache["devices"][model.binding["cpu"]]["ops"].values()
              for m in rec["models"]}
    assert "op:nn.conv2d" in groups


def test_the_converter_takes_model_names_from_graphs(graphs) -> None:
    resnet = synthetic.resnet_v1((1, 1, 1, 1), image=64, name="resnet_64")
    times = {op_signature(n): 1e-5 for n in resnet}
    old = {"schema": "partition_lab.gpu_profile/1", "meta": {"gpu": "G", "host_cpu": "C"},
           "ops": {"accel": times, "cpu": times}, "op_info": {},
           "transfers": {"h2d": COPIES, "d2h": COPIES}, "region_overhead_s": {"accel": 1e-6,
                                                                              "cpu": 2e-6}}
    cache = _converter().cache_from_measured_gpu(old, graphs=[resnet])
    ops = next(iter(cache["devices"].values()))["ops"]
    assert all(rec["models"] == ["resnet_64"] for rec in ops.values())
    node = resnet[0]
    rec = ops[op_signature(node)]
    assert (rec["flops"], rec["bytes"]) == (node.flops, node.bytes_moved)


# ---------------------------------------------------------------------------- signatures
def test_node_from_signature_recovers_flops_and_outputs() -> None:
    graph = synthetic.resnet_v1((1, 1, 1, 1), image=96)
    checked = 0
    for node in graph:
        if node.op in ("nn.conv2d", "nn.dense", "add", "nn.relu"):
            parsed = node_from_signature(op_signature(node))
            assert parsed.flops == pytest.approx(node.flops), op_signature(node)
            assert parsed.outputs == node.outputs, op_signature(node)
            assert op_signature(parsed) == op_signature(node)
            checked += 1
    assert checked > 20
    # Relay's own attributes (the synthetic pool leaves its padding out).
    pool = node_from_signature(
        "nn.max_pool2d(float16[1,112,112,64]){ceil_mode=0,dilation=[1,1],layout=NHWC,"
        "out_layout=,padding=[1,1,1,1],pool_size=[3,3],strides=[2,2]}")
    assert pool.outputs[0].shape == (1, 56, 56, 64)
    assert pool.flops == 56 * 56 * 64 * 9
    conv = node_from_signature(
        "nn.conv2d(float16[1,224,224,3],float16[7,7,3,64]){channels=64,data_layout=NHWC,"
        "dilation=[1,1],groups=1,kernel_layout=HWIO,kernel_size=[7,7],out_dtype=float16,"
        "out_layout=,padding=[3,3,3,3],strides=[2,2]}")
    assert conv.outputs[0].shape == (1, 112, 112, 64)
    assert conv.flops == 2 * 112 * 112 * 64 * 7 * 7 * 3
    with pytest.raises(ProfileError):
        node_from_signature("not a signature")


def test_docstring_examples_run() -> None:
    import doctest

    from partition_lab.cost_models import fit, signatures

    for module in (fit, signatures):
        result = doctest.testmod(module)
        assert result.attempted > 0 and result.failed == 0, module.__name__


# ---------------------------------------------------------------------------- in-graph times
def with_in_graph(cache: dict, graph_name: str, factor: dict[str, float], *,
                  jitter: float = 0.0, seed: int = 1) -> dict:
    """``cache`` where every op of ``graph_name`` also has a time inside that model's graph:
    its priced-alone time (median plus overheads) times ``factor[op class]``, with log-normal
    ``jitter``, as a whole-graph run on each entry would have recorded it."""
    import copy

    rng = np.random.default_rng(seed)
    out = copy.deepcopy(cache)
    for entry in out["devices"].values():
        per_op = entry["overheads"].get("per_op_s", 0.0)
        floor = entry["overheads"].get("op_floor_s") if entry["kind"] != "cpu" else None
        for rec in entry["ops"].values():
            if graph_name not in rec["models"]:
                continue
            alone = max(rec["median_s"], floor) if floor else rec["median_s"] + per_op
            rec["in_graph_s"] = {graph_name: alone * factor[rec["class"]]
                                 * math.exp(rng.normal(0, jitter))}
        entry["graphs"] = {graph_name: {"total_s": 1e-3, "ops": 10, "runs": 5}}
    return out


def test_an_op_measured_inside_a_graph_is_priced_at_that_time(graphs) -> None:
    cache = with_in_graph(synthetic_cache(graphs), "resnet_128",
                          {"matrix": 1.3, "vector": 2.0, "data": 2.5})
    model = ProfiledCostModel(cache, TENSORCORE)
    for node in graphs["resnet_128"]:
        recorded = cache["devices"][CPU]["ops"][op_signature(node)]["in_graph_s"]["resnet_128"]
        assert model.op_time(node, "cpu") == pytest.approx(recorded)
        assert model.op_times([node], "cpu") == [pytest.approx(recorded)]
        assert "inside whole-graph runs of resnet_128" in model.explain(node, "cpu")


def test_other_ops_take_their_class_ratio_and_its_measured_spread(graphs) -> None:
    """Ops without an in-graph time: alone (with overheads) x the median in-graph / alone ratio
    of their op class; the spread of those ratios replaces the assumed in-graph sigma."""
    base = synthetic_cache(graphs)
    plain = ProfiledCostModel(base, TENSORCORE)
    factor = {"matrix": 1.3, "vector": 2.0, "data": 2.5}
    model = ProfiledCostModel(with_in_graph(base, "resnet_128", factor, jitter=0.2), TENSORCORE)
    own = {op_signature(n) for n in graphs["resnet_128"]}
    others = [n for n in graphs["chain_16_56"] if op_signature(n) not in own]
    assert {op_class(n) for n in others} >= {"vector"}
    counts = Counter(cache_class for cache_class in (
        rec["class"] for rec in model.cache["devices"][CPU]["ops"].values() if "in_graph_s" in rec))
    assert counts["vector"] >= MIN_RATIO and counts["data"] < MIN_RATIO
    for node in others:
        ratio = model.op_time(node, "cpu") / plain.op_time(node, "cpu")
        cls = op_class(node)
        if counts[cls] >= MIN_RATIO:  # the class's own median, drawn around factor (sd 0.2)
            assert ratio == pytest.approx(factor[cls], rel=0.25), node.op
        else:  # too few of its class: the median over every class
            assert min(factor.values()) * 0.8 < ratio < max(factor.values()) * 1.2, node.op
        assert "median in-graph / alone ratio" in model.explain(node, "cpu")
        assert model.op_sigma(node, "cpu") == pytest.approx(
            math.hypot(model.entry_of("cpu").spread[op_signature(node)],
                       model.entry_of("cpu").ratio(op_class(node))[1]))
    spreads = [model.entry_of("cpu").ratio(c)[1] for c in ("vector", "matrix")]
    assert all(0.1 < s < 0.3 for s in spreads), spreads  # the jitter's 0.2, measured


def test_without_graph_runs_nothing_changes(graphs) -> None:
    cache = synthetic_cache(graphs)
    model = ProfiledCostModel(cache, TENSORCORE)
    node = graphs["chain_16_56"][0]
    assert model.entry_of("cpu").ratio(op_class(node)) == (1.0, None)
    assert model.op_sigma(node, "cpu") == pytest.approx(
        math.hypot(model.entry_of("cpu").spread[op_signature(node)], 0.25))


def test_copies_that_whole_graph_runs_made_join_the_copy_curve(graphs) -> None:
    """Three runs whose copies the curve prices under 0.5 ms set the fixed part (1 ms); a run
    whose two 6 MB outputs took 8 ms beyond it makes a point at 6 MB of 4 ms each, replacing
    the probe's point at 10 MB (within a factor of 2); a run on another platform is not used."""
    cache = synthetic_cache(graphs)
    plain = ProfiledCostModel(cache, TENSORCORE)

    def run(platform: str, ins: list[float], outs: list[float], extra: float) -> dict:
        price = sum(plain.transfer_time(n, "cpu", "cuda") for n in ins) + sum(
            plain.transfer_time(n, "cuda", "cpu") for n in outs)
        return {"model": "m", "platform": platform, "device": "cuda", "total_s": 1.0,
                "outside_s": price + 1e-3 + extra, "ops": 9, "runs": 3,
                "inputs_bytes": ins, "outputs_bytes": outs}

    small = [run("tensorcore", [1e3], [1e3], 0.0) for _ in range(3)]
    big_in = 1e4
    big = run("tensorcore", [big_in], [6e6, 6e6], 0.0)
    big["outside_s"] = 1e-3 + plain.transfer_time(big_in, "cpu", "cuda") + 8e-3
    other = run("neuron", [1e3], [9e6], 5.0)
    cache["devices"][GPU]["graphs"] = {f"r{i}": r for i, r in enumerate([*small, big, other])}
    model = ProfiledCostModel(cache, TENSORCORE)
    assert model.transfer_time(6e6, "cuda", "cpu") == pytest.approx(
        4e-3 + plain._cast_time(6e6, "cuda", "cpu"))
    assert model.transfer_time(1e5, "cuda", "cpu") == plain.transfer_time(1e5, "cuda", "cpu")
    assert model.transfer_time(6e6, "cpu", "cuda") == plain.transfer_time(6e6, "cpu", "cuda")
    del cache["devices"][GPU]["graphs"]["r3"]
    unchanged = ProfiledCostModel(cache, TENSORCORE)
    assert unchanged.transfer_time(6e6, "cuda", "cpu") == plain.transfer_time(6e6, "cuda", "cpu")


def test_ambiguous_entries_are_explained_in_the_readers_terms(graphs) -> None:
    from partition_lab._audience import command_line

    cache = synthetic_cache(graphs)
    cache["devices"]["gpu-2"] = dict(cache["devices"][GPU])
    del cache["bindings"]
    with pytest.raises(ProfileError, match=r"pass binding=\{device: key\}"):
        ProfiledCostModel(cache, TENSORCORE)
    with command_line(), pytest.raises(ProfileError, match=r"partition-lab profile MODEL "
                                                           r"--platform tensorcore"):
        ProfiledCostModel(cache, TENSORCORE)
