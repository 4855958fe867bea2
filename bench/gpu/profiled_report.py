"""Report the profiled-cost evidence (runs HERE): predicted vs measured per
(model, platform), for protocol (a) profile-guided and (b) unseen (lomo; strict shown beside).

Reads the planned bundles (``bench/gpu/replan_profiled.py``: every plan's predicted total and
standard deviation under each protocol's cost model) and the evidence runs
(``bench/gpu/profiled_evidence.py``: every distinct plan timed in turns with greedy's), writes
``<out>.md`` and ``<out>.json`` (per row and per plan: predictions and measurements, so the
report can be rebuilt without the bundles).

    .venv/bin/python bench/gpu/profiled_report.py --bundles .gpu_bundle/profiled \\
        --runs bench/results/gpu_profiled_run1_raw.json bench/results/gpu_profiled_run2_raw.json \\
        --out bench/results/gpu_profiled
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

STRATEGIES = ("greedy", "min_size", "no_mac", "cost", "optimal", "all_cpu", "all_accel")
#: partition_lab.partition's default strategy with a profile (``--default``; the first round,
#: gpu_profiled.md, judged "greedy", the default then).
DEFAULT = "cost"
PROTOCOLS = {"profiled": "(a) profile-guided", "lomo": "(b) unseen, leave one model out",
             "strict": "(b') unseen, strict"}
PLATFORM_DIRS = {"tensorcore": "base_tensorcore", "neuron@2020": "base_neuron2020",
                 "neuron": "base_neuron"}


def ranks(values: list[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


def spearman(a: list[float], b: list[float]) -> float:
    ra, rb = ranks(a), ranks(b)
    ma, mb = statistics.fmean(ra), statistics.fmean(rb)
    num = sum((x - ma) * (y - mb) for x, y in zip(ra, rb, strict=True))
    den = math.sqrt(sum((x - ma) ** 2 for x in ra) * sum((y - mb) ** 2 for y in rb))
    return num / den if den else float("nan")


def strategy_name(protocol: str, strategy: str) -> str:
    return strategy if protocol == "profiled" else f"{protocol}:{strategy}"


def load_rows(bundles: Path, runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from partition_lab.executors.graph_io import read_bundle

    first = runs[0]
    out = []
    for r1 in first["rows"]:
        if "plans" not in r1:
            out.append({"bundle": r1.get("bundle"), "missing": r1.get("skipped") or r1.get("error")})
            continue
        bundle = read_bundle(bundles / r1["bundle"])
        meta = bundle.meta
        others = [next((r for r in run["rows"] if r.get("bundle") == r1["bundle"]
                        and "plans" in r), None) for run in runs[1:]]
        measured = list(r1["plans"])  # distinct plans, greedy first
        alias = {**{n: n for n in measured}, **r1["same_plan_as"]}
        plans = {}
        for name in measured:
            entry: dict[str, Any] = {
                "measured_ms": [r1["plans"][name]["median_s"] * 1e3] + [
                    o["plans"][name]["median_s"] * 1e3 if o and name in o["plans"] else None
                    for o in others],
                "ratio_to_greedy": [r1["plans"][name]["ratio_to_greedy"]] + [
                    o["plans"][name]["ratio_to_greedy"] if o and name in o["plans"] else None
                    for o in others],
                "error_vs_greedy": r1["plans"][name]["error_vs_greedy"],
                "ops_per_device": r1["plans"][name]["ops_per_device"],
                "also": sorted(n for n, a in alias.items() if a == name and n != name),
            }
            for protocol in meta["predicted_by_protocol"]:
                p = meta["predicted_by_protocol"][protocol][name]
                entry[protocol] = {"predicted_ms": p["total_s"] * 1e3,
                                   "sigma_ms": p["sigma_s"] * 1e3,
                                   "ops_measured": p["ops_measured"]}
            plans[name] = entry
        strategies = {protocol: {s: alias[strategy_name(protocol, s)] for s in STRATEGIES
                                 if strategy_name(protocol, s) in alias}
                      for protocol in PROTOCOLS if protocol in meta["predicted_by_protocol"]}
        out.append({"model": r1["model"], "platform": r1["platform"], "bundle": r1["bundle"],
                    "ops": r1["ops"], "rounds": [r1["rounds"]] + [o and o["rounds"]
                                                                  for o in others],
                    "coverage": meta["coverage"], "withheld": meta["withheld"],
                    "strategies": strategies, "plans": plans})
    return out


def analyse(row: dict[str, Any], protocol: str, run: int = 0) -> dict[str, Any]:
    plans = row["plans"]
    names = [n for n in plans if plans[n]["measured_ms"][run] is not None]
    measured = [plans[n]["measured_ms"][run] for n in names]
    predicted = [plans[n][protocol]["predicted_ms"] for n in names]
    chosen = row["strategies"][protocol]

    def ratio(name: str) -> float:
        return plans[name]["ratio_to_greedy"][run]

    best = min(set(chosen.values()), key=ratio)
    default = chosen[DEFAULT]
    inside = sum(abs(plans[n]["measured_ms"][run] - plans[n][protocol]["predicted_ms"])
                 <= 2 * plans[n][protocol]["sigma_ms"] for n in names)
    strat_pm = {s: plans[p][protocol]["predicted_ms"] / plans[p]["measured_ms"][run]
                for s, p in chosen.items()}
    return {
        "plans": len(names),
        "spearman": spearman(predicted, measured),
        "default_plan": default, "best_strategy": [s for s, p in chosen.items() if p == best],
        "best_plan": best, "default_vs_best": ratio(default) / ratio(best),
        "default_vs_greedy": ratio(default) / ratio(chosen["greedy"]),
        "cost_vs_greedy": ratio(chosen["cost"]) / ratio(chosen["greedy"]),
        "cost_vs_best": ratio(chosen["cost"]) / ratio(best),
        "optimal_vs_greedy": ratio(chosen["optimal"]) / ratio(chosen["greedy"]),
        "cost_plan": chosen["cost"], "optimal_plan": chosen["optimal"],
        "pred_meas_default": strat_pm[DEFAULT],
        "pred_meas_strategies": [min(strat_pm.values()), max(strat_pm.values())],
        "pred_meas_all": [min(p / m for p, m in zip(predicted, measured, strict=True)),
                          max(p / m for p, m in zip(predicted, measured, strict=True))],
        "within_2sigma": inside / len(names),
    }


def spread(row: dict[str, Any], i: int, j: int) -> dict[str, Any]:
    """Between two runs (machine instances) ``i`` and ``j``: greedy's absolute median and how
    far every other plan's ratio to greedy (the drift-free number) moved."""
    plans = row["plans"]
    g = plans["greedy"]["measured_ms"]
    if max(i, j) >= len(g) or g[i] is None or g[j] is None:
        return {}
    logs = [abs(math.log(p["ratio_to_greedy"][j] / p["ratio_to_greedy"][i]))
            for n, p in plans.items() if n != "greedy" and p["ratio_to_greedy"][j] is not None]
    return {"greedy_j_over_i": g[j] / g[i],
            "ratio_spread_median": math.expm1(statistics.median(logs)) if logs else 0.0,
            "ratio_spread_max": math.expm1(max(logs)) if logs else 0.0}


