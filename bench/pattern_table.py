"""Regions, host islands and their reasons per model and platform, with patterns and without.

For each model of the transformer and CNN suite that the zoo has, on ``neuron@2020``,
``neuron``, ``tensorcore`` at the model's own batch (1) and ``tensorcore`` at batch 32 (the
model exported again at that batch; a model that cannot take it is listed with the reason),
partitions with ``greedy`` twice: as shipped (targets judge their declared patterns as units)
and with every target's patterns removed (support judged op by op, as without patterns). Each
plan is validated and drawn (SVG, into a temporary directory; DOT where a plan has more
regions than graphviz lays out in reasonable time). Writes ``docs/evidence/patterns.md`` (generated; do
not edit) and prints it::

    TOPHUB_LOCATION=NONE .venv/bin/python bench/pattern_table.py [--full] [--out docs/evidence/patterns.md]

``--full`` adds the full-size models (their first build takes minutes and is cached). The
``hf:`` models need ``transformers``; where it is missing they are left out with a note.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

os.environ.setdefault("TOPHUB_LOCATION", "NONE")

import partition_lab  # noqa: E402
from partition_lab import render, zoo  # noqa: E402
from partition_lab._optional import MissingDependencyError  # noqa: E402
from partition_lab._tvm_logs import quiet_tvm_logs  # noqa: E402
from partition_lab.errors import PartitionLabError  # noqa: E402
from partition_lab.render.graphviz import RenderBudgetError  # noqa: E402
from partition_lab.targets import get_platform  # noqa: E402
from partition_lab.targets.devices import without_patterns  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MODELS = ("tv:vit_b_16", "tv:swin_t", "tv:convnext_tiny", "tv:efficientnet_b0",
          "tv:deeplabv3_mobilenet_v3_large", "hf:bert_base", "hf:distilbert",
          "tv:ssdlite320_mobilenet_v3_large")
#: ``(platform, batch)``; batch None is the model's own.
SETTINGS = (("neuron@2020", None), ("neuron", None), ("tensorcore", None), ("tensorcore", 32))
#: Distinct host reasons listed per plan (the rest are counted).
SHOWN_REASONS = 6


def load(model: str, small: bool, batch: int | None) -> tuple[object, dict, float]:
    """The model (at ``batch`` in its first input, exported again) and the seconds it took."""
    shapes = None
    if batch is not None:
        own = zoo.info(model).shapes(small)
        first = next(iter(own))
        shapes = {first: (batch, *own[first][1:])}
    start = time.perf_counter()
    mod, params = zoo.load(model, small=small, input_shapes=shapes)
    return mod, params, time.perf_counter() - start


def row(mod: object, params: dict, label: str, platform_name: str, batch: int,
        patterns: bool, drawings: Path) -> dict:
    """Partition (greedy), validate, draw; what the plan left on the host and why."""
    platform = get_platform(platform_name)
    if not patterns:
        platform = without_patterns(platform)
    start = time.perf_counter()
    result = partition_lab.partition(mod, platform, params=params, strategy="greedy", name=label)
    seconds = time.perf_counter() - start
    plan = result.plan
    plan.validate()
    stem = f"{label}.{platform_name}.b{batch}.{'with' if patterns else 'without'}"
    drawn = draw(result, drawings / (stem.replace(":", "_").replace("@", "_") + ".svg"))
    host = platform.host.name
    decisions = [d for d in plan.decisions if d.device == host]
    reasons: Counter[str] = Counter()
    for group in plan.reason_groups():
        if group.device == host:
            for text, members in group.details:
                reasons[text] += len(members)
    units = plan.support.units if patterns else ()
    return {"model": label, "platform": platform_name, "batch": batch, "patterns": patterns,
            "ops": len(result.graph), "units": len(units),
            "unit_kinds": dict(Counter(unit.name for unit in units).most_common()),
            "regions": len(plan.accelerator_regions), "islands": len(plan.cpu_regions),
            "host_ops": len(decisions),
            "host_op_types": dict(Counter(result.graph[d.node].op
                                          for d in decisions).most_common()),
            "reasons": reasons.most_common(), "drawn": drawn, "seconds": seconds}


def draw(result: object, path: Path) -> str:
    """``svg`` when the drawing rendered, ``dot (N regions)`` when only its DOT text could be
    written (over the render budget)."""
    try:
        render.write(result.plan, path, result.cost)
        assert path.stat().st_size > 0
        return "svg"
    except RenderBudgetError:
        dot = path.with_suffix(".dot")
        render.write(result.plan, dot, result.cost)
        assert dot.stat().st_size > 0
        return f"dot ({len(result.plan.accelerator_regions)} regions)"


def markdown(rows: list[dict], skipped: list[str], load_times: dict, command: str) -> str:
    lines = ["# Regions and host islands with patterns and without",
             "",
             f"Generated by `{command}` (greedy; do not edit). \"without\": every target judges "
             "op by op, as before patterns; \"with\": targets judge the units of their declared "
             "patterns whole (README, *Patterns*). Every plan below was validated and drawn "
             "(\"drawn\": SVG, or DOT where the plan has more regions than graphviz lays out in "
             "reasonable time). Batch 32 is the model exported again at that batch "
             "(`zoo.load(..., input_shapes=...)`, `--input-shape` on the command line).",
             "",
             "The Hugging Face model families, tuned and held-out, before and after, with the "
             "false-island rule: [families.md](families.md) (`bench/model_families.py`).",
             ""]
    lines += [f"Left out: {note}" for note in skipped] + ([""] if skipped else [])
    lines += ["| model | platform | batch | ops | units | regions without -> with | host "
              "islands without -> with | host ops without -> with | host ops with patterns | "
              "why (with patterns) | drawn | partition s without / with |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    pairs = _pairs(rows)
    for (model, platform, batch), pair in pairs.items():
        off, on = pair[False], pair[True]
        kinds = ", ".join(f"{n} {op}" for op, n in list(on["host_op_types"].items())[:4]) or "-"
        why = "; ".join(text[:140] for text, _ in on["reasons"][:2]) or "-"
        drawn = on["drawn"] if on["drawn"] == off["drawn"] else \
            f"{off['drawn']} / {on['drawn']}"
        lines.append(f"| {model} | {platform} | {batch} | {on['ops']} | {on['units']} | "
                     f"{off['regions']} -> {on['regions']} | {off['islands']} -> {on['islands']}"
                     f" | {off['host_ops']} -> {on['host_ops']} | {kinds} | {why} | {drawn} | "
                     f"{off['seconds']:.1f} / {on['seconds']:.1f} |")
    lines += ["", "## What the host keeps, and why", "",
              "Each distinct reason of a plan's host ops, with how many ops it covers; units "
              "are the patterns matched (with patterns).", ""]
    for (model, platform, batch), pair in pairs.items():
        if not (pair[False]["host_ops"] or pair[True]["host_ops"]):
            continue
        units = ", ".join(f"{n} {name}" for name, n in pair[True]["unit_kinds"].items()) or "none"
        lines.append(f"### {model} on {platform}, batch {batch}")
        lines.append("")
        lines.append(f"Units: {units}.")
        lines.append("")
        for patterns in (False, True):
            r = pair[patterns]
            lines.append(f"- {'with' if patterns else 'without'} patterns: {r['host_ops']} host "
                         f"op(s) in {r['islands']} island(s)")
            for text, count in r["reasons"][:SHOWN_REASONS]:
                lines.append(f"  - {count}x {text}")
            rest = r["reasons"][SHOWN_REASONS:]
            if rest:
                lines.append(f"  - ... {len(rest)} more distinct reasons "
                             f"({sum(count for _, count in rest)} ops)")
        lines.append("")
    lines += ["## Timings", "",
              "Measured on the machine that generated this file (seconds; loading includes "
              "building the ONNX file on the first run).", "",
              "| model | batch | load s |", "|---|---|---|"]
    lines += [f"| {model} | {batch} | {seconds:.1f} |"
              for (model, batch), seconds in load_times.items()]
    return "\n".join(lines) + "\n"


def _pairs(rows: list[dict]) -> dict[tuple[str, str, int], dict[bool, dict]]:
    pairs: dict[tuple[str, str, int], dict[bool, dict]] = {}
    for r in rows:
        pairs.setdefault((r["model"], r["platform"], r["batch"]), {})[r["patterns"]] = r
    return pairs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--full", action="store_true", help="also the full-size models")
    parser.add_argument("--models", help="comma-separated zoo names (default: the suite)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "evidence" / "patterns.md")
    args = parser.parse_args()
    command = "bench/pattern_table.py" + (" --full" if args.full else "")
    rows: list[dict] = []
    skipped: list[str] = []
    load_times: dict[tuple[str, int], float] = {}
    models = args.models.split(",") if args.models else MODELS
    known = set(zoo.torchvision_names() + zoo.transformers_names())
    with tempfile.TemporaryDirectory() as scratch, quiet_tvm_logs(True):
        for model in models:
            if model not in known:
                skipped.append(f"{model} (not in the zoo)")
                continue
            for small in (True, False) if args.full else (True,):
                label = model + (":small" if small else "")
                for platform, batch in SETTINGS:
                    try:
                        mod, params, seconds = load(model, small, batch)
                    except MissingDependencyError as exc:  # transformers, for hf: models
                        skipped.append(f"{label}: {exc}")
                        break
                    except PartitionLabError as exc:  # a shape the model cannot take
                        skipped.append(f"{label} on {platform} at batch {batch}: {exc}")
                        print(f"{label} batch {batch}: {exc}", file=sys.stderr, flush=True)
                        continue
                    shown_batch = batch or next(iter(zoo.info(model).shapes(small).values()))[0]
                    load_times.setdefault((label, shown_batch), seconds)
                    for patterns in (False, True):
                        rows.append(row(mod, params, label, platform, shown_batch, patterns,
                                        Path(scratch)))
                        print(f"{label} {platform} batch {shown_batch} patterns={patterns}: "
                              f"{rows[-1]['regions']} regions, {rows[-1]['islands']} islands, "
                              f"{rows[-1]['seconds']:.1f} s, drawn {rows[-1]['drawn']}",
                              file=sys.stderr, flush=True)
    text = markdown(rows, list(dict.fromkeys(skipped)), load_times, command)
    args.out.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
