"""Robust choices: cost and optimal leave greedy's plan only beyond the model's uncertainty."""

from __future__ import annotations

import math

import pytest

from partition_lab import synthetic
from partition_lab.cost_models import evaluate, get_cost_model
from partition_lab.errors import PartitionLabError
from partition_lab.strategies import get_strategy
from partition_lab.strategies.costing import CostTables
from partition_lab.strategies.robust import decide, gain_sigma, plan_sigma
from partition_lab.targets import get_platform


class Flat:
    """Greedy's one region on the accelerator costs ``accel`` per op; the CPU ``cpu`` per op.

    ``sigma``: the relative uncertainty it reports (None: it reports none)."""

    name = "flat"

    def __init__(self, accel: float, cpu: float, sigma: float | None) -> None:
        self.accel, self.cpu = accel, cpu
        if sigma is not None:
            self.op_sigma = lambda node, device: sigma
            self.transfer_sigma = lambda nbytes, src, dst: sigma
            self.overhead_sigma = lambda device: sigma

    def op_time(self, node, device) -> float:
        return self.cpu if device == "cpu" else self.accel

    def transfer_time(self, nbytes, src, dst) -> float:
        return 0.0 if src == dst else 1e-4

    def region_overhead(self, device) -> float:
        return 0.0 if device == "cpu" else 1e-3


def problem():
    # A chain whose last op is rejected: greedy puts 5 ops on the accelerator (one launch, two
    # copies); all on the CPU saves 1 ms of launch and copies but costs 5 x 0.15 ms more compute.
    graph = synthetic.chain(["nn.relu"] * 5 + ["tanh"])
    verdicts = synthetic.verdicts_by_op(graph, unsupported=["tanh"])
    return graph, synthetic.one_accelerator(verdicts, "acc")


@pytest.mark.parametrize("name", ["cost", "optimal"])
def test_a_gain_within_the_uncertainty_keeps_greedy(name) -> None:
    graph, support = problem()
    greedy = get_strategy("greedy").run(graph, support)
    certain = Flat(1e-4, 1e-4 + 4e-5, sigma=None)
    moved = get_strategy(name).run(graph, support, cost_model=certain)
    assert [d.device for d in moved.decisions] != [d.device for d in greedy.decisions]
    # The same numbers, but the model says each figure may be 50% off: the gain is noise.
    unsure = Flat(1e-4, 1e-4 + 4e-5, sigma=0.5)
    kept = get_strategy(name).run(graph, support, cost_model=unsure)
    assert [d.device for d in kept.decisions] == [d.device for d in greedy.decisions]
    assert any("kept greedy's plan" in note for note in kept.notes)
    # confidence_z=0 takes the predicted optimum again.
    again = get_strategy(name, confidence_z=0).run(graph, support, cost_model=unsure)
    assert evaluate(again, unsure).total < evaluate(greedy, unsure).total
    # min_gain is a floor on top of the uncertainty.
    floor = get_strategy(name, min_gain=0.9).run(graph, support, cost_model=certain)
    assert [d.device for d in floor.decisions] == [d.device for d in greedy.decisions]


def test_gain_sigma_counts_only_what_differs() -> None:
    graph, support = problem()
    model = Flat(1e-4, 2e-4, sigma=0.5)
    tables = CostTables(graph, model, support.platform)
    greedy = get_strategy("greedy").run(graph, support)
    device = [support.platform.index(d.device) for d in greedy.decisions]
    regions = [list(r.nodes) for r in greedy.regions]
    assert gain_sigma(tables, device, regions, device, regions) == 0.0
    host = [support.platform.host_index] * len(graph)
    sigma = gain_sigma(tables, device, regions, host, [list(range(len(graph)))])
    # 5 ops moved (each 0.5 x 0.1 ms and 0.5 x 0.2 ms), one launch gone (0.5 x 1 ms), the copies
    # of the tensors those ops touch (0.5 x 0.1 ms each where they cross).
    ops = 5 * ((0.5 * 1e-4) ** 2 + (0.5 * 2e-4) ** 2)
    launch = (0.5 * 1e-3) ** 2
    assert math.sqrt(ops + launch) <= sigma <= math.sqrt(ops + launch + 7 * (0.5 * 1e-4) ** 2)
    assert plan_sigma(tables, device, regions) > 0
    decision = decide(tables, device, regions, 1.0, host, [list(range(len(graph)))], 0.9,
                      z=2.0, min_gain=0.0)
    assert decision.leave and decision.threshold == pytest.approx(2 * decision.sigma)


