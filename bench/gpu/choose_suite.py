"""Measured final choice on the H200: propose here, time and decide there, then check
the decision on a second, independent timing of the same candidates.

``prepare`` (here, no TVM: bundles carry the graph and the support): per bundle, the profiled
cost model (the suite's H200 profile, protocol (a)) proposes greedy and the ``--k`` best other
distinct plans by mean and by optimism (:func:`partition_lab.choice.propose`); a bundle of those
candidates is written with their predictions.

``prepare`` also keeps the source bundle's other distinct plans (every strategy under both
protocols, the hand-made variants, the all-GPU baseline) as ``other:NAME``, never offered to
the choice. ``run`` (there): per bundle, round A is the choice itself
(:func:`partition_lab.choice.measure_and_decide` with the PyTorch executor on the GPU: its
screening and confirming stages, ``--seconds`` in all); round B
times the candidates and, with ``--all``, those other plans again in turns (new executors, new
rounds), so the chosen plan is judged on times that did not choose it, against the best plan
timed in the same run; ``--b-sets N`` times round B N times, each with new executors, and
judges by the geometric mean of the sets' ratios. With ``--race`` round B is raced: B0 times
every plan once (new executors), and only greedy, the chosen plan and the plans near B0's best
(:func:`contenders`) go on to the ``--b-sets`` judging sets, so the seconds go to the plans
that could be the best, not to the all-host plan. ``--settle-s`` makes every settling run
(rounds A and B) last at least that long (``timed_in_turns(settle_s=)``; the next test of
``choice.SETTLE_SECONDS``, gpu_choose.md). Written after every bundle.

    python bench/gpu/choose_suite.py prepare --cache bench/results/gpu_suite_cache.json \\
        --bundles .gpu_bundle/suite_planned/s_* --out .gpu_bundle/choose --k 3
    PYTHONPATH=src python3 bench/gpu/choose_suite.py run --bundles .gpu_bundle/choose/s_* \\
        --device cuda --out $OUT/choose_run.json --seconds 5
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import statistics
import time
from pathlib import Path
from typing import Any


def prepare(bundles: list[Path], cache: Path, out: Path, k: int) -> None:
    from partition_lab.choice import propose
    from partition_lab.cost_models.profiled import ProfiledCostModel
    from partition_lab.executors.graph_io import Bundle, read_bundle, write_bundle

    data = json.loads(cache.read_text())
    for folder in bundles:
        for path in sorted(folder.glob("*.json.gz")):
            start = time.perf_counter()
            bundle = read_bundle(path)
            support = next(iter(bundle.plans.values())).support
            model = ProfiledCostModel(data, support.platform)
            candidates = propose(bundle.graph, support, model, k)
            seen = {_placement(c.plan) for c in candidates}
            others = {}
            for name, plan in bundle.plans.items():
                if _placement(plan) not in seen:
                    seen.add(_placement(plan))
                    others[f"other:{name}"] = plan
            meta = {**bundle.meta, "candidates": [
                {"plan": c.name, "predicted_s": c.predicted_s, "sigma_s": c.sigma_s}
                for c in candidates], "cost_model": model.name}
            target = out / folder.name / path.name
            target.parent.mkdir(parents=True, exist_ok=True)
            write_bundle(target, Bundle(bundle.graph, bundle.bindings,
                                        {c.name: c.plan for c in candidates} | others, meta,
                                        support.platform))
            print(f"{folder.name}/{path.name}: {[c.name for c in candidates]} "
                  f"({time.perf_counter() - start:.1f} s)", flush=True)


def _placement(plan: Any) -> tuple[str, ...]:
    return tuple(d.device for d in plan.decisions)


def run(bundles: list[Path], device: str, out: Path, seconds: float, every: bool,
        seconds_b: float, b_sets: int = 1, race: bool = False,
        settle_s: float | None = None) -> None:
    from partition_lab.choice import (
        SCREEN_SHARE,
        SETTLE_SECONDS,
        Candidate,
        measure_and_decide,
        torch_timer,
    )
    from partition_lab.executors.graph_io import read_bundle

    settle_s = SETTLE_SECONDS if settle_s is None else settle_s

    rows: list[dict[str, Any]] = []
    for folder in bundles:
        for path in sorted(folder.glob("*.json.gz")):
            bundle = read_bundle(path)
            candidates = [Candidate(c["plan"], bundle.plans[c["plan"]], c["predicted_s"],
                                    c["sigma_s"]) for c in bundle.meta["candidates"]]
            timer, confirm_timer = (
                torch_timer(bundle.graph, bundle.bindings, device=device, rounds=200,
                            min_rounds=6, max_seconds=seconds * share, settle_s=settle_s)
                for share in (SCREEN_SHARE, 1 - SCREEN_SHARE))
            choice = measure_and_decide(candidates, timer, f"torch executor ({device})",
                                        confirm_timer=confirm_timer)
            judged = {c.name: c.plan for c in candidates}
            if every:
                judged |= {n: p for n, p in bundle.plans.items() if n.startswith("other:")}
            # each call of a timer builds executors of its own
            new_timer = functools.partial(torch_timer, bundle.graph, bundle.bindings,
                                          device=device, rounds=400, min_rounds=6,
                                          settle_s=settle_s)
            if race:
                heats = new_timer(max_seconds=seconds_b)(judged)  # round B0: every plan, once
                kept = contenders(heats, choice.chosen)
                sets = [new_timer(max_seconds=seconds_b)({n: judged[n] for n in kept})
                        for _ in range(b_sets)]
                round_b = {name: race_record(heats, sets, name) for name in judged}
            else:
                sets = [new_timer(max_seconds=seconds_b)(judged) for _ in range(b_sets)]  # round B
                round_b = {name: round_b_record([t[name] for t in sets],
                                                [t["greedy"] for t in sets]) for name in judged}
            rows.append({
                "model": bundle.meta.get("model", path.name[:-8]), "bundle":
                f"{folder.name}/{path.name}", "platform": candidates[0].plan.platform_name,
                "ops": len(bundle.graph), "choice": choice.to_dict(), "round_b": round_b,
                "judge": "race" if race else "sets", "settle_s": settle_s})
            out.write_text(json.dumps({"device": device, "rows": rows}, indent=1))
            print(f"{rows[-1]['bundle']}: {choice.chosen} ({choice.reason}) "
                  f"{choice.elapsed_s:.1f} s", flush=True)


#: Round B0's plans within this factor of its best ratio to greedy go on to the judging sets.
RACE_MARGIN = 1.15
#: At most this many plans (greedy and the chosen plan included) go on.
RACE_CAP = 6


def contenders(heats: dict[str, list[float]], chosen: str) -> list[str]:
    """Greedy, the chosen plan, and the plans of round B0 (every plan in turns, the all-host
    plan too) whose median per-round ratio to greedy is within :data:`RACE_MARGIN` of the
    best, fastest first, :data:`RACE_CAP` in all: the plans that could be "the best timed
    plan". The rest are judged on B0 alone (15% slower than B0's best is far from a 3% call)."""
    ratio = {n: statistics.median([a / g for a, g in zip(t, heats["greedy"], strict=False)])
             for n, t in heats.items()}
    best = min(ratio.values())
    kept = ["greedy", *([chosen] if chosen != "greedy" else [])]
    for name in sorted(ratio, key=ratio.get):
        if len(kept) < RACE_CAP and name not in kept and ratio[name] <= best * RACE_MARGIN:
            kept.append(name)
    return kept


