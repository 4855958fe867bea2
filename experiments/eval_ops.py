"""The evaluation models (and the zoo): build times, op counts, and the Relay ops each model has
on every platform's prepared module, with the ones the PyTorch executor has no kernel for.

    TOPHUB_LOCATION=NONE .venv/bin/python experiments/eval_ops.py                 # evaluation models, full size
    TOPHUB_LOCATION=NONE .venv/bin/python experiments/eval_ops.py --zoo           # zoo + evaluation
    TOPHUB_LOCATION=NONE .venv/bin/python experiments/eval_ops.py --small ssd_512_resnet50_v1_voc
    ... --cache DIR (default: .cache/zoo; a fresh directory times cold builds) --json out.json

For every model and every frontend that converts it (``zoo.info(name).frontends``): the MXNet
files are built (seeded random weights, nothing downloaded) and the ONNX file exported, each
timed (zero when cached); the module is loaded and its op counts checked against the catalog's
(``ZooEntry.op_counts``); then, for every built-in platform and every example platform file,
the module is prepared as ``partition_lab.api.analyze`` prepares it and its OpGraph read. The
union of op names is printed per model with the ops the executor cannot run
(``kernels.unsupported_nodes``: no kernel, or attribute values its kernel does not take).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PLATFORM_FILES = sorted(str(p) for p in (REPO / "examples" / "platforms").glob("*.toml"))


def timed(run) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def census(name: str, small: bool, platforms: list[str]) -> dict:
    from partition_lab import zoo
    from partition_lab.api import analyze
    from partition_lab.executors.kernels import unsupported_nodes
    from partition_lab.relay.frontends._spans import calls_in_order

    entry = zoo.info(name)
    row: dict = {"frontends": list(entry.frontends), "frontend_note": entry.frontend_note,
                 "seconds": {}, "ops": {}, "problems": {}, "counts": {}, "count_mismatch": {},
                 "nodes": {}}
    row["seconds"]["build mxnet"] = timed(lambda: zoo.mxnet_paths(name, small=small))
    if "onnx" in entry.frontends:
        row["seconds"]["export onnx"] = timed(lambda: zoo.onnx_path(name, small=small))
    for frontend in entry.frontends:
        start = time.perf_counter()
        mod, params = zoo.load(name, frontend=frontend, small=small)
        row["seconds"][f"load {frontend}"] = time.perf_counter() - start
        counts = Counter(call.op.name for call in calls_in_order(mod["main"]))
        expected = entry.op_counts(small, frontend)
        got = {op: counts.get(op, 0) for op in expected}
        row["counts"][frontend] = got
        if got != expected:
            row["count_mismatch"][frontend] = {"expected": expected, "got": got}
        for platform in platforms:
            key = f"{frontend}/{Path(platform).stem}"
            start = time.perf_counter()
            graph = analyze(mod, platform, params=params, name=name).graph
            row["seconds"][f"analyze {key}"] = time.perf_counter() - start
            row["nodes"][key] = len(graph)
            for op, count in Counter(n.op for n in graph.nodes).items():
                row["ops"].setdefault(op, {})[key] = count
            if found := unsupported_nodes(graph.nodes):
                row["problems"][key] = found
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="*", help="model names (default: evaluation models)")
    parser.add_argument("--zoo", action="store_true", help="the zoo models too")
    parser.add_argument("--small", action="store_true", help="the small variants")
    parser.add_argument("--cache", default=str(REPO / ".cache" / "zoo"))
    parser.add_argument("--json", help="write the census here")
    args = parser.parse_args(argv)
    os.environ.setdefault("TOPHUB_LOCATION", "NONE")
    os.environ["PARTITION_LAB_CACHE"] = args.cache
    from partition_lab import targets, zoo
    from partition_lab.executors.kernels import supported_ops

    names = args.models or (zoo.names() if args.zoo else []) + zoo.evaluation_names()
    platforms = list(targets.available_targets()) + PLATFORM_FILES
    result = {}
    for name in names:
        row = census(name, args.small, platforms)
        result[name] = row
        seconds = row["seconds"]
        steps = ", ".join(f"{k} {v:.1f}s" for k, v in seconds.items()
                          if not k.startswith("analyze"))
        analyze_s = sum(v for k, v in seconds.items() if k.startswith("analyze"))
        sizes = sorted(set(row["nodes"].values()))
        print(f"{name}{' (small)' if args.small else ''}: frontends {row['frontends']}; "
              f"{steps}; analyze x{len(row['nodes'])} {analyze_s:.1f}s; "
              f"{sizes[0]}-{sizes[-1]} nodes", flush=True)
        print(f"    {len(row['ops'])} ops: {', '.join(sorted(row['ops']))}", flush=True)
        print(f"    cannot run: {row['problems'] or 'none'}; op counts "
              f"{'differ: ' + str(row['count_mismatch']) if row['count_mismatch'] else 'as catalogued'}",
              flush=True)
    union = sorted({op for row in result.values() for op in row["ops"]})
    print(f"all models: {len(union)} ops; without a kernel: "
          f"{sorted(set(union) - set(supported_ops())) or 'none'}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
