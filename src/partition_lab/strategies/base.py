"""What every strategy shares: the protocol, plan building, anchor legality, region wording.

A strategy is a frozen dataclass whose fields are its options (settable from the command line as
``--option key=value``); ``run(graph, support, *, cost_model)`` returns a validated-shape
:class:`~partition_lab.core.plan.PartitionPlan` in which every op off its preferred device carries the
reason it is there. ``support`` is a :class:`~partition_lab.core.support.Support` (every (op,
device) verdict of a platform).

An :class:`Assignment` is a device index per node (indices into the platform's devices, most
preferred first); when a strategy takes an op off a device, it goes to the op's *fallback*: the
next device in preference order that supports it (Tensor Cores -> CUDA cores -> host).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from ..core.graph import OpGraph
from ..core.plan import PartitionPlan
from ..core.platform import Platform
from ..core.reasons import Reason, ReasonCode
from ..core.regions import form_regions
from ..core.support import Support
from ..cost_models.base import CostModel
from ..errors import PartitionLabError


@dataclass(frozen=True)
class Strategy:
    """Base of all strategies: ``name`` and ``summary`` are class constants, fields are options."""

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    needs_cost_model: ClassVar[bool] = False

    def run(self, graph: OpGraph, support: Support, *,
            cost_model: CostModel | None = None) -> PartitionPlan:
        """Partition ``graph`` given per-(op, device) ``support`` (see the module docstring)."""
        self.check_support(support)
        return self.plan(graph, support, cost_model)

    def check_support(self, support: object) -> None:
        if not isinstance(support, Support):
            raise PartitionLabError(f"strategy {self.name!r} needs a Support (every (op, device) "
                                    f"verdict of a platform), not {type(support).__name__}")

    def plan(self, graph: OpGraph, support: Support,
             cost_model: CostModel | None) -> PartitionPlan:
        raise NotImplementedError

    def options(self) -> dict[str, Any]:
        return asdict(self)

    def check_options(self) -> None:
        """Raise a :class:`PartitionLabError` naming the option when a value is out of range."""

    def require_model(self, cost_model: CostModel | None) -> CostModel:
        if cost_model is None:
            raise PartitionLabError(
                f"strategy {self.name!r} needs a cost model (pass cost_model=, e.g. "
                "partition_lab.cost_models.get_cost_model(platform))")
        return cost_model


# ---------------------------------------------------------------------------- assignments
@dataclass
class Assignment:
    """A device index per node while a strategy works, plus the reasons of moved nodes."""

    graph: OpGraph
    support: Support
    device: list[int]
    reasons: dict[int, Reason]

    @classmethod
    def preferred(cls, graph: OpGraph, support: Support) -> Assignment:
        """Every op on its most preferred supporting device (the greedy start)."""
        check_support(graph, support)
        return cls(graph, support, [support.preferred(n) for n in range(len(graph))], {})

    @classmethod
    def on_host(cls, graph: OpGraph, support: Support, reason: Reason) -> Assignment:
        """Every op on the host; ``reason`` for those that another device supports."""
        host = support.platform.host_index
        reasons = {n: reason for n in range(len(graph)) if support.preferred(n) != host}
        return cls(graph, support, [host] * len(graph), reasons)

    @property
    def platform(self) -> Platform:
        return self.support.platform

    @property
    def target(self) -> str:
        return self.platform.name

    @property
    def host(self) -> int:
        return self.platform.host_index

    def name(self, device: int) -> str:
        return self.platform.devices[device].name

    def devices(self) -> list[str]:
        names = self.platform.names
        return [names[d] for d in self.device]

    def regions(self) -> list[list[int]]:
        return form_regions(self.graph, self.devices(), default_device=self.platform.main.name)

    def move(self, nodes: Iterable[int], device: int, reason: Reason | None = None) -> None:
        """Put ``nodes`` on ``device``; a node back on its preferred device loses its reason."""
        for n in nodes:
            self.device[n] = device
            if device == self.support.preferred(n):
                self.reasons.pop(n, None)
            elif reason:
                self.reasons[n] = reason

    def fall_back(self, nodes: Iterable[int], reason: Reason) -> None:
        """Each node to its next supporting device after its current one."""
        for n in nodes:
            self.device[n] = self.support.fallback(n, self.device[n])
            self.reasons[n] = reason

    def copy(self) -> Assignment:
        return Assignment(self.graph, self.support, list(self.device), dict(self.reasons))


def check_support(graph: OpGraph, support: Support) -> None:
    if len(support) != len(graph):
        raise PartitionLabError(
            f"got {len(support)} verdicts for a graph of {len(graph)} nodes; need one per node")


def legalize(state: Assignment) -> list[list[int]]:
    """Move anchorless regions of anchored devices to their fallback and re-form until stable.

    Returns the final regions (as :func:`~partition_lab.core.regions.form_regions` gives them).
    """
    support = state.support
    anchored = [support.anchored(d) for d in range(len(state.platform.devices))]
    while True:
        regions = state.regions()
        if not any(anchored):
            return regions
        dropped = False
        for members in regions:
            device = state.device[members[0]]
            if anchored[device] and not any(support.verdict(n, device).anchor for n in members):
                # No region label: this group is never a region of the final plan.
                state.fall_back(members, Reason(
                    ReasonCode.NO_ANCHOR, f"its group of supported ops holds no {state.name(device)} "
                    f"compute op (only {op_list(state.graph, members)}) to ride along with",
                    "anchor", state.name(device)))
                dropped = True
        if not dropped:
            return regions


def greedy_start(graph: OpGraph, support: Support) -> tuple[Assignment, list[list[int]]]:
    """Every op on its preferred device, anchors legalised: greedy's plan, as a state."""
    state = Assignment.preferred(graph, support)
    return state, legalize(state)


