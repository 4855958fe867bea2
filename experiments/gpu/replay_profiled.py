"""Re-price the measured plans of an H200 run under today's cost model, and re-plan (runs HERE).

A run (``bench/gpu/profiled_pipeline.sh``) timed every distinct plan of every planned bundle on
the instance that measured the profile. When the cost model changes after the run, its plans
can still be priced again from that profile, offline: per row, the Spearman rank correlation of
predicted and measured time over the row's plans and predicted / measured of each plan; and
``cost`` / ``optimal`` re-run, with their new plan looked up among the measured ones (its
measured ratio to greedy), or reported as not measured. And how well the stated uncertainties
cover the errors: |predicted - measured| / sd of each plan's total, and of each plan's gain over
greedy (what the robust rule of ``strategies.robust`` compares; calibrated, the median would be
0.67 and 95% would lie within 2). Nothing here is a new measurement.

    PYTHONPATH=src .venv/bin/python experiments/gpu/replay_profiled.py \\
        --cache bench/results/gpu_ingraph_cache.json --run bench/results/gpu_ingraph_run2_raw.json \\
        --bundles .gpu_bundle/h200_11c/planned --out bench/results/gpu_ingraph_replay
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from partition_lab.cost_models.base import evaluate
from partition_lab.cost_models.profile_cache import read_profile_cache
from partition_lab.cost_models.profiled import ProfiledCostModel
from partition_lab.executors.graph_io import read_bundle
from partition_lab.strategies import get_strategy
from partition_lab.strategies.costing import CostTables
from partition_lab.strategies.robust import gain_sigma, plan_sigma

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "gpu"))  # evidence, profiled_report
from evidence import plan_key  # noqa: E402
from profiled_report import spearman  # noqa: E402

BAND = (0.8, 1.25)


def replay_row(row: dict[str, Any], bundle: Any, model: Any) -> dict[str, Any]:
    names = list(row["plans"])
    predicted = [evaluate(bundle.plans[n], model).total for n in names]
    measured = [row["plans"][n]["median_s"] for n in names]
    ratios = [p / m for p, m in zip(predicted, measured, strict=True)]
    tables = CostTables(bundle.graph, model, bundle.platform)
    z_total, z_gain = [], []
    greedy = _placement(bundle.plans["greedy"])
    for name, p, m in zip(names, predicted, measured, strict=True):
        placed = _placement(bundle.plans[name])
        z_total.append(abs(p - m) / max(plan_sigma(tables, *placed), 1e-12))
        if name != "greedy":
            sigma = gain_sigma(tables, *greedy, *placed)
            if sigma > 0:
                z_gain.append(abs((predicted[0] - p) - (measured[0] - m)) / sigma)
    keys = {plan_key(bundle.plans[n]): n for n in names}
    support = bundle.plans["greedy"].support
    choices = {}
    for strategy in ("cost", "optimal"):
        plan = get_strategy(strategy).run(bundle.graph, support, cost_model=model)
        name = keys.get(plan_key(plan))
        choices[strategy] = {"plan": name, "ratio_to_greedy":
                             row["plans"][name]["ratio_to_greedy"] if name else None,
                             "predicted_gain": 1 - evaluate(plan, model).total / predicted[0]}
    return {"model": row["model"], "platform": row["platform"], "plans": len(names),
            "spearman": spearman(predicted, measured), "pred_meas_greedy": ratios[0],
            "plans_in_band": sum(BAND[0] <= r <= BAND[1] for r in ratios) / len(ratios),
            "z_total": z_total, "z_gain": z_gain, "choices": choices}


def _placement(plan: Any) -> tuple[list[int], list[Any]]:
    """A plan as the robust rule's tables see it: device index per node, region members."""
    return ([plan.platform.index(d.device) for d in plan.decisions],
            [r.nodes for r in plan.regions])


def _coverage(what: str, zs: list[float]) -> str:
    return (f"Uncertainty of {what}: median |error| / sd {statistics.median(zs):.2f} (0.67 if "
            f"calibrated), {sum(z <= 2 for z in zs) / len(zs):.0%} of {len(zs)} within 2 sd "
            "(95% if calibrated).")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, required=True)
    parser.add_argument("--run", type=Path, required=True)
    parser.add_argument("--bundles", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--drift-sigma", type=float, default=None,
                        help="ProfiledCostModel's drift_sigma (default its DRIFT_SIGMA)")
    args = parser.parse_args(argv)
    cache = read_profile_cache(args.cache)
    run = json.loads(args.run.read_text())
    models: dict[str, Any] = {}
    rows = []
    for row in run["rows"]:
        if "plans" not in row or len(row["plans"]) < 5:
            continue
        bundle = read_bundle(args.bundles / row["bundle"])
        name = bundle.platform.name
        if name not in models:
            models[name] = ProfiledCostModel(cache, bundle.platform,
                                             drift_sigma=args.drift_sigma)
        rows.append(replay_row(row, bundle, models[name]))
    args.out.with_suffix(".json").write_text(json.dumps({"run": str(args.run), "rows": rows},
                                                        indent=1))
    n = len(rows)
    moved = [(r, s, c) for r in rows for s, c in r["choices"].items() if c["plan"] != "greedy"]
    measured = [c["ratio_to_greedy"] for _, _, c in moved if c["plan"] is not None]
    lines = [
        f"# Measured plans of `{args.run.name}` priced again by today's cost model (offline)",
        "",
        f"{n} rows with at least 5 distinct measured plans. Spearman >= 0.9: "
        f"{sum(r['spearman'] >= 0.9 for r in rows)}/{n} (median "
        f"{statistics.median(r['spearman'] for r in rows):.2f}); greedy's predicted / measured "
        f"in {BAND[0]}-{BAND[1]}: {sum(BAND[0] <= r['pred_meas_greedy'] <= BAND[1] for r in rows)}"
        f"/{n} (median {statistics.median(r['pred_meas_greedy'] for r in rows):.2f}); share of "
        f"all plans in that band: {statistics.mean(r['plans_in_band'] for r in rows):.2f}.",
        "",
        f"cost / optimal re-run: {2 * n - len(moved)} of {2 * n} choices are greedy's plan; "
        f"{len(measured)} are other measured plans (ratio to greedy "
        f"{min(measured, default=float('nan')):.3f}-{max(measured, default=float('nan')):.3f}); "
        f"{len(moved) - len(measured)} are plans the run did not measure (no claim about them).",
        "",
        _coverage("plan totals", [z for r in rows for z in r["z_total"]]),
        _coverage("gains over greedy", [z for r in rows for z in r["z_gain"]]),
        "",
        "| model | platform | plans | Spearman | greedy pred/meas | plans in band | cost: plan "
        "(measured ratio, predicted gain) | optimal: plan (measured ratio, predicted gain) |",
        "|---|---|---|---|---|---|---|---|",
    ]

    def cell(c: dict[str, Any]) -> str:
        ratio = "not measured" if c["plan"] is None else f"{c['ratio_to_greedy']:.3f}"
        return f"{c['plan'] or '-'} ({ratio}, {c['predicted_gain'] * 100:.1f}%)"

    for r in rows:
        lines.append(f"| {r['model']} | {r['platform']} | {r['plans']} | {r['spearman']:.2f} | "
                     f"{r['pred_meas_greedy']:.2f} | {r['plans_in_band']:.2f} | "
                     f"{cell(r['choices']['cost'])} | {cell(r['choices']['optimal'])} |")
    args.out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[:6]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
