"""Strategies: registry, invariants over every strategy, optimal vs brute force, the field story."""

from __future__ import annotations

import doctest
import itertools
import json
import random

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from optimal_notes import check_optimal_note
from partition_lab import synthetic
from partition_lab.comparison import compare_plans
from partition_lab.core.graph import OpGraph
from partition_lab.core.platform import HOST
from partition_lab.core.support import Verdict
from partition_lab.cost_models import evaluate, get_cost_model
from partition_lab.errors import PartitionLabError, PlanError, UnknownStrategyError
from partition_lab.strategies import (
    NotApplicableError,
    available_strategies,
    get_strategy,
    option_fields,
)
from partition_lab.strategies.costing import CostTables
from partition_lab.targets import get_platform

ALL = ["greedy", "min_size", "no_mac", "cost", "optimal", "all_cpu", "all_accel"]
NEURON = get_cost_model(get_platform("neuron@2020"))
TENSORCORE = get_cost_model(get_platform("tensorcore"))


# ---------------------------------------------------------------------------- registry
def test_registry_lists_every_strategy_and_round_trips() -> None:
    assert available_strategies() == ALL
    for name in ALL:
        strategy = get_strategy(name)
        assert strategy.name == name
        defaults = {key: default for key, _, default, _ in option_fields(name)}
        assert strategy.options() == defaults
        assert get_strategy(name, **{k: str(v) for k, v in defaults.items()}) == strategy


def test_unknown_strategy_lists_the_known_ones() -> None:
    with pytest.raises(UnknownStrategyError, match="available: greedy, min_size"):
        get_strategy("fastest")
    with pytest.raises(UnknownStrategyError):
        option_fields("fastest")


@pytest.mark.parametrize(("name", "options", "message"), [
    ("min_size", {"min_op": 3}, "no option 'min_op'; its options: min_ops"),
    ("min_size", {"min_ops": "three"}, "min_ops='three' must be an integer"),
    ("min_size", {"min_ops": 0}, "min_ops must be >= 1"),
    ("min_size", {"min_ops": 2.5}, "must be an integer"),
    ("greedy", {"min_ops": 3}, "its options: none"),
    ("optimal", {"exact_limit": "-1"}, "exact_limit must be >= 0"),
    ("cost", {"max_rounds": True}, "must be a number"),
])
def test_bad_options_name_the_option(name: str, options: dict, message: str) -> None:
    with pytest.raises(PartitionLabError, match=message):
        get_strategy(name, **options)


def test_option_fields_describe_the_cli_options() -> None:
    assert option_fields("min_size") == [
        ("min_ops", int, 3, "smallest outlined region kept, in ops")]
    assert get_strategy("min_size", min_ops="5").min_ops == 5


def test_cost_strategies_need_a_cost_model() -> None:
    graph = synthetic.chain(["nn.conv2d", "nn.relu"])
    for name in ("cost", "optimal"):
        with pytest.raises(PartitionLabError, match="needs a cost model"):
            get_strategy(name).run(graph, synthetic.one_accelerator(synthetic.verdicts_by_op(graph)))


# ---------------------------------------------------------------------------- fixtures
def _chain_with_unsupported() -> tuple[OpGraph, list[Verdict]]:
    ops = ["nn.conv2d", "nn.relu", "tanh", "nn.batch_norm", "nn.relu", "tanh", "nn.conv2d",
           "nn.relu", "nn.conv2d", "tanh", "nn.relu"]
    graph = synthetic.chain(ops, name="chain_unsupported")
    return graph, synthetic.verdicts_by_op(graph, ["tanh"], target="neuron@2020")


def _anchored_layered() -> tuple[OpGraph, list[Verdict]]:
    graph = synthetic.layered_dag(120, seed=4, name="anchored")
    return graph, synthetic.random_verdicts(graph, seed=4, unsupported=0.25, anchored=True)


