"""``no_mac``: greedy, then outlined regions that do no multiply-accumulate work fall back.

Modelled on TVM's TensorRT integration (``prune_tensorrt_subgraphs`` with
``remove_no_mac_subgraphs``): a region without conv/dense/matmul is not worth a launch. It
applies to regions outlined for a BYOC compiler; their ops go to their next supporting device.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.graph import OpGraph
from ..core.ops import MAC_OPS
from ..core.plan import PartitionPlan
from ..core.reasons import Reason, ReasonCode
from ..core.support import Support
from ..cost_models.base import CostModel
from .base import Assignment, Strategy, describe_region, greedy_start, make_plan, prune_outlined


@dataclass(frozen=True)
class NoMac(Strategy):
    """Greedy, then drop outlined regions without a conv/dense/matmul op."""

    name = "no_mac"
    summary = "greedy, then outlined regions without conv/dense/matmul fall back (TVM TensorRT pruning)"

    def plan(self, graph: OpGraph, support: Support,
             cost_model: CostModel | None = None) -> PartitionPlan:
        state, regions = greedy_start(graph, support)
        return make_plan(self, state, self.prune(state, regions))

    def prune(self, state: Assignment, regions: list[list[int]]) -> list[list[int]]:
        """Move outlined regions without MAC work to their fallback until none is left."""
        graph = state.graph
        return prune_outlined(
            state, regions, lambda members: not any(graph[n].op in MAC_OPS for n in members),
            lambda index, members: Reason(
                ReasonCode.NO_MAC, f"{describe_region(state, index, members)} does no "
                "multiply-accumulate work (no conv/dense/matmul)", "no-mac",
                state.name(state.device[members[0]])))
