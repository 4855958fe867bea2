"""``min_size``: greedy, then regions under ``min_ops`` ops go back to the CPU.

Modelled on TF-TRT's ``minimum_segment_size``, ONNX Runtime's ``trt_min_subgraph_size`` and
Torch-TensorRT's ``min_block_size``: the decision counts ops and ignores what they cost.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..cost_models.base import CostModel
from ..errors import PartitionLabError
from ..graph import OpGraph
from ..plan import PartitionPlan, Verdict
from .base import (
    Assignment,
    Strategy,
    accel_regions,
    describe_region,
    greedy_start,
    legalize,
    make_plan,
)


@dataclass(frozen=True)
class MinSize(Strategy):
    """Greedy, then drop accelerator regions with fewer than ``min_ops`` ops."""

    name = "min_size"
    summary = "greedy, then regions under min_ops ops stay on the CPU (TF-TRT minimum_segment_size)"
    min_ops: int = field(default=3, metadata={"help": "smallest accelerator region kept, in ops"})

    def check_options(self) -> None:
        if self.min_ops < 1:
            raise PartitionLabError(f"strategy 'min_size': option min_ops must be >= 1, "
                                    f"got {self.min_ops}")

    def run(self, graph: OpGraph, verdicts: Sequence[Verdict], *, target: str,
            cost_model: CostModel | None = None) -> PartitionPlan:
        state, regions = greedy_start(graph, verdicts, target)
        return make_plan(self, state, self.prune(state, regions))

    def prune(self, state: Assignment, regions: list[list[int]]) -> list[list[int]]:
        """Move small accelerator regions of ``state`` to the CPU until none is left."""
        while True:
            small = [(i, r) for i, r in accel_regions(state, regions) if len(r) < self.min_ops]
            if not small:
                return regions
            for index, members in small:
                state.move_to_cpu(members, (
                    f"{describe_region(state.graph, index, members)} is smaller than "
                    f"min_ops={self.min_ops}"))
            regions = legalize(state)