CASES = {
    "layered": lambda: (lambda g: (g, synthetic.random_verdicts(g, seed=2, unsupported=0.2)))(
        synthetic.layered_dag(300, seed=2)),
    "diamond": lambda: (lambda g: (g, synthetic.verdicts_by_op(g, ["nn.relu"])))(
        synthetic.diamond(branches=3)),
    "chain_unsupported": _chain_with_unsupported,
    "anchored": _anchored_layered,
    "simple_pose_like": lambda: (lambda g: (g, synthetic.verdicts_by_op(
        g, ["nn.conv2d_transpose"])))(synthetic.simple_pose_like()),
    "all_supported": lambda: (lambda g: (g, synthetic.verdicts_by_op(g)))(
        synthetic.diamond(depth=3)),
    "random": lambda: (lambda g: (g, synthetic.random_verdicts(g, seed=9, unsupported=0.3)))(
        synthetic.random_dag(40, seed=9, max_fan_in=3)),
}


# ---------------------------------------------------------------------------- invariants
@pytest.mark.parametrize("model", [NEURON, TENSORCORE], ids=["inferentia1", "t4"])
@pytest.mark.parametrize("case", list(CASES))
def test_every_strategy_gives_a_valid_explained_plan_and_optimal_is_lowest(case, model) -> None:
    graph, verdicts = CASES[case]()
    comparison = compare_plans(graph, synthetic.one_accelerator(verdicts, "acc"), cost_model=model)
    totals = {}
    for row in comparison.rows:
        if not row.applicable:
            assert row.strategy == "all_accel"
            assert not all(v.supported for v in verdicts) or any(v.anchor for v in verdicts)
            continue
        plan = comparison.plans[row.strategy]
        plan.validate()
        assert plan.strategy == row.strategy
        for d in plan.decisions:
            assert d.reason, (row.strategy, graph[d.node].name)
            if d.device == HOST and verdicts[d.node].supported and row.strategy != "all_cpu":
                assert "the strategy kept it on the CPU" not in d.reason, d.reason
        tables = CostTables(graph, model, plan.platform, plan.support.units)
        device = [plan.platform.index(d.device) for d in plan.decisions]
        regions = [r.nodes for r in plan.regions]
        assert tables.total(device, regions) == pytest.approx(row.total_s, rel=1e-9)
        totals[row.strategy] = row.total_s
    check_optimal_note(comparison.plans["optimal"].notes, totals["optimal"], totals)
    assert totals["cost"] <= totals["greedy"] * (1 + 1e-9)


def test_anchorless_regions_are_dropped_with_a_reason() -> None:
    graph = synthetic.chain(["nn.conv2d", "nn.relu", "tanh", "nn.relu", "add", "tanh",
                             "nn.conv2d"])
    verdicts = synthetic.verdicts_by_op(graph, ["tanh"], anchors=["nn.conv2d"],
                                        target="tensorcore")
    plan = get_strategy("greedy").run(graph, synthetic.one_accelerator(verdicts, "tensorcore"))
    plan.validate()
    assert [len(r.nodes) for r in plan.accelerator_regions] == [2, 1]
    reason = plan.decisions[3].reason
    assert plan.decisions[3].device == HOST
    assert reason == ("its group of supported ops holds no tensorcore compute op "
                      "(only nn.relu, add) to ride along with")


def test_min_size_and_no_mac_say_why() -> None:
    graph, verdicts = _chain_with_unsupported()
    plan = get_strategy("min_size", min_ops=3).run(graph, synthetic.one_accelerator(verdicts, "neuron@2020"))
    assert all(len(r.nodes) >= 3 for r in plan.accelerator_regions)
    assert "2 ops on neuron@2020 (nn.batch_norm, nn.relu) is smaller than min_ops=3" in \
        plan.decisions[3].reason
    why = plan.decisions[3].why
    assert (why.code, why.rule, why.device) == ("min-size", "min_ops=3", "neuron@2020")
    plan = get_strategy("no_mac").run(graph, synthetic.one_accelerator(verdicts, "neuron@2020"))
    assert "does no multiply-accumulate work" in plan.decisions[3].reason
    assert all(any(graph[n].op == "nn.conv2d" for n in r.nodes) for r in plan.accelerator_regions)


