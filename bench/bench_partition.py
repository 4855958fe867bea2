"""Time the whole partition (annotate, merge, outline) against TVM's own three-pass chain.

For every zoo model (full size, MXNet frontend; ``tv:`` models through ONNX) and target, in the
same process (``hf:bert_base``, BERT-base from ``transformers.BertConfig()`` with random weights
at sequence 128, is built here when the zoo does not have it, as ``transformers_patterns.py``
builds it):

* ours: Relay -> OpGraph, support verdicts, ``greedy`` regions, plan validation, outlining into
  ``Compiler`` functions (``partition_lab.partition`` minus model loading and preparation);
* TVM: ``AnnotateTarget -> MergeCompilerRegions -> PartitionGraph`` with the same per-node
  support predicate.

``--predicate random-70%`` replaces the target's verdicts with a seeded random 70% of ops
supported (as ``tests/test_api.py`` does): many regions, where TVM's region merging is
slowest. ``ours_op_by_op_s`` is ours again with every target judging op by op (no pattern
units), so the JSON shows what patterns cost (``patterns_cost``: ours_s / ours_op_by_op_s, and
``patterns_cost_median`` of the medians; the goal is at most 1.5). Both are timed as the
best of ``--repeat`` runs (medians beside them); the table also says whether both found the same
regions, and how long one ``InferType`` of our partitioned module takes (outlining ends with one:
the floor under our time, since the result must be a type-checked module as PartitionGraph's
is). Usage::

    .venv/bin/python bench/bench_partition.py [--models a,b] [--targets neuron] [--repeat 3]
        [--predicate target|random-70%]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("TOPHUB_LOCATION", "NONE")

import numpy as np  # noqa: E402

from partition_lab import synthetic, zoo  # noqa: E402
from partition_lab.api import analyze  # noqa: E402
from partition_lab.core.support import Verdict  # noqa: E402
from partition_lab.relay.frontends import load_model  # noqa: E402
from partition_lab.relay.passes.outline import outline  # noqa: E402
from partition_lab.relay.passes.tvm_reference import tvm_chain_regions  # noqa: E402
from partition_lab.strategies import get_strategy  # noqa: E402
from partition_lab.targets.devices import without_patterns  # noqa: E402

RESULTS = Path(__file__).parent / "results"


def ours(analysis, verdicts=None, platform=None) -> tuple[float, list[frozenset[int]], float]:
    """Seconds for verdict-to-module work on an analysed model, the accelerator regions, and
    the seconds of one type inference of the partitioned module. ``verdicts`` replace the
    target's (which are computed, and timed, otherwise); ``platform`` replaces the analysis's
    (its devices' rules judge the ops)."""
    from tvm import relay

    from partition_lab.relay.passes.annotate import support_table
    from partition_lab.relay.relay_graph import relay_graph

    start = time.perf_counter()
    rg = relay_graph(analysis.prepared_mod)
    if verdicts is None:
        support = support_table(rg.graph, platform or analysis.platform)
    else:
        support = synthetic.one_accelerator(verdicts, analysis.platform.primary.name)
    plan = get_strategy("greedy").run(rg.graph, support)
    plan.validate()
    partitioned = outline(rg, plan)
    seconds = time.perf_counter() - start
    start = time.perf_counter()
    relay.transform.InferType()(partitioned)
    infer_seconds = time.perf_counter() - start
    return seconds, sorted((frozenset(r.nodes) for r in plan.accelerator_regions), key=min), \
        infer_seconds


BERT_BASE = "hf:bert_base"
_built: dict[str, tuple] = {}


def load(name: str) -> tuple:
    """``(mod, params)`` of a zoo model, or of BERT-base built here when the zoo lacks it."""
    if name in zoo.ENTRIES:
        return zoo.load(name, frontend=None if ":" in name else "mxnet")
    if name != BERT_BASE:
        raise SystemExit(f"unknown model {name!r}; zoo models or {BERT_BASE}")
    if name not in _built:  # one torch.export -> ONNX -> Relay for every target
        from transformers_patterns import build, torch  # torch and transformers: only here

        ids = torch.randint(0, 1000, (1, 128), generator=torch.Generator().manual_seed(0))
        _built[name] = load_model(build("bert", small=False), ids)
    return _built[name]


def bench_model(name: str, target: str, repeat: int, predicate: str = "target") -> dict:
    mod, params = load(name)
    analysis = analyze(mod, target, params=params, name=name)
    graph = analysis.graph
    verdicts = None
    if predicate == "random-70%":
        rng = np.random.default_rng(len(graph))
        verdicts = [Verdict(bool(ok), "random 70%") for ok in rng.random(len(graph)) < 0.7]
    supported = [v.supported for v in verdicts or analysis.verdicts]
    our_times, ref_times, infer_times, op_by_op_times = [], [], [], []
    op_by_op = without_patterns(analysis.platform)
    for _ in range(repeat):
        if verdicts is None:
            op_by_op_times.append(ours(analysis, platform=op_by_op)[0])
        seconds, our_regions, infer_seconds = ours(analysis, verdicts)
        our_times.append(seconds)
        infer_times.append(infer_seconds)
        ref = tvm_chain_regions(analysis.relay, supported)
        ref_times.append(ref.seconds)
    # greedy drops anchorless regions on anchored targets; TVM's chain has no such notion.
    anchored = any(v.anchor for v in verdicts or analysis.verdicts)
    same = our_regions == ref.regions if not anchored else None
    return {
        "model": name, "target": target, "predicate": predicate, "ops": len(graph),
        "ours_s": min(our_times), "ours_infer_type_s": min(infer_times),
        # the same without pattern units (every op judged alone): what patterns cost
        "ours_op_by_op_s": min(op_by_op_times) if op_by_op_times else None,
        "patterns_cost": min(our_times) / min(op_by_op_times) if op_by_op_times else None,
        # medians too: on a busy machine the best of a few runs swings more than the ratio
        "ours_median_s": statistics.median(our_times),
        "ours_op_by_op_median_s": statistics.median(op_by_op_times) if op_by_op_times else None,
        "patterns_cost_median": (statistics.median(our_times) / statistics.median(op_by_op_times)
                                 if op_by_op_times else None),
        "tvm_chain_s": min(ref_times),
        "speedup": min(ref_times) / min(our_times),
        "regions_ours": len(our_regions), "regions_tvm": len(ref.regions), "same_regions": same,
        "tvm_empty_functions": ref.empty_functions,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(zoo.names()))
    parser.add_argument("--targets", default="neuron@2020")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--predicate", choices=("target", "random-70%"), default="target")
    parser.add_argument("--out", help="default: bench/results/partition_vs_tvm[_random70].json")
    args = parser.parse_args(argv)
    rows = []
    print(f"{'model':28} {'target':12} {'ops':>5} {'ours s':>8} {'(infer)':>8} {'op by op':>8} "
          f"{'pat/op':>6} {'TVM s':>8} {'speedup':>8} {'regions':>9} same")
    for target in args.targets.split(","):
        for name in args.models.split(","):
            row = bench_model(name, target, args.repeat, args.predicate)
            rows.append(row)
            op_by_op, cost = row["ours_op_by_op_s"], row["patterns_cost"]
            print(f"{row['model']:28} {row['target']:12} {row['ops']:5d} {row['ours_s']:8.3f} "
                  f"{row['ours_infer_type_s']:8.3f} "
                  f"{'-' if op_by_op is None else f'{op_by_op:8.3f}':>8} "
                  f"{'-' if cost is None else f'{cost:5.2f}x':>6} "
                  f"{row['tvm_chain_s']:8.3f} {row['speedup']:7.1f}x "
                  f"{row['regions_ours']:4d}/{row['regions_tvm']:<4d} {row['same_regions']}",
                  flush=True)
    suffix = "_random70" if args.predicate == "random-70%" else ""
    out = Path(args.out or RESULTS / f"partition_vs_tvm{suffix}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    # Other processes on the machine move these timings; the load says how busy it was.
    out.write_text(json.dumps({"command": " ".join(sys.argv), "cpus": os.cpu_count(),
                               "load_average_1min_at_end": os.getloadavg()[0], "rows": rows},
                              indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
