"""Greedy on ``tvm:<backend>`` against the backend's own ``partition_for_*``, on ONNX files.

Run in the Relax venv, ONNX paths as arguments (the zoo's cached exports, for example)::

    TOPHUB_LOCATION=NONE PYTHONPATH=src .venv-relax/bin/python experiments/tvm_backends.py \
        ~/.cache/partition_lab/zoo/*/tv_swin_t-small/tv_swin_t.onnx

Prints per (model, backend) the ops, how many each side offloads, whether the sets are equal,
the time of our analysis and of ``partition_for_*``, and (with ``--reasons``) the distinct
reasons of the ops left off. A ``partition_for_*`` that raises is reported in one line. With
``--cost``, a second table: per (model, backend) the ops greedy and ``cost`` put on the backend
and each plan's predicted time (the target's default profile, roofline), and whether our
partitioned module is ``partition_for_*``'s own (``tvm.ir.structural_equal``).

The zoo-like graphs of the tests (``tests/relax/models.py``, ``ZOO_LIKE``) as files::

    PYTHONPATH=src:tests/relax .venv-relax/bin/python -c "import models, onnx; \
        [onnx.save(b(), f'/tmp/{n}.onnx') for n, b in models.ZOO_LIKE.items()]"
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from pathlib import Path

import partition_lab
from partition_lab.relax.byoc.oracle import offloaded_by_backend

BACKENDS = ("tensorrt", "cutlass", "cublas", "cudnn", "nnapi", "coreml")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", type=Path)
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--reasons", action="store_true")
    parser.add_argument("--cost", action="store_true")
    args = parser.parse_args()
    costs: list[str] = []
    print("| model | backend | ops | greedy offloads | partition_for offloads | equal | ours s | "
          "theirs s |\n|---|---|---|---|---|---|---|---|")
    left: Counter[tuple[str, str]] = Counter()
    for path in args.models:
        mod, params = partition_lab.load_model(str(path))
        for backend in args.backends.split(","):
            start = time.perf_counter()
            try:
                result = partition_lab.partition(mod, f"tvm:{backend}", params=params,
                                                 strategy="greedy")
            except Exception as error:  # noqa: BLE001 - a model we cannot read is a result
                line = (str(error).strip().splitlines() or [""])[0][:90]
                print(f"| {path.stem} | {backend} | - | ours raises {type(error).__name__}: "
                      f"{line} | - | - | - | - |")
                break
            ours_s = time.perf_counter() - start
            ours = {n for n in range(len(result.graph)) if result.plan.device_of(n) == backend}
            if args.cost:
                costs.append(_cost_row(path.stem, backend, mod, params, result))
            start = time.perf_counter()
            try:
                theirs = offloaded_by_backend(result.ir, backend)
            except Exception as error:  # noqa: BLE001 - TVM's own pass failing is a result
                line = (str(error).strip().splitlines() or [""])[0][:90]
                print(f"| {path.stem} | {backend} | {len(result.graph)} | {len(ours)} | "
                      f"raises {type(error).__name__}: {line} | - | {ours_s:.1f} | - |")
                continue
            theirs_s = time.perf_counter() - start
            print(f"| {path.stem} | {backend} | {len(result.graph)} | {len(ours)} | "
                  f"{len(theirs)} | {'yes' if ours == theirs else 'NO'} | {ours_s:.1f} | "
                  f"{theirs_s:.1f} |")
            verdicts = result.plan.support.of(backend)
            for n in set(range(len(result.graph))) - ours:
                left[backend, verdicts[n].reason[:160]] += 1
    if costs:
        print("\n| model | backend | greedy ops | greedy ms | cost ops | cost ms | module is "
              "partition_for's |\n|---|---|---|---|---|---|---|")
        print("\n".join(costs))
    if args.reasons:
        for (backend, reason), count in sorted(left.items()):
            print(f"{backend} x{count}: {reason}")


def _cost_row(model: str, backend: str, mod, params, greedy) -> str:
    import tvm_ffi

    from partition_lab.relax.byoc.backends import backend as spec
    from partition_lab.relax.byoc.backends import partition_for

    cost = partition_lab.partition(mod, f"tvm:{backend}", params=params, strategy="cost")
    try:
        theirs = partition_for(spec(backend))(greedy.prepared_mod)
        same = "yes" if tvm_ffi.structural_equal(greedy.mod, theirs) else "NO"
    except Exception as error:  # noqa: BLE001 - TVM's own pass failing is a result
        same = f"partition_for raises {type(error).__name__}"
    return (f"| {model} | {backend} | {greedy.plan.ops_per_device()[backend]} | "
            f"{greedy.cost.total * 1e3:.3f} | {cost.plan.ops_per_device()[backend]} | "
            f"{cost.cost.total * 1e3:.3f} | {same} |")


if __name__ == "__main__":
    main()
