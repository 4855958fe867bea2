"""Bundles that time a model's plan with patterns against its plan op by op, in turns (runs HERE).

For each ``<model>.json.gz`` of a folder that has a ``<model>_op_by_op.json.gz`` beside it
(``export_bundles.py --no-patterns``: the same graph, every target's patterns removed), writes
``<out>/<model>.json.gz`` holding three plans over the same graph and the same devices:
``greedy`` (with patterns), ``greedy_op_by_op`` (greedy when support is judged op by op) and
those of ``all_cpu``, ``cost`` and ``unpartitioned_gpu`` the bundle has. ``profiled_evidence.py`` then times them end to end in turns on the GPU machine, so
the with/without ratio is free of the machine's drift (timing the two bundles as separate rows
was not: one model's greedy moved 35 -> 21 ms between two instances).

    PYTHONPATH=src .venv/bin/python experiments/gpu/pattern_pairs.py --bundles .gpu_bundle/s_neuron \\
        .gpu_bundle/s_tensorcore --out .gpu_bundle/pattern_pairs
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from partition_lab.core.plan import PartitionPlan
from partition_lab.executors.graph_io import Bundle, read_bundle, write_bundle


def pair(with_patterns: Bundle, op_by_op: Bundle) -> Bundle:
    """``with_patterns`` holding its greedy and all_cpu plans and op_by_op's greedy plan."""
    greedy = with_patterns.plans["greedy"]
    if len(op_by_op.graph) != len(greedy.graph):
        raise SystemExit("the two bundles have different graphs")
    devices = [op_by_op.plans["greedy"].device_of(n) for n in range(len(greedy.graph))]
    # op_by_op's own verdicts: a unit the target rejects whole (GroupNorm on neuron) may have
    # pieces that op by op it accepts
    other = PartitionPlan.from_devices(greedy.graph, op_by_op.plans["greedy"].support,
                                       "greedy_op_by_op", devices,
                                       notes=["greedy with support judged op by op"])
    other.validate()
    plans = {"greedy": greedy, "greedy_op_by_op": other,
             # the bundle's other plans where it has them (decoder_patterns.py plans cost and
             # the all-GPU baseline, export_bundles.py all_cpu)
             **{name: with_patterns.plans[name] for name in ("all_cpu", "cost", "unpartitioned_gpu")
                if name in with_patterns.plans}}
    meta = {**{k: v for k, v in with_patterns.meta.items() if k not in ("predicted",
                                                                       "comparison")},
            "pair": "greedy with patterns vs greedy op by op"}
    return Bundle(with_patterns.graph, with_patterns.bindings, plans, meta,
                  with_patterns.platform)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundles", type=Path, nargs="+", required=True, help="folders")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    for folder in args.bundles:
        for path in sorted(folder.glob("*_op_by_op.json.gz")):
            base = path.with_name(path.name.replace("_op_by_op", ""))
            if not base.exists():
                continue
            out = args.out / folder.name / base.name
            out.parent.mkdir(parents=True, exist_ok=True)
            write_bundle(out, pair(read_bundle(base), read_bundle(path)))
            print(f"{folder.name}/{base.name}: greedy with patterns and op by op", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
