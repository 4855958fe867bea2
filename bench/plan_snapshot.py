"""Snapshot every plan: zoo model x platform x strategy -> SHA-256 of its plan JSON and cost.

A refactor that claims "behaviour unchanged" runs this before and after and compares::

    .venv/bin/python bench/plan_snapshot.py --out before.json [--small] [--models a,b]
    ... change the code ...
    .venv/bin/python bench/plan_snapshot.py --out after.json --compare before.json

Each row holds the digest of ``plan.to_json()`` (regions, decisions, reasons, verdicts) and of
the cost model's breakdown of that plan (``CostBreakdown.to_dict()``), so a change in support
rules, region formation, reasons, FLOP counting or pricing all show. ``--compare`` prints the
rows that differ (with the first differing line of the plan JSON when ``--keep DIR`` kept the
plans of both runs) and exits 1 if any does.

Platforms: the built-ins (``tensorcore``, ``neuron``, ``neuron@2020``, ``cpu``), the example
three-device platform file and the example one-accelerator target file, and ``tensorcore`` priced
by the measured H200 profile cache of the zoo (``experiments/data/gpu_ingraph_cache.json.xz``,
the profiled cost model). Strategies: every registered one (``all_accel`` is skipped where it does not apply).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TOPHUB_LOCATION", "NONE")

from ship_profile import SOURCES, read_source  # noqa: E402  (a sibling script)

from partition_lab import zoo  # noqa: E402
from partition_lab._run_to_run import mask_solve_times  # noqa: E402
from partition_lab.api import analyze  # noqa: E402
from partition_lab.cost_models.base import evaluate  # noqa: E402
from partition_lab.strategies import available_strategies, get_strategy  # noqa: E402
from partition_lab.strategies.all_accel import NotApplicableError  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PROFILE_CACHE = SOURCES[0]  # the zoo's H200 profile cache, one source of the shipped profile
PLATFORMS = {
    "tensorcore": {"target": "tensorcore"},
    "neuron": {"target": "neuron"},
    "neuron@2020": {"target": "neuron@2020"},
    "cpu": {"target": "cpu"},
    "npu_dsp_cpu": {"target": str(ROOT / "examples" / "platforms" / "npu_dsp_cpu.toml")},
    "npu_target": {"target": str(ROOT / "examples" / "targets" / "npu.toml")},
    "tensorcore+h200_cache": {"target": "tensorcore", "profile_cache": PROFILE_CACHE},
}


def digest(text: str) -> str:
    """The SHA-256 (16 digits) of ``text``, its solve times masked (the one part of a plan that
    differs from run to run)."""
    return hashlib.sha256(mask_solve_times(text).encode()).hexdigest()[:16]


def snapshot_model(name: str, small: bool, keep: Path | None) -> dict[str, dict]:
    mod, params = zoo.load(name, small=small)
    rows: dict[str, dict] = {}
    for platform_name, how in PLATFORMS.items():
        cache = how.get("profile_cache")
        analysis = analyze(mod, how["target"], params=params, name=name,
                           profile_cache=None if cache is None else read_source(cache).to_dict())
        for strategy_name in available_strategies():
            key = f"{name}{':small' if small else ''} | {platform_name} | {strategy_name}"
            try:
                plan = get_strategy(strategy_name).run(analysis.graph, analysis.support,
                                                       cost_model=analysis.cost_model)
            except NotApplicableError as error:
                rows[key] = {"skipped": str(error)[:80]}
                continue
            plan_json = plan.to_json()
            cost_json = json.dumps(evaluate(plan, analysis.cost_model).to_dict(), sort_keys=True)
            rows[key] = {"plan": digest(plan_json), "cost": digest(cost_json),
                         "regions": len(plan.regions)}
            if keep is not None:
                stem = digest(key)
                (keep / f"{stem}.plan.json").write_text(plan_json)
                (keep / f"{stem}.cost.json").write_text(cost_json)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--models", help="comma-separated zoo names (default: zoo.names())")
    parser.add_argument("--small", action="store_true", help="the small variants")
    parser.add_argument("--keep", type=Path, help="a folder to keep every plan and cost JSON in")
    parser.add_argument("--compare", type=Path, help="a snapshot to compare with")
    args = parser.parse_args()
    models = args.models.split(",") if args.models else zoo.names()
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
    rows: dict[str, dict] = {}
    start = time.perf_counter()
    for name in models:
        t0 = time.perf_counter()
        rows.update(snapshot_model(name, args.small, args.keep))
        print(f"{name}: {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    args.out.write_text(json.dumps({"rows": rows}, indent=1, sort_keys=True) + "\n")
    print(f"{len(rows)} plans in {time.perf_counter() - start:.0f} s -> {args.out}")
    if args.compare is None:
        return 0
    before = json.loads(args.compare.read_text())["rows"]
    differ = sorted(k for k in set(before) | set(rows) if before.get(k) != rows.get(k))
    for key in differ:
        print(f"DIFFERS {key}: before {before.get(key)} after {rows.get(key)}")
    print(f"{len(differ)} of {len(rows)} rows differ from {args.compare}")
    print("(a plan's digest leaves out the solve time in optimal's note)")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
