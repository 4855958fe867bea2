"""The tensorcore platform on an H200: where each strategy put the ops, and what that costs
(runs HERE, from what ``bench/gpu/evidence.py`` wrote on the GPU machine).

Reads the bundles (plans, predictions under the per-device roofline) and one or two evidence
runs, and writes ``<out>.md`` and ``<out>.json``: per model and plan, ops and regions per device
(tensorcore / cuda / cpu), the crossings the executor made, predicted and measured times, the
ratio to the unpartitioned graph on the GPU (from runs taken in turns, ``--interleave``), the
ops on each device, numerics, and the checks of the platform goals.

    .venv/bin/python bench/gpu/platforms_report.py --bundles .gpu_bundle/platforms \\
        --evidence bench/results/gpu_platforms_raw.json \\
        --repeat bench/results/gpu_platforms_run1_raw.json \\
        --previous bench/results/gpu_evidence.json --out bench/results/gpu_platforms
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from partition_lab.executors.graph_io import read_bundle

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling bench scripts

WITHIN = 0.10  #: a batch-1 tensorcore plan must run within 10% of the unpartitioned graph
STRATEGIES = ("greedy", "cost", "optimal")
DEVICES = ("tensorcore", "cuda", "cpu")


def spearman(x: list[float], y: list[float]) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(x, y).statistic) if len(x) >= 3 else float("nan")


def histogram(ops: list[str]) -> str:
    counts: dict[str, int] = {}
    for op in ops:
        counts[op] = counts.get(op, 0) + 1
    return ", ".join(f"{c} {op}" for op, c in sorted(counts.items(), key=lambda kv: (-kv[1],
                                                                                     kv[0])))


def kind_of(plan: str) -> str:
    if plan.startswith("variant"):
        return "variant"
    return "baseline" if plan == "unpartitioned_gpu" else "strategy"


def model_part(entry: dict[str, Any], bundle_dir: Path) -> dict[str, Any]:
    bundle = read_bundle(bundle_dir / f"{entry['model']}.json.gz")
    graph = bundle.graph
    batch = next(iter(bundle.meta["input_shapes"].values()))[0]
    reference = entry["reference"]["unpartitioned_gpu"]["median_s"]
    interleaved = entry.get("interleaved", {})
    rows, placement = [], {}
    for name, measured in entry["plans"].items():
        if "median_s" not in measured:
            continue
        plan = bundle.plans[name]
        same = measured.get("same_plan_as")
        turns = interleaved.get(same or name)
        predicted = bundle.meta["predicted"][name]
        host = [graph[d.node] for d in plan.decisions if d.device == "cpu"]
        rejected: dict[str, int] = {}  # where the ops that tensorcore rejects went
        for d in plan.decisions:
            if not plan.support.verdict(d.node, "tensorcore").supported:
                rejected[d.device] = rejected.get(d.device, 0) + 1
        rows.append({
            "model": entry["model"], "batch": batch, "plan": name, "kind": kind_of(name),
            "same_plan_as": same, "ops": len(graph),
            "ops_per_device": measured["ops_per_device"],
            "regions_per_device": measured["regions_per_device"],
            "tensorcore_rejected_on": rejected,
            "crossings": measured["crossings"],
            "predicted_s": predicted["total_s"],
            "measured_s": measured["median_s"], "measured_min_s": measured["min_s"],
            "ratio_separate": measured["median_s"] / reference,
            "interleaved_s": turns["median_s"] if turns else None,
            "ratio_interleaved": turns["ratio_to_unpartitioned"] if turns else None,
            "breakdown": {"by_device_s": measured["breakdown"]["by_device_s"],
                          "copy_s": measured["breakdown"]["copies"]["time_s"],
                          "synchronised_total_s": measured["breakdown"]["total_s"]},
            "error_vs_unpartitioned": measured["error_vs_unpartitioned"],
            "float32_mode_error_vs_float32": measured["float32_mode_error_vs_float32"],
            "host_ops": [f"{graph[d.node].name}: {d.reason}" for d in plan.decisions
                         if d.device == "cpu"] if len(host) <= 4 else None,
        })
        if not same and name in (*STRATEGIES, "unpartitioned_gpu"):
            placement[name] = {device: histogram([graph[d.node].op for d in plan.decisions
                                                  if d.device == device])
                               for device in DEVICES}
    distinct = [r for r in rows if not r["same_plan_as"]]
    return {
        "model": entry["model"], "batch": batch, "ops": len(graph), "rows": rows,
        "placement": placement,
        "unpartitioned_gpu_s": reference,
        "unpartitioned_gpu_again_s": entry["reference"]["unpartitioned_gpu_again"]["median_s"],
        "unpartitioned_interleaved_s": interleaved.get("unpartitioned", {}).get("median_s"),
        "interleaved_rounds": interleaved.get("rounds"),
        "fp16_vs_fp32": entry["reference"]["graph_precision_vs_float32"],
        "spearman_within": spearman([r["predicted_s"] for r in distinct],
                                    [r["measured_s"] for r in distinct]),
        "distinct_plans": len(distinct),
    }


def goals(models: list[dict[str, Any]], previous: dict[str, Any] | None) -> dict[str, Any]:
    """Batch 1: every strategy's plan within 10% of the unpartitioned graph (runs in turns),
    nothing on the host that the GPU could run; batch 32: Tensor Core regions."""
    batch1, batched = [], []
    old_rows = {(r["model"], r["strategy"]): r for r in (previous or {}).get("rows", [])}
    old_best = (previous or {}).get("best", {})
    for m in models:
        by_plan = {r["plan"]: r for r in m["rows"]}
        for strategy in STRATEGIES:
            r = by_plan.get(strategy)
            if r is None:
                continue
            ratio = r["ratio_interleaved"]
            row = {"model": m["model"], "batch": m["batch"], "strategy": strategy,
                   "same_plan_as": r["same_plan_as"], "ops": m["ops"],
                   "ops_per_device": r["ops_per_device"],
                   "regions_per_device": r["regions_per_device"],
                   "ratio": ratio, "ok": ratio is not None and ratio <= 1 + WITHIN,
                   "measured_s": r["interleaved_s"], "host_ops": r["host_ops"],
                   "tensorcore_rejected_on": r["tensorcore_rejected_on"],
                   "unpartitioned_s": m["unpartitioned_interleaved_s"]}
            old = old_rows.get((m["model"], strategy))
            if old is not None:
                row["before"] = {"measured_s": old["measured_s"],
                                 "ops_on_gpu": old["ops_on_accel"],
                                 "unpartitioned_s": old_best.get(m["model"], {}).get(
                                     "unpartitioned_gpu_s")}
            (batch1 if m["batch"] == 1 else batched).append(row)
    return {
        "batch1": batch1, "batched": batched,
        "batch1_ok": all(r["ok"] for r in batch1),
        "batch1_rejected_on_cuda": all(set(r["tensorcore_rejected_on"]) <= {"cuda"}
                                       for r in batch1),
        "batch1_no_host_ops": all(r["ops_per_device"]["cpu"] == 0 for r in batch1),
        "batch1_host_ops": sorted({f"{r['model']} {r['strategy']}: {op}" for r in batch1
                                   for op in (r.get("host_ops") or [])}),
        "batched_tensorcore": all(r["ops_per_device"]["tensorcore"] > 0 and
                                  r["regions_per_device"]["tensorcore"] > 0 for r in batched),
        "batched_ok": all(r["ok"] for r in batched),
    }


def build(bundle_dir: Path, evidence_path: Path, repeat_path: Path | None,
          previous_path: Path | None, versions: str, commands: list[str], notes: list[str],
          device_time: list[str]) -> dict[str, Any]:
    evidence = json.loads(evidence_path.read_text())
    previous = json.loads(previous_path.read_text()) if previous_path else None
    models = [model_part(e, bundle_dir) for e in evidence["models"] if "plans" in e]
    skipped = [f"{e['model']}: {e.get('error') or e.get('skipped')}"
               for e in evidence["models"] if "plans" not in e]
    repeat = {}
    if repeat_path:
        run = json.loads(repeat_path.read_text())
        for e in run["models"]:
            if "plans" in e:
                ref = e["reference"]["unpartitioned_gpu"]["median_s"]
                repeat[e["model"]] = {p: v["median_s"] / ref for p, v in e["plans"].items()
                                      if "median_s" in v and p in (*STRATEGIES,
                                                                   "unpartitioned_gpu")}
    rows = [r for m in models for r in m["rows"]]
    distinct = [r for r in rows if not r["same_plan_as"]]
    return {
        "schema": "partition_lab.gpu_platforms/1",
        "platform": "tensorcore (tensorcore: Tensor Core regions, cuda: CUDA cores, cpu: host "
                    "in float32)",
        "cost_model": evidence_cost_model(bundle_dir, models),
        "goals": goals(models, previous), "models": models,
        "spearman_all_distinct": spearman([r["predicted_s"] for r in distinct],
                                          [r["measured_s"] for r in distinct]),
        "distinct_plans": len(distinct),
        "repeat_ratio_separate": repeat, "skipped": skipped,
        "setup": {"gpu": evidence.get("gpu"), "torch": evidence.get("torch"),
                  "cpu threads": evidence.get("cpu_threads"), "versions": versions,
                  "evidence command": evidence.get("command"),
                  "evidence wall time s": round(evidence.get("elapsed_s", 0.0), 1),
                  "float32 math": evidence.get("float32_math")},
        "device_time": device_time, "commands": commands, "notes": notes,
    }


def evidence_cost_model(bundle_dir: Path, models: list[dict[str, Any]]) -> str:
    if not models:
        return ""
    return str(read_bundle(bundle_dir / f"{models[0]['model']}.json.gz").meta.get("cost_model"))


def ms(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "-"
    return f"{seconds * 1e3:.3f}" if seconds < 10 else f"{seconds * 1e3:.0f}"


def ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def per_device(counts: dict[str, int]) -> str:
    return " / ".join(str(counts.get(d, 0)) for d in DEVICES)


def markdown(report: dict[str, Any]) -> str:
    g = report["goals"]
    lines = [
        "# The tensorcore platform on an NVIDIA H200: Tensor Core regions, CUDA cores, host",
        "",
        "Generated by `bench/gpu/platforms_report.py` from `gpu_platforms_raw.json` (the exact "
        "commands are at the end). Every zoo model, prepared for the three-device `tensorcore` "
        "platform here (fp16, NHWC), planned by `greedy`, `cost`, `optimal` and `all_cpu` under "
        f"`{report['cost_model']}`, plus `unpartitioned_gpu` (every op on `cuda`, one region) "
        "and 3 hand-made variants per model (runs of GPU ops moved to the host). On the GPU "
        "machine `partition_lab.executors.torch_exec` ran each plan: regions of `tensorcore` and `cuda` "
        "on the H200 (one memory space: no copy between them), host islands on the CPU in "
        "float32, every crossing a real copy and cast.",
        "",
        "What this executor can and cannot show, said plainly: it runs each Relay op as the "
        "PyTorch op. A `tensorcore` region and a `cuda` region run the same cuDNN/cuBLAS fp16 "
        "kernels, which use Tensor Cores whenever they can; PyTorch cannot be told to keep an "
        "fp16 convolution off them. So the measured times show the cost of *where the host "
        "is involved* (islands, copies, casts), not the Tensor Core vs CUDA core difference "
        "that the roofline prices (it predicts resnet50_v1_b32 at 4.8 ms with Tensor Core "
        "regions vs 10.0 ms all on CUDA cores; measured, both are the same kernels).",
        "",
        "## The goals of the platform evidence",
        "",
        f"- **Batch 1: every strategy's plan within 10% of the unpartitioned graph on the GPU, "
        f"the ops Tensor Cores reject on the CUDA cores, not the host**: "
        f"{sum(r['ok'] for r in g['batch1'])}/{len(g['batch1'])} (model, strategy) within "
        f"10% ({'met' if g['batch1_ok'] else 'NOT met'}); the ops `tensorcore` rejects went to "
        f"`cuda` in every batch-1 strategy plan: "
        f"{'yes' if g['batch1_rejected_on_cuda'] else 'NO'}; ops on the host in a batch-1 strategy "
        f"plan: " + ("none" if g["batch1_no_host_ops"] else "; ".join(
            f"`{h}`" for h in g["batch1_host_ops"])) + ".",
        f"- **Batch 32: Tensor Core regions**: "
        f"{'met' if g['batched_tensorcore'] else 'NOT met'}; within 10% of the unpartitioned "
        f"graph: {sum(r['ok'] for r in g['batched'])}/{len(g['batched'])}.",
        "",
        "Ratios are medians of end-to-end runs taken in turns with the unpartitioned graph "
        "(`--interleave`: one run of each per round, 40 rounds, order rotated), so that the "
        "machine's drift (up to 1.6x between two timings of the same graph minutes apart, see "
        "below) hits both alike. \"before\" is the two-device result "
        "(`bench/results/gpu_evidence.json`, another machine instance): a strategy's "
        "measured time and ops on the GPU, and the unpartitioned graph's.",
        "",
        "| model | batch | strategy | same plan as | ops tensorcore / cuda / cpu | regions "
        "tensorcore / cuda / cpu | ms (in turns) | unpartitioned ms | ratio | ok | before: ms, "
        "ops on GPU, unpartitioned ms |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in g["batched"] + g["batch1"]:
        before = r.get("before")
        old = (f"{ms(before['measured_s'])}, {before['ops_on_gpu']}/{r['ops']}, "
               f"{ms(before['unpartitioned_s'])}" if before else "-")
        lines.append(
            f"| {r['model']} | {r['batch']} | {r['strategy']} | {r['same_plan_as'] or ''} | "
            f"{per_device(r['ops_per_device'])} | {per_device(r['regions_per_device'])} | "
            f"{ms(r['measured_s'])} | {ms(r['unpartitioned_s'])} | {ratio(r['ratio'])} | "
            f"{'yes' if r['ok'] else 'NO'} | {old} |")
    lines += [
        "", "## Every plan", "",
        "Predicted: the plan's total under the cost model above. Measured: median end-to-end "
        "time of this plan timed on its own (30 runs); \"alone / unpart.\" divides it by the "
        "unpartitioned graph's median timed on its own at the start of the model, so it "
        "carries the drift; \"in turns\" is the drift-free ratio where the plan was timed in "
        "turns. Crossings: tensors the executor moved between places (GPU memory, host in "
        "float32), once per destination; `copy+cast` are float16 tensors cast on the host side.",
        "",
        "| model | plan | ops tensorcore / cuda / cpu | regions | crossings (kinds, MB) | "
        "predicted ms | measured ms (min) | alone / unpart. | in turns | measured GPU / host "
        "/ copy ms (synchronised) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for m in report["models"]:
        for r in m["rows"]:
            if r["same_plan_as"]:
                continue
            c = r["crossings"]
            kinds = ", ".join(f"{n} {k}" for k, n in sorted(c["kinds"].items()))
            b = r["breakdown"]["by_device_s"]
            gpu = sum(t for d, t in b.items() if d != "cpu")
            lines.append(
                f"| {r['model']} | {r['plan']} | {per_device(r['ops_per_device'])} | "
                f"{per_device(r['regions_per_device'])} | {c['count']} ({kinds}; "
                f"{c['bytes'] / 1e6:.2f}) | {ms(r['predicted_s'])} | {ms(r['measured_s'])} "
                f"({ms(r['measured_min_s'])}) | {ratio(r['ratio_separate'])} | "
                f"{ratio(r['ratio_interleaved'])} | {ms(gpu)} / {ms(b.get('cpu', 0.0))} / "
                f"{ms(r['breakdown']['copy_s'])} |")
    lines += ["", "Plans identical to another plan of the same model (not run twice): " + "; ".join(
        f"{m['model']}: " + ", ".join(f"{r['plan']} = {r['same_plan_as']}" for r in m["rows"]
                                      if r["same_plan_as"])
        for m in report["models"] if any(r["same_plan_as"] for r in m["rows"])) + "."]
    lines += [
        "", "## Which ops went where", "",
        "Per model, each distinct strategy plan (and the baseline where it differs): the ops on "
        "each device, by op. Host ops are named where a plan has 4 or fewer.", "",
        "| model | plan | tensorcore | cuda | cpu (host) |", "|---|---|---|---|---|",
    ]
    for m in report["models"]:
        named = {r["plan"]: r["host_ops"] for r in m["rows"]}
        for plan, hist in m["placement"].items():
            host = hist["cpu"] + (f" ({', '.join(named[plan])})" if named.get(plan) else "")
            lines.append(f"| {m['model']} | {plan} | {hist['tensorcore'] or '-'} | "
                         f"{hist['cuda'] or '-'} | {host or '-'} |")
    lines += [
        "", "## Predicted vs measured ranking", "",
        f"Spearman rank correlation, roofline prediction vs measured median, over the "
        f"{report['distinct_plans']} distinct plans of all models: "
        f"{report['spearman_all_distinct']:.3f}. Within each model (distinct plans: strategies, "
        "baseline, variants):", "",
        "| model | distinct plans | Spearman | unpartitioned ms: start / after the plans / in "
        "turns |", "|---|---|---|---|",
    ]
    for m in report["models"]:
        lines.append(f"| {m['model']} | {m['distinct_plans']} | {m['spearman_within']:.3f} | "
                     f"{ms(m['unpartitioned_gpu_s'])} / {ms(m['unpartitioned_gpu_again_s'])} / "
                     f"{ms(m['unpartitioned_interleaved_s'])} |")
    if report["repeat_ratio_separate"]:
        lines += ["", "An earlier run of the same bundles (without `--interleave`, another "
                  "machine instance; `gpu_platforms_run1_raw.json`), plan median / unpartitioned "
                  "median, each timed alone:", "",
                  "| model | " + " | ".join(STRATEGIES) + " | unpartitioned_gpu |",
                  "|---|" + "---|" * (len(STRATEGIES) + 1)]
        for model, ratios in report["repeat_ratio_separate"].items():
            lines.append(f"| {model} | " + " | ".join(
                ratio(ratios.get(p)) for p in (*STRATEGIES, "unpartitioned_gpu")) + " |")
    lines += [
        "", "## Numerics", "",
        "Relative L2 error of each plan's outputs (worst output) against the unpartitioned graph "
        "on the GPU, in fp16, and with every tensor in float32 against the float32 "
        "unpartitioned graph (TF32 off). Plans that stay on the GPU give bit-identical outputs; "
        "host islands compute in float32 and round at their boundary.", "",
        "| model | fp16 graph vs fp32 | worst plan, fp16 | worst plan, float32 |", "|---|---|---|---|",
    ]
    for m in report["models"]:
        worst16 = max(r["error_vs_unpartitioned"] for r in m["rows"])
        worst32 = max(r["float32_mode_error_vs_float32"] for r in m["rows"])
        lines.append(f"| {m['model']} | {m['fp16_vs_fp32']:.2e} | {worst16:.2e} | "
                     f"{worst32:.2e} |")
    lines += ["", "## Setup", ""] + [f"- {k}: {v}" for k, v in report["setup"].items()]
    lines += ["", "## Device time", ""] + [f"- {t}" for t in report["device_time"]]
    lines += ["", "## Commands", ""] + [f"    {c}" for c in report["commands"]]
    if report["skipped"] or report["notes"]:
        lines += ["", "## Notes", ""] + [f"- {n}" for n in report["notes"] + report["skipped"]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundles", type=Path, required=True)
    parser.add_argument("--evidence", type=Path, required=True)
    parser.add_argument("--repeat", type=Path, help="an earlier evidence run of the same bundles")
    parser.add_argument("--previous", type=Path, help="the two-device gpu_evidence.json")
    parser.add_argument("--versions", type=Path, help="versions.txt from the GPU machine")
    parser.add_argument("--out", type=Path, required=True, help="path stem for .md and .json")
    parser.add_argument("--command", action="append", default=[])
    parser.add_argument("--note", action="append", default=[])
    parser.add_argument("--device-time", action="append", default=[])
    args = parser.parse_args(argv)
    versions = args.versions.read_text().strip().replace("\n", "; ") if args.versions else ""
    report = build(args.bundles, args.evidence, args.repeat, args.previous, versions,
                   args.command, args.note, args.device_time)
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