def test_the_note_says_the_gain_is_what_exceeds_the_threshold_or_not() -> None:
    from partition_lab.strategies.robust import RobustChoice

    kept = RobustChoice(False, 0.82e-3, 0.88e-3, 1.76e-3).note("cost")
    assert kept.startswith("cost: kept greedy's plan: the predicted gain of 0.82 ms does not "
                           "exceed the threshold of 1.76 ms (2 sigma; 1 sigma = 0.88 ms, the "
                           "uncertainty of the difference between the two plans)")
    left = RobustChoice(True, 2.21e-3, 0.78e-3, 1.56e-3, 10e-3, 7.79e-3).note("optimal")
    assert left == ("optimal: left greedy's plan: the predicted gain of 2.21 ms (10 ms -> "
                    "7.79 ms) exceeds the threshold of 1.56 ms (2 sigma; 1 sigma = 0.78 ms, the "
                    "uncertainty of the difference between the two plans)")
    # A threshold set by min_gain says so.
    floor = RobustChoice(False, 0.5e-3, 0.1e-3, 1e-3, 10e-3, 9.5e-3, 2.0, 0.1)
    assert "(min_gain 0.1 x greedy's total; 1 sigma = 0.1 ms" in floor.note("cost")
    assert floor.threshold_text() == "min_gain 0.1 x greedy's total = 1 ms"


def test_a_shared_device_drift_grows_with_the_work_moved_not_its_square_root() -> None:
    # 40 ops move from the accelerator to the host. Independent op errors average out (their
    # sigma grows like sqrt(40)); a device that runs 10% slow on the day slows all 40 alike, so
    # its part grows like 40: the gain's sigma must hold 10% of the host time gained.
    graph = synthetic.chain(["nn.relu"] * 40 + ["tanh"])
    support = synthetic.one_accelerator(synthetic.verdicts_by_op(graph, unsupported=["tanh"]), "acc")
    independent = Flat(1e-4, 2e-4, sigma=0.1)
    drifting = Flat(1e-4, 2e-4, sigma=0.1)
    drifting.device_sigma = lambda device: 0.1
    greedy = get_strategy("greedy").run(graph, support)
    device = [support.platform.index(d.device) for d in greedy.decisions]
    regions = [list(r.nodes) for r in greedy.regions]
    host = [support.platform.host_index] * len(graph)
    sigmas = [gain_sigma(CostTables(graph, m, support.platform), device, regions, host,
                         [list(range(len(graph)))]) for m in (independent, drifting)]
    host_gained, accel_freed = 40 * 2e-4, 40 * 1e-4 + 1e-3  # ops, and the launch gone
    drift = math.hypot(0.1 * host_gained, 0.1 * accel_freed)
    assert sigmas[1] == pytest.approx(math.hypot(sigmas[0], drift))
    assert sigmas[1] > 2 * sigmas[0]
    # A plan's own sigma holds each device's drift on all it does.
    tables = CostTables(graph, drifting, support.platform)
    assert plan_sigma(tables, host, [list(range(len(graph)))]) >= 0.1 * 41 * 2e-4


def test_the_roofline_states_its_uncertainty_and_options_are_checked() -> None:
    model = get_cost_model(get_platform("neuron@2020"))
    node = synthetic.chain(["nn.relu"])[0]
    assert model.op_sigma(node, "cpu") > 0.5 and not model.is_measured(node, "cpu")
    with pytest.raises(PartitionLabError, match="confidence_z"):
        get_strategy("cost", confidence_z=-1)
    with pytest.raises(PartitionLabError, match="min_gain"):
        get_strategy("optimal", min_gain=1.5)