def verdict_a(a: dict[str, Any]) -> list[str]:
    missed = []
    if not a["spearman"] >= 0.9:
        missed.append(f"Spearman {a['spearman']:.2f} < 0.9")
    if a["default_vs_best"] > 1.05:
        missed.append(f"default {a['default_vs_best']:.3f}x best")
    for s in ("cost", "optimal"):
        if a[f"{s}_vs_greedy"] > 1.03:
            missed.append(f"{s} {a[f'{s}_vs_greedy']:.3f}x greedy")
    lo, hi = a["pred_meas_strategies"]
    if lo < 0.8 or hi > 1.25:
        missed.append(f"pred/meas {lo:.2f}-{hi:.2f}")
    return missed


def verdict_b(b: dict[str, Any]) -> list[str]:
    missed = []
    if not b["spearman"] >= 0.8:
        missed.append(f"Spearman {b['spearman']:.2f} < 0.8")
    if b["default_vs_greedy"] > 1.05:  # 1 by definition while greedy is the default
        missed.append(f"default {b['default_vs_greedy']:.3f}x greedy")
    for s in ("cost", "optimal"):
        if b[f"{s}_vs_greedy"] > 1.05:
            missed.append(f"{s} {b[f'{s}_vs_greedy']:.3f}x greedy")
    return missed


