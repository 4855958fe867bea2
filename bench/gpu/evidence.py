"""Run and time every strategy's plan of every bundled model on the GPU machine (runs THERE; also
runs here with --device cpu as a check).

Per model: seeded synthetic weights (:func:`partition_lab.executors.weights.synthetic_weights`), batch
norms calibrated on the input (float32, on the GPU), the unpartitioned graph run on the GPU in
float32 (TF32 off) and in the graph's precision (the references), then each plan: its outputs
against both references, the same plan run in float32 against the float32 reference (partitioning
must not change the function: copies, region order and host islands are all exercised), where
its ops went (per plan device) and what the executor moves between places, its end-to-end time
(median of repeated runs, synchronised only where the program must) and a per-region /
per-crossing breakdown (separately synchronised runs); after the plans, the unpartitioned graph
is timed again (drift), and with ``--interleave`` the named plans and the unpartitioned graph are
timed in turns (their ratios then do not depend on when each was timed; ``--interleave all``:
every plan of the bundle). ``--plan-seconds`` and ``--interleave-seconds`` bound each timing
(for a short run over many bundles). Results are written after every plan, so a run cut short
keeps what it measured.

    PYTHONPATH=src python3 bench/gpu/evidence.py --bundles .gpu_bundle/platforms \\
        --out $OUT/gpu_platforms_raw.json --budget 300
    # here, without a GPU: the same plans with their crossings as CPU copies
    PYTHONPATH=src .venv/bin/python bench/gpu/evidence.py --bundles .gpu_bundle/small \\
        --out /tmp/evidence_cpu.json --device cpu --separate-memories
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from partition_lab.executors.graph_io import read_bundle
from partition_lab.executors.torch_exec import PlanExecutor, calibrate_batch_norm
from partition_lab.executors.turns import timed_in_turns
from partition_lab.executors.weights import sample_inputs, synthetic_weights


def relative_error(out: list[np.ndarray], ref: list[np.ndarray]) -> float:
    """Largest ||out - ref|| / ||ref|| over the outputs (float64); inf for NaN or shape mismatch."""
    worst = 0.0
    for a, b in zip(out, ref, strict=True):
        if a.shape != b.shape or not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
            return float("inf")
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        worst = max(worst, float(np.linalg.norm(a64 - b64) / max(np.linalg.norm(b64), 1e-30)))
    return worst


def plan_key(plan: Any) -> tuple:
    return tuple(sorted((r.device, r.nodes) for r in plan.regions))


def summarise(bench: Any) -> dict[str, Any]:
    breakdown = bench.median_breakdown()
    copies = breakdown.pop("copies", [])
    by_device: dict[str, float] = {}
    for label, seconds in breakdown.get("regions", {}).items():
        device = breakdown.get("devices", {}).get(label, label)
        by_device[device] = by_device.get(device, 0.0) + seconds
    breakdown["by_device_s"] = by_device
    breakdown["copies"] = {"count": len(copies), "bytes": sum(c["nbytes"] for c in copies),
                           "time_s": sum(c["time_s"] for c in copies),
                           "largest": sorted(copies, key=lambda c: -c["time_s"])[:5]}
    return {"median_s": bench.median_s, "min_s": min(bench.end_to_end_s),
            "end_to_end_s": bench.end_to_end_s, "breakdown": breakdown}


def placement(plan: Any, executor: Any) -> dict[str, Any]:
    """Where the plan put the ops, and what the executor moves between places."""
    moves = executor.crossings()
    kinds: dict[str, int] = {}
    for move in moves:
        kinds[move["kind"]] = kinds.get(move["kind"], 0) + 1
    return {
        "ops_per_device": plan.ops_per_device(),
        "regions_per_device": {d: len(plan.regions_on(d)) for d in plan.platform.names},
        "region_order": executor.region_order(),
        "places": {d: p.name for d, p in executor.device_places.items()},
        "crossings": {"count": len(moves), "bytes": sum(m["nbytes"] for m in moves),
                      "kinds": kinds},
        # old keys, read by report.py's first report
        "accel_regions": len(plan.accelerator_regions), "cpu_regions": len(plan.cpu_regions),
        "ops_on_accel": len(plan.accelerator_nodes),
    }


def run_model(path: Path, device: str, deadline: float, write: Any,
              numerics_only: bool = False, separate: bool = False,
              interleave: tuple[str, ...] = (), seconds: tuple[float, float, float] = (3, 4, 8)
              ) -> dict[str, Any]:
    """One bundle's evidence; ``seconds``: the most each timing of the unpartitioned graph, of
    each plan, and of the plans in turns may take."""
    bundle = read_bundle(path)
    graph, bindings = bundle.graph, bundle.bindings
    reference_s, plan_s, turns_s = seconds
    # bundle and platform: one model's bundles for several platforms share meta.model
    row: dict[str, Any] = {"model": bundle.meta.get("model", path.name), "bundle": path.name[:-8],
                           "platform": bundle.platform.name if bundle.platform else None,
                           "ops": len(graph),
                           "cost_model": bundle.meta.get("cost_model"), "plans": {}}
    start = time.perf_counter()
    weights = synthetic_weights(graph, bindings, seed=0)
    inputs = sample_inputs(graph, seed=0)
    calibrate_batch_norm(graph, bindings, weights, inputs, device=device)
    ref32 = PlanExecutor(graph, None, bindings, weights, device=device, dtype="float32").run(inputs)
    reference = PlanExecutor(graph, None, bindings, weights, device=device)
    ref16 = reference.run(inputs)
    row["reference"] = {"setup_s": time.perf_counter() - start,
                        "graph_precision_vs_float32": relative_error(ref16, ref32)}
    if not numerics_only:
        row["reference"]["unpartitioned_gpu"] = summarise(reference.benchmark(
            inputs, warmup=2, repeats=30, max_seconds=reference_s))
    seen: dict[tuple, str] = {}
    for strategy, plan in bundle.plans.items():
        if time.perf_counter() > deadline:
            row["plans"][strategy] = {"skipped": "time budget reached"}
            continue
        key = plan_key(plan)
        if key in seen:
            row["plans"][strategy] = {**row["plans"][seen[key]], "same_plan_as": seen[key]}
            continue
        seen[key] = strategy
        exact = PlanExecutor(graph, plan, bindings, weights, device=device, dtype="float32",
                             separate_memories=separate)
        error_fp32_mode = relative_error(exact.run(inputs), ref32)
        del exact
        executor = PlanExecutor(graph, plan, bindings, weights, device=device,
                                separate_memories=separate)
        outputs = executor.run(inputs)
        row["plans"][strategy] = {
            **placement(plan, executor),
            "error_vs_unpartitioned": relative_error(outputs, ref16),
            "error_vs_float32": relative_error(outputs, ref32),
            "float32_mode_error_vs_float32": error_fp32_mode,
        }
        if not numerics_only:
            bench = executor.benchmark(inputs, warmup=2, repeats=30, max_seconds=plan_s)
            row["plans"][strategy].update(summarise(bench))
        print(f"  {row['model']} {strategy}: err {error_fp32_mode:.2e} in float32, "
              f"{row['plans'][strategy]['error_vs_unpartitioned']:.2e} in fp16", flush=True)
        del executor
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
        write()
    if not numerics_only:
        # the unpartitioned graph again, after the plans: how much the machine drifted
        row["reference"]["unpartitioned_gpu_again"] = summarise(reference.benchmark(
            inputs, warmup=2, repeats=30, max_seconds=reference_s))
        if interleave and time.perf_counter() < deadline:
            names = tuple(bundle.plans) if interleave == ("all",) else interleave
            chosen = {s: bundle.plans[s] for s in names if s in bundle.plans
                      and "same_plan_as" not in row["plans"].get(s, {"same_plan_as": None})}
            executors = {"unpartitioned": reference} | {
                s: PlanExecutor(graph, p, bindings, weights, device=device,
                                separate_memories=separate) for s, p in chosen.items()}
            row["interleaved"] = interleaved(executors, inputs, max_seconds=turns_s)
            del executors
    del reference
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return row


def interleaved(executors: dict[str, Any], inputs: dict[str, np.ndarray], rounds: int = 40,
                max_seconds: float = 8.0, min_rounds: int = 8) -> dict[str, Any]:
    """End-to-end times of several plans of one model taken in turns (one run of each per round,
    the order rotated every round), so that a drift of the machine hits all of them alike; the
    medians and each plan's median ratio to the first (the unpartitioned graph)."""
    names = list(executors)
    for executor in executors.values():
        executor.prepare()
        for _ in range(2):
            executor.run(inputs)
    # settle: each timed run after an untimed one of the same plan (runs before 2026-12-02
    # timed without, and charged a plan for a host-heavy plan run before it)
    times = timed_in_turns(executors, inputs, rounds, max_seconds, min_rounds, settle=1)
    base = statistics.median(times[names[0]])
    return {name: {"median_s": statistics.median(t), "min_s": min(t),
                   "ratio_to_unpartitioned": statistics.median(t) / base, "times_s": t}
            for name, t in times.items()} | {"rounds": len(times[names[0]])}


