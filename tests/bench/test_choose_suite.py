"""bench/gpu/choose_suite.py's raced round B and choose_report.py's verdicts on it: the scripts
behind the H200 figures (docs/evidence/results/gpu_choose.md), checked on made-up timings."""

from __future__ import annotations

import importlib.util
import math

import pytest

from repo_paths import REPO_ROOT

GPU_BENCH = REPO_ROOT / "bench" / "gpu"


def _script(name: str):  # noqa: ANN202
    spec = importlib.util.spec_from_file_location(name, GPU_BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


suite = _script("choose_suite")
report = _script("choose_report")


def _heats(ratios: dict[str, float], rounds: int = 4) -> dict[str, list[float]]:
    """Round B0's times: greedy 10 ms a round, every other plan ``ratio`` times that."""
    return {name: [0.01 * ratio] * rounds for name, ratio in {"greedy": 1.0, **ratios}.items()}


def test_contenders_are_greedy_the_chosen_plan_and_the_plans_near_the_best() -> None:
    heats = _heats({"cost_z0": 0.90, "no_mac": 1.00, "other:variant0": 1.03,
                    "other:variant1": 1.04, "all_cpu": 3.0})
    # best 0.90, so up to 1.035: 0.90, 1.00 and 1.03 go on; 1.04 and the host plan do not
    assert suite.contenders(heats, "greedy") == ["greedy", "cost_z0", "no_mac",
                                                 "other:variant0"]
    # the chosen plan goes on wherever B0 put it
    assert suite.contenders(heats, "all_cpu") == ["greedy", "all_cpu", "cost_z0", "no_mac",
                                                  "other:variant0"]


def test_contenders_stop_at_the_cap_fastest_first() -> None:
    heats = _heats({f"p{k}": 0.95 + 0.01 * k for k in range(8)})
    kept = suite.contenders(heats, "p7")
    assert len(kept) == suite.RACE_CAP
    assert kept == ["greedy", "p7", "p0", "p1", "p2", "p3"]


def test_a_contender_is_judged_on_the_sets_and_the_rest_on_the_heat() -> None:
    heats = _heats({"cost_z0": 0.90, "all_cpu": 3.0})
    sets = [{"greedy": [0.01] * 3, "cost_z0": [0.0095] * 3},
            {"greedy": [0.01] * 3, "cost_z0": [0.0085] * 3}]
    contender = suite.race_record(heats, sets, "cost_z0")
    assert contender["contender"] and contender["heat_ratio"] == pytest.approx(0.90)
    assert contender["set_ratios"] == pytest.approx([0.95, 0.85])
    assert contender["ratio_to_greedy"] == pytest.approx(math.sqrt(0.95 * 0.85))
    host = suite.race_record(heats, sets, "all_cpu")
    assert not host["contender"]
    assert host["ratio_to_greedy"] == pytest.approx(3.0)
    assert host["sets_s"] == [heats["all_cpu"]] and host["set_ratios"] == pytest.approx([3.0])


def _raced_row(chosen: str, judged: dict[str, float], greedy_times: list[float]
               ) -> dict:
    """A ``choose_suite.py run --race`` row: the choice's candidates (screening times only)
    and a round B whose plans have the given ratios to greedy."""
    candidates = [{"plan": "greedy", "measured_s": [1.0] * 4},
                  {"plan": "cost_z0", "measured_s": [1.1] * 4}]
    round_b = {name: {"ratio_to_greedy": ratio, "set_ratios": [ratio, ratio],
                      "times_s": greedy_times if name == "greedy" else [],
                      "contender": True} for name, ratio in judged.items()}
    return {"bundle": "s/x.json.gz", "round_b": round_b,
            "choice": {"chosen": chosen, "candidates": candidates, "elapsed_s": 5.0}}


def test_the_report_counts_a_hit_within_3_percent_and_a_loss_beyond_greedys_spread() -> None:
    steady = [0.010] * 8
    hit = report.judge(_raced_row("greedy", {"greedy": 1.0, "cost_z0": 0.975}, steady))
    assert hit["two"]["hit"] and not hit["two"]["loss"]
    miss = report.judge(_raced_row("greedy", {"greedy": 1.0, "cost_z0": 0.96}, steady))
    assert not miss["two"]["hit"] and miss["best_name"] == "cost_z0"
    loss = report.judge(_raced_row("cost_z0", {"greedy": 1.0, "cost_z0": 1.05}, steady))
    assert loss["two"]["loss"]
    # greedy's own spread (half its interquartile range over its median: 10% here) covers it
    noisy = report.judge(_raced_row("cost_z0", {"greedy": 1.0, "cost_z0": 1.05},
                                    [0.008, 0.009, 0.010, 0.011, 0.012]))
    assert noisy["spread"] == pytest.approx(0.1) and not noisy["two"]["loss"]


def test_one_round_of_greedy_has_no_spread() -> None:
    assert report.greedy_spread([0.01]) == 0.0
    assert report.greedy_spread([0.01, 0.01, 0.01]) == 0.0