def test_all_accel_is_a_bound_only_when_everything_is_supported() -> None:
    graph, verdicts = _chain_with_unsupported()
    with pytest.raises(NotApplicableError, match=r"does not support 3 op\(s\) \(tanh\): tanh_2"):
        get_strategy("all_accel").run(graph, synthetic.one_accelerator(verdicts, "neuron@2020"))
    supported = synthetic.verdicts_by_op(graph)
    plan = get_strategy("all_accel").run(graph, synthetic.one_accelerator(supported, "neuron@2020"))
    assert len(plan.accelerator_nodes) == len(graph) and len(plan.regions) == 1


def test_all_cpu_is_the_baseline() -> None:
    graph, verdicts = _chain_with_unsupported()
    plan = get_strategy("all_cpu").run(graph, synthetic.one_accelerator(verdicts, "neuron@2020"))
    assert plan.accelerator_nodes == [] and len(plan.regions) == 1
    assert plan.decisions[0].reason.startswith("all_cpu")
    assert plan.decisions[2].reason == verdicts[2].reason


def test_greedy_regions_are_form_regions() -> None:
    graph, verdicts = CASES["layered"]()
    plan = get_strategy("greedy").run(graph, synthetic.one_accelerator(verdicts, "acc"))
    again = synthetic.plan_on(graph, synthetic.one_accelerator(verdicts, "acc"), "greedy", [n for n, v in enumerate(verdicts) if v.supported])
    assert [r.nodes for r in plan.regions] == [r.nodes for r in again.regions]


def test_cost_scales_to_a_few_thousand_ops() -> None:
    graph = synthetic.layered_dag(3000, seed=5)
    verdicts = synthetic.random_verdicts(graph, seed=5, unsupported=0.15)
    plan = get_strategy("cost").run(graph, synthetic.one_accelerator(verdicts, "acc"), cost_model=NEURON)
    plan.validate()
    greedy = get_strategy("greedy").run(graph, synthetic.one_accelerator(verdicts, "acc"))
    assert evaluate(plan, NEURON).total < evaluate(greedy, NEURON).total


# ---------------------------------------------------------------------------- the field story
def test_simple_pose_story_cost_and_optimal_keep_bn_relu_regions_on_the_cpu() -> None:
    """seeds/001: SimplePose on neuron@2020 split into 4 subgraphs, 2 of them only BN+ReLU;
    the engineer excluded those by name (38.7 -> 32.0 ms). cost/optimal must find that alone."""
    graph = synthetic.simple_pose_like()
    verdicts = synthetic.verdicts_by_op(graph, ["nn.conv2d_transpose"], target="neuron@2020")
    greedy = get_strategy("greedy").run(graph, synthetic.one_accelerator(verdicts, "neuron@2020"))
    regions = greedy.accelerator_regions
    assert len(regions) == 4
    bn_relu = [r for r in regions if {graph[n].op for n in r.nodes} == {"nn.batch_norm", "nn.relu"}]
    assert len(bn_relu) == 2
    excluded = {n for r in bn_relu for n in r.nodes}
    names = {graph[n].source_name for n in excluded}
    assert names == {"batchnormcudnnoff0_fwd", "relu0_fwd", "batchnormcudnnoff1_fwd", "relu1_fwd"}
    by_hand = synthetic.plan_on(graph, synthetic.one_accelerator(verdicts, "neuron@2020"), "excl_node_names", [n for n in greedy.accelerator_nodes if n not in excluded])
    assert len(by_hand.accelerator_regions) == 2
    hand_total = evaluate(by_hand, NEURON).total
    greedy_total = evaluate(greedy, NEURON).total
    for name in ("cost", "optimal"):
        plan = get_strategy(name).run(graph, synthetic.one_accelerator(verdicts, "neuron@2020"), cost_model=NEURON)
        assert all(plan.device_of(n) == HOST for n in excluded), name
        total = evaluate(plan, NEURON).total
        assert total <= hand_total * (1 + 1e-9) and total < greedy_total, name
    cost_plan = get_strategy("cost").run(graph, synthetic.one_accelerator(verdicts, "neuron@2020"),
                                         cost_model=NEURON)
    reason = cost_plan.decisions[min(excluded)].reason
    assert reason.startswith("its region of 2 ops on neuron@2020 (nn.batch_norm, nn.relu) "
                             "excluded: predicted ")
    assert "of copies" in reason and "on CPU" in reason