def race_record(heats: dict[str, list[float]], sets: list[dict[str, list[float]]],
                name: str) -> dict[str, Any]:
    """One plan's round B when raced: B0's times (``heat_s``, ``heat_ratio``) and, for a
    contender, the judging sets' record (:func:`round_b_record`); a plan that did not go on
    keeps B0's ratio as its ``ratio_to_greedy``."""
    heat = round_b_record([heats[name]], [heats["greedy"]])
    record = {"heat_s": heats[name], "heat_ratio": heat["ratio_to_greedy"],
              "contender": name in sets[0]}
    if record["contender"]:
        return record | round_b_record([t[name] for t in sets], [t["greedy"] for t in sets])
    return record | {key: heat[key] for key in ("median_s", "times_s", "set_ratios",
                                                "ratio_to_greedy")} | {"sets_s": [heats[name]]}


def round_b_record(sets: list[list[float]], greedy_sets: list[list[float]]) -> dict[str, Any]:
    """One plan's round B: its times (the first set's as ``times_s``, every set's in
    ``sets_s``) and its ratio to greedy, the geometric mean of the sets' median per-round
    ratios (each set of executors carries an offset of its own; averaging sets shrinks it)."""
    medians = [statistics.median([a / g for a, g in zip(t, gt, strict=False)])
               for t, gt in zip(sets, greedy_sets, strict=True)]
    return {"median_s": statistics.median(sets[0]), "times_s": sets[0], "sets_s": sets,
            "set_ratios": medians, "ratio_to_greedy": math.prod(medians) ** (1 / len(medians))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--bundles", type=Path, nargs="+", required=True)
    p.add_argument("--cache", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--k", type=int, default=3)
    r = sub.add_parser("run")
    r.add_argument("--bundles", type=Path, nargs="+", required=True)
    r.add_argument("--device", default="cuda")
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--seconds", type=float, default=5.0,
                   help="round A (both stages of the choice), per bundle")
    r.add_argument("--all", action="store_true", help="round B also times the other plans")
    r.add_argument("--seconds-b", type=float, default=5.0, help="round B, per bundle and set")
    r.add_argument("--b-sets", type=int, default=1,
                   help="round B's sets, each with new executors (ratios: their geometric mean)")
    r.add_argument("--race", action="store_true",
                   help="round B0 times every plan once; only the plans near its best (and "
                   "greedy, and the chosen plan) go on to the --b-sets judging sets")
    r.add_argument("--settle-s", type=float,
                   help="settling runs last at least this long, in rounds A and B (default: "
                   "the chooser's, choice.SETTLE_SECONDS)")
    args = parser.parse_args(argv)
    if args.command == "prepare":
        prepare(args.bundles, args.cache, args.out, args.k)
    else:
        run(args.bundles, args.device, args.out, args.seconds, args.all, args.seconds_b,
            args.b_sets, args.race, args.settle_s)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
