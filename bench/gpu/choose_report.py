"""Report ``choose_suite.py run`` results: the measured choice judged on an independent timing.

Per row: the plan the choice took (round A), the plan the one-stage rule would have taken on
the same screening rounds (faster than greedy in three rounds of four, the rule before the
confirming stage), and both judged on round B (new executors, new rounds): their ratio to
greedy there and to the best plan timed in round B (every candidate and, with ``--all``, every
other plan of the bundle). A row counts as a hit when the chosen plan is within 3% of round B's
best, and as a loss when it is slower than greedy in round B by more than the spread of
greedy's own round-B times (half the interquartile range of greedy's time over its median).

``--carry-over`` reports instead how much what ran before a plan slowed it: in the screening
rounds the candidates rotate in a fixed cyclic order (greedy first, the all-host plan last), so
greedy follows the all-host plan in every round but those it starts, where it follows a GPU
plan; the ratio of greedy's median time in the first kind of round to the second, per row.

    python bench/gpu/choose_report.py bench/results/gpu_choose_run_c.json [more runs]
    python bench/gpu/choose_report.py --carry-over bench/results/gpu_choose_run_*.json
    python bench/gpu/choose_report.py --company bench/results/gpu_choose_run_f.json  # see below

``--company``: the shortlisted plans' ratio to greedy in round B over the confirming stage's.
``--judge``: how far round B agrees with itself.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from pathlib import Path
from typing import Any

WITHIN = 1.03


def one_stage_choice(candidates: list[dict[str, Any]]) -> str:
    """The rule before the confirming stage, on the screening rounds (``measured_s``)."""
    greedy = candidates[0]["measured_s"]
    winners = []
    for candidate in candidates[1:]:
        ratios = [t / g for t, g in zip(candidate["measured_s"], greedy, strict=False) if g > 0]
        if len(ratios) > 1 and statistics.quantiles(ratios, n=4, method="inclusive")[2] < 1.0:
            winners.append((statistics.median(ratios), candidate["plan"]))
    return min(winners)[1] if winners else candidates[0]["plan"]


def greedy_spread(times: list[float]) -> float:
    """Half greedy's interquartile range over its median: its own round-to-round spread (none
    from a single round, which a slow plan on a slow machine can leave)."""
    if len(times) < 2:
        return 0.0
    lower, median, upper = statistics.quantiles(times, n=4, method="inclusive")
    return (upper - lower) / 2 / median


def judge(row: dict[str, Any]) -> dict[str, Any]:
    """One row's verdicts for the two-stage choice and the one-stage rule."""
    round_b = row["round_b"]
    best_name = min(round_b, key=lambda name: round_b[name]["ratio_to_greedy"])
    best = round_b[best_name]["ratio_to_greedy"]
    spread = greedy_spread(round_b["greedy"]["times_s"])
    verdict = {"bundle": row["bundle"], "best": best, "best_name": best_name,
               "rounds_b": len(round_b["greedy"]["times_s"]), "spread": spread,
               "elapsed_s": row["choice"].get("elapsed_s", 0.0)}
    for rule, chosen in (("two", row["choice"]["chosen"]),
                         ("one", one_stage_choice(row["choice"]["candidates"]))):
        ratio = round_b[chosen]["ratio_to_greedy"]
        verdict[rule] = {"chosen": chosen, "ratio": ratio, "hit": ratio <= best * WITHIN,
                         "loss": ratio > 1.0 + spread}
    return verdict