# ---------------------------------------------------------------------------- optimal
class RandomTableModel:
    """A cost model with arbitrary per-node times: what the optimum must be exact for."""

    def __init__(self, graph: OpGraph, seed: int) -> None:
        rng = random.Random(seed)
        self.name = f"random-table({seed})"
        self.cpu = [rng.uniform(0.1, 5.0) for _ in graph]
        self.accel = [rng.uniform(0.05, 3.0) for _ in graph]
        self.latency = rng.uniform(0.0, 1.0)
        self.per_byte = rng.uniform(0.0, 2.0) / 256
        self.launch = rng.choice((0.0, rng.uniform(0.0, 3.0)))

    def op_time(self, node, kind) -> float:
        return (self.cpu if kind == "cpu" else self.accel)[node.id]

    def transfer_time(self, nbytes, src, dst) -> float:
        return 0.0 if src == dst else self.latency + nbytes * self.per_byte

    def region_overhead(self, kind) -> float:
        return self.launch if kind == "accel" else 0.0


def brute_force(graph: OpGraph, verdicts: list[Verdict], model) -> float:
    """Minimum total over every assignment of the supported ops that validates."""
    supported = [n for n, v in enumerate(verdicts) if v.supported]
    best = float("inf")
    for bits in itertools.product((False, True), repeat=len(supported)):
        chosen = [n for n, on in zip(supported, bits, strict=True) if on]
        plan = synthetic.plan_on(graph, synthetic.one_accelerator(verdicts, "acc"), "brute", chosen)
        try:
            plan.validate()
        except PlanError:
            continue  # an accelerator region without an anchor op
        best = min(best, evaluate(plan, model).total)
    return best


@st.composite
def small_problems(draw: st.DrawFn):
    seed = draw(st.integers(0, 2 ** 31))
    n = draw(st.integers(1, 14))
    graph = synthetic.random_dag(n, seed=seed, max_fan_in=draw(st.integers(1, 3)),
                                 window=draw(st.integers(1, 5)), size=16)
    verdicts = synthetic.random_verdicts(graph, seed=seed, unsupported=draw(
        st.sampled_from((0.0, 0.2, 0.4))), anchored=draw(st.booleans()))
    return graph, verdicts, RandomTableModel(graph, seed)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_problems())
def test_optimal_equals_brute_force_on_small_graphs(problem) -> None:
    graph, verdicts, model = problem
    assume(sum(v.supported for v in verdicts) <= 11)  # keeps the brute force under a second
    plan = get_strategy("optimal").run(graph, synthetic.one_accelerator(verdicts, "acc"), cost_model=model)
    plan.validate()
    assert evaluate(plan, model).total == pytest.approx(brute_force(graph, verdicts, model),
                                                        rel=1e-9, abs=1e-12)
    assert "proven optimal" in plan.notes[0]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_problems())
