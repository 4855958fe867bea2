"""Time every distinct plan of every bundle end to end, all plans of one (model, platform) in turns
(runs THERE, on the GPU machine; also here with --device cpu as a check).

For the profiled-cost evidence (bundles from ``bench/gpu/replan_profiled.py``). Per
bundle: seeded synthetic weights, batch norms calibrated on the input, one
:class:`~partition_lab.executors.torch_exec.PlanExecutor` per distinct plan (non-host devices on
the GPU, the host on the CPU, every crossing a real copy), two warm-up runs each, then rounds in
which every plan runs once, the order rotated each round, so that a drift of the machine hits
every plan alike (greedy's plan is one of them: each plan's median ratio to greedy's is
drift-free). Rounds stop after ``--max-rounds`` or when the row's time share is spent (at least
``--min-rounds``). Each plan's outputs are compared with greedy's (relative L2, worst output).
The result is written after every bundle. Float32 math: torch's defaults (as the profile measured; cuDNN may use
TF32), or TF32 off with ``--tf32 off``.

    PYTHONPATH=src python3 bench/gpu/profiled_evidence.py --bundles .gpu_bundle/profiled/* \\
        --out $OUT/gpu_profiled_run1.json --budget 330
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

from partition_lab.executors.graph_io import read_bundle
from partition_lab.executors.torch_exec import PlanExecutor, calibrate_batch_norm
from partition_lab.executors.weights import sample_inputs, synthetic_weights

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling bench scripts
from evidence import plan_key, relative_error, timed_in_turns  # noqa: E402


def run_bundle(path: Path, device: str, cap_s: float, min_rounds: int, max_rounds: int
               ) -> dict[str, Any]:
    start = time.perf_counter()
    bundle = read_bundle(path)
    graph, bindings = bundle.graph, bundle.bindings
    platform = next(iter(bundle.plans.values())).platform.name
    row: dict[str, Any] = {"model": bundle.meta.get("model", path.name[:-8]),
                           "platform": platform, "bundle": f"{path.parent.name}/{path.name}",
                           "ops": len(graph), "plans": {}, "same_plan_as": {}}
    weights = synthetic_weights(graph, bindings, seed=0)
    inputs = sample_inputs(graph, seed=0)
    calibrate_batch_norm(graph, bindings, weights, inputs, device=device)
    seen: dict[tuple, str] = {}
    executors: dict[str, PlanExecutor] = {}
    order = ["greedy"] + [n for n in bundle.plans if n != "greedy"]
    for name in order:
        plan = bundle.plans[name]
        key = plan_key(plan)
        if key in seen:
            row["same_plan_as"][name] = seen[key]
            continue
        seen[key] = name
        executors[name] = PlanExecutor(graph, plan, bindings, weights, device=device)
    outputs = {}
    for name, executor in executors.items():
        executor.prepare()
        for _ in range(2):
            outputs[name] = executor.run(inputs)
    row["setup_s"] = time.perf_counter() - start
    names = list(executors)
    t0 = time.perf_counter()
    # settle: each timed run after an untimed one of the same plan (runs before 2026-12-02
    # timed without, and charged a plan for a host-heavy plan run before it)
    times = timed_in_turns(executors, inputs, max_rounds, cap_s, min_rounds, settle=1)
    base = statistics.median(times["greedy"])
    for name in names:
        t = times[name]
        plan = bundle.plans[name]
        row["plans"][name] = {
            "median_s": statistics.median(t), "min_s": min(t), "times_s": t,
            "ratio_to_greedy": statistics.median(t) / base,
            "error_vs_greedy": relative_error(outputs[name], outputs["greedy"]),
            "ops_per_device": plan.ops_per_device(),
            "regions_per_device": {d: len(plan.regions_on(d)) for d in plan.platform.names},
            "crossings": len(executors[name].crossings()),
        }
    row["rounds"] = len(times["greedy"])
    row["timing_s"] = time.perf_counter() - t0
    row["elapsed_s"] = time.perf_counter() - start
    del executors, outputs, weights
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundles", type=Path, nargs="+", required=True, help="folders")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--budget", type=float, default=330.0, help="seconds in all")
    parser.add_argument("--row-cap", type=float, default=6.0,
                        help="most seconds of timing rounds per bundle")
    parser.add_argument("--min-rounds", type=int, default=5)
    parser.add_argument("--max-rounds", type=int, default=30)
    parser.add_argument("--label", default="", help="a name for this run (machine instance)")
    parser.add_argument("--tf32", choices=("default", "off"), default="default",
                        help="float32 convolutions and matmuls: torch's defaults (cuDNN may use "
                             "TF32, as when the profile was measured) or TF32 off (IEEE)")
    args = parser.parse_args(argv)
    if args.tf32 == "off":
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
    start = time.perf_counter()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from profile_bundles import bundle_paths

    paths = bundle_paths(args.bundles)
    result: dict[str, Any] = {
        "label": args.label, "device": args.device, "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name() if args.device != "cpu" else None,
        "cpu_threads": torch.get_num_threads(), "command": " ".join(sys.argv),
        "float32_math": {"cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
                         "cuda.matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32},
        "rows": []}

    def write() -> None:
        result["elapsed_s"] = time.perf_counter() - start
        tmp = args.out.with_suffix(".tmp")
        tmp.write_text(json.dumps(result))
        tmp.replace(args.out)

    for i, path in enumerate(paths):
        left = args.budget - (time.perf_counter() - start)
        if left <= 5:
            result["rows"].append({"bundle": f"{path.parent.name}/{path.name}",
                                   "skipped": "time budget reached"})
            continue
        # each remaining row gets an equal share; setup takes about a third of a row's time
        cap = max(1.0, min(args.row_cap, left / (len(paths) - i) * 0.6))
        try:
            row = run_bundle(path, args.device, cap, args.min_rounds, args.max_rounds)
        except Exception as err:  # noqa: BLE001 - keep the other bundles' evidence
            row = {"bundle": f"{path.parent.name}/{path.name}",
                   "error": f"{type(err).__name__}: {err}"}
            print(f"  {path} failed: {row['error']}", flush=True)
            if args.device.startswith("cuda"):
                torch.cuda.empty_cache()
        else:
            ratios = " ".join(f"{n}={p['ratio_to_greedy']:.3f}" for n, p in row["plans"].items())
            print(f"[{time.perf_counter() - start:.0f} s] {row['bundle']}: {len(row['plans'])} "
                  f"plans, {row['rounds']} rounds, greedy "
                  f"{row['plans']['greedy']['median_s'] * 1e3:.3f} ms; {ratios}", flush=True)
        result["rows"].append(row)
        write()
    write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
