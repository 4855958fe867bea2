"""``cost``: start from greedy, then exclude, merge and shift regions while the model predicts a gain.

The search is :func:`~.local_search.improve`: whole-region exclusions (what the field report's
engineer did by hand with ``excl_node_names``), absorbing CPU islands of supported ops into the
accelerator, and single boundary-op moves, each kept only if the exact predicted total drops.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..cost_models.base import CostModel
from ..errors import PartitionLabError
from ..graph import OpGraph
from ..plan import CPU, PartitionPlan, Verdict
from ..regions import form_regions
from .base import Strategy, greedy_start, make_plan, ms
from .costing import CostTables
from .local_search import improve


@dataclass(frozen=True)
class CostBased(Strategy):
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

    def run(self, graph: OpGraph, verdicts: Sequence[Verdict], *, target: str,
            cost_model: CostModel | None = None) -> PartitionPlan:
        model = self.require_model(cost_model)
        tables = CostTables(graph, model)
        state, regions = greedy_start(graph, verdicts, target)
        result = improve(state, regions, tables, max_rounds=self.max_rounds,
                         tolerance=self.tolerance)
        note = (f"cost: {result.accepted} move(s) kept in {result.rounds} round(s); predicted "
                f"{ms(result.start_total)} (greedy) -> {ms(result.total)} under {model.name}")
        regions, total = result.regions, result.total
        # The moves are local: excluding every region at once can still win where each
        # exclusion alone does not (copies between many small regions).
        on_cpu = [False] * len(graph)
        cpu_total = tables.compute(on_cpu) + tables.overhead_cpu  # at least one CPU island
        if cpu_total < total:
            cpu_regions = form_regions(graph, [CPU] * len(graph))
            cpu_total = tables.total(on_cpu, cpu_regions)
        if cpu_total < total:
            reason = (f"all accelerator regions excluded: predicted {ms(cpu_total)} with every "
                      f"op on the CPU vs {ms(total)} for the best plan with accelerator regions")
            state.move_to_cpu([n for n, on in enumerate(state.on_accel) if on], reason)
            regions = cpu_regions
            note += f"; excluding every region predicts {ms(cpu_total)}, taken"
        return make_plan(self, state, regions, [note])
