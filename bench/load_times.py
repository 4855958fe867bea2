"""Load time of every zoo model through both frontends, cold and warm cache; and (--viz-twice)
a first and a second ``partition-lab viz`` of one ONNX file, the converted-model cache's gain.

    TOPHUB_LOCATION=NONE .venv/bin/python bench/load_times.py            # all full-size models
    TOPHUB_LOCATION=NONE .venv/bin/python bench/load_times.py --small resnet50_v1
    TOPHUB_LOCATION=NONE .venv/bin/python bench/load_times.py --viz-twice tv:simple_pose_resnet152

--viz-twice MODEL (a zoo name whose ONNX file is built in --cache, or an .onnx path) runs
``partition-lab viz FILE --target T --debug`` twice as subprocesses, with a fresh converted-model
cache, and prints each run's wall time, its stages and the ratio second / first (the goal: at
most 1/3). tv:simple_pose_resnet152 is 522 ONNX nodes (SimplePose on ResNet-152, 277 MB).

Cold: the model's files are built first (MXNet files: build the Gluon block, seeded random
weights, write symbol + params; ONNX: export those files with mxnet.onnx at opset 13).
Warm: the files are on disk; only ``load_model`` runs (parse + convert to Relay + type
inference). Cold = build + warm. By default the files go to a fresh temporary cache directory,
so every model is really cold; ``--cache DIR`` reuses DIR instead.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any


def timed(run: Callable[[], Any]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def measure(name: str, small: bool) -> dict[str, float]:
    """Seconds for each step of one model; see the module docstring."""
    from partition_lab import zoo
    from partition_lab.relay.frontends import load_model

    shapes = dict(zoo.info(name).shapes(small))
    build_mxnet = timed(lambda: zoo.mxnet_paths(name, small=small))
    symbol_path, params_path = zoo.mxnet_paths(name, small=small)
    warm_mxnet = timed(lambda: load_model(symbol_path, shapes, params=params_path))
    export_onnx = timed(lambda: zoo.onnx_path(name, small=small))
    onnx_file = zoo.onnx_path(name, small=small)
    warm_onnx = timed(lambda: load_model(onnx_file))
    return {
        "build mxnet": build_mxnet, "mxnet warm": warm_mxnet, "mxnet cold": build_mxnet + warm_mxnet,
        "export onnx": export_onnx, "onnx warm": warm_onnx,
        # ONNX from nothing: the MXNet files, their export, then the load.
        "onnx cold": build_mxnet + export_onnx + warm_onnx,
    }


def viz_twice(model: str, target: str) -> int:
    """Time two ``partition-lab viz`` runs of one ONNX file with a fresh converted-model cache."""
    import subprocess
    from pathlib import Path

    from partition_lab import zoo

    if zoo.is_spec(model):
        name, small = zoo.parse_spec(model)  # type: ignore[misc]
        path = zoo.onnx_path(name, small=small)
    else:
        path = Path(model)
    with tempfile.TemporaryDirectory(prefix="partition_lab_viz_") as fresh:
        env = {**os.environ, "PARTITION_LAB_CACHE": fresh, "TOPHUB_LOCATION": "NONE"}
        command = [sys.executable, "-m", "partition_lab.cli", "viz", str(path), "--target",
                   target, "-o", str(Path(fresh) / "plan.svg"), "--debug"]
        print(f"model {path} ({path.stat().st_size / 1e6:.0f} MB); command: "
              f"{' '.join(command[2:])}")
        seconds = []
        for run in ("first", "second"):
            start = time.perf_counter()
            done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
            seconds.append(time.perf_counter() - start)
            stages = [line for line in done.stderr.splitlines() if "stages:" in line]
            print(f"{run:6s} {seconds[-1]:6.1f} s  {stages[-1] if stages else done.stderr[-500:]}",
                  flush=True)
            if done.returncode != 0:
                return done.returncode
    print(f"second / first = {seconds[1] / seconds[0]:.2f} (target: at most 0.33)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="*", help="zoo model names (default: all)")
    parser.add_argument("--small", action="store_true", help="the small variants instead")
    parser.add_argument("--cache", help="cache directory to use (default: a fresh temporary one)")
    parser.add_argument("--viz-twice", metavar="MODEL", help="time a first and a second "
                        "'partition-lab viz' of MODEL's ONNX file (see above)")
    parser.add_argument("--target", default="tensorcore", help="--viz-twice's target")
    args = parser.parse_args(argv)
    os.environ.setdefault("TOPHUB_LOCATION", "NONE")
    if args.viz_twice:
        if args.cache:
            os.environ["PARTITION_LAB_CACHE"] = args.cache  # where the zoo's files are
        return viz_twice(args.viz_twice, args.target)
    with tempfile.TemporaryDirectory(prefix="partition_lab_bench_") as scratch:
        os.environ["PARTITION_LAB_CACHE"] = args.cache or scratch
        from partition_lab import zoo

        names = args.models or zoo.names()
        columns = ["build mxnet", "mxnet warm", "mxnet cold", "export onnx", "onnx warm",
                   "onnx cold"]
        print(f"{'model':28s}" + "".join(f"{c:>13s}" for c in columns) + "   (seconds)")
        for name in names:
            row = measure(name, args.small)
            print(f"{name:28s}" + "".join(f"{row[c]:13.1f}" for c in columns), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