def several_regions():
    # Three accelerator regions split by a rejected op: three launches, each with the error of
    # the one launch figure the model states for the device.
    graph = synthetic.chain(["nn.relu", "nn.relu", "tanh"] * 3)
    verdicts = synthetic.verdicts_by_op(graph, unsupported=["tanh"])
    return graph, synthetic.one_accelerator(verdicts, "acc")


def test_a_plan_total_and_its_gain_share_one_launch_error() -> None:
    graph, support = several_regions()
    model = Flat(1e-4, 5e-4, sigma=0.5)
    tables = CostTables(graph, model, support.platform)
    greedy = get_strategy("greedy").run(graph, support)
    device = [support.platform.index(d.device) for d in greedy.decisions]
    regions = [list(r.nodes) for r in greedy.regions]
    accel = [r for r in greedy.regions if r.is_accelerator]
    assert len(accel) == 3
    # The launch figure's error counts once for the three regions (3 x 0.5 x 1 ms), as in the
    # gain's sigma, not as three independent errors (sqrt(3) x 0.5 x 1 ms).
    assert plan_sigma(tables, device, regions) >= 3 * 0.5 * 1e-3
    host = [support.platform.host_index] * len(graph)
    host_regions = [list(range(len(graph)))]
    gain = gain_sigma(tables, device, regions, host, host_regions)
    assert gain >= 3 * 0.5 * 1e-3
    # One error model: the difference's sigma is never more than the two totals' together.
    assert gain <= plan_sigma(tables, device, regions) + plan_sigma(tables, host, host_regions)


def test_compare_best_is_what_cost_takes_and_says_why() -> None:
    from partition_lab.comparison import compare_plans

    graph, support = several_regions()
    model = Flat(1e-4, 5e-4, sigma=0.5)  # all on the CPU: predicted faster, within the error
    comparison = compare_plans(graph, support, cost_model=model,
                               strategies=["greedy", "cost", "all_cpu"])
    cost, greedy, all_cpu = (comparison.row(n) for n in ("cost", "greedy", "all_cpu"))
    assert comparison.lowest() is all_cpu and all_cpu.total_s < greedy.total_s
    assert comparison.best() is cost and cost.kept_greedy and cost.total_s == greedy.total_s
    assert cost.robust is not None and cost.robust.total == pytest.approx(all_cpu.total_s)
    # The sigma cost decided with is the one the all_cpu row shows for its gain over greedy.
    assert cost.robust.sigma == pytest.approx(all_cpu.gain_sigma_s)
    assert cost.robust.gain == pytest.approx(all_cpu.gain_s)
    data = comparison.to_dict()
    assert data["best"] == "cost" and "keeps greedy's plan" in data["best_reason"]
    table = comparison.to_table()
    assert "best: greedy's plan, kept by cost" in table and "best: all_cpu" not in table
    assert any(line.startswith("cost (kept greedy's plan)") for line in table.splitlines())
    # Without cost in the comparison, "best" applies cost's rule to the lowest total.
    without = compare_plans(graph, support, cost_model=model, strategies=["greedy", "all_cpu"])
    assert without.best() is without.row("greedy")
    assert "rule of cost" in (without.best_reason() or "")
    # A model that states no uncertainty: any gain is taken, and there are no sigmas.
    certain = compare_plans(graph, support, cost_model=Flat(1e-4, 5e-4, sigma=None),
                            strategies=["greedy", "cost", "all_cpu"])
    best = certain.best()
    assert best is not None and best.strategy == "cost" and not best.kept_greedy
    assert best.total_s == pytest.approx(certain.row("all_cpu").total_s)
    assert best.gain_sigma_s is None and best.total_sigma_s is None
