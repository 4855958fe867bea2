"""``all_accel``: every op on the accelerator, legal only when the target supports every op."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..cost_models.base import CostModel
from ..errors import PartitionLabError
from ..graph import OpGraph
from ..plan import PartitionPlan, Verdict
from .base import Assignment, Strategy, is_anchored, make_plan, op_list


class NotApplicableError(PartitionLabError):
    """A strategy cannot produce a legal plan for this graph and target (e.g. ``all_accel``)."""


@dataclass(frozen=True)
class AllAccel(Strategy):
    """Every op on the accelerator (a bound); raises when some op is not supported."""

    name = "all_accel"
    summary = "every op on the accelerator (bound; only when the target supports every op)"

    def run(self, graph: OpGraph, verdicts: Sequence[Verdict], *, target: str,
            cost_model: CostModel | None = None) -> PartitionPlan:
        state = Assignment.supported(graph, verdicts, target)
        blocking = [n for n, v in enumerate(verdicts) if not v.supported]
        if blocking:
            names = ", ".join(graph[n].name for n in blocking[:5])
            more = f" and {len(blocking) - 5} more" if len(blocking) > 5 else ""
            raise NotApplicableError(
                f"all_accel is not applicable: {target} does not support {len(blocking)} op(s) "
                f"({op_list(graph, blocking)}): {names}{more}; first reason: "
                f"{verdicts[blocking[0]].reason}")
        regions = state.regions()
        if is_anchored(verdicts):
            for members in regions:
                if not any(verdicts[n].anchor for n in members):
                    raise NotApplicableError(
                        f"all_accel is not applicable: a region of {op_list(graph, members)} "
                        f"holds no {target} compute op to ride along with")
        return make_plan(self, state, regions)
