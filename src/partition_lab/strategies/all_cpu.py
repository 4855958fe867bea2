"""``all_cpu``: the baseline of offloading, every op on the host CPU."""

from __future__ import annotations

from dataclasses import dataclass

from ..core.graph import OpGraph
from ..core.plan import PartitionPlan
from ..core.reasons import Reason, ReasonCode
from ..core.support import Support
from ..cost_models.base import CostModel
from .base import Assignment, Strategy, check_support, make_plan


@dataclass(frozen=True)
class AllCpu(Strategy):
    """Every op on the host CPU (a baseline)."""

    name = "all_cpu"
    summary = "every op on the host CPU (baseline)"

    def plan(self, graph: OpGraph, support: Support,
             cost_model: CostModel | None = None) -> PartitionPlan:
        check_support(graph, support)
        state = Assignment.on_host(graph, support, Reason(
            ReasonCode.BASELINE, "all_cpu: every op runs on the CPU (baseline)", "all_cpu"))
        return make_plan(self, state, state.regions())
