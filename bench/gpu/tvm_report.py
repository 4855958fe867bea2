"""Plans built by TVM and timed on the GPU, against our predictions (runs
HERE in the main venv: needs no TVM, only the bundle's manifest, graphs and timings).

Per model and platform (a row), every distinct plan that ``tvm_plans.py build`` built is priced
again here from its device per op (``PartitionPlan.from_devices`` over the manifest's graph,
the support recomputed by ``targets.annotate.support_table``) under each predictor:

- ``roofline``: the analytic model with the H200 profile on the platform's GPU devices (the GPU
  stands in for every accelerator in these builds) and the default host profile;
- ``torch`` / ``torch:lomo``: a profile cache measured by the PyTorch runner on the same
  machine (``profile_bundles.py`` over the same models' Relay bundles), whole and with the
  row's model left out (``replan_profiled.withheld_cache``);
- ``tvm`` / ``tvm:lomo``: the profile of TVM-built kernels (``tvm_ops.py``), whole and with
  the row's model left out;
- ``shipped``: the profile that ships for ``tensorcore`` (zoo models at other shapes).

Each predictor's within-row Spearman correlation with the measured medians is reported, and
the medians beside the PyTorch executor's times of the same named plans (``evidence.py`` over
``torch_side.py``'s bundles) where given.

    .venv/bin/python bench/gpu/tvm_report.py --bundle .gpu_bundle/tvm_plans \\
        --results bench/results/gpu_tvm_plans2_raw.json [--results RUN2 ...] \\
        --tvm-cache bench/results/gpu_tvm_ops_cache.json \\
        --torch-cache bench/results/gpu_tvm_torch_cache.json \\
        --torch-results bench/results/gpu_tvm_torch_raw.json \\
        --json bench/results/gpu_tvm_report.json --md bench/results/gpu_tvm_report.md
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import statistics
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from scipy.stats import spearmanr

from partition_lab.core.plan import PartitionPlan
from partition_lab.cost_models import get_cost_model, shipped_cost_model
from partition_lab.cost_models.base import evaluate
from partition_lab.cost_models.profile_cache import read_profile_cache
from partition_lab.cost_models.profiled import ProfiledCostModel
from partition_lab.executors.graph_io import graph_from_dict
from partition_lab.targets import get_platform
from partition_lab.targets.annotate import support_table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from replan_profiled import withheld_cache  # noqa: E402

BASELINE = "tvm_unpartitioned"


# ---------------------------------------------------------------------------- inputs
def measured_medians(paths: Sequence[Path]) -> dict[str, dict[str, list[float]]]:
    """``{entry key: {plan: [median ms of each run]}}`` from the driver's results files."""
    out: dict[str, dict[str, list[float]]] = {}
    for path in paths:
        for entry in json.loads(path.read_text())["entries"]:
            for plan in entry.get("plans", []):
                out.setdefault(entry["key"], {}).setdefault(plan["name"], []).append(
                    plan["median_ms"])
    return out


def torch_medians(paths: Sequence[Path]) -> dict[str, dict[str, float]]:
    """``{model@platform: {plan: median ms}}`` from ``evidence.py`` results: the plans timed in
    turns (``--interleave all``) where they were, else each plan's own timing; a plan the same
    as another (``same_plan_as``) gets that one's time."""
    out: dict[str, dict[str, float]] = {}
    for path in paths:
        for row in json.loads(path.read_text()).get("models", []):
            key = f"{row.get('model')}@{row.get('platform')}"
            times = {name: rec["median_s"] * 1e3 for name, rec in row.get("plans", {}).items()
                     if isinstance(rec, Mapping) and "median_s" in rec}
            turns = {name: rec["median_s"] * 1e3
                     for name, rec in (row.get("interleaved") or {}).items()
                     if isinstance(rec, Mapping) and "median_s" in rec}
            times |= turns
            for name, rec in row.get("plans", {}).items():
                if isinstance(rec, Mapping) and rec.get("same_plan_as") in times:
                    times[name] = times[rec["same_plan_as"]]
            if times:
                out.setdefault(key, {}).update(times)
    return out


