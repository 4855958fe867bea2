"""``greedy``: every supported op on the accelerator, in maximal cycle-free regions.

The regions are TVM's ``AnnotateTarget -> MergeCompilerRegions -> PartitionGraph`` regions for
the same support predicate (see :mod:`partition_lab.regions`). On anchored targets (Tensor Core)
a region without an anchor op goes back to the CPU and the regions are formed again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..cost_models.base import CostModel
from ..graph import OpGraph
from ..plan import PartitionPlan, Verdict
from .base import Strategy, greedy_start, make_plan


@dataclass(frozen=True)
class Greedy(Strategy):
    """All supported ops on the accelerator; maximal regions (TVM MergeCompilerRegions)."""

    name = "greedy"
    summary = "every supported op on the accelerator, maximal cycle-free regions (TVM's merge)"

    def run(self, graph: OpGraph, verdicts: Sequence[Verdict], *, target: str,
            cost_model: CostModel | None = None) -> PartitionPlan:
        state, regions = greedy_start(graph, verdicts, target)
        return make_plan(self, state, regions)
