"""What every strategy shares: the protocol, plan building, anchor legality, region wording.

A strategy is a frozen dataclass whose fields are its options (settable from the command line as
``--option key=value``); ``run(graph, verdicts, *, target, cost_model)`` returns a validated-shape
:class:`~partition_lab.plan.PartitionPlan` in which every CPU op carries the reason it is there.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from ..cost_models.base import CostModel
from ..errors import PartitionLabError
from ..graph import OpGraph
from ..plan import CPU, PartitionPlan, Verdict
from ..regions import form_regions


@dataclass(frozen=True)
class Strategy:
    """Base of all strategies: ``name`` and ``summary`` are class constants, fields are options."""

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    needs_cost_model: ClassVar[bool] = False

    def run(self, graph: OpGraph, verdicts: Sequence[Verdict], *, target: str,
            cost_model: CostModel | None = None) -> PartitionPlan:
        """Partition ``graph`` for ``target`` given per-node support ``verdicts``."""
        raise NotImplementedError

    def options(self) -> dict[str, Any]:
        return asdict(self)

    def check_options(self) -> None:
        """Raise a :class:`PartitionLabError` naming the option when a value is out of range."""

    def require_model(self, cost_model: CostModel | None) -> CostModel:
        if cost_model is None:
            raise PartitionLabError(
                f"strategy {self.name!r} needs a cost model (pass cost_model=, e.g. "
                "partition_lab.cost_models.get_cost_model(target))")
        return cost_model


# ---------------------------------------------------------------------------- assignments
@dataclass
class Assignment:
    """A device choice per node while a strategy works: accelerator flags plus CPU reasons."""

    graph: OpGraph
    verdicts: Sequence[Verdict]
    target: str
    on_accel: list[bool]
    reasons: dict[int, str]

    @classmethod
    def supported(cls, graph: OpGraph, verdicts: Sequence[Verdict], target: str) -> Assignment:
        """Every supported op on the accelerator (the greedy start)."""
        check_verdicts(graph, verdicts)
        return cls(graph, verdicts, target, [v.supported for v in verdicts], {})

    def devices(self) -> list[str]:
        return [self.target if a else CPU for a in self.on_accel]

    def regions(self) -> list[list[int]]:
        return form_regions(self.graph, self.devices())

    def move_to_cpu(self, nodes: Iterable[int], reason: str) -> None:
        for n in nodes:
            self.on_accel[n] = False
            self.reasons[n] = reason

    def copy(self) -> Assignment:
        return Assignment(self.graph, self.verdicts, self.target, list(self.on_accel),
                          dict(self.reasons))


def check_verdicts(graph: OpGraph, verdicts: Sequence[Verdict]) -> None:
    if len(verdicts) != len(graph):
        raise PartitionLabError(
            f"got {len(verdicts)} verdicts for a graph of {len(graph)} nodes; need one per node")


def is_anchored(verdicts: Sequence[Verdict]) -> bool:
    """Whether the target only accepts accelerator regions that hold an anchor op."""
    return any(v.anchor for v in verdicts)


def legalize(state: Assignment) -> list[list[int]]:
    """Drop anchorless accelerator regions to the CPU and re-form regions until stable.

    Returns the final regions (as :func:`~partition_lab.regions.form_regions` gives them).
    """
    anchored = is_anchored(state.verdicts)
    while True:
        regions = state.regions()
        if not anchored:
            return regions
        dropped = False
        for members in regions:
            if state.on_accel[members[0]] and not any(state.verdicts[n].anchor for n in members):
                # No region label: this group is never a region of the final plan.
                state.move_to_cpu(members, (
                    f"its group of supported ops holds no {state.target} compute op "
                    f"(only {op_list(state.graph, members)}) to ride along with"))
                dropped = True
        if not dropped:
            return regions


def greedy_start(graph: OpGraph, verdicts: Sequence[Verdict],
                 target: str) -> tuple[Assignment, list[list[int]]]:
    """Every supported op on the accelerator, anchors legalised: greedy's plan, as a state."""
    state = Assignment.supported(graph, verdicts, target)
    return state, legalize(state)


def accel_regions(state: Assignment, regions: Sequence[Sequence[int]]) -> list[tuple[int, list[int]]]:
    """``(index, members)`` of the accelerator regions, index = the region's plan id."""
    return [(i, list(r)) for i, r in enumerate(regions) if state.on_accel[r[0]]]


# ---------------------------------------------------------------------------- wording
def op_list(graph: OpGraph, nodes: Iterable[int], limit: int = 4) -> str:
    """Distinct op names of ``nodes`` in order: ``"nn.batch_norm, nn.relu"``."""
    ops = list(dict.fromkeys(graph[n].op for n in nodes))
    return ", ".join(ops[:limit]) + (f" and {len(ops) - limit} more" if len(ops) > limit else "")


def describe_region(graph: OpGraph, index: int, nodes: Sequence[int]) -> str:
    """``"region accel2 (2 ops: nn.batch_norm, nn.relu)"``."""
    count = len(nodes)
    return f"region accel{index} ({count} op{'s' if count != 1 else ''}: {op_list(graph, nodes)})"


def ms(seconds: float) -> str:
    """Seconds as a short millisecond figure: ``0.21 ms``."""
    value = seconds * 1e3
    if value == 0:
        return "0 ms"
    if abs(value) >= 100:
        return f"{value:.0f} ms"
    if abs(value) >= 0.01:
        return f"{value:.3g} ms"
    return f"{value:.2g} ms"


# ---------------------------------------------------------------------------- plans
def make_plan(strategy: Strategy, state: Assignment, regions: Sequence[Sequence[int]],
              notes: Iterable[str] = ()) -> PartitionPlan:
    """The plan for ``state`` with its already-formed ``regions`` (what ``from_assignment`` does).

    ``regions`` must be ``form_regions`` of the state's devices; building the plan from them
    saves forming them again on large graphs.
    """
    return PartitionPlan.from_regions(
        state.graph, state.target, strategy.name, state.devices(), regions, state.verdicts,
        state.reasons, _plain_options(strategy.options()), notes)


def _plain_options(options: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in options.items() if k != "require_anchor"}