def entry_plans(bundle: Path, entry: Mapping[str, Any]) -> tuple[Any, dict[str, PartitionPlan]]:
    """The row's graph and its plans rebuilt from each plan's device per op."""
    with gzip.open(bundle / entry["graph_file"], "rt") as f:
        graph = graph_from_dict(json.load(f))
    platform = get_platform(entry["platform"])
    support = support_table(graph, platform)
    plans = {}
    for raw in entry["plans"]:
        devices = raw.get("op_devices")
        if raw["name"] == BASELINE or not devices:
            continue
        plans[raw["name"]] = PartitionPlan.from_devices(graph, support, raw["name"], devices)
    return graph, plans


# ---------------------------------------------------------------------------- predictors
def predictors(platform: Any, model: str, caches: Mapping[str, dict[str, Any]]
               ) -> dict[str, Any]:
    """The cost models a row is priced with (see the module docstring)."""
    roofline = get_cost_model(platform, accel_profile="h200")
    models: dict[str, Any] = {"roofline": roofline}
    for label, cache in caches.items():
        if not _binds(cache, platform.name):
            continue
        models[label] = ProfiledCostModel(cache, platform, fallback=roofline)
        held_out, _ = withheld_cache(cache, model, set(), "lomo")
        models[f"{label}:lomo"] = ProfiledCostModel(held_out, platform, fallback=roofline)
    shipped = shipped_cost_model(platform)
    if shipped is not None:
        models["shipped"] = shipped
    return models


def _binds(cache: Mapping[str, Any], platform: str) -> bool:
    return platform in cache.get("bindings", {})


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    if len(xs) < 3 or len(set(xs)) < 2 or len(set(ys)) < 2:
        return None
    return float(spearmanr(xs, ys).statistic)


# ---------------------------------------------------------------------------- the report
def report_row(bundle: Path, entry: Mapping[str, Any], measured: Mapping[str, list[float]],
               caches: Mapping[str, dict[str, Any]], torch_ms: Mapping[str, float]
               ) -> dict[str, Any]:
    graph, plans = entry_plans(bundle, entry)
    platform = next(iter(plans.values())).platform
    models = predictors(platform, entry["model"], caches)
    rows = []
    for name, plan in plans.items():
        if name not in measured:
            continue
        rows.append({"plan": name, "measured_ms": statistics.median(measured[name]),
                     "runs_ms": measured[name], "torch_ms": torch_ms.get(name),
                     "ops_per_device": plan.ops_per_device(), "regions": len(plan.regions),
                     "predicted_ms": {label: evaluate(plan, m).total * 1e3
                                      for label, m in models.items()}})
    base = measured.get(BASELINE)
    measured_col = [r["measured_ms"] for r in rows]
    correlations = {label: spearman([r["predicted_ms"][label] for r in rows], measured_col)
                    for label in models}
    best = min(measured_col)
    # the decision: the plan each predictor ranks first, measured against the best measured
    regret = {label: min(rows, key=lambda r: r["predicted_ms"][label])["measured_ms"] / best
              for label in models}
    log_error = {label: statistics.median(abs(math.log(r["predicted_ms"][label] /
                                                       r["measured_ms"])) for r in rows)
                 for label in models}
    torch_pairs = [(r["torch_ms"], r["measured_ms"]) for r in rows if r["torch_ms"] is not None]
    torch_x, torch_y = ([p[0] for p in torch_pairs], [p[1] for p in torch_pairs])
    return {"key": entry["key"], "model": entry["model"], "platform": entry["platform"],
            "ops": len(graph), "plans": rows,
            "tvm_unpartitioned_ms": statistics.median(base) if base else None,
            "spearman": correlations, "regret": regret, "median_abs_log_error": log_error,
            "withheld": withheld_counts(caches, entry["model"]),
            "spearman_torch_executor": spearman(torch_x, torch_y),
            "cost_models": {label: m.name for label, m in models.items()}}


def withheld_counts(caches: Mapping[str, dict[str, Any]], model: str) -> dict[str, int]:
    """Per cache, how many op signatures leave-one-model-out withholds for ``model``."""
    return {label: sum(withheld_cache(cache, model, set(), "lomo")[1].values())
            for label, cache in caches.items()}


