"""``no_mac``: greedy, then regions that do no multiply-accumulate work go back to the CPU.

Modelled on TVM's TensorRT integration (``prune_tensorrt_subgraphs`` with
``remove_no_mac_subgraphs``): a region without conv/dense/matmul is not worth a launch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..cost_models.base import CostModel
from ..graph import OpGraph
from ..plan import PartitionPlan, Verdict
from ..synthetic import MAC_OPS
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
class NoMac(Strategy):
    """Greedy, then drop accelerator regions without a conv/dense/matmul op."""

    name = "no_mac"
    summary = "greedy, then regions without conv/dense/matmul stay on the CPU (TVM TensorRT pruning)"

    def run(self, graph: OpGraph, verdicts: Sequence[Verdict], *, target: str,
            cost_model: CostModel | None = None) -> PartitionPlan:
        state, regions = greedy_start(graph, verdicts, target)
        return make_plan(self, state, self.prune(state, regions))

    def prune(self, state: Assignment, regions: list[list[int]]) -> list[list[int]]:
        """Move accelerator regions without MAC work to the CPU until none is left."""
        graph = state.graph
        while True:
            idle = [(i, r) for i, r in accel_regions(state, regions)
                    if not any(graph[n].op in MAC_OPS for n in r)]
            if not idle:
                return regions
            for index, members in idle:
                state.move_to_cpu(members, (
                    f"{describe_region(graph, index, members)} does no multiply-accumulate "
                    "work (no conv/dense/matmul)"))
            regions = legalize(state)