def test_every_strategy_is_valid_on_random_problems(problem) -> None:
    graph, verdicts, model = problem
    assume(sum(v.supported for v in verdicts) <= 11)  # keeps the brute force under a second
    totals = {}
    for name in ALL:
        try:
            plan = get_strategy(name).run(graph, synthetic.one_accelerator(verdicts, "acc"), cost_model=model)
        except NotApplicableError:
            continue
        plan.validate()
        totals[name] = evaluate(plan, model).total
    # No strategy beats the brute-force optimum (an oracle independent of every strategy).
    best = brute_force(graph, verdicts, model)
    assert all(t >= best * (1 - 1e-9) - 1e-12 for t in totals.values()), (best, totals)


def test_optimal_reports_its_gap_beyond_the_exact_limit() -> None:
    graph, verdicts = CASES["layered"]()
    plan = get_strategy("optimal", exact_limit=4).run(graph, synthetic.one_accelerator(verdicts, "acc"),
                                                      cost_model=NEURON)
    assert "exhaustive" not in plan.notes[0]  # beyond the exact limit: the bound and its gap
    totals = {name: row.total_s for name, row in ((r.strategy, r) for r in compare_plans(graph, synthetic.one_accelerator(verdicts, "acc"), cost_model=NEURON).rows) if row.applicable}
    check_optimal_note(plan.notes, evaluate(plan, NEURON).total, totals)


# ---------------------------------------------------------------------------- compare
def test_compare_table_json_and_best() -> None:
    graph, verdicts = _chain_with_unsupported()
    comparison = compare_plans(graph, synthetic.one_accelerator(verdicts, "neuron@2020"), cost_model=NEURON)
    assert [r.strategy for r in comparison.rows] == ALL
    assert comparison.row("all_accel").applicable is False
    assert comparison.row("all_accel").total_s is None
    best = comparison.best()
    assert best is not None and best.strategy == "cost"  # "best" is what cost takes
    lowest = comparison.lowest()
    assert lowest is not None
    assert lowest.total_s == min(r.total_s for r in comparison.rows if r.applicable)
    data = json.loads(comparison.to_json())
    assert data["schema"] == "partition_lab.compare/3"
    assert data["best"] == best.strategy
    assert set(data) == {"schema", "graph", "target", "cost_model", "ops", "devices",
                         "default_strategy", "best", "best_reason", "rows"}
    assert set(data["rows"][0]) == {
        "strategy", "applicable", "accel_regions", "ops_on_accel", "tensors_crossing",
        "bytes_crossing", "compute_cpu_s", "compute_accel_s", "transfer_s", "overhead_s",
        "total_s", "partition_s", "notes", "ops_by_device", "compute_by_device_s",
        "total_sigma_s", "ops_measured", "gain_s", "gain_sigma_s", "robust"}
    table = comparison.to_table()
    for name in ALL:
        assert name in table
    assert "n/a" in table and f"best: {best.strategy}" in table
    # Plain text off a terminal (rich's table without box or colour): stable for scripts.
    assert "\x1b" not in table and "┃" not in table and " ms " in table
    assert table == comparison.to_table() and not any(line != line.rstrip()
                                                      for line in table.splitlines())
    greedy = comparison.row("greedy")
    assert greedy.total_s == pytest.approx(
        greedy.compute_cpu_s + greedy.compute_accel_s + greedy.transfer_s + greedy.overhead_s)


def test_compare_a_subset_with_configured_strategies() -> None:
    graph, verdicts = _chain_with_unsupported()
    comparison = compare_plans(graph, synthetic.one_accelerator(verdicts, "neuron@2020"), cost_model=NEURON,
                               strategies=["greedy", get_strategy("min_size", min_ops=5)])
    assert [r.strategy for r in comparison.rows] == ["greedy", "min_size"]
    assert comparison.plans["min_size"].options == {"min_ops": 5}


def test_docstring_examples_run() -> None:
    from partition_lab import strategies

    for module in (strategies,):  # comparison has no doctest: testing it would run nothing
        result = doctest.testmod(module)
        assert result.attempted > 0 and result.failed == 0
