"""Replay the two-stage measured choice on timings already taken on two H200 instances.

``bench/results/gpu_choose_run_a.json`` (instance 1) and ``gpu_choose_run_b.json`` (instance 2)
each hold, per suite row, round A (every candidate timed in turns: the choice of the one-stage
rule) and round B (the candidates timed again with new executors; on instance 2 with every other
plan of the bundle too). Both instances proposed the same candidates. So the two-stage rule of
``partition_lab.choice`` can be replayed without a GPU, its choice made on one instance and
judged on the other:

- screening = that instance's round A, confirming = its round B restricted to greedy and the
  :func:`~partition_lab.choice.shortlist` (the live rule's confirming stage times only those,
  here they were timed among 2-15 plans: a difference this replay cannot remove);
- judged on the other instance's round B: the chosen plan's median per-round ratio to greedy
  there, against the best candidate there and (judging on instance 2) the best of every plan.

The one-stage rule (faster than greedy in three of four screening rounds) is judged the same
way on the same rows. Runs here:

    python experiments/gpu/choose_replay.py bench/results/gpu_choose_run_a.json \\
        bench/results/gpu_choose_run_b.json
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from partition_lab.choice import Candidate, decide, shortlist  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "gpu"))  # choose_report.py
from choose_report import WITHIN, greedy_spread, one_stage_choice  # noqa: E402


def two_stage_choice(row: dict[str, Any]) -> str:
    """The two-stage rule on one instance's row: round A screens, round B confirms."""
    candidates = [Candidate(c["plan"], None, c["predicted_s"], c["sigma_s"],  # type: ignore[arg-type]
                            list(c["measured_s"])) for c in row["choice"]["candidates"]]
    picked = shortlist(candidates)
    if not picked:
        return candidates[0].name
    for candidate in (candidates[0], *picked):
        candidate.confirm_s = list(row["round_b"][candidate.name]["times_s"])
    return decide(candidates)[0]


def judged(chosen: str, judge_row: dict[str, Any], candidates: list[str]) -> dict[str, Any]:
    round_b = judge_row["round_b"]
    ratio = round_b[chosen]["ratio_to_greedy"]
    best_candidate = min(round_b[name]["ratio_to_greedy"] for name in candidates)
    best_all = min(v["ratio_to_greedy"] for v in round_b.values())
    spread = greedy_spread(round_b["greedy"]["times_s"])
    return {"chosen": chosen, "ratio": ratio, "best_candidate": best_candidate,
            "best_all": best_all, "hit_candidate": ratio <= best_candidate * WITHIN,
            "hit_all": ratio <= best_all * WITHIN, "loss": ratio > 1.0 + spread}


def replay(chooser: dict[str, Any], judge: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for row, judge_row in zip(chooser["rows"], judge["rows"], strict=True):
        if row["bundle"] != judge_row["bundle"]:
            raise SystemExit(f"rows out of step: {row['bundle']} vs {judge_row['bundle']}")
        names = [c["plan"] for c in row["choice"]["candidates"]]
        rows.append({"bundle": row["bundle"],
                     "two": judged(two_stage_choice(row), judge_row, names),
                     "one": judged(one_stage_choice(row["choice"]["candidates"]), judge_row,
                                   names)})
    return rows


def table(rows: list[dict[str, Any]], title: str, best_of_all: bool) -> list[str]:
    lines = [f"### {title}", "", "| bundle | two stages | ratio | one stage | ratio | best "
             "candidate |" + (" best of all |" if best_of_all else ""),
             "|---|---|---|---|---|---|" + ("---|" if best_of_all else "")]
    for r in rows:
        two, one = r["two"], r["one"]
        lines.append(f"| {r['bundle']} | {two['chosen']} | {two['ratio']:.3f} | {one['chosen']} | "
                     f"{one['ratio']:.3f} | {two['best_candidate']:.3f} |"
                     + (f" {two['best_all']:.3f} |" if best_of_all else ""))
    lines.append("")
    for rule, label in (("two", "two-stage"), ("one", "one-stage")):
        n = len(rows)
        hits = sum(r[rule]["hit_candidate"] for r in rows)
        text = f"- {label}: within 3% of the best candidate on {hits} of {n}"
        if best_of_all:
            text += f", of the best of every plan on {sum(r[rule]['hit_all'] for r in rows)} of {n}"
        losses = [r["bundle"] for r in rows if r[rule]["loss"]]
        worst = max(r[rule]["ratio"] for r in rows)
        lines.append(text + f"; slower than greedy beyond its spread on {len(losses)} "
                     f"({', '.join(losses) or 'none'}); worst {worst:.3f}x greedy; left greedy "
                     f"on {sum(r[rule]['chosen'] != 'greedy' for r in rows)}")
    return [*lines, ""]


def reproducibility(one: dict[str, Any], two: dict[str, Any]) -> list[str]:
    """How far one plan's ratio to greedy moves between two timings: round B on instance 1 vs
    instance 2, and round A vs round B on each instance (greedy and all_cpu left out)."""
    def spread(pairs: list[tuple[float, float]]) -> str:
        logs = sorted(abs(math.log(a / b)) for a, b in pairs)
        over = sum(x > math.log(WITHIN) for x in logs)
        return (f"median {math.exp(statistics.median(logs)) - 1:.1%}, over 3% on {over} of "
                f"{len(logs)} plans")

    across = [(v["ratio_to_greedy"], row_2["round_b"][name]["ratio_to_greedy"])
              for row_1, row_2 in zip(one["rows"], two["rows"], strict=True)
              for name, v in row_1["round_b"].items() if name not in ("greedy", "all_cpu")]
    lines = [f"- one plan's ratio to greedy, instance 1 vs instance 2 (round B): {spread(across)}"]
    for label, run in (("instance 1", one), ("instance 2", two)):
        within = []
        for row in run["rows"]:
            greedy = row["choice"]["candidates"][0]["measured_s"]
            for c in row["choice"]["candidates"][1:]:
                if c["plan"] != "all_cpu":
                    within.append((statistics.median(
                        [t / g for t, g in zip(c["measured_s"], greedy, strict=False)]),
                        row["round_b"][c["plan"]]["ratio_to_greedy"]))
        lines.append(f"- the same, round A vs round B on {label}: {spread(within)}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_1", type=Path, help="instance 1 (round B: candidates)")
    parser.add_argument("run_2", type=Path, help="instance 2 (round B: every plan)")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    one, two = (json.loads(p.read_text()) for p in (args.run_1, args.run_2))
    chosen_on_2 = replay(two, one)
    chosen_on_1 = replay(one, two)
    print("\n".join(table(chosen_on_2, "chosen on instance 2, judged on instance 1's round B",
                          False)
                    + table(chosen_on_1, "chosen on instance 1, judged on instance 2's round B",
                            True)))
    print("\n".join(reproducibility(one, two)))
    both = chosen_on_1 + chosen_on_2
    for rule in ("two", "one"):
        print(f"both directions, {rule}-stage: {sum(r[rule]['hit_candidate'] for r in both)} of "
              f"{len(both)} within 3% of the best candidate; median ratio to greedy "
              f"{statistics.median(r[rule]['ratio'] for r in both):.3f}")
    if args.json:
        args.json.write_text(json.dumps({"chosen_on_2": chosen_on_2, "chosen_on_1": chosen_on_1},
                                        indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
