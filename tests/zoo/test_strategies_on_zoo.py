"""Every strategy on every full-size zoo model, both accelerator targets, and the report stories
told with the Inferentia1 profile."""

from __future__ import annotations

import functools

import pytest

import partition_lab
from optimal_notes import check_optimal_note
from partition_lab import synthetic, zoo
from partition_lab.api import analyze
from partition_lab.comparison import compare_plans
from partition_lab.cost_models.base import evaluate

# A relative slack for float sums taken in different orders.
EPS = 1e-9


@functools.cache
def _analysis(model: str, target: str):
    mod, params = zoo.load(model)
    return analyze(mod, target, params=params, name=model)


@functools.cache
def _comparison(model: str, target: str):
    a = _analysis(model, target)
    return compare_plans(a.graph, a.support, cost_model=a.cost_model)


@pytest.mark.parametrize("target", ["neuron@2020", "neuron", "tensorcore", "cpu"])
@pytest.mark.parametrize("model", zoo.names())
def test_every_strategy_valid_on_every_built_in_platform(model: str, target: str) -> None:
    comparison = _comparison(model, target)
    platform = _analysis(model, target).platform
    applicable = [r for r in comparison.rows if r.applicable]
    assert {r.strategy for r in applicable} >= {"greedy", "min_size", "no_mac", "cost",
                                                "optimal", "all_cpu"}
    for name, plan in comparison.plans.items():
        plan.validate()
        assert plan.strategy == name and plan.platform is platform
        assert all(d.reason and d.why is not None for d in plan.decisions)
    greedy = comparison.plans["greedy"].ops_per_device()
    if target == "tensorcore":
        # Every op the Tensor Cores reject runs on the CUDA cores: nothing goes to the host.
        assert greedy["cpu"] == 0 and greedy["tensorcore"] + greedy["cuda"] == len(
            comparison.graph)
    if target == "cpu":
        assert greedy == {"cpu": len(comparison.graph)}
    check_optimal_note(comparison.plans["optimal"].notes, comparison.row("optimal").total_s,
                       {r.strategy: r.total_s for r in applicable})


@pytest.mark.parametrize("model", zoo.names())
def test_the_default_on_tensorcore_is_never_predicted_slower_than_greedy(model: str) -> None:
    """Without a profile of one's own, tensorcore is priced by the shipped H200 profile and
    its default strategy is cost, which must never be predicted slower than greedy."""
    from partition_lab.cost_models import ProfiledCostModel
    from partition_lab.strategies import default_strategy

    analysis = _analysis(model, "tensorcore")
    assert isinstance(analysis.cost_model, ProfiledCostModel)
    assert default_strategy(profiled=True) == "cost"
    comparison = _comparison(model, "tensorcore")
    assert comparison.row("cost").total_s <= comparison.row("greedy").total_s * (1 + EPS)


def test_optimal_finishes_on_the_largest_model_and_says_how_exact_it_is() -> None:
    comparison = _comparison("densenet201", "neuron@2020")
    assert len(comparison.graph) > 700
    check_optimal_note(comparison.plans["optimal"].notes, comparison.row("optimal").total_s,
                       {r.strategy: r.total_s for r in comparison.rows if r.applicable})


# ----------------------------------------------------------------------------- stories
def test_simple_pose_cost_and_optimal_beat_greedy_and_match_the_hand_made_plan() -> None:
    """The report's engineer excluded the two BatchNorm+ReLU-only subgraphs by hand; cost and
    optimal must find a plan at least as good by themselves, and predict it faster than greedy."""
    a = _analysis("simple_pose_resnet152_v1b", "neuron@2020")
    comparison = _comparison("simple_pose_resnet152_v1b", "neuron@2020")
    greedy = comparison.plans["greedy"]
    lonely = [r for r in greedy.accelerator_regions
              if {a.graph[n].op for n in r.nodes} <= {"nn.batch_norm", "nn.relu"}]
    assert len(lonely) == 2
    hand_made = synthetic.plan_on(a.graph, synthetic.one_accelerator(a.verdicts, greedy.platform_name), "report", set(greedy.accelerator_nodes)
        - {n for r in lonely for n in r.nodes})
    hand_total = evaluate(hand_made, a.cost_model).total
    greedy_total = comparison.row("greedy").total_s
    assert hand_total < greedy_total
    for strategy in ("cost", "optimal"):
        total = comparison.row(strategy).total_s
        assert total <= hand_total * (1 + EPS), strategy
        assert total < greedy_total, strategy
        plan = comparison.plans[strategy]
        for region in lonely:
            assert all(plan.device_of(n) == "cpu" for n in region.nodes), strategy


def test_fcn_breakdown_shows_the_resize_island_and_its_copies() -> None:
    mod, params = zoo.load("fcn_resnet101_ade")
    result = partition_lab.partition(mod, "neuron", params=params)
    resizes = [n.id for n in result.graph if n.op == "image.resize2d"]
    islands = {result.plan.region_of(n).id for n in resizes}
    cost = result.cost
    island_costs = [r for r in cost.regions if r.region in islands]
    assert island_costs and all(r.device == "cpu" and r.compute > 0 for r in island_costs)
    copies_in = [c for c in cost.cuts if set(c.consumers) & set(resizes)]
    assert len(copies_in) == 2 and all(c.src == "neuron" and c.dst == "cpu" for c in copies_in)


def test_matmul_x100_on_a_neuroncore_is_within_25_percent_of_the_report() -> None:
    a = _analysis("matmul_fp16_x100", "neuron@2020")
    comparison = _comparison("matmul_fp16_x100", "neuron@2020")
    accel = comparison.row("greedy").compute_accel_s
    assert comparison.row("greedy").ops_on_accel == len(a.graph)
    assert accel == pytest.approx(17.1e-3, rel=0.25)
