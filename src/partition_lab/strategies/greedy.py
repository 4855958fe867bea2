"""``greedy``: every op on its preferred device, in maximal cycle-free regions.

The regions are TVM's ``AnnotateTarget -> MergeCompilerRegions -> PartitionGraph`` regions for
the same support predicate (see :mod:`partition_lab.core.regions`), formed per device. On anchored
devices (Tensor Core) a region without an anchor op goes to the next device that supports its
ops (the GPU's CUDA cores on ``tensorcore``, the host elsewhere) and the regions are formed again.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.graph import OpGraph
from ..core.plan import PartitionPlan
from ..core.support import Support
from ..cost_models.base import CostModel
from .base import Strategy, greedy_start, make_plan


@dataclass(frozen=True)
class Greedy(Strategy):
    """Each op on its preferred supporting device; maximal regions (TVM MergeCompilerRegions)."""

    name = "greedy"
    summary = "each op on its preferred supporting device, maximal cycle-free regions (TVM's merge)"

    def plan(self, graph: OpGraph, support: Support,
             cost_model: CostModel | None = None) -> PartitionPlan:
        state, regions = greedy_start(graph, support)
        return make_plan(self, state, regions)