def _float32_math_settings() -> dict[str, Any]:
    """What PyTorch says it will do with float32 matmuls and convolutions (TF32 or IEEE)."""
    settings: dict[str, Any] = {
        "cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
        "cuda.matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
    }
    if hasattr(torch.backends.cuda.matmul, "fp32_precision"):
        settings["cuda.matmul.fp32_precision"] = torch.backends.cuda.matmul.fp32_precision
        settings["cudnn.conv.fp32_precision"] = torch.backends.cudnn.conv.fp32_precision
    return settings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundles", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--models", nargs="*")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--budget", type=float, default=300.0, help="seconds in all")
    parser.add_argument("--numerics-only", action="store_true",
                        help="check outputs only, no timing (the float32 check with TF32 off)")
    parser.add_argument("--separate-memories", action="store_true",
                        help="each memory space its own place even on one torch device "
                             "(a CPU run that still makes every crossing)")
    parser.add_argument("--interleave", nargs="*", default=[],
                        help="after each model, time these plans and the unpartitioned graph "
                             "in turns (drift-free ratios); 'all': every plan of the bundle")
    parser.add_argument("--reference-seconds", type=float, default=3.0,
                        help="the most each timing of the unpartitioned graph takes")
    parser.add_argument("--plan-seconds", type=float, default=4.0,
                        help="the most each plan's own timing takes (at least 3 runs)")
    parser.add_argument("--interleave-seconds", type=float, default=8.0,
                        help="the most the plans timed in turns take (at least 8 rounds)")
    args = parser.parse_args(argv)
    # The float32 references must be float32: no TF32 in cuDNN convolutions or cuBLAS matmuls
    # (PyTorch >= 2.9 has fp32_precision settings; the allow_tf32 flags are being retired).
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    if hasattr(torch.backends.cuda.matmul, "fp32_precision"):
        torch.backends.cuda.matmul.fp32_precision = "ieee"
        torch.backends.cudnn.conv.fp32_precision = "ieee"
    start = time.perf_counter()
    order_file = args.bundles / "order.json"
    names = args.models or (json.loads(order_file.read_text()) if order_file.is_file()
                            else sorted(p.name[:-8] for p in args.bundles.glob("*.json.gz")))
    result: dict[str, Any] = {"device": args.device, "torch": torch.__version__,
                              "gpu": torch.cuda.get_device_name() if args.device != "cpu" else None,
                              "cpu_threads": torch.get_num_threads(),
                              "float32_math": _float32_math_settings(),
                              "command": " ".join(sys.argv), "models": []}

    def write() -> None:
        result["elapsed_s"] = time.perf_counter() - start
        tmp = args.out.with_suffix(".tmp")
        tmp.write_text(json.dumps(result, indent=1))
        tmp.replace(args.out)

    for name in names:
        if time.perf_counter() > start + args.budget:
            result["models"].append({"model": name, "skipped": "time budget reached"})
            continue
        print(f"{name} ({time.perf_counter() - start:.0f} s)", flush=True)
        try:
            row = run_model(args.bundles / f"{name}.json.gz", args.device,
                            start + args.budget, write, args.numerics_only,
                            args.separate_memories, tuple(args.interleave),
                            (args.reference_seconds, args.plan_seconds, args.interleave_seconds))
        except Exception as err:  # noqa: BLE001 - keep the other models' evidence
            row = {"model": name, "error": f"{type(err).__name__}: {err}"}
            print(f"  {name} failed: {row['error']}", flush=True)
        result["models"].append(row)
        write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
