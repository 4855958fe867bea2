"""``all_accel``: every op on the primary accelerator, legal only when it supports every op."""

from __future__ import annotations

from dataclasses import dataclass

from ..core.graph import OpGraph
from ..core.plan import PartitionPlan
from ..core.support import Support
from ..cost_models.base import CostModel
from ..errors import PartitionLabError
from .base import Assignment, Strategy, check_support, make_plan, op_list


class NotApplicableError(PartitionLabError):
    """A strategy cannot produce a legal plan for this graph and target (e.g. ``all_accel``)."""


@dataclass(frozen=True)
class AllAccel(Strategy):
    """Every op on the platform's primary accelerator (a bound); raises where one is rejected."""

    name = "all_accel"
    summary = "every op on the primary accelerator (bound; only when it supports every op)"

    def plan(self, graph: OpGraph, support: Support,
             cost_model: CostModel | None = None) -> PartitionPlan:
        check_support(graph, support)
        primary = support.platform.primary
        index = support.platform.index(primary.name)
        verdicts = support.of(index)
        blocking = [n for n, v in enumerate(verdicts) if not v.supported]
        if blocking:
            names = ", ".join(graph[n].name for n in blocking[:5])
            more = f" and {len(blocking) - 5} more" if len(blocking) > 5 else ""
            raise NotApplicableError(
                f"all_accel is not applicable: {primary.name} does not support {len(blocking)} "
                f"op(s) ({op_list(graph, blocking)}): {names}{more}; first reason: "
                f"{verdicts[blocking[0]].reason}")
        state = Assignment(graph, support, [index] * len(graph), {})
        regions = state.regions()
        if support.anchored(index):
            for members in regions:
                if not any(verdicts[n].anchor for n in members):
                    raise NotApplicableError(
                        f"all_accel is not applicable: a region of {op_list(graph, members)} "
                        f"holds no {primary.name} compute op to ride along with")
        return make_plan(self, state, regions)