def fmt(x: float, digits: int = 3) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def main(argv: list[str] | None = None) -> int:
    global DEFAULT
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundles", type=Path, required=True)
    parser.add_argument("--runs", type=Path, nargs="+", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--labels", nargs="*", help="a short name per run")
    parser.add_argument("--spread", nargs="*", default=["1,2"], metavar="I,J",
                        help="pairs of runs (0-based, in --runs order) whose instance spread "
                             "is reported")
    parser.add_argument("--notes", type=Path, help="markdown appended (setup, commands, notes)")
    parser.add_argument("--preface", type=Path, help="markdown placed after the introduction")
    parser.add_argument("--default", default=DEFAULT,
                        help="the default strategy the goals judge (cost; greedy for the first round)")
    parser.add_argument("--title", help="the report's title")
    args = parser.parse_args(argv)
    DEFAULT = args.default
    labels = args.labels or [p.stem for p in args.runs]
    pairs = [tuple(int(x) for x in pair.split(",")) for pair in args.spread]
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
    runs = [json.loads(p.read_text()) for p in args.runs]
    rows = load_rows(args.bundles, runs)
    done = [r for r in rows if "plans" in r]
    for row in done:
        row["analysis"] = {p: [analyse(row, p, run) for run in range(len(runs))]
                           for p in PROTOCOLS if p in row["strategies"]}
        row["spread"] = {f"{labels[i]} vs {labels[j]}": spread(row, i, j) for i, j in pairs}
    args.out.with_suffix(".json").write_text(json.dumps(
        {"schema": "partition_lab.gpu_profiled/1", "runs": [str(p) for p in args.runs],
         "labels": labels, "float32_math": [r.get("float32_math") for r in runs],
         "gpu": runs[0].get("gpu"), "torch": runs[0].get("torch"), "rows": rows}, indent=1))

    md: list[str] = []
    w = md.append
    w(args.title or "# Profile-guided plans on the H200, checked on models the profile never "
      "saw")
    w("")
    w(f"Generated by `bench/gpu/profiled_report.py` from {', '.join(f'`{p.name}`' for p in args.runs)} "
      "and the planned bundles (the exact commands are at the end). "
      f"{len(done)} (model, platform) rows, each with at least 10 distinct plans: every "
      "registered strategy under each protocol's cost model, the baseline on `tensorcore` "
      "(every op on the GPU, one region) and 8 hand-made variants (greedy with runs of ops "
      "moved to the host). Every distinct plan of a row was timed end to end in turns with "
      "the others (one run of each per round, order rotated; greedy's plan is one of them), "
      "so its ratio to greedy is free of the machine's drift; each run on its own machine "
      "instance.")
    w("")
    if args.preface and args.preface.is_file():
        w(args.preface.read_text().strip())
        w("")
    # ---------------------------------------------------------------- goals summary
    w("## The goals, per row")
    w("")
    w(f"Numbers of {labels[0]}; the other runs are in the next section, and a ranking "
      "claim holds only where the runs agree beyond the instance spread (below). "
      f"Default strategy: `{DEFAULT}` (`partition_lab.partition`'s default with a profile). "
      "'best' is the "
      "measured-fastest plan among the protocol's strategy plans. pred/meas: predicted / "
      "measured end-to-end time, over the protocol's strategy plans (min-max).")
    w("")
    w("| model | platform | plans | (a) Spearman | (a) default / best | (a) cost, optimal / greedy "
      "| (a) pred/meas | (a) missed | (b) Spearman | (b) cost, optimal / greedy | (b) missed "
      "| (b') strict Spearman |")
    w("|---|---|---|---|---|---|---|---|---|---|---|---|")
    totals = {"a_ok": 0, "b_ok": 0}
    for row in done:
        a, b, s = (row["analysis"].get(p, [None])[0] for p in ("profiled", "lomo", "strict"))
        ma, mb = verdict_a(a), verdict_b(b)
        totals["a_ok"] += not ma
        totals["b_ok"] += not mb
        w(f"| {row['model']} | {row['platform']} | {a['plans']} | {fmt(a['spearman'], 2)} | "
          f"{fmt(a['default_vs_best'])} | {fmt(a['cost_vs_greedy'])}, "
          f"{fmt(a['optimal_vs_greedy'])} | {fmt(a['pred_meas_strategies'][0], 2)}-"
          f"{fmt(a['pred_meas_strategies'][1], 2)} | {'; '.join(ma) or 'met'} | "
          f"{fmt(b['spearman'], 2)} | {fmt(b['cost_vs_greedy'])}, {fmt(b['optimal_vs_greedy'])} "
          f"| {'; '.join(mb) or 'met'} | {fmt(s['spearman'], 2) if s else '-'} |")
    w("")
    w(f"Rows meeting every (a) goal: {totals['a_ok']}/{len(done)}; every (b) goal: "
      f"{totals['b_ok']}/{len(done)}.")
    w("")
    w("### Each goal on its own, per run")
    w("")
    w("| run | (a) Spearman >= 0.9 | (a) median Spearman | (a) default within 5% of best | "
      "(a) cost within 5% of best | (a) cost and optimal <= 1.03 x greedy | "
      "(a) worst cost or optimal / greedy | (a) pred/meas of every strategy plan in 0.8-1.25 | "
      "(a) greedy pred/meas, median (range) | (b) Spearman >= 0.8 | (b) median Spearman | "
      "(b) default <= 1.05 x greedy | (b) worst cost or optimal / greedy | "
      "(b') Spearman >= 0.8 | (b') median Spearman |")
    w("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    n = len(done)
    for k, label in enumerate(labels):
        a = [r["analysis"]["profiled"][k] for r in done]
        b = [r["analysis"]["lomo"][k] for r in done]
        c = [r["analysis"]["strict"][k] for r in done if "strict" in r["analysis"]]
        worst = max(max(x["cost_vs_greedy"], x["optimal_vs_greedy"]) for x in a)
        worst_b = max(max(x["cost_vs_greedy"], x["optimal_vs_greedy"]) for x in b)
        gpm = [x["pred_meas_default"] for x in a]
        w(f"| {label} | {sum(x['spearman'] >= 0.9 for x in a)}/{n} | "
          f"{statistics.median(x['spearman'] for x in a):.2f} | "
          f"{sum(x['default_vs_best'] <= 1.05 for x in a)}/{n} | "
          f"{sum(x['cost_vs_best'] <= 1.05 for x in a)}/{n} | "
          f"{sum(max(x['cost_vs_greedy'], x['optimal_vs_greedy']) <= 1.03 for x in a)}/{n} | "
          f"{worst:.3f} | "
          f"{sum(x['pred_meas_strategies'][0] >= 0.8 and x['pred_meas_strategies'][1] <= 1.25 for x in a)}/{n} | "
          f"{statistics.median(gpm):.2f} ({min(gpm):.2f}-{max(gpm):.2f}) | "
          f"{sum(x['spearman'] >= 0.8 for x in b)}/{n} | "
          f"{statistics.median(x['spearman'] for x in b):.2f} | "
          f"{sum(x['default_vs_greedy'] <= 1.05 for x in b)}/{n} | {worst_b:.3f} | "
          + (f"{sum(x['spearman'] >= 0.8 for x in c)}/{n} | "
             f"{statistics.median(x['spearman'] for x in c):.2f} |" if c else "- | - |"))
    w("")
    # ---------------------------------------------------------------- per goal, both runs
    runs_txt = " / ".join(labels)
    w("## Each goal in every run")
    w("")
    w(f"Each cell: {runs_txt}.")
    w("")
    w("| model | platform | Spearman (a) | (b) | (b') | default/best (a) | cost/greedy (a) | "
      "optimal/greedy (a) | greedy pred/meas (a) | plans within pred +-2 sd (a) |")
    w("|---|---|---|---|---|---|---|---|---|---|")
    for row in done:
        an = row["analysis"]

        def both(p: str, k: str, d: int = 3, an: dict = an) -> str:
            return " / ".join(fmt(x[k], d) for x in an[p]) if p in an else "-"
        w(f"| {row['model']} | {row['platform']} | {both('profiled', 'spearman', 2)} | "
          f"{both('lomo', 'spearman', 2)} | {both('strict', 'spearman', 2)} | "
          f"{both('profiled', 'default_vs_best')} | {both('profiled', 'cost_vs_greedy')} | "
          f"{both('profiled', 'optimal_vs_greedy')} | {both('profiled', 'pred_meas_default', 2)} "
          f"| {' / '.join(fmt(x['within_2sigma'] * 100, 0) + '%' for x in an['profiled'])} |")
    w("")
    # ---------------------------------------------------------------- strategy plans
    w("## Where the strategies left greedy's plan")
    w("")
    w("Rows where some strategy's plan differs from greedy's (the others: every strategy that "
      "applies gives greedy's plan, or only `all_cpu` differs). ratio: measured median / "
      f"greedy's, in turns, {runs_txt}; predicted: (a) / (b) / (b') in ms, +-1 sd (a).")
    w("")
    w("| model | platform | plan | strategies giving it | predicted ms (a) | (b) | (b') | "
      f"measured ms {labels[0]} | ratio to greedy ({runs_txt}) |")
    w("|---|---|---|---|---|---|---|---|---|")
    for row in done:
        given: dict[str, list[str]] = {}
        for protocol, mapping in row["strategies"].items():
            for s, p in mapping.items():
                given.setdefault(p, []).append(strategy_name(protocol, s))
        interesting = [p for p in given if p != "greedy"
                       and not all(s.endswith("all_cpu") for s in given[p])]
        if not interesting:
            continue
        for p in ["greedy", *interesting]:
            e = row["plans"][p]
            w(f"| {row['model']} | {row['platform']} | {p} | {', '.join(given[p])} | "
              f"{e['profiled']['predicted_ms']:.3f} +-{e['profiled']['sigma_ms']:.3f} | "
              f"{e['lomo']['predicted_ms']:.3f} | "
              f"{fmt(e['strict']['predicted_ms']) if 'strict' in e else '-'} | "
              f"{e['measured_ms'][0]:.3f} | {' / '.join(fmt(x) for x in e['ratio_to_greedy'])} |")
    w("")
    # ---------------------------------------------------------------- spread
    w("## Spread between machine instances")
    w("")
    w("Per pair of runs (each its own machine instance): greedy J/I, greedy's absolute median "
      "on J over I (includes each instance's speed); ratio spread, how much a plan's "
      "drift-free ratio to greedy moved between the two (median and largest over the row's "
      "other plans). Rounds: timing rounds per run.")
    w("")
    keys = [f"{labels[i]} vs {labels[j]}" for i, j in pairs]
    w("| model | platform | rounds | " + " | ".join(
        f"{k}: greedy J/I | median | max" for k in keys) + " |")
    w("|---|---|---|" + "---|---|---|" * len(keys))
    for row in done:
        cells = []
        for k in keys:
            sp = row["spread"].get(k) or {}
            cells.append(f"{sp['greedy_j_over_i']:.3f} | {sp['ratio_spread_median'] * 100:.1f}% "
                         f"| {sp['ratio_spread_max'] * 100:.1f}%" if sp else "- | - | -")
        w(f"| {row['model']} | {row['platform']} | {' / '.join(str(x) for x in row['rounds'])} "
          f"| " + " | ".join(cells) + " |")
    w("")
    # ---------------------------------------------------------------- coverage
    w("## What each protocol's cost model knew")
    w("")
    w("Share of the model's ops measured in the profile (per device; 1.0 = every op's "
      "signature timed), and signatures withheld (per cache entry: GPU, host).")
    w("")
    w("| model | platform | (a) measured | (b) lomo measured | (b) lomo withheld GPU / host | "
      "(b') strict withheld GPU / host |")
    w("|---|---|---|---|---|---|")
    for row in done:
        cov = row["coverage"]

        def c(p: str, cov: dict = cov) -> str:
            return ", ".join(f"{d} {v:.2f}" for d, v in cov[p].items())

        def wh(p: str, row: dict = row) -> str:
            if p not in row["withheld"]:
                return "-"
            vals = row["withheld"][p]
            gpu = sum(v for k, v in vals.items() if k.startswith("torch-cuda"))
            host = sum(v for k, v in vals.items() if k.startswith("torch-cpu"))
            return f"{gpu} / {host}"
        w(f"| {row['model']} | {row['platform']} | {c('profiled')} | {c('lomo')} | {wh('lomo')} "
          f"| {wh('strict')} |")
    w("")
    missing = [r for r in rows if "plans" not in r]
    if missing:
        w("Not measured: " + ", ".join(f"{r['bundle']} ({r['missing']})" for r in missing))
        w("")
    if args.notes and args.notes.is_file():
        md.append(args.notes.read_text())
    args.out.with_suffix(".md").write_text("\n".join(md) + "\n")
    print("\n".join(md[:60]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
