"""Predicted vs measured: the evidence table, rank correlation and best-plan check (runs HERE).

Reads the evidence the GPU machine wrote (``bench/gpu/evidence.py``), the bundles it ran (their
plans) and the measured profile, prices every plan with :class:`MeasuredGpuCostModel` and writes
``bench/results/gpu_evidence.{md,json}``. ``--merge`` first joins profile parts measured in
separate runs into the package's profile file.

    .venv/bin/python bench/gpu/report.py --merge part1.json part2.json \\
        --profile src/partition_lab/cost_models/profiles/h200_measured.json
    .venv/bin/python bench/gpu/report.py --bundles .gpu_bundle/measured \\
        --evidence evidence_measured.json --profile .../h200_measured.json --out bench/results/gpu_evidence
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from partition_lab.cost_models.base import evaluate
from partition_lab.cost_models.measured_gpu import MeasuredGpuCostModel, load_gpu_profile
from partition_lab.executors.graph_io import read_bundle

WITHIN = 0.10  # the predicted-best plan must be within 10% of the measured fastest


def merge_profiles(parts: list[Path], out: Path) -> None:
    """Join profile parts: op tables united (a later part wins), the first part's transfers,
    overheads and metadata, each part's metadata kept under ``meta.parts``."""
    merged: dict[str, Any] = {}
    for path in parts:
        data = json.loads(path.read_text())
        if not merged:
            merged = data
            merged["meta"]["parts"] = []
        else:
            for kind in ("accel", "cpu"):
                merged["ops"][kind].update(data["ops"][kind])
            merged["op_info"].update(data["op_info"])
        merged["meta"]["parts"].append({k: data["meta"].get(k) for k in (
            "date", "gpu", "driver", "command", "elapsed_s")} | {
            "signatures": {k: len(v) for k, v in data["ops"].items()}})
    out.write_text(json.dumps(merged, indent=1))
    load_gpu_profile(out)  # fail here, not later, if the result is malformed


def spearman(x: list[float], y: list[float]) -> float:
    """Spearman's rank correlation (average ranks for ties), as scipy.stats.spearmanr."""
    from scipy.stats import spearmanr

    return float(spearmanr(x, y).statistic)


def model_rows(evidence: dict[str, Any], bundle_dir: Path, model: MeasuredGpuCostModel
               ) -> list[dict[str, Any]]:
    bundle = read_bundle(bundle_dir / f"{evidence['model']}.json.gz")
    rows = []
    for strategy, measured in evidence["plans"].items():
        if "median_s" not in measured:
            continue
        cost = evaluate(bundle.plans[strategy], model)
        b = measured["breakdown"]
        regions = b["regions"]
        rows.append({
            "model": evidence["model"], "strategy": strategy,
            "kind": "variant" if strategy.startswith("variant") else "strategy",
            "same_plan_as": measured.get("same_plan_as"),
            "accel_regions": measured["accel_regions"], "cpu_regions": measured["cpu_regions"],
            "ops_on_accel": measured["ops_on_accel"], "ops": evidence["ops"],
            "predicted_s": cost.total, "measured_s": measured["median_s"],
            "predicted": {"cpu_s": cost.compute_cpu, "accel_s": cost.compute_accel,
                          "copy_s": cost.transfer, "overhead_s": cost.overhead,
                          "copies": len(cost.cuts), "bytes": cost.transfer_bytes},
            "measured_breakdown": {
                "cpu_s": sum(t for k, t in regions.items() if _device(b, k) == "cpu"),
                "accel_s": sum(t for k, t in regions.items() if _device(b, k) != "cpu"),
                "copy_s": b["copies"]["time_s"], "copies": b["copies"]["count"],
                "synchronised_total_s": b["total_s"]},
            "error_vs_unpartitioned": measured["error_vs_unpartitioned"],
            "error_vs_float32": measured["error_vs_float32"],
            "coverage": model.coverage(bundle.graph),
        })
    return rows


def _device(breakdown: dict[str, Any], label: str) -> str:
    """The plan device of a region label (evidence files before plan/2 had only labels)."""
    return breakdown.get("devices", {}).get(label) or ("cpu" if label.startswith("cpu")
                                                        else "accel")