def offload_regions(state: Assignment, regions: Sequence[Sequence[int]],
                    roles: Iterable[str] = ("byoc", "main")) -> list[tuple[int, list[int]]]:
    """``(index, members)`` of the regions on devices of ``roles`` (index = the plan's id)."""
    wanted = set(roles)
    devices = state.platform.devices
    return [(i, list(r)) for i, r in enumerate(regions) if devices[state.device[r[0]]].role in wanted]


def prune_outlined(state: Assignment, regions: list[list[int]],
                   drop: Callable[[list[int]], bool],
                   reason: Callable[[int, list[int]], Reason]) -> list[list[int]]:
    """Move the outlined (BYOC) regions that ``drop`` selects to their fallback device, with
    ``reason(index, members)``, and re-form, until no region is dropped (min_size, no_mac)."""
    while True:
        dropped = [(i, r) for i, r in offload_regions(state, regions, ("byoc",)) if drop(r)]
        if not dropped:
            return regions
        for index, members in dropped:
            state.fall_back(members, reason(index, members))
        regions = legalize(state)


# ---------------------------------------------------------------------------- wording
def op_list(graph: OpGraph, nodes: Iterable[int], limit: int = 4) -> str:
    """Distinct op names of ``nodes`` in order: ``"nn.batch_norm, nn.relu"``."""
    ops = list(dict.fromkeys(graph[n].op for n in nodes))
    return ", ".join(ops[:limit]) + (f" and {len(ops) - limit} more" if len(ops) > limit else "")


def describe_region(state: Assignment, index: int, nodes: Sequence[int]) -> str:
    """``"its region of 2 ops on neuron@2020 (nn.batch_norm, nn.relu)"``.

    No label: region ids are those of the plan the strategy started from, which is not the
    plan a user sees, so a label would name a region that is not drawn.
    """
    count = len(nodes)
    device = state.name(state.device[nodes[0]])
    return (f"its region of {count} op{'s' if count != 1 else ''} on {device} "
            f"({op_list(state.graph, nodes)})")


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
    """The plan for ``state`` with its already-formed ``regions`` (``state.regions()``).

    A pattern unit the strategy split over two devices is put whole on its output's device
    first (and the regions formed again), with a note: a unit never straddles two devices.
    """
    notes = list(notes)
    joined = keep_units_whole(state)
    if joined:
        regions = legalize(state)
        notes.append(f"{strategy.name}: put {joined} pattern unit(s) it had split back on one "
                     "device each (the device of the unit's output)")
    return PartitionPlan.from_devices(
        state.graph, state.support, strategy.name, state.devices(), state.reasons,
        _plain_options(strategy.options()), notes, groups=regions)


def keep_units_whole(state: Assignment) -> int:
    """Move every unit of ``state.support.units`` that straddles devices onto the device of
    its output node (each member supports it: a unit's members share one verdict per device).
    Returns how many units were moved."""
    moved = 0
    for unit in state.support.units:
        device = state.device[unit.output]
        split = [n for n in unit.nodes if state.device[n] != device]
        if split and all(device in state.support.allowed(n) for n in split):
            reason = state.reasons.get(unit.output)
            state.move(split, device, reason)
            moved += 1
    return moved


def _plain_options(options: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in options.items() if k != "require_anchor"}
