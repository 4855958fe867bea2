"""Does the company a plan is timed in change its ratio to greedy? On the H200.

Round B of ``choose_suite.py`` (every plan, the all-host plan among them) found ``cost_z0``
plans 5-12% faster than greedy where the choice's confirming stage (greedy and one or two GPU
plans only) found them level, on the same instance. Per bundle, this times greedy and one
candidate in four contexts, each with executors of its own, in this order: the pair alone
(settling one run), with the all-host plan in the turns (one settling run), the same with the
settling runs lasting at least 20 ms and 100 ms, then the pair alone again (how far two sets of
executors agree without any change of context). Printed and written: the candidate's median
per-round ratio to greedy in each context.

    PYTHONPATH=src python3 experiments/gpu/settle_check.py --bundles .gpu_bundle/choose/z_tensorcore/tiny_yolo_v2.json.gz \\
        --device cuda --seconds 4 --out $OUT/settle_check.json
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

CONTEXTS = (("pair", False, 0.0), ("with host", False, 0.0), ("with host", True, 0.02),
            ("with host", True, 0.1), ("pair again", False, 0.0))


def check(path: Path, device: str, seconds: float, candidate: str) -> dict:
    from partition_lab.choice import torch_timer
    from partition_lab.executors.graph_io import read_bundle

    bundle = read_bundle(path)
    host = "all_cpu"
    rows = []
    for label, _, settle_s in CONTEXTS:
        plans = {"greedy": bundle.plans["greedy"], candidate: bundle.plans[candidate]}
        if label == "with host":
            plans[host] = bundle.plans[host]
        times = torch_timer(bundle.graph, bundle.bindings, device=device, rounds=400,
                            min_rounds=6, max_seconds=seconds, settle_s=settle_s)(plans)
        ratios = [t / g for t, g in zip(times[candidate], times["greedy"], strict=False)]
        rows.append({"context": label, "settle_s": settle_s, "rounds": len(ratios),
                     "ratio": statistics.median(ratios),
                     "greedy_median_s": statistics.median(times["greedy"])})
        print(f"{path.name} {candidate} {label:10s} settle>={settle_s:.2f}s "
              f"{len(ratios):4d} rounds  ratio {rows[-1]['ratio']:.3f}  greedy "
              f"{rows[-1]['greedy_median_s'] * 1e3:.2f} ms", flush=True)
    return {"bundle": str(path), "candidate": candidate, "contexts": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundles", type=Path, nargs="+", required=True)
    parser.add_argument("--candidate", default="cost_z0")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    results = []
    for path in args.bundles:
        results.append(check(path, args.device, args.seconds, args.candidate))
        args.out.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
