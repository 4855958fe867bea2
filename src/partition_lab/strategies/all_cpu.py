"""``all_cpu``: the lower bound of offloading, every op on the host CPU."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..cost_models.base import CostModel
from ..graph import OpGraph
from ..plan import PartitionPlan, Verdict
from .base import Assignment, Strategy, make_plan


@dataclass(frozen=True)
class AllCpu(Strategy):
    """Every op on the CPU (a baseline)."""

    name = "all_cpu"
    summary = "every op on the CPU (baseline)"

    def run(self, graph: OpGraph, verdicts: Sequence[Verdict], *, target: str,
            cost_model: CostModel | None = None) -> PartitionPlan:
        state = Assignment.supported(graph, verdicts, target)
        supported = [n for n, on in enumerate(state.on_accel) if on]
        state.move_to_cpu(supported, "all_cpu: every op runs on the CPU (baseline)")
        return make_plan(self, state, state.regions())
