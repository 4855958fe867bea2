"""ResNet-50 on a platform with three devices: an NPU, a vector DSP and the host CPU.

``examples/platforms/npu_dsp_cpu.toml`` declares the devices as data: the NPU (BYOC
``Compiler="npu"``, convolutions and dense layers with their epilogues, anchored on them), a DSP
that shares its memory (BYOC ``Compiler="dsp"``: pooling, element-wise, resize, data movement)
and the host. Each op goes to the most preferred device whose rules accept it; what neither
accelerator runs (the RGB stem conv: 3 input channels) stays on the host. This script partitions
``resnet50_v1`` with ``cost``, prints the ops per device and why the ones off the NPU are where
they are, and draws the plan (one colour per device, a legend with each device's role and op
count) to ``out/three_devices.png`` (``-o docs/img/three_devices.png`` refreshes
the README's picture).

    python examples/three_devices.py            # the full model
    python examples/three_devices.py --small    # the zoo's small variant
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

os.environ.setdefault("TOPHUB_LOCATION", "NONE")

import partition_lab  # noqa: E402  (TOPHUB_LOCATION must be set before TVM loads)
from partition_lab import render, zoo  # noqa: E402

MODEL = "resnet50_v1"
TARGET = str(Path(__file__).resolve().parent / "platforms" / "npu_dsp_cpu.toml")
# out/ (git ignores it): the tracked docs/img pictures change only when asked, with -o.
DEFAULT_OUTPUT = Path(__file__).resolve().parents[1] / "out" / "three_devices.png"


def main() -> None:
    args = parse_args()
    mod, params = zoo.load(MODEL, small=args.small)
    batch = zoo.info(MODEL).shapes(args.small)["data"][0]
    result = partition_lab.partition(mod, TARGET, params=params, name=MODEL,
                                     strategy=args.strategy)
    plan = result.plan
    print(plan.summary())
    print(f"predicted {render.format_time(result.cost.total)} ({result.cost.model})")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    render.write(plan, args.output, result.cost, collapse=True,
                 title=f"{MODEL}{' (small)' if args.small else ''}, batch {batch}, on "
                       f"{plan.platform_name} (NPU, DSP, host CPU), strategy {plan.strategy}")
    print(f"wrote {args.output}")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="use the zoo's small variant")
    parser.add_argument("--strategy", default="cost", help="partitioning strategy (cost)")
    parser.add_argument("-o", "--output", type=Path, default=DEFAULT_OUTPUT)
    return parser.parse_args()


if __name__ == "__main__":
    main()
