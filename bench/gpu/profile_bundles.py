"""Profile every bundle of one or more folders into one profile cache (runs THERE, on the GPU
machine; no TVM needed; also runs here with --device cpu as a check).

The same as ``partition-lab profile BUNDLE --device cuda:0 --cache FILE --name MODEL`` once per
bundle, in one process (torch is imported once and the cache is kept in memory between bundles,
saved after each): every op signature on every device that supports it (non-host devices on the
GPU, the host on the CPU), copies and overheads, each signature labelled with the model it came
from (the bundle's ``meta.model``), which is what leave-one-model-out needs.

    PYTHONPATH=src python3 bench/gpu/profile_bundles.py --bundles .gpu_bundle/base_tensorcore \\
        .gpu_bundle/base_neuron2020 .gpu_bundle/base_neuron --device cuda:0 \\
        --cache $OUT/h200_profile.json --budget 300
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from partition_lab.executors.graph_io import read_bundle
from partition_lab.profiling import ProfileCache, profile


def bundle_paths(folders: list[Path]) -> list[Path]:
    """The bundles of each folder, in its ``order.json`` order where it has one."""
    paths = []
    for folder in folders:
        order = folder / "order.json"
        names = (json.loads(order.read_text()) if order.is_file()
                 else sorted(p.name[:-8] for p in folder.glob("*.json.gz")))
        paths.extend(folder / f"{name}.json.gz" for name in names
                     if (folder / f"{name}.json.gz").is_file())
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundles", type=Path, nargs="+", required=True, help="folders")
    parser.add_argument("--cache", type=Path, required=True)
    parser.add_argument("--device", default=None, help="torch device of non-host devices")
    parser.add_argument("--budget", type=float, default=300.0,
                        help="seconds of op timing in all (what is left is fitted)")
    parser.add_argument("--repeats", type=int, default=9, help="TorchRunner repeats")
    parser.add_argument("--batch-s", type=float, default=0.005, help="TorchRunner batch_s")
    parser.add_argument("--log", type=Path, help="JSON log of what each profile did")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    store = ProfileCache.load(args.cache, missing_ok=True)
    log: dict[str, Any] = {"command": " ".join(sys.argv), "profiles": []}
    for path in bundle_paths(args.bundles):
        left = args.budget - (time.perf_counter() - start)
        if left <= 0:
            log["profiles"].append({"bundle": str(path), "skipped": "budget reached"})
            continue
        model = read_bundle(path).meta.get("model") or path.name[:-8]
        try:
            result = profile(path, device=args.device, cache=store, name=model,
                             budget_s=left,
                             runner_options={"repeats": args.repeats, "batch_s": args.batch_s})
        except Exception as err:  # noqa: BLE001 - keep the other bundles' profiles
            print(f"{path}: failed: {type(err).__name__}: {err}", flush=True)
            log["profiles"].append({"bundle": str(path), "error": f"{type(err).__name__}: {err}"})
            continue
        print(f"[{time.perf_counter() - start:.0f} s] {path.parent.name}/{path.name}: "
              + result.summary(), flush=True)
        log["profiles"].append({"bundle": str(path), **result.to_dict()})
        store.save(args.cache)
        if args.log:
            log["elapsed_s"] = time.perf_counter() - start
            args.log.write_text(json.dumps(log, indent=1))
    store.save(args.cache)
    log["elapsed_s"] = time.perf_counter() - start
    if args.log:
        args.log.write_text(json.dumps(log, indent=1))
    print(f"done in {log['elapsed_s']:.0f} s -> {args.cache}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
