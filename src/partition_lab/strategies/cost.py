"""``cost``: start from greedy, then exclude, merge and shift regions while the model predicts a gain.

The search is :func:`~.local_search.improve`: whole-region exclusions (what the field report's
engineer did by hand with ``excl_node_names``), absorbing CPU islands of supported ops into the
accelerator, and single boundary-op moves, each kept only if the exact predicted total drops.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..core.graph import OpGraph
from ..core.plan import PartitionPlan
from ..core.reasons import Reason, ReasonCode
from ..core.support import Support
from ..cost_models.base import CostModel
from ..errors import PartitionLabError
from .base import Assignment, Strategy, greedy_start, make_plan, ms
from .costing import CostTables
from .local_search import improve
from .robust import RobustChoice, RobustOptions, decide


@dataclass(frozen=True)
class CostBased(RobustOptions, Strategy):
    """Greedy regions, then cost-model-driven exclusions, merges and boundary moves."""

    name = "cost"
    summary = "greedy, then exclude/merge regions and move boundary ops while the model predicts a gain"
    needs_cost_model = True
    max_rounds: int = field(default=50, metadata={
        "help": "most search rounds (each re-forms the regions once)"})
    tolerance: float = field(default=1e-3, metadata={
        "help": "stop once a round saves less than this fraction of the predicted total"})

    def check_options(self) -> None:
        if self.max_rounds < 0:
            raise PartitionLabError(f"strategy 'cost': option max_rounds must be >= 0, "
                                    f"got {self.max_rounds}")
        if not 0 <= self.tolerance < 1:
            raise PartitionLabError(f"strategy 'cost': option tolerance must be in [0, 1), "
                                    f"got {self.tolerance}")
        self.check_robust_options("cost")

    def plan(self, graph: OpGraph, support: Support,
             cost_model: CostModel | None = None) -> PartitionPlan:
        return self.plan_with_choice(graph, support, cost_model)[0]

    def plan_with_choice(self, graph: OpGraph, support: Support, cost_model: CostModel | None
                         ) -> tuple[PartitionPlan, RobustChoice | None]:
        model = self.require_model(cost_model)
        tables = CostTables(graph, model, support.platform, support.units)
        state, regions = greedy_start(graph, support)
        greedy, greedy_regions = state.copy(), regions
        result = improve(state, regions, tables, max_rounds=self.max_rounds,
                         tolerance=self.tolerance)
        # What the search found, said as a candidate: the robust rule below decides whether
        # the plan is taken (its note says so), so nothing here may read as taken already.
        if result.accepted:
            note = (f"cost: the search's best plan ({result.accepted} move(s) in "
                    f"{result.rounds} round(s)) predicts {ms(result.total)} against greedy's "
                    f"{ms(result.start_total)} under {model.name}")
        else:
            note = (f"cost: no move lowers greedy's predicted {ms(result.start_total)} under "
                    f"{model.name} ({result.rounds} round(s))")
        regions, total = result.regions, result.total
        # The moves are local: putting everything on one device at once can still win where
        # each exclusion alone does not (copies between many small regions).
        for single in _single_device_plans(graph, support):
            single_regions = single.regions()
            single_total = tables.total(single.device, single_regions)
            if single_total < total:
                where = single.name(single.device[0])
                reason = Reason(ReasonCode.SINGLE_DEVICE, f"every op on {where}: predicted "
                                f"{ms(single_total)} vs {ms(total)} for the best plan over "
                                "several devices", "cost", where,
                                {"single_s": single_total, "several_s": total})
                for n in range(len(graph)):
                    if single.device[n] != state.device[n]:
                        state.move((n,), single.device[n], reason)
                regions, total = single_regions, single_total
                note += f"; every op on {where} predicts {ms(single_total)}, the better candidate"
        notes = [note]
        choice = None
        if state.device != greedy.device:
            choice = decide(tables, greedy.device, greedy_regions, result.start_total,
                            state.device, regions, total, z=self.confidence_z,
                            min_gain=self.min_gain)
            if tables.uncertain or self.min_gain:
                notes.append(choice.note("cost"))
            if not choice.leave:
                state, regions = greedy, greedy_regions
        return make_plan(self, state, regions, notes), choice


def _single_device_plans(graph: OpGraph, support: Support) -> list[Assignment]:
    """Every op on one device, for each device that supports every op (the host always does)."""
    out = []
    for index in range(len(support.platform.devices)):
        if all(v.supported for v in support.of(index)) and not support.anchored(index):
            out.append(Assignment(graph, support, [index] * len(graph), {}))
    return out
