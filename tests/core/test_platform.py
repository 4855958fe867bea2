"""Platforms with N devices: data, support per (op, device), strategies and the exact optimum."""

from __future__ import annotations

import itertools
import json
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from partition_lab import synthetic
from partition_lab.core.graph import OpGraph
from partition_lab.core.ops import MAC_OPS
from partition_lab.core.plan import PartitionPlan
from partition_lab.core.platform import AS_PREPARED, HOST, Device, Platform, host_device
from partition_lab.core.support import Support, Verdict, host_verdict
from partition_lab.cost_models import evaluate, get_cost_model
from partition_lab.errors import PlanError, TargetSpecError
from partition_lab.relay.passes.annotate import support_table
from partition_lab.strategies import NotApplicableError, available_strategies, get_strategy
from partition_lab.strategies.costing import CostTables
from partition_lab.targets import TargetSpec, get_platform


# ---------------------------------------------------------------------------- platforms
def test_built_in_platforms() -> None:
    tensorcore = get_platform("tensorcore")
    assert tensorcore.names == ["tensorcore", "cuda", "cpu"]
    assert [d.role for d in tensorcore.devices] == ["byoc", "main", "host"]
    assert tensorcore.main.name == "cuda" and tensorcore.host.precision == "float32"
    assert tensorcore.device("tensorcore").domain == tensorcore.device("cuda").domain
    assert tensorcore.device("tensorcore").compiler == "tensorcore"
    neuron = get_platform("neuron@2020")
    assert neuron.names == ["neuron@2020", "cpu"] and neuron.primary.compiler == "neuron_2020"
    assert neuron.main.name == "cpu"
    assert get_platform("cpu").names == ["cpu"]
    assert get_platform("tensorcore", precision="fp32").primary.target.options["precision"] == "fp32"


def test_preference_is_a_field_not_list_order() -> None:
    spec = TargetSpec("dsp", supports_all=True)
    late = Device("dsp", spec, preference=50)
    early = Device("npu", TargetSpec("npu", supports_all=True), preference=5)
    platform = Platform("p", (early, host_device(), late))
    assert platform.names == ["dsp", "npu", "cpu"]


@pytest.mark.parametrize("devices, message", [
    ((Device("cpu", TargetSpec("cpu", supports_all=True)), host_device()), "repeat"),
    ((Device("npu", TargetSpec("npu", supports_all=True)),), "exactly one host"),
])
def test_platform_rules_are_checked(devices, message) -> None:
    with pytest.raises(TargetSpecError, match=message):
        Platform("bad", devices)


def test_platform_file_round_trip(tmp_path) -> None:
    path = tmp_path / "two.toml"
    path.write_text('name = "two"\n'
                    '[[devices]]\nname = "npu"\ntarget = "neuron@2020"\nmemory = "npu"\n'
                    'preference = 5\nprofile = "inferentia1"\n'
                    '[[devices]]\nname = "gpu"\ntarget = "cpu"\nrole = "main"\nmemory = "gpu"\n'
                    'preference = 1\nprofile = "t4"\nmatrix_engine = false\n'
                    '[[devices]]\nname = "cpu"\nrole = "host"\n')
    platform = get_platform(str(path))
    assert platform.names == ["npu", "gpu", "cpu"]
    assert platform.device("npu").compiler == "npu" and platform.main.name == "gpu"
    model = get_cost_model(platform)
    assert model.transfer_time(1e6, "npu", "gpu") > 0  # two memories: a copy