def best_check(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Is the plan the model ranks best the measured fastest, or within 10% of it?"""
    predicted_best = min(rows, key=lambda r: r["predicted_s"])
    measured_best = min(rows, key=lambda r: r["measured_s"])
    gap = predicted_best["measured_s"] / measured_best["measured_s"] - 1
    return {"predicted_best": predicted_best["strategy"],
            "measured_best": measured_best["strategy"],
            "predicted_best_measured_s": predicted_best["measured_s"],
            "measured_best_s": measured_best["measured_s"], "gap": gap,
            "ok": gap <= WITHIN, "distinct_plans": len({r["same_plan_as"] or r["strategy"]
                                                        for r in rows})}


def numerics(evidence: dict[str, Any]) -> dict[str, Any]:
    """fp16 tolerance: partitioning adds no more error than the graph precision itself has."""
    base = evidence["reference"]["graph_precision_vs_float32"]
    worst = max((p["error_vs_unpartitioned"] for p in evidence["plans"].values()
                 if "error_vs_unpartitioned" in p), default=0.0)
    tolerance = max(2 * base, 1e-3)
    exact = max((p["float32_mode_error_vs_float32"] for p in evidence["plans"].values()
                 if "float32_mode_error_vs_float32" in p), default=float("nan"))
    return {"unpartitioned_fp16_vs_fp32": base, "worst_plan_vs_unpartitioned": worst,
            "tolerance": tolerance, "ok": worst <= tolerance,
            "worst_plan_in_float32_vs_float32": exact}


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f}" if seconds < 10 else f"{seconds * 1e3:.0f}"


def markdown(report: dict[str, Any]) -> str:
    lines = [
        "# Predicted vs measured plan times on an NVIDIA H200 and its host CPU", "",
        "Generated by `bench/gpu/report.py`; the commands are at the end. Each row is one "
        "(model, strategy) plan on `tensorcore` (fp16): predicted by `MeasuredGpuCostModel` "
        "(the measured H200 profile), measured end to end by `partition_lab.executors.torch_exec` on the "
        "GPU machine (median of repeated runs). Accelerator regions ran as PyTorch ops on the "
        "H200 (cuDNN/cuBLAS, fp16, channels-last convolutions: a stand-in for TVM's CUDA "
        "tensor-core kernels, since the TVM wheel has no CUDA); CPU islands ran with PyTorch's "
        "CPU kernels on the host (TVM's llvm cannot run there), with real pageable copies "
        "between them.", "",
        f"**Spearman rank correlation** over all {report['rows_count']} rows: "
        f"**{report['spearman_all']:.3f}** (goal >= 0.9); over distinct plans only "
        f"({report['distinct_count']}): {report['spearman_distinct']:.3f}; with the hand-made "
        f"variant plans too ({report['plans_with_variants']} distinct plans): "
        f"{report['spearman_with_variants']:.3f}.", "",
        "| model | strategy | same plan as | accel regions / CPU islands | ops on GPU | "
        "copies | predicted ms | measured ms | pred/meas |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report["rows"]:
        if r["kind"] != "strategy":
            continue
        lines.append(
            f"| {r['model']} | {r['strategy']} | {r['same_plan_as'] or ''} | "
            f"{r['accel_regions']} / {r['cpu_regions']} | {r['ops_on_accel']}/{r['ops']} | "
            f"{r['predicted']['copies']} | {ms(r['predicted_s'])} | {ms(r['measured_s'])} | "
            f"{r['predicted_s'] / r['measured_s']:.2f} |")
    lines += ["", "## Is the predicted-best plan the measured fastest (or within 10%)?", "",
              "Strategies only (the variants are not a strategy's choice). The last column is the "
              "whole graph on the GPU, every op included, for scale: no plan can do that, since "
              "the target keeps some ops off the Tensor Core region.", "",
              "| model | distinct plans | predicted best | measured best | gap | ok | "
              "unpartitioned on GPU ms |",
              "|---|---|---|---|---|---|---|"]
    for name, check in report["best"].items():
        lines.append(f"| {name} | {check['distinct_plans']} | {check['predicted_best']} | "
                     f"{check['measured_best']} | {check['gap'] * 100:+.1f}% | "
                     f"{'yes' if check['ok'] else 'NO'} | {ms(check['unpartitioned_gpu_s'])} |")
    lines += ["", "## Ranking within a model: hand-made variant plans", "",
              "Most strategies agree on these models, so each model with accelerator regions also "
              "ran 8 plans that no strategy chose: the greedy plan with 1, 2, 4 or 8 random runs "
              "of consecutive accelerator ops moved to the CPU (`export_bundles.py --variants`).",
              "", "| model | distinct plans | Spearman within the model |", "|---|---|---|"]
    for name, check in report["within_model"].items():
        lines.append(f"| {name} | {check['plans']} | {check['spearman']:.3f} |")
    lines += ["", "| model | plan | ops on GPU | copies | predicted ms | measured ms | pred/meas |",
              "|---|---|---|---|---|---|---|"]
    for r in report["rows"]:
        if r["kind"] == "variant" and not r["same_plan_as"]:
            lines.append(f"| {r['model']} | {r['strategy']} | {r['ops_on_accel']}/{r['ops']} | "
                         f"{r['predicted']['copies']} | {ms(r['predicted_s'])} | "
                         f"{ms(r['measured_s'])} | {r['predicted_s'] / r['measured_s']:.2f} |")
    lines += ["", "## Numerics on the GPU", "",
              "Every plan's outputs against the unpartitioned graph run on the GPU in fp16 "
              "(relative L2 error, worst output). Tolerance: twice the error the fp16 graph "
              "itself has against the same graph in fp32 (at least 1e-3): partitioning may not "
              "add more error than fp16 rounding already does. Weights are seeded random, batch "
              "norms calibrated on the input.", "",
              "The float32 columns run every plan again with every tensor in float32 against "
              "the unpartitioned float32 run on the GPU. In the evidence run the copies between "
              "devices still rounded float16 tensors to float16 (the executor's wire dtype), "
              "which is most of what that column shows; the re-run (`--numerics` file) copies "
              "them as float32 with TF32 off, so what is left is float32 rounding (CPU vs GPU "
              "kernels), amplified by the depth of random-weight networks.", "",
              "| model | fp16 vs fp32 (unpartitioned) | worst plan vs unpartitioned | ok | "
              "worst plan in float32, evidence run | worst plan in float32, re-run |",
              "|---|---|---|---|---|---|"]
    for name, check in report["numerics"].items():
        rerun = check.get("float32_rerun_worst")
        lines.append(f"| {name} | {check['unpartitioned_fp16_vs_fp32']:.2e} | "
                     f"{check['worst_plan_vs_unpartitioned']:.2e} | "
                     f"{'yes' if check['ok'] else 'NO'} | "
                     f"{check['worst_plan_in_float32_vs_float32']:.2e} | "
                     f"{'not run' if rerun is None else f'{rerun:.2e}'} |")
    lines += ["", "## Where the time goes (distinct plans)", "",
              "| model | strategy | pred CPU / GPU / copy / launch ms | measured CPU / GPU / copy ms "
              "(synchronised breakdown run) |", "|---|---|---|---|"]
    for r in report["rows"]:
        if r["same_plan_as"]:
            continue
        p, m = r["predicted"], r["measured_breakdown"]
        lines.append(f"| {r['model']} | {r['strategy']} | {ms(p['cpu_s'])} / {ms(p['accel_s'])}"
                     f" / {ms(p['copy_s'])} / {ms(p['overhead_s'])} | {ms(m['cpu_s'])} / "
                     f"{ms(m['accel_s'])} / {ms(m['copy_s'])} |")
    lines += ["", "## Setup", ""] + [f"- {k}: {v}" for k, v in report["setup"].items()]
    lines += ["", "## Commands", ""] + [f"    {c}" for c in report["commands"]]
    if report.get("notes"):
        lines += ["", "## Notes", ""] + [f"- {n}" for n in report["notes"]]
    return "\n".join(lines) + "\n"


def float32_rerun(path: Path | None) -> tuple[dict[str, float], dict[str, Any]]:
    """Per model, the worst float32-mode error of a numerics-only evidence run
    (``evidence.py --numerics-only``), and that run's setup."""
    if path is None:
        return {}, {}
    run = json.loads(path.read_text())
    worst = {entry["model"]: max(p["float32_mode_error_vs_float32"]
                                 for p in entry["plans"].values()
                                 if "float32_mode_error_vs_float32" in p)
             for entry in run["models"] if entry.get("plans")}
    return worst, {"float32 re-run": run.get("command"), "its float32 math": run.get("float32_math")}


def build_report(bundle_dir: Path, evidence_path: Path, profile: Path,
                 commands: list[str], notes: list[str],
                 numerics_path: Path | None = None) -> dict[str, Any]:
    evidence = json.loads(evidence_path.read_text())
    rerun, rerun_setup = float32_rerun(numerics_path)
    model = MeasuredGpuCostModel(profile)
    rows, best, checks = [], {}, {}
    for entry in evidence["models"]:
        if "plans" not in entry:
            notes.append(f"{entry['model']}: not run ({entry.get('error') or entry.get('skipped')})")
            continue
        model_part = model_rows(entry, bundle_dir, model)
        if not model_part:
            continue
        rows += model_part
        best[entry["model"]] = best_check([r for r in model_part if r["kind"] == "strategy"]) | {
            "unpartitioned_gpu_s": entry["reference"]["unpartitioned_gpu"]["median_s"]}
        checks[entry["model"]] = numerics(entry) | (
            {"float32_rerun_worst": rerun[entry["model"]]} if entry["model"] in rerun else {})
    strategies = [r for r in rows if r["kind"] == "strategy"]
    distinct = [r for r in strategies if not r["same_plan_as"]]
    every_plan = [r for r in rows if not r["same_plan_as"]]
    within = {}
    for name in best:
        own = [r for r in every_plan if r["model"] == name]
        if len(own) >= 3:
            within[name] = {"plans": len(own), "spearman": spearman(
                [r["predicted_s"] for r in own], [r["measured_s"] for r in own])}
    meta = model.profile.meta
    return {
        "schema": "partition_lab.gpu_evidence/1", "cost_model": model.name,
        "rows_count": len(strategies), "distinct_count": len(distinct),
        "spearman_all": spearman([r["predicted_s"] for r in strategies],
                                 [r["measured_s"] for r in strategies]),
        "spearman_distinct": spearman([r["predicted_s"] for r in distinct],
                                      [r["measured_s"] for r in distinct]),
        "plans_with_variants": len(every_plan),
        "spearman_with_variants": spearman([r["predicted_s"] for r in every_plan],
                                           [r["measured_s"] for r in every_plan]),
        "within_model": within,
        "best": best, "numerics": checks, "rows": rows,
        "setup": {"gpu": meta.get("gpu"), "driver": meta.get("driver"),
                  "torch / CUDA / cuDNN": f"{evidence.get('torch')} / {meta.get('cuda')} / "
                                          f"{meta.get('cudnn')}",
                  "host CPU": f"{meta.get('host_cpu')}, {evidence.get('cpu_threads')} torch threads",
                  "profile measured": ", ".join(p.get("date") or "?" for p in meta.get(
                      "parts", [meta])),
                  "evidence run": evidence.get("command"), **rerun_setup},
        "commands": commands, "notes": notes,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--merge", nargs="*", type=Path, help="profile parts to join")
    parser.add_argument("--profile", type=Path, required=True)
    parser.add_argument("--bundles", type=Path)
    parser.add_argument("--evidence", type=Path)
    parser.add_argument("--out", type=Path, help="path stem for .md and .json")
    parser.add_argument("--command", action="append", default=[], help="a command to list")
    parser.add_argument("--note", action="append", default=[])
    parser.add_argument("--numerics", type=Path,
                        help="a numerics-only evidence run (float32 with float32 copies)")
    args = parser.parse_args(argv)
    if args.merge:
        merge_profiles(args.merge, args.profile)
    if not args.evidence:
        return 0
    report = build_report(args.bundles, args.evidence, args.profile, args.command, args.note,
                          args.numerics)
    write_report(args.out, report, markdown(report))
    return 0


def write_report(out: Path, report: dict[str, Any], text: str) -> None:
    """``out``.json (non-finite floats as null) and ``out``.md, and the markdown on stdout."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(report, indent=1, default=_finite))
    out.with_suffix(".md").write_text(text)
    print(text)


def _finite(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else str(value)


if __name__ == "__main__":
    sys.exit(main())
