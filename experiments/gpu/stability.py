"""How repeatable is one plan's end-to-end time on the GPU machine, and what does the timing
protocol change? (runs THERE; also here with --device cpu as a check)

The profiled-cost runs found the same plan measured 0.45-1.74x apart on one machine instance: in the
profile's whole-graph run and in the timed run minutes later, or in two rows of one run (an
all-host plan of one model under two op-support patterns). Before the 0.8-1.25 goal can be judged,
this measures, per plan and per host thread count:

- back to back: the plan run ``--runs`` times in a row (how a deployed model runs), twice, some
  minutes apart (test-retest);
- in turns: every plan once per round, order rotated (the protocol of
  ``bench/gpu/profiled_evidence.py`` until now), where a plan follows a different one;
- blocks in turns: every plan ``--block`` times per round, the first run after the switch kept
  apart from the rest.

Reported per (model, plan, threads): the median of each protocol, their ratios, and the spread
(interquartile range / median) of each.

    PYTHONPATH=src python3 experiments/gpu/stability.py --bundles .gpu_bundle/h200_11b/planned/base_tensorcore \\
        --models resnet50_v1 mobilenetv2_1.0 --threads 16 8 --out $OUT/stability.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

from partition_lab.executors.graph_io import read_bundle
from partition_lab.executors.torch_exec import PlanExecutor, calibrate_batch_norm
from partition_lab.executors.weights import sample_inputs, synthetic_weights


def spread(times: list[float]) -> float:
    """Interquartile range over the median."""
    q = statistics.quantiles(times, n=4)
    return (q[2] - q[0]) / statistics.median(times)


def once(executor: PlanExecutor, inputs: Any) -> float:
    t0 = executor._clock()
    executor.run(inputs)
    return executor._clock() - t0


def back_to_back(executors: dict[str, PlanExecutor], inputs: Any, runs: int
                 ) -> dict[str, list[float]]:
    out = {}
    for name, ex in executors.items():
        for _ in range(3):
            ex.run(inputs)
        out[name] = [once(ex, inputs) for _ in range(runs)]
    return out


def in_turns(executors: dict[str, PlanExecutor], inputs: Any, rounds: int, block: int
             ) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """(first run after each switch, the other runs of each block) per plan."""
    names = list(executors)
    first: dict[str, list[float]] = {n: [] for n in names}
    rest: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            first[name].append(once(executors[name], inputs))
            rest[name].extend(once(executors[name], inputs) for _ in range(block - 1))
    return first, rest


def measure_model(path: Path, plans: list[str], device: str, threads: list[int], runs: int,
                  rounds: int, block: int) -> list[dict[str, Any]]:
    bundle = read_bundle(path)
    graph, bindings = bundle.graph, bundle.bindings
    weights = synthetic_weights(graph, bindings, seed=0)
    inputs = sample_inputs(graph, seed=0)
    calibrate_batch_norm(graph, bindings, weights, inputs, device=device)
    executors = {n: PlanExecutor(graph, bundle.plans[n], bindings, weights, device=device)
                 for n in plans if n in bundle.plans}
    for ex in executors.values():
        ex.prepare()
        ex.run(inputs)
    rows = []
    for t in threads:
        torch.set_num_threads(t)
        b2b = back_to_back(executors, inputs, runs)
        single, _ = in_turns(executors, inputs, rounds, 1)
        first, rest = in_turns(executors, inputs, rounds, block)
        again = back_to_back(executors, inputs, runs)
        for name in executors:
            m = {k: statistics.median(v[name]) for k, v in
                 (("b2b", b2b), ("turns", single), ("block_first", first),
                  ("block_rest", rest), ("b2b_again", again))}
            rows.append({"model": path.name[:-8], "plan": name, "threads": t,
                         "ops_per_device": bundle.plans[name].ops_per_device(),
                         "median_s": m,
                         "spread": {k: spread(v[name]) for k, v in
                                    (("b2b", b2b), ("turns", single), ("block_rest", rest))},
                         "turns_over_b2b": m["turns"] / m["b2b"],
                         "block_rest_over_b2b": m["block_rest"] / m["b2b"],
                         "retest": m["b2b_again"] / m["b2b"],
                         "times_s": {"b2b": b2b[name], "turns": single[name],
                                     "block_first": first[name], "block_rest": rest[name],
                                     "b2b_again": again[name]}})
            print(f"{rows[-1]['model'][:24]:24s} {name:10s} T={t:2d} b2b={m['b2b'] * 1e3:8.2f} "
                  f"retest={rows[-1]['retest']:.2f} turns/b2b={rows[-1]['turns_over_b2b']:.2f} "
                  f"block_rest/b2b={rows[-1]['block_rest_over_b2b']:.2f} "
                  f"iqr b2b={rows[-1]['spread']['b2b']:.2f} "
                  f"turns={rows[-1]['spread']['turns']:.2f}", flush=True)
    del executors
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundles", type=Path, required=True)
    parser.add_argument("--models", nargs="+", required=True)
    parser.add_argument("--plans", nargs="+", default=["greedy", "all_cpu", "variant1"])
    parser.add_argument("--threads", type=int, nargs="+", default=[torch.get_num_threads()])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--block", type=int, default=3)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    meta = {"cpus": os.cpu_count(), "default_threads": torch.get_num_threads(),
            "torch": torch.__version__, "command": " ".join(sys.argv),
            "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None}
    rows: list[dict[str, Any]] = []
    start = time.perf_counter()
    for model in args.models:
        rows += measure_model(args.bundles / f"{model}.json.gz", args.plans, args.device,
                              args.threads, args.runs, args.rounds, args.block)
        args.out.write_text(json.dumps({"meta": meta, "rows": rows,
                                        "elapsed_s": time.perf_counter() - start}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
