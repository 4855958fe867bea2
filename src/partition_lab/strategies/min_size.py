"""``min_size``: greedy, then outlined regions under ``min_ops`` ops fall back.

Modelled on TF-TRT's ``minimum_segment_size``, ONNX Runtime's ``trt_min_subgraph_size`` and
Torch-TensorRT's ``min_block_size``: the decision counts ops and ignores what they cost. It
applies to regions that are outlined for a BYOC compiler (as those engines are); their ops go to
their next supporting device (CUDA cores on ``tensorcore``, the host on ``neuron``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..core.graph import OpGraph
from ..core.plan import PartitionPlan
from ..core.reasons import Reason, ReasonCode
from ..core.support import Support
from ..cost_models.base import CostModel
from ..errors import PartitionLabError
from .base import Assignment, Strategy, describe_region, greedy_start, make_plan, prune_outlined


@dataclass(frozen=True)
class MinSize(Strategy):
    """Greedy, then drop outlined regions with fewer than ``min_ops`` ops."""

    name = "min_size"
    summary = "greedy, then outlined regions under min_ops ops fall back (TF-TRT minimum_segment_size)"
    min_ops: int = field(default=3, metadata={"help": "smallest outlined region kept, in ops"})

    def check_options(self) -> None:
        if self.min_ops < 1:
            raise PartitionLabError(f"strategy 'min_size': option min_ops must be >= 1, "
                                    f"got {self.min_ops}")

    def plan(self, graph: OpGraph, support: Support,
             cost_model: CostModel | None = None) -> PartitionPlan:
        state, regions = greedy_start(graph, support)
        return make_plan(self, state, self.prune(state, regions))

    def prune(self, state: Assignment, regions: list[list[int]]) -> list[list[int]]:
        """Move small outlined regions of ``state`` to their fallback until none is left."""
        return prune_outlined(state, regions, lambda members: len(members) < self.min_ops,
                              lambda index, members: self._reason(state, index, members))

    def _reason(self, state: Assignment, index: int, members: list[int]) -> Reason:
        return Reason(ReasonCode.MIN_SIZE, f"{describe_region(state, index, members)} is "
                      f"smaller than min_ops={self.min_ops}", f"min_ops={self.min_ops}",
                      state.name(state.device[members[0]]))
