"""ResNet-50 at batch 32 on ``tensorcore``: one plan over three devices, drawn per device.

The ``tensorcore`` platform has Tensor Core regions (BYOC ``Compiler="tensorcore"``), the GPU's
CUDA cores (TVM's ``cuda`` main target, same memory) and the host CPU (float32). At batch 32
every conv2d but the stem matches a Tensor Core shape; the stem (3 input channels) misses it and
runs on the CUDA cores, not on the host. The ``cost`` strategy also moves the input's float32 ->
float16 cast to the host, so that half the bytes cross PCIe. This script partitions
``resnet50_v1_b32`` with ``cost``, prints the ops per device and why the ones off the Tensor
Cores are there, and draws the plan (one colour per device, a legend with each device's role and
op count) to ``docs/img/tensorcore_three_devices.png``.

    python examples/tensorcore_three_devices.py            # the full model (seconds)
    python examples/tensorcore_three_devices.py --small    # the zoo's small variant (batch 8)
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

os.environ.setdefault("TOPHUB_LOCATION", "NONE")

import partition_lab  # noqa: E402  (TOPHUB_LOCATION must be set before TVM loads)
from partition_lab import render, zoo  # noqa: E402

MODEL, TARGET = "resnet50_v1_b32", "tensorcore"
DEFAULT_OUTPUT = (Path(__file__).resolve().parents[1] / "docs" / "img"
                  / "tensorcore_three_devices.png")


def main() -> None:
    args = parse_args()
    mod, params = zoo.load(MODEL, small=args.small)
    batch = zoo.info(MODEL).shapes(args.small)["data"][0]
    result = partition_lab.partition(mod, TARGET, params=params, name=MODEL,
                                     strategy=args.strategy)
    plan = result.plan
    print(plan.summary())
    print(f"predicted {render.format_time(result.cost.total)} ({result.cost.model})")
    render.write(plan, args.output, result.cost, collapse=True,
                 title=f"{MODEL}{' (small)' if args.small else ''}, batch {batch}, on {TARGET}"
                       f" (Tensor Cores, CUDA cores, host CPU), strategy {plan.strategy}")
    print(f"wrote {args.output}")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="use the zoo's small variant")
    parser.add_argument("--strategy", default="cost", help="partitioning strategy (cost)")
    parser.add_argument("-o", "--output", type=Path, default=DEFAULT_OUTPUT)
    return parser.parse_args()


if __name__ == "__main__":
    main()