def summarise(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per predictor: rows with a correlation, its median and rows at >= 0.9; the rows whose
    predicted-best plan measured within 5% of the best; the median |log(predicted/measured)|."""
    labels = sorted({label for row in rows for label in row["spearman"]})
    out = {}
    for label in labels + ["torch_executor"]:
        values = [row["spearman_torch_executor"] if label == "torch_executor"
                  else row["spearman"].get(label) for row in rows]
        values = [v for v in values if v is not None]
        out[label] = {"rows": len(values),
                      "median": statistics.median(values) if values else None,
                      "at_least_0.9": sum(v >= 0.9 - 1e-9 for v in values)}
        if label != "torch_executor":
            regrets = [row["regret"][label] for row in rows if label in row["regret"]]
            errors = [row["median_abs_log_error"][label] for row in rows
                      if label in row["median_abs_log_error"]]
            out[label] |= {"best_within_5pct": sum(r <= 1.05 for r in regrets),
                           "worst_regret": max(regrets, default=None),
                           "median_abs_log_error": statistics.median(errors) if errors
                           else None}
    return out


def markdown(report: Mapping[str, Any]) -> str:
    lines = ["| model | platform | plan | TVM-built ms | PyTorch executor ms | "
             + " | ".join(f"predicted {label}" for label in report["labels"]) + " |",
             "|---|---|---|---|---|" + "---|" * len(report["labels"])]
    for row in report["rows"]:
        first = True
        for p in sorted(row["plans"], key=lambda p: p["measured_ms"]):
            head = f"| {row['model']} | {row['platform']} |" if first else "| | |"
            first = False
            cells = [_ms(p["predicted_ms"].get(label)) for label in report["labels"]]
            lines.append(f"{head} {p['plan']} | {_ms(p['measured_ms'])} | {_ms(p['torch_ms'])}"
                         f" | " + " | ".join(cells) + " |")
        if row["tvm_unpartitioned_ms"] is not None:
            lines.append(f"| | | TVM, unpartitioned | {_ms(row['tvm_unpartitioned_ms'])} | | "
                         + " | ".join("" for _ in report["labels"]) + " |")
        lines.append("| | | *Spearman* | | "
                     + _rho(row["spearman_torch_executor"]) + " | "
                     + " | ".join(_rho(row["spearman"].get(label)) for label in report["labels"])
                     + " |")
    lines += ["", "| predictor | rows | median Spearman | rows >= 0.9 | predicted best within "
              "5% of measured best | worst (measured time of predicted best / best) | median "
              "abs log error (predicted/measured) |", "|---|---|---|---|---|---|---|"]
    for label, s in report["summary"].items():
        extra = ("| | |" if "best_within_5pct" not in s else
                 f"| {s['best_within_5pct']} | {_rho(s['worst_regret'])} | "
                 f"{_rho(s['median_abs_log_error'])} |")
        lines.append(f"| {label} | {s['rows']} | {_rho(s['median'])} | {s['at_least_0.9']} "
                     + extra)
    return "\n".join(lines) + "\n"


def _ms(value: float | None) -> str:
    if value is None:
        return ""
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _rho(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", type=Path, required=True, help="tvm_plans build folder")
    parser.add_argument("--results", type=Path, nargs="+", required=True,
                        help="the driver's run results (several runs: medians of medians)")
    parser.add_argument("--tvm-cache", type=Path, help="profile cache of TVM-built kernels")
    parser.add_argument("--torch-cache", type=Path, help="profile cache of the PyTorch runner")
    parser.add_argument("--torch-results", type=Path, nargs="*", default=[],
                        help="evidence.py results over the same models' bundles")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--md", type=Path)
    args = parser.parse_args(argv)
    manifest = json.loads((args.bundle / "manifest.json").read_text())
    measured = measured_medians(args.results)
    caches = {label: read_profile_cache(path) for label, path in
              (("tvm", args.tvm_cache), ("torch", args.torch_cache)) if path}
    torch_ms = torch_medians(args.torch_results)
    rows = []
    for entry in manifest["models"]:
        if entry["key"] not in measured:
            continue
        rows.append(report_row(args.bundle, entry, measured[entry["key"]], caches,
                               torch_ms.get(entry["key"], {})))
        print(f"{entry['key']}: " + ", ".join(
            f"{label} {_rho(rho)}" for label, rho in rows[-1]["spearman"].items()), flush=True)
    labels = sorted({label for row in rows for label in row["spearman"]})
    report = {"rows": rows, "labels": labels, "summary": summarise(rows),
              "command": " ".join(sys.argv)}
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    if args.md:
        args.md.write_text(markdown(report))
    print(json.dumps(report["summary"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
