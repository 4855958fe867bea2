"""SimplePose-ResNet152 on neuron@2020: the greedy split, the report's manual fix, and ours.

Field report 001: Deconvolution was unsupported in the early-2020 neuron-cc, so the graph split
into 4 accelerator subgraphs, 2 of which held only BatchNorm+ReLU. Forcing those onto the CPU by
hand with ``excl_node_names`` (2 subgraphs left) took the model from 38.7 ms to 32.0 ms.

This script partitions the model three ways and prints the predicted time of each:
``greedy`` (what neuron-cc did), the report's hand-made exclusion, and the ``cost`` strategy,
which finds the exclusion by itself. It draws greedy and cost side by side in
``out/simple_pose_greedy_vs_cost.png`` (``-o docs/img/simple_pose_greedy_vs_cost.png`` refreshes
the README's picture).

    python examples/simple_pose_greedy_vs_cost.py            # the full model
    python examples/simple_pose_greedy_vs_cost.py --small    # the zoo's small variant
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

os.environ.setdefault("TOPHUB_LOCATION", "NONE")

import partition_lab  # noqa: E402  (TOPHUB_LOCATION must be set before TVM loads)
from partition_lab import render, zoo  # noqa: E402

MODEL, TARGET = "simple_pose_resnet152_v1b", "neuron@2020"
# out/ (git ignores it): the tracked docs/img pictures change only when asked, with -o.
DEFAULT_OUTPUT = Path(__file__).resolve().parents[1] / "out" / "simple_pose_greedy_vs_cost.png"


def main() -> None:
    args = parse_args()
    mod, params = zoo.load(MODEL, small=args.small)
    greedy = partition_lab.partition(mod, TARGET, params=params, strategy="greedy", name=MODEL)
    by_hand = partition_lab.partition(mod, TARGET, params=params, strategy="greedy", name=MODEL,
                                      excl_node_names=batchnorm_relu_only(greedy))
    cost = partition_lab.partition(mod, TARGET, params=params, strategy="cost", name=MODEL)
    for label, result in (("greedy (neuron-cc)", greedy), ("by hand (the report)", by_hand),
                          ("cost strategy", cost)):
        print(f"--- {label}\n{result.summary()}\n")
    print("predicted:", ", ".join(
        f"{name} {render.format_time(r.cost.total)}"
        for name, r in (("greedy", greedy), ("by hand", by_hand), ("cost", cost))))
    size = " (small)" if args.small else ""
    args.output.parent.mkdir(parents=True, exist_ok=True)
    render.write_side_by_side([
        render.draw(greedy.plan, greedy.cost, title=f"before: greedy{size}, as neuron-cc split it"),
        render.draw(cost.plan, cost.cost, title=f"after: the cost strategy{size}"),
    ], args.output)
    print(f"wrote {args.output}")


def batchnorm_relu_only(result) -> list[str]:
    """Source names of the ops in accelerator regions that hold only BatchNorm and ReLU: the
    nodes the report's author passed to ``excl_node_names``."""
    names = []
    for region in result.plan.accelerator_regions:
        ops = {result.graph[n].op for n in region.nodes}
        if ops <= {"nn.batch_norm", "nn.relu"}:
            names.extend(result.graph[n].source_name for n in region.nodes)
    return names


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="use the zoo's small variant")
    parser.add_argument("-o", "--output", type=Path, default=DEFAULT_OUTPUT)
    return parser.parse_args()


if __name__ == "__main__":
    main()