def report(paths: list[Path]) -> str:
    lines = []
    for path in paths:
        rows = [judge(row) for row in json.loads(path.read_text())["rows"]]
        lines += [f"### {path.name}", "",
                  "| bundle | chosen (two stages) | B: chosen/greedy | one-stage rule | B: its "
                  "ratio | B: best of all | best plan in B | B rounds | choosing s |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for v in rows:
            lines.append(f"| {v['bundle']} | {v['two']['chosen']} | {v['two']['ratio']:.3f} | "
                         f"{v['one']['chosen']} | {v['one']['ratio']:.3f} | {v['best']:.3f} | "
                         f"{v['best_name']} | {v['rounds_b']} | {v['elapsed_s']:.1f} |")
        n = len(rows)
        lines.append("")
        for rule, label in (("two", "two-stage choice"), ("one", "one-stage rule, same rounds")):
            hits = sum(v[rule]["hit"] for v in rows)
            losses = [v for v in rows if v[rule]["loss"]]
            worst = max(v[rule]["ratio"] for v in rows) if rows else float("nan")
            lines.append(f"- {label}: within 3% of round B's best on {hits} of {n} rows; "
                         f"slower than greedy beyond greedy's spread on {len(losses)} "
                         f"({', '.join(v['bundle'] for v in losses) or 'none'}); worst "
                         f"{worst:.3f}x greedy")
        seconds = [v["elapsed_s"] for v in rows]
        if seconds:
            lines.append(f"- seconds choosing took per row (round A, setup included): "
                         f"{min(seconds):.1f}-{max(seconds):.1f}, median "
                         f"{statistics.median(seconds):.1f}")
        lines.append("")
    return "\n".join(lines)


def position_ratio(times: list[float], n: int, k: int) -> float | None:
    """The ``k``-th of ``n`` rotated plans: its median time in the rounds it did not start
    over its median in the rounds it started (round r runs ``names[r % n:] + names[:r % n]``,
    so plan k starts rounds with ``r % n == k``); None with fewer than two rounds of either."""
    started = [t for r, t in enumerate(times) if r % n == k]
    others = [t for r, t in enumerate(times) if r % n != k]
    if len(started) < 2 or len(others) < 2:
        return None
    return statistics.median(others) / statistics.median(started)


def carry_over(row: dict[str, Any]) -> dict[str, float | None] | None:
    """How a plan's screening time depends on what ran before it; None where the row has no
    all-host candidate (listed last) or fewer than three candidates.

    - ``greedy``: greedy's median after the all-host plan (the rounds it does not start) over
      its median after a GPU plan (the rounds it starts).
    - ``second``: the candidate after greedy follows the all-host plan only in the rounds it
      starts: its median after greedy over its median after the all-host plan (below 1 where
      the all-host plan slows it).
    - ``control``: the same ratio (not started over started) for the later candidates, which never
      follow the all-host plan (geometric mean of theirs): what the statistic shows without
      any carry-over (round position, drift, the median of a few rounds)."""
    candidates = row["choice"]["candidates"]
    names = [c["plan"] for c in candidates]
    n = len(names)
    if names[-1] != "all_cpu" or n < 3:
        return None
    later = [position_ratio(c["measured_s"], n, k) for k, c in enumerate(candidates[2:-1], 2)]
    later = [r for r in later if r is not None]
    return {"greedy": position_ratio(candidates[0]["measured_s"], n, 0),
            "second": position_ratio(candidates[1]["measured_s"], n, 1),
            "control": math.prod(later) ** (1 / len(later)) if later else None}


def _summary(label: str, ratios: list[float]) -> str:
    return (f"- {label}: {len(ratios)} rows, median {statistics.median(ratios):.3f}, over 1 on "
            f"{sum(r > 1 for r in ratios)}, over 1.05 on {sum(r > 1.05 for r in ratios)}, "
            f"range {min(ratios):.3f}-{max(ratios):.3f}")


def carry_over_report(paths: list[Path]) -> str:
    lines = ["| run | bundle | greedy: after the all-host plan / after a GPU plan | second "
             "candidate: after greedy / after the all-host plan | control |", "|---|---|---|---|---|"]
    columns: dict[str, list[float]] = {"greedy": [], "second": [], "control": []}
    for path in paths:
        for row in json.loads(path.read_text())["rows"]:
            ratios = carry_over(row)
            if ratios is None or ratios["greedy"] is None:
                continue
            for key, value in ratios.items():
                if value is not None:
                    columns[key].append(value)
            cells = " | ".join("-" if v is None else f"{v:.3f}" for v in ratios.values())
            lines.append(f"| {path.stem} | {row['bundle']} | {cells} |")
    labels = {"greedy": "greedy after the all-host plan / after a GPU plan",
              "second": "second candidate after greedy / after the all-host plan",
              "control": "control, later candidates (never after the all-host plan)"}
    lines.append("")
    lines += [_summary(labels[key], values) for key, values in columns.items() if values]
    return "\n".join(lines)


def company_report(paths: list[Path]) -> str:
    """The shortlisted plans' median ratio to greedy in round B (timed among every plan, the
    all-host plan and host-heavy variants too) over their ratio in the confirming stage (greedy
    and one or two GPU plans only; both timings independent of the shortlisting): about 1
    if the company a plan is timed in does not matter."""
    quotients = []
    for path in paths:
        for row in json.loads(path.read_text())["rows"]:
            greedy, *others = row["choice"]["candidates"]
            for candidate in others:
                if candidate.get("confirm_s") and greedy.get("confirm_s"):
                    confirm = statistics.median(
                        [t / g for t, g in zip(candidate["confirm_s"], greedy["confirm_s"],
                                               strict=False)])
                    quotients.append(row["round_b"][candidate["plan"]]["ratio_to_greedy"]
                                     / confirm)
    if not quotients:
        return "- no shortlisted plan was timed again"
    from scipy.stats import binomtest

    below = sum(q < 1 for q in quotients)
    sign_p = binomtest(below, len(quotients)).pvalue  # two-sided: no bias either way
    return (f"- round B over the confirming stage, shortlisted plans' ratio to greedy: "
            f"{len(quotients)} plans, median {statistics.median(quotients):.3f}, below 1 on "
            f"{below} (sign test p = {sign_p:.2g}), range {min(quotients):.3f}-"
            f"{max(quotients):.3f}")


def _beats_by_quartile(ratios: list[float]) -> bool:
    return len(ratios) > 1 and statistics.quantiles(ratios, n=4, method="inclusive")[2] < 1.0


def _beats_by_wilcoxon(ratios: list[float], alpha: float) -> bool:
    from scipy.stats import wilcoxon

    logs = [math.log(r) for r in ratios]
    return len(logs) > 5 and wilcoxon(logs, alternative="less").pvalue < alpha


def _beats_by_sign(ratios: list[float]) -> bool:
    from scipy.stats import binomtest

    return bool(ratios) and binomtest(sum(r < 1 for r in ratios), len(ratios),
                                      alternative="greater").pvalue < 0.05


#: Rules for "a shortlisted candidate beats greedy" on its confirming rounds' ratios.
RULES = {
    "three of four confirming rounds (the shipped rule)": _beats_by_quartile,
    "Wilcoxon signed-rank on log ratios, one-sided p < 0.05":
        lambda ratios: _beats_by_wilcoxon(ratios, 0.05),
    "Wilcoxon, p < 0.2": lambda ratios: _beats_by_wilcoxon(ratios, 0.2),
    "sign test, one-sided p < 0.05": _beats_by_sign,
}


def rules_report(paths: list[Path]) -> str:
    """Other rules for the confirming stage, replayed on the rounds it timed and judged by
    the same row's round B: how many rows each would have chosen within 3% of round B's best,
    and its worst ratio to greedy there. Development data: a rule picked here needs runs it
    never saw before it replaces the shipped one."""
    hits = {rule: 0 for rule in RULES}
    worst = {rule: 1.0 for rule in RULES}
    rows = 0
    for path in paths:
        for row in json.loads(path.read_text())["rows"]:
            greedy, *others = row["choice"]["candidates"]
            rows += 1  # a row that confirmed nothing keeps greedy under every rule
            round_b = row["round_b"]
            best = min(timed["ratio_to_greedy"] for timed in round_b.values())
            for rule, beats in RULES.items():
                winners = []
                for candidate in others:
                    ratios = [t / g for t, g in zip(candidate.get("confirm_s") or [],
                                                    greedy.get("confirm_s") or [], strict=False)]
                    if ratios and beats(ratios):
                        winners.append((statistics.median(ratios), candidate["plan"]))
                chosen = min(winners)[1] if winners else greedy["plan"]
                ratio = round_b[chosen]["ratio_to_greedy"]
                hits[rule] += ratio <= best * WITHIN
                worst[rule] = max(worst[rule], ratio)
    return "\n".join(f"- {rule}: within 3% of round B's best on {hits[rule]} of {rows} rows; "
                     f"worst {worst[rule]:.3f}x greedy" for rule in RULES)


def judge_report(paths: list[Path], within: float = 0.03) -> str:
    """How far round B (the judge) agrees with itself: within one run, the plan best by the
    first set of executors against the second set's best, and one plan's ratio to greedy in
    the two sets; across runs (a bundle in two of ``paths``: two instances), the same for
    the runs' ratios. A chooser cannot be judged finer than the judge repeats itself."""
    best_hits = rows = 0
    set_gaps: list[float] = []
    by_bundle: dict[str, list[dict[str, float]]] = {}
    for path in paths:
        for row in json.loads(path.read_text())["rows"]:
            # raced rows (``--race``): only the contenders have two sets; the rest never were
            # near the best
            timed_twice = {n: t for n, t in row["round_b"].items() if len(t["set_ratios"]) > 1}
            sets = [{name: timed["set_ratios"][i] for name, timed in timed_twice.items()}
                    for i in range(2)] if len(timed_twice) > 1 else None
            by_bundle.setdefault(row["bundle"], []).append(
                {name: timed["ratio_to_greedy"] for name, timed in row["round_b"].items()})
            if sets is None:
                continue
            first, second = sets
            rows += 1
            best_hits += second[min(first, key=first.get)] <= (1 + within) * min(second.values())
            set_gaps += [abs(first[n] / second[n] - 1) for n in first if n != "greedy"]
    lines = []
    if rows:
        lines.append(f"- within runs: the first set's best plan within {within:.0%} of the "
                     f"second set's best on {best_hits} of {rows} rows; one plan's ratio to "
                     f"greedy, first set over second: median {statistics.median(set_gaps):.1%} "
                     f"apart, over {within:.0%} on {sum(g > within for g in set_gaps)} of "
                     f"{len(set_gaps)}")
    pairs = [runs for runs in by_bundle.values() if len(runs) == 2]
    if pairs:
        gaps = [abs(a[n] / b[n] - 1) for a, b in pairs for n in a if n != "greedy" and n in b]
        hits = sum(b[min(a, key=a.get)] <= (1 + within) * min(b.values()) for a, b in pairs)
        lines.append(f"- across runs: the first run's best plan within {within:.0%} of the "
                     f"second run's best on {hits} of {len(pairs)} bundles; one plan's ratio "
                     f"to greedy: median {statistics.median(gaps):.1%} apart, over "
                     f"{within:.0%} on {sum(g > within for g in gaps)} of {len(gaps)}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path, nargs="+")
    parser.add_argument("--carry-over", action="store_true",
                        help="how much running after the all-host plan slowed greedy's plan")
    parser.add_argument("--judge", action="store_true",
                        help="how far round B agrees with itself (sets, and two runs)")
    parser.add_argument("--company", action="store_true",
                        help="round B (every plan) over the confirming stage (GPU plans only)")
    parser.add_argument("--rules", action="store_true",
                        help="other rules for the confirming stage, replayed (development)")
    args = parser.parse_args(argv)
    if args.rules:
        print(rules_report(args.runs))
    elif args.company:
        print(company_report(args.runs))
    elif args.judge:
        print(judge_report(args.runs))
    else:
        print(carry_over_report(args.runs) if args.carry_over else report(args.runs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
