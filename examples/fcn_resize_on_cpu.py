"""FCN-ResNet101 (ADE20K) on Inferentia: the two resize ops stay on the CPU, and we say why.

Field report 001 measured 227.8 ms for this model on an Inf1 instance, with the two
``_contrib_BilinearResize2D`` ops left on the CPU behind the accelerator subgraph, and 13.0 ms
with the resize taken out of the model. This script partitions the same model for ``neuron``,
prints where each resize went and why, the predicted time of the CPU island and of the copies
in front of it, and draws the partition to ``out/fcn_resize_on_cpu.png``
(``-o docs/img/fcn_resize_on_cpu.png`` refreshes the README's picture).

    python examples/fcn_resize_on_cpu.py            # the full model (about a minute here)
    python examples/fcn_resize_on_cpu.py --small    # the zoo's small variant (seconds)
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

os.environ.setdefault("TOPHUB_LOCATION", "NONE")

import partition_lab  # noqa: E402  (TOPHUB_LOCATION must be set before TVM loads)
from partition_lab import render, zoo  # noqa: E402

MODEL, TARGET = "fcn_resnet101_ade", "neuron"
# out/ (git ignores it): the tracked docs/img pictures change only when asked, with -o.
DEFAULT_OUTPUT = Path(__file__).resolve().parents[1] / "out" / "fcn_resize_on_cpu.png"


def main() -> None:
    args = parse_args()
    mod, params = zoo.load(MODEL, small=args.small)
    result = partition_lab.partition(mod, TARGET, params=params, name=MODEL)
    print(result.summary())
    report_resizes(result)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    render.write(result.plan, args.output, result.cost,
                 title=f"{MODEL}{' (small)' if args.small else ''} on {TARGET}: "
                       "the resize ops stay on the CPU")
    print(f"wrote {args.output}")


def report_resizes(result) -> None:
    """Where each resize went, why, what it is predicted to cost, and the copies around it."""
    plan, cost = result.plan, result.cost
    resizes = [node for node in result.graph if node.op == "image.resize2d"]
    print(f"\n{len(resizes)} resize op(s):")
    for node in resizes:
        decision = plan.decisions[node.id]
        print(f"  {node.source_name or node.name}: on {decision.device}, "
              f"predicted {render.format_time(cost.node_times[node.id])}\n"
              f"    why: {decision.reason}")
    ids = {node.id for node in resizes}
    feeding = [cut for cut in cost.cuts if ids & set(cut.consumers)]
    leaving = [cut for cut in cost.cuts if cut.producer in ids]
    for title, cuts in (("copies into the resizes", feeding), ("copies out of them", leaving)):
        print(f"{title}:" if cuts else f"{title}: none")
        for cut in cuts:
            print(f"  {cut.tensor} {cut.src}->{cut.dst} {cut.dtype}{list(cut.shape)} "
                  f"{render.format_bytes(cut.nbytes)}: {render.format_time(cut.time)}")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="use the zoo's small variant")
    parser.add_argument("-o", "--output", type=Path, default=DEFAULT_OUTPUT)
    return parser.parse_args()


if __name__ == "__main__":
    main()
