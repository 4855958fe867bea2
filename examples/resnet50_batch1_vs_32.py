"""ResNet-50 on Tensor Cores: at batch 1 no conv2d is eligible, at batch 32 they are.

The ``tensorcore`` platform has three devices: Tensor Core regions, the GPU's CUDA cores and the
host. A conv that misses the Tensor Core rules runs on the CUDA cores, not the host.

Field report 000: TVM's ``conv2d_nhwc_tensorcore`` beat cuDNN 1.69x on ResNet-50 at batch 32
(T4, fp32 run with reduced input precision), but only applies when (batch, in_channels,
out_channels) is a multiple of (16,16,16), (8,16,32) or (32,16,8): at batch 1 it cannot be used
at all. This script partitions ``resnet50_v1`` (batch 1) and ``resnet50_v1_b32`` for
``tensorcore``, prints why each conv2d was (not) taken, and draws both side by side in
``out/resnet50_batch1_vs_32.png`` (``-o docs/img/resnet50_batch1_vs_32.png`` refreshes
the README's picture).

    python examples/resnet50_batch1_vs_32.py            # the full models
    python examples/resnet50_batch1_vs_32.py --small    # small variants (batch 1 and 8)
"""

from __future__ import annotations

import argparse
import os
from collections import Counter
from pathlib import Path

os.environ.setdefault("TOPHUB_LOCATION", "NONE")

import partition_lab  # noqa: E402  (TOPHUB_LOCATION must be set before TVM loads)
from partition_lab import render, zoo  # noqa: E402

TARGET = "tensorcore"
# out/ (git ignores it): the tracked docs/img pictures change only when asked, with -o.
DEFAULT_OUTPUT = Path(__file__).resolve().parents[1] / "out" / "resnet50_batch1_vs_32.png"


def main() -> None:
    args = parse_args()
    drawings = []
    for model in ("resnet50_v1", "resnet50_v1_b32"):
        mod, params = zoo.load(model, small=args.small)
        batch = zoo.info(model).shapes(args.small)["data"][0]
        result = partition_lab.partition(mod, TARGET, params=params, name=model,
                                         precision=args.precision)
        print(f"--- {model} (batch {batch})\n{result.plan.summary().splitlines()[0]}")
        print(f"  predicted {render.format_time(result.cost.total)} ({result.cost.model})")
        print_conv_reasons(result)
        drawings.append(render.draw(
            result.plan, result.cost,
            title=f"{model}{' (small)' if args.small else ''}, batch {batch}, on {TARGET}"))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    render.write_side_by_side(drawings, args.output)
    print(f"wrote {args.output}")


def print_conv_reasons(result) -> None:
    """How many conv2d went to each device; every distinct reason for those off the Tensor
    Cores, one example of the accepted ones (their reasons differ only by shape)."""
    convs = [d for d in result.plan.decisions if result.graph[d.node].op == "nn.conv2d"]
    per_device = Counter(d.device for d in convs)
    print("  conv2d: " + ", ".join(f"{count} on {device}"
                                   for device, count in per_device.most_common()))
    elsewhere = Counter((d.device, d.reason) for d in convs if d.device != TARGET)
    for (device, reason), count in elsewhere.most_common():
        print(f"  {count:3d} on {device}: {reason}")
    accepted = [d.reason for d in convs if d.device == TARGET]
    if accepted:
        print(f"  e.g. on {TARGET}: {accepted[0]}")
    print()


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="use the zoo's small variants")
    parser.add_argument("--precision", choices=("fp16", "fp32"), default="fp32",
                        help="tensorcore precision; the report ran fp32 (default)")
    parser.add_argument("-o", "--output", type=Path, default=DEFAULT_OUTPUT)
    return parser.parse_args()


if __name__ == "__main__":
    main()
