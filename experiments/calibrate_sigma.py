"""Calibrate the profiled cost model's uncertainty on the H200 suite runs.

The robust rule (``strategies/robust.py``) leaves greedy's plan only for a predicted gain above
``z`` standard deviations of the gain's error. This script measures how wide that error really
is: for every timed plan of every suite row (``gpu_suite_run{1,2}_raw.json``: two H200
instances), the predicted gain over greedy as a fraction of greedy's predicted time
(``1 - pred/pred_greedy``) against the measured one (``1 - median/median_greedy``), in units of
the model's stated sigma of that gain (:func:`~partition_lab.strategies.robust.gain_sigma`,
relative to greedy's prediction). The scale that makes +-2 sd cover 95% of run 1's plans is the
calibration; it is checked on run 2 (another instance), and leave-one-model-out: each model's
plans in run 2 judged with a scale fitted on the other models' plans of run 1.

Runs here (no GPU, no TVM): bundles carry the graphs and the plans.

    PYTHONPATH=src python experiments/calibrate_sigma.py --bundles .gpu_bundle/suite_planned \\
        --cache bench/results/gpu_suite_cache.json \\
        --runs bench/results/gpu_suite_run1_raw.json bench/results/gpu_suite_run2_raw.json

``--check`` judges the package's scales (``GAIN_SIGMA_SCALE``, ``TOTAL_SIGMA_SCALE``, fitted as
above) on later runs they were not fitted on: round B of ``bench/gpu/choose_suite.py run``
(every candidate and every other plan of a bundle, each timed run after a settling run of the
same plan), the measured gain being round B's paired ratio to greedy:

    PYTHONPATH=src python experiments/calibrate_sigma.py --bundles .gpu_bundle/choose \
        --cache bench/results/gpu_suite_cache.json --check bench/results/gpu_choose_run_f.json bench/results/gpu_choose_run_g.json
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from pathlib import Path
from typing import Any

from partition_lab.cost_models.base import evaluate
from partition_lab.cost_models.profiled import (
    GAIN_SIGMA_SCALE,
    TOTAL_SIGMA_SCALE,
    ProfiledCostModel,
)
from partition_lab.executors.graph_io import read_bundle
from partition_lab.strategies.costing import CostTables
from partition_lab.strategies.robust import gain_sigma, plan_sigma


def plan_errors(bundle_path: Path, cache: dict[str, Any], rows: list[dict[str, Any]]
                ) -> list[dict[str, Any]]:
    """Per timed plan and run: its model, the gain error and the stated sigma (fractions of
    greedy's time), and the total's log error and stated relative sigma."""
    bundle = read_bundle(bundle_path)
    support = next(iter(bundle.plans.values())).support
    model = ProfiledCostModel(cache, support.platform, gain_sigma_scale=1.0,
                              total_sigma_scale=1.0)  # the stated sigmas
    tables = CostTables(bundle.graph, model, support.platform, support.units)
    greedy = bundle.plans["greedy"]
    g_dev = [support.platform.index(d.device) for d in greedy.decisions]
    g_regions = [r.nodes for r in greedy.regions]
    g_pred = evaluate(greedy, model).total
    g_sigma = plan_sigma(tables, g_dev, g_regions)
    out = []
    for run, row in enumerate(rows):
        plans = row["plans"]
        g_meas = plans["greedy"]["median_s"]
        out.append({"model": row["model"], "platform": row["platform"], "plan": "greedy",
                    "run": run, "total_error": math.log(g_meas / g_pred),
                    "total_sigma": g_sigma / g_pred})
        for name, timed in plans.items():
            if name == "greedy" or name not in bundle.plans:
                continue
            plan = bundle.plans[name]
            device = [support.platform.index(d.device) for d in plan.decisions]
            sigma = gain_sigma(tables, g_dev, g_regions, device, [r.nodes for r in plan.regions])
            total = evaluate(plan, model).total
            predicted = 1 - total / g_pred
            measured = 1 - timed.get("ratio_to_greedy", timed["median_s"] / g_meas)
            out.append({"model": row["model"], "platform": row["platform"], "plan": name,
                        "run": run, "error": predicted - measured, "sigma": sigma / g_pred,
                        "total_error": math.log(timed["median_s"] / total),
                        "total_sigma": plan_sigma(tables, device,
                                                  [r.nodes for r in plan.regions]) / total})
    return out


def coverage(points: list[dict[str, Any]], scale: float, kind: str = "") -> float:
    """The share of ``points`` whose ``kind`` error (gain: "", total: "total_") lies within
    +-2 scaled sd."""
    inside = [abs(p[kind + "error"]) <= 2 * scale * p[kind + "sigma"] for p in points
              if p.get(kind + "sigma", 0) > 0]
    return sum(inside) / len(inside) if inside else float("nan")


def scale_for(points: list[dict[str, Any]], kind: str = "", target: float = 0.95) -> float:
    """The smallest scale with ``target`` of ``points`` inside +-2 scaled sd."""
    ratios = sorted(abs(p[kind + "error"]) / (2 * p[kind + "sigma"]) for p in points
                    if p.get(kind + "sigma", 0) > 0)
    return ratios[min(len(ratios) - 1, int(round(target * (len(ratios) - 1))))]


def choose_rows(run: dict[str, Any]) -> list[dict[str, Any]]:
    """A ``choose_suite.py run`` file's round B as rows of :func:`plan_errors`: each plan's
    median over every set of executors, and its paired ratio to greedy."""
    rows = []
    for row in run["rows"]:
        plans = {name: {"median_s": statistics.median(t for times in timed["sets_s"]
                                                      for t in times),
                        "ratio_to_greedy": timed["ratio_to_greedy"]}
                 for name, timed in row["round_b"].items()}
        rows.append({"model": row["model"], "platform": row["platform"],
                     "bundle": row["bundle"], "plans": plans})
    return rows


def check(bundles: Path, cache: dict[str, Any], runs: list[Path]) -> dict[str, Any]:
    """Coverage of +-2 sd with the package's scales on each of ``runs`` (choose-suite files),
    overall and per platform, gains and totals."""
    report: dict[str, Any] = {"gain_sigma_scale": GAIN_SIGMA_SCALE,
                              "total_sigma_scale": TOTAL_SIGMA_SCALE, "runs": {}}
    for path in runs:
        points: list[dict[str, Any]] = []
        for row in choose_rows(json.loads(path.read_text())):
            if (bundles / row["bundle"]).exists():
                points += plan_errors(bundles / row["bundle"], cache, [row])
        gains = [p for p in points if "error" in p]
        entry: dict[str, Any] = {
            "rows": len({p["model"] + p["platform"] for p in points}), "plans": len(gains),
            "gain_coverage": coverage(gains, GAIN_SIGMA_SCALE),
            "gain_coverage_stated": coverage(gains, 1.0),
            "total_coverage": coverage(points, TOTAL_SIGMA_SCALE, "total_"),
            "per_platform": {}}
        for platform in sorted({p["platform"] for p in gains}):
            mine = [p for p in gains if p["platform"] == platform]
            entry["per_platform"][platform] = [coverage(mine, GAIN_SIGMA_SCALE), len(mine)]
        report["runs"][path.name] = entry
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundles", type=Path, required=True)
    parser.add_argument("--cache", type=Path, required=True)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--runs", type=Path, nargs=2, help="fit on the first, check on the second")
    mode.add_argument("--check", type=Path, nargs="+",
                      help="choose_suite.py run files: the shipped scales' coverage on them")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    cache = json.loads(args.cache.read_text())
    if args.check:
        text = json.dumps(check(args.bundles, cache, args.check), indent=1)
        print(text)
        if args.out:
            args.out.write_text(text + "\n")
        return 0
    runs = [json.loads(p.read_text())["rows"] for p in args.runs]
    points: list[dict[str, Any]] = []
    for row in runs[0]:
        other = next(r for r in runs[1] if r["bundle"] == row["bundle"])
        points += plan_errors(args.bundles / row["bundle"], cache, [row, other])
    first = [p for p in points if p["run"] == 0]
    second = [p for p in points if p["run"] == 1]
    gains1, gains2 = ([p for p in ps if "error" in p] for ps in (first, second))
    first, second = gains1, gains2  # gains below; totals (greedy's too) in "totals"
    fitted = scale_for(first)
    total_fit = scale_for([p for p in points if p["run"] == 0], "total_")
    every2 = [p for p in points if p["run"] == 1]
    report: dict[str, Any] = {
        "plans": [len(first), len(second)],
        "stated_coverage": [coverage(first, 1.0), coverage(second, 1.0)],
        "scale_fitted_on_run1": fitted, "coverage_run2_with_it": coverage(second, fitted),
        "scale_fitted_on_run2": scale_for(second),
        "coverage_run1_with_it": coverage(first, scale_for(second)),
        "totals": {"stated_coverage": [coverage([p for p in points if p["run"] == 0], 1.0,
                                                "total_"), coverage(every2, 1.0, "total_")],
                   "scale_fitted_on_run1": total_fit,
                   "coverage_run2_with_it": coverage(every2, total_fit, "total_")},
        "per_platform_run2": {}, "leave_one_model_out_run2": {}}
    for platform in sorted({p["platform"] for p in second}):
        mine = [p for p in second if p["platform"] == platform]
        report["per_platform_run2"][platform] = [coverage(mine, fitted), len(mine)]
    inside = total = 0
    for model in sorted({p["model"] for p in points}):
        scale = scale_for([p for p in first if p["model"] != model])
        mine = [p for p in second if p["model"] == model and p["sigma"] > 0]
        inside += sum(abs(p["error"]) <= 2 * scale * p["sigma"] for p in mine)
        total += len(mine)
        report["leave_one_model_out_run2"][model] = [round(scale, 3), len(mine)]
    report["leave_one_model_out_coverage_run2"] = inside / total if total else float("nan")
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
