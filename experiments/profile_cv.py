"""Cross-validate the profiled cost model's fitted estimates (planning from measurements).

Converts a measured profile of the old two-kind format (default: the H200 one,
``experiments/data/h200_measured.json.xz``, with ``experiments/gpu_profile_to_cache.py``) to the profile
cache format, or reads a profile cache, and prints the leave-one-model-out errors of :class:`ProfiledCostModel`'s fit: per device
entry and op class over held-out signatures, and per held-out model over its summed op times.

The old format does not record which models a signature came from. With ``--bundles DIR``
(bundles of the profiled models, ``bench/gpu/export_bundles.py``) the signatures are assigned to
the graphs that contain them: true leave-one-model-out, each node counted in the totals. Without
bundles the signatures are grouped by op name (``--group op``): that leaves one op name out at a
time, which is not the same test (weaker: no unseen-model shapes; harsher: no same-op data).

    PYTHONPATH=src python3 experiments/profile_cv.py                                 # by op
    PYTHONPATH=src python3 experiments/profile_cv.py --bundles .gpu_bundle/platforms # by model
    PYTHONPATH=src python3 experiments/profile_cv.py --cache my_profile_cache.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

from partition_lab.cost_models.profile_cache import read_profile_cache, write_profile_cache
from partition_lab.cost_models.profiled import ProfiledCostModel
from partition_lab.cost_models.signatures import op_signature
from partition_lab.targets import get_platform

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_profile_to_cache import bundle_graphs, cache_from_measured_gpu  # noqa: E402


def baseline(model: ProfiledCostModel, graphs: dict | None) -> list[str]:
    """The same folds priced by the old fallback: the h200 / xeon_gold_6130 roofline times the
    median measured/roofline ratio of the op's class among the fold's training signatures."""
    import math
    import statistics

    from partition_lab.cost_models import load_profile
    from partition_lab.cost_models.roofline import RooflineCostModel
    from partition_lab.cost_models.signatures import node_from_signature

    roofline = RooflineCostModel(load_profile("h200"), load_profile("xeon_gold_6130"))
    nodes = {}
    for graph in (graphs or {}).values():
        for node in graph:
            nodes.setdefault(op_signature(node), node)
    lines = ["", "baseline, same folds: scaled roofline (the retired two-kind model's fallback)",
             f"{'device':<16} {'group':<8} {'n':>5} {'median':>7} {'p90':>6} {'rms':>6}"]
    for device, key in model.binding.items():
        if device not in ("cpu", model.platform.primary.name):
            continue
        entry = model.entry_of(device)
        kind = "cpu" if device == "cpu" else "accel"
        est = {s: roofline.op_time(nodes.get(s) or node_from_signature(s), kind)
               for s in entry.signatures}
        measured = dict(zip(entry.signatures, entry.times, strict=True))
        cls = {s: x.cls for s, x in zip(entry.signatures, entry.samples, strict=True)}
        folds = model.folds(key)
        errors: dict[str, list[float]] = {}
        graph_errors = []
        for fold, held in folds.held_out.items():
            ratios: dict[str, list[float]] = {}
            for s in folds.training[fold]:
                ratios.setdefault(cls[s], []).append(measured[s] / est[s])
            scale = {c: statistics.median(v) for c, v in ratios.items()}
            pred_total = meas_total = 0.0
            counts = ({} if not graphs or fold not in graphs else
                      Counter(op_signature(n) for n in graphs[fold]))
            for s in held:
                if cls[s] not in scale:
                    continue
                pred = est[s] * scale[cls[s]]
                errors.setdefault(cls[s], []).append(math.log(pred / measured[s]))
                pred_total += counts.get(s, 1) * pred
                meas_total += counts.get(s, 1) * measured[s]
            if meas_total:
                graph_errors.append(math.log(pred_total / meas_total))
        rows = [(c, errors[c]) for c in ("matrix", "vector", "data") if c in errors]
        rows += [("all", [e for v in errors.values() for e in v]), ("graph", graph_errors)]
        for group, v in rows:
            a = sorted(abs(e) for e in v)
            lines.append(f"{device:<16} "
                         f"{group:<8} {len(a):>5} {statistics.median(a):>7.3f} "
                         f"{a[int(0.9 * (len(a) - 1))]:>6.3f} "
                         f"{math.sqrt(sum(e * e for e in v) / len(v)):>6.3f}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--profile", help="old partition_lab.gpu_profile/1 file (default: "
                                          "experiments/data/h200_measured.json.xz)")
    source.add_argument("--cache", help="a partition_lab.profile_cache/1 file")
    parser.add_argument("--bundles", type=Path, help="bundles of the profiled models: model "
                                                     "names and node counts per signature")
    parser.add_argument("--group", choices=("op", "signature"), default="op",
                        help="pseudo-models of signatures no bundle names (default: op)")
    parser.add_argument("--platform", default="tensorcore")
    parser.add_argument("--write-cache", type=Path, help="also write the converted cache here")
    parser.add_argument("--json", type=Path, help="write the cross-validation as JSON here")
    parser.add_argument("--no-baseline", action="store_true",
                        help="skip the scaled-roofline baseline on the same folds")
    args = parser.parse_args(argv)

    graphs = bundle_graphs(args.bundles) if args.bundles else None
    if args.cache:
        cache = read_profile_cache(args.cache)
        what = args.cache
    else:
        cache = cache_from_measured_gpu(args.profile, graphs=graphs, platform=args.platform,
                                        group=args.group)
        what = f"{args.profile or 'h200_measured.json'} converted " + (
            f"(models from {len(graphs)} bundles in {args.bundles})" if graphs else
            f"(no model names: signatures grouped by {args.group})")
        if args.write_cache:
            write_profile_cache(args.write_cache, cache)
    model = ProfiledCostModel(cache, get_platform(args.platform))
    start = time.perf_counter()
    cv = model.cross_validate(graphs)
    elapsed = time.perf_counter() - start
    print(f"profile: {what}")
    print(f"model: {model.name}")
    for key, entry in cache["devices"].items():
        print(f"  {key}: {len(entry.get('ops', {}))} signatures")
    print(f"cross-validation: {elapsed:.1f} s\n")
    print(cv.format())
    if not args.no_baseline:
        print("\n".join(baseline(model, graphs)))
    if args.json:
        args.json.write_text(json.dumps(cv.to_dict(), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