def test_platform_file_errors_name_the_problem(tmp_path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('[[devices]]\nname = "npu"\n[[devices]]\nname = "cpu"\nrole = "host"\n')
    with pytest.raises(TargetSpecError, match="needs a target"):
        get_platform(str(path))


# ---------------------------------------------------------------------------- a 3-device world
def three_devices(anchored: bool = True) -> Platform:
    """Tensor-Core-like (anchored, outlined) + CUDA-core-like (main) in one memory + host."""
    fast = Device("fast", TargetSpec("fast", supports_all=True), role="byoc", memory="gpu",
                  compiler="fast", preference=20)
    general = Device("general", TargetSpec("general", supports_all=True), role="main",
                     memory="gpu", preference=10)
    return Platform("three", (fast, general, host_device("float32")))


def random_support(graph: OpGraph, platform: Platform, seed: int,
                   anchored: bool = True) -> Support:
    rng = random.Random(seed)
    table: dict[str, list[Verdict]] = {HOST: [host_verdict() for _ in graph]}
    for device in platform.accelerators:
        row = []
        for node in graph:
            ok = rng.random() < (0.6 if device.role == "byoc" else 0.85)
            row.append(Verdict(ok, f"{device.name} {'takes' if ok else 'rejects'} {node.op}",
                               "random", anchor=ok and anchored and device.role == "byoc"
                               and node.op in MAC_OPS))
        table[device.name] = row
    return Support(platform, table)


class RandomDeviceModel:
    """Random op times per device, copies between memories, a cast into the fp32 host."""

    def __init__(self, graph: OpGraph, platform: Platform, seed: int) -> None:
        rng = random.Random(seed)
        self.name = f"random-devices({seed})"
        self.times = {d.name: [rng.uniform(0.05, 5.0) for _ in graph] for d in platform.devices}
        self.domain = {d.name: d.domain for d in platform.devices}
        self.memory = {d.name: d.memory for d in platform.devices}
        self.latency, self.per_byte = rng.uniform(0.0, 1.0), rng.uniform(0.0, 2.0) / 256
        self.cast = rng.uniform(0.0, 1.0) / 256
        self.launch = {d.name: (0.0 if d.role != "byoc" else rng.choice((0.0, rng.uniform(0, 3))))
                       for d in platform.devices}

    def op_time(self, node, device) -> float:
        return self.times[device][node.id]

    def transfer_time(self, nbytes, src, dst) -> float:
        if self.domain[src] == self.domain[dst]:
            return 0.0
        copy = self.latency + nbytes * self.per_byte if self.memory[src] != self.memory[dst] else 0
        cast = nbytes * self.cast if self.domain[src][1] != self.domain[dst][1] else 0.0
        return copy + cast

    def region_overhead(self, device) -> float:
        return self.launch[device]


def brute_force(graph: OpGraph, support: Support, model) -> float:
    """Minimum predicted total over every assignment that validates."""
    best = float("inf")
    choices = [support.allowed(n) for n in range(len(graph))]
    names = support.platform.names
    for assignment in itertools.product(*choices):
        plan = PartitionPlan.from_devices(graph, support, "brute", [names[d] for d in assignment])
        try:
            plan.validate()
        except PlanError:
            continue  # a region of the anchored device without an anchor op
        best = min(best, evaluate(plan, model).total)
    return best


@st.composite
def three_device_problems(draw: st.DrawFn):
    seed = draw(st.integers(0, 2 ** 31))
    n = draw(st.integers(1, 9))
    graph = synthetic.random_dag(n, seed=seed, max_fan_in=draw(st.integers(1, 3)),
                                 window=draw(st.integers(1, 4)), size=16)
    platform = three_devices()
    support = random_support(graph, platform, seed, anchored=draw(st.booleans()))
    return graph, support, RandomDeviceModel(graph, platform, seed)


@settings(max_examples=35, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(three_device_problems())
def test_optimal_equals_brute_force_with_three_devices(problem) -> None:
    graph, support, model = problem
    plan = get_strategy("optimal").run(graph, support, cost_model=model)
    plan.validate()
    assert evaluate(plan, model).total == pytest.approx(brute_force(graph, support, model),
                                                        rel=1e-9, abs=1e-12)
    assert "proven optimal" in plan.notes[0]


@settings(max_examples=35, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(three_device_problems())
def test_cost_tables_price_plans_as_evaluate_does(problem) -> None:
    graph, support, model = problem
    tables = CostTables(graph, model, support.platform)
    for name in ("greedy", "cost", "all_cpu"):
        plan = get_strategy(name).run(graph, support, cost_model=model)
        plan.validate()
        device = [support.platform.index(d.device) for d in plan.decisions]
        regions = [r.nodes for r in plan.regions]
        assert tables.total(device, regions) == pytest.approx(evaluate(plan, model).total,
                                                              rel=1e-9, abs=1e-12)


def test_every_strategy_is_valid_with_three_devices() -> None:
    for seed in range(25):
        graph = synthetic.random_dag(40, seed=seed, max_fan_in=3, window=5, size=16)
        support = random_support(graph, three_devices(), seed)
        model = RandomDeviceModel(graph, support.platform, seed)
        for name in available_strategies():
            try:
                plan = get_strategy(name).run(graph, support, cost_model=model)
            except NotApplicableError:
                continue
            plan.validate()
            assert all(d.reason for d in plan.decisions)


# ---------------------------------------------------------------------------- greedy semantics
def test_greedy_puts_ops_a_byoc_device_rejects_on_the_general_cores_not_the_host() -> None:
    graph = synthetic.chain(["nn.conv2d", "nn.relu", "nn.conv2d", "tanh", "nn.conv2d"])
    platform = three_devices()
    rejects_tanh = [Verdict(node.op != "tanh", "fast rule", "r", anchor=node.op == "nn.conv2d")
                    for node in graph]
    support = Support(platform, {"fast": rejects_tanh,
                                 "general": [Verdict(True, "all", "r") for _ in graph],
                                 HOST: [host_verdict() for _ in graph]})
    plan = get_strategy("greedy").run(graph, support)
    devices = [d.device for d in plan.decisions]
    assert devices == ["fast", "fast", "fast", "general", "fast"]
    tanh = plan.decisions[3]
    assert "fast rule" in tanh.reason  # why it is not on the preferred device


def test_an_anchorless_group_falls_back_to_the_next_device() -> None:
    graph = synthetic.chain(["nn.conv2d", "tanh", "nn.relu", "add"])
    platform = three_devices()
    fast = [Verdict(node.op != "tanh", "fast rule", "r", anchor=node.op == "nn.conv2d")
            for node in graph]
    support = Support(platform, {"fast": fast, "general": [Verdict(True, "ok", "r")] * 4,
                                 HOST: [host_verdict()] * 4})
    plan = get_strategy("greedy").run(graph, support)
    assert [d.device for d in plan.decisions] == ["fast", "general", "general", "general"]
    assert "ride along" in plan.decisions[2].reason


def test_tensorcore_rejects_go_to_cuda_on_a_resnet_at_batch_1() -> None:
    graph = synthetic.resnet_v1((1, 1, 1, 1), image=64, classes=10)
    support = support_table(graph, get_platform("tensorcore"))
    plan = get_strategy("greedy").run(graph, support)
    counts = plan.ops_per_device()
    assert counts["cpu"] == 0 and counts["cuda"] == len(graph)  # batch 1: no Tensor Core conv


# ---------------------------------------------------------------------------- plans as data
def test_plan_json_round_trips_and_plan_1_files_still_load() -> None:
    graph = synthetic.chain(["nn.conv2d", "tanh", "nn.conv2d"])
    support = random_support(graph, three_devices(anchored=False), 3, anchored=False)
    plan = get_strategy("greedy").run(graph, support)
    again = PartitionPlan.from_dict(graph, json.loads(plan.to_json()))
    assert again.to_dict() == plan.to_dict()
    again.validate()
    old = {"schema": "partition_lab.plan/1", "target": "acc", "strategy": "greedy",
           "regions": [{"id": 0, "device": "acc", "nodes": [0]},
                       {"id": 1, "device": "cpu", "nodes": [1]},
                       {"id": 2, "device": "acc", "nodes": [2]}],
           "nodes": [{"id": i, "device": dev, "region": i, "reason": "r", "supported": ok,
                      "support_reason": "why", "support_rule": "x", "anchor": False}
                     for i, (dev, ok) in enumerate([("acc", True), ("cpu", False),
                                                    ("acc", True)])]}
    loaded = PartitionPlan.from_dict(graph, old)
    loaded.validate()
    assert loaded.platform.names == ["acc", "cpu"] and loaded.regions[0].label == "accel0"


def test_validate_catches_unknown_devices_rejected_ops_and_shuffled_regions() -> None:
    graph = synthetic.chain(["nn.conv2d", "tanh", "nn.conv2d"])
    platform = three_devices()
    support = Support(platform, {
        "fast": [Verdict(n.op != "tanh", "rule", "r", anchor=True) for n in graph],
        "general": [Verdict(True, "ok", "r")] * 3, HOST: [host_verdict()] * 3})
    plan = get_strategy("greedy").run(graph, support)
    data = plan.to_dict()
    data["nodes"][1]["device"] = data["regions"][1]["device"] = "fast"
    with pytest.raises(PlanError, match="fast rejected"):
        PartitionPlan.from_dict(graph, data, platform=platform).validate()
    data = plan.to_dict()
    data["regions"].reverse()
    with pytest.raises(PlanError, match="at position"):
        PartitionPlan.from_dict(graph, data, platform=platform).validate()
    data = plan.to_dict()
    data["nodes"][1]["device"] = data["regions"][1]["device"] = "dsp"
    with pytest.raises(PlanError, match="not a device"):
        PartitionPlan.from_dict(graph, data, platform=platform).validate()


def test_host_islands_of_an_fp16_gpu_program_pay_casts() -> None:
    graph = synthetic.chain(["nn.conv2d", "tanh", "nn.conv2d"], dtype="float16")
    platform = get_platform("tensorcore")
    model = get_cost_model(platform)
    support = Support(platform, {d.name: [Verdict(True, "ok", "r", anchor=True)] * 3
                                 for d in platform.devices})
    on_gpu = PartitionPlan.from_devices(graph, support, "t", ["cuda", "cuda", "cuda"])
    island = PartitionPlan.from_devices(graph, support, "t", ["cuda", "cpu", "cuda"])
    cuts = evaluate(island, model).cuts
    assert len(cuts) >= 2 and all(c.time > model.link.transfer_time(c.nbytes) for c in cuts
                                  if {c.src, c.dst} == {"cuda", "cpu"})
    assert evaluate(on_gpu, model).transfer < evaluate(island, model).transfer
    assert platform.device("cuda").precision == AS_PREPARED


# ---------------------------------------------------------------------------- reasons as data
def test_reasons_are_data_and_the_summary_groups_by_them() -> None:
    graph = synthetic.resnet_v1((1, 1, 1, 1), image=64, classes=10)
    support = support_table(graph, get_platform("tensorcore"))
    plan = get_strategy("greedy").run(graph, support)
    convs = [d for d in plan.decisions if graph[d.node].op == "nn.conv2d"]
    assert {d.why.code for d in convs} == {"rejected"}
    assert {d.why.device for d in convs} == {"tensorcore"}
    riders = [d for d in plan.decisions if graph[d.node].op == "nn.relu"]
    assert {(d.why.code, d.why.rule) for d in riders} == {("no-anchor", "anchor")}
    groups = plan.reason_groups()
    # Every op of a group shares code, deciding device and rule; groups never mix them.
    for group in groups:
        assert len({(d.device, d.why.group_key()) for d in group.decisions}) == 1
    assert sum(len(g.decisions) for g in groups) == len(graph)  # none on the preferred device
    lines = plan.summary().splitlines()
    dense = next(line for line in lines if "nn.dense" in line and "on cuda:" in line)
    assert "nn.conv2d" not in dense.split(":", 2)[2]  # a dense is not explained as a conv
    data = json.loads(plan.to_json())
    assert data["nodes"][0]["why"]["code"] == "rejected"
    again = PartitionPlan.from_dict(graph, data, platform=plan.platform)
    assert again.decisions[0].why == plan.decisions[0].why


def test_platform_docstring_examples_run() -> None:
    import doctest

    from partition_lab.targets import platform_files

    result = doctest.testmod(platform_files)
    assert result.attempted > 0 and result.failed == 0
