"""The CostModel protocol and the generic evaluation of a plan under a cost model.

A cost model answers three questions about devices of a platform, named as in the plan
(``"cpu"`` is the host), each in seconds:

* ``op_time(node, device)``: one op on that device;
* ``transfer_time(nbytes, src, dst)``: one tensor made available on ``dst``'s domain (memory
  space, precision) from ``src``'s: a copy, a cast, or both; zero within one domain;
* ``region_overhead(device)``: the fixed cost of invoking one region there (launch, runtime call).

:func:`evaluate` turns those into an explained total for a plan: time per region, per cut and
overall. A tensor that leaves its domain is paid once per destination domain, however many
consumers it has there; graph inputs start on the host and graph outputs end there.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..core.graph import OpGraph, OpNode
from ..core.patterns import Unit, composite_node
from ..core.platform import Platform
from ..errors import CostModelError

if TYPE_CHECKING:
    from ..core.plan import PartitionPlan


@runtime_checkable
class CostModel(Protocol):
    """Predicts op, transfer and invocation times per device name. Must be deterministic."""

    name: str

    def op_time(self, node: OpNode, device: str) -> float: ...

    def transfer_time(self, nbytes: float, src: str, dst: str) -> float: ...

    def region_overhead(self, device: str) -> float: ...


@dataclass(frozen=True)
class RegionCost:
    region: int
    label: str
    device: str
    ops: int
    compute: float
    overhead: float

    @property
    def total(self) -> float:
        return self.compute + self.overhead


@dataclass(frozen=True)
class CutCost:
    """One tensor copied between devices."""

    tensor: str
    producer: int | None
    consumers: tuple[int, ...]
    src: str
    dst: str
    shape: tuple[int, ...]
    dtype: str
    nbytes: float
    time: float


@dataclass(frozen=True)
class CostBreakdown:
    model: str
    regions: tuple[RegionCost, ...]
    cuts: tuple[CutCost, ...]
    node_times: tuple[float, ...]

    @property
    def compute_cpu(self) -> float:
        return sum(r.compute for r in self.regions if r.device == "cpu")

    @property
    def compute_accel(self) -> float:
        """Compute off the host (every non-host device)."""
        return sum(r.compute for r in self.regions if r.device != "cpu")

    def compute_by_device(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for r in self.regions:
            out[r.device] = out.get(r.device, 0.0) + r.compute
        return out

    @property
    def transfer(self) -> float:
        return sum(c.time for c in self.cuts)

    @property
    def transfer_bytes(self) -> float:
        return sum(c.nbytes for c in self.cuts)

    @property
    def overhead(self) -> float:
        return sum(r.overhead for r in self.regions)

    @property
    def total(self) -> float:
        return self.compute_cpu + self.compute_accel + self.transfer + self.overhead

    def to_dict(self) -> dict:
        return {
            "model": self.model,
            "total_s": self.total,
            "compute_cpu_s": self.compute_cpu,
            "compute_accel_s": self.compute_accel,
            "compute_by_device_s": self.compute_by_device(),
            "transfer_s": self.transfer,
            "transfer_bytes": self.transfer_bytes,
            "overhead_s": self.overhead,
            "regions": [asdict(r) | {"total": r.total} for r in self.regions],
            "cuts": [asdict(c) for c in self.cuts],
        }


def require_platform(platform: Any, who: str) -> Platform:
    """``platform`` if it is a :class:`~partition_lab.core.platform.Platform`; a TypeError
    naming ``who`` otherwise (cost models take platforms, not names, files or target specs)."""
    if not isinstance(platform, Platform):
        raise TypeError(f"{who} takes a Platform (partition_lab.core.platform.Platform), got "
                        f"{type(platform).__name__} {platform!r}; build the platform first "
                        "(e.g. get_platform(name))")
    return platform


def check_times(values: Iterable[float], what: str, model: CostModel) -> None:
    """:class:`CostModelError` unless every value is a finite, non-negative number of seconds.

    The formats a price comes from are validated at load; this is the last line of defence, so
    that a NaN, infinite or negative price (from a custom cost model, or a figure that slipped
    through) stops with one message instead of becoming a plan's total or its choice.
    """
    for value in values:
        try:
            seconds = float(value)  # numpy scalars too
        except (TypeError, ValueError):
            seconds = math.nan
        if not (math.isfinite(seconds) and seconds >= 0):
            raise CostModelError(
                f"cost model {getattr(model, 'name', type(model).__name__)} priced {what} at "
                f"{value!r} s, not a finite non-negative time; check the hardware profile or "
                "profile cache it reads (or the custom cost model)")


def node_times(model: CostModel, graph: OpGraph, platform: Platform, device: str,
               units: Sequence[Unit] = ()) -> list[float]:
    """Every node's time on ``device``; each unit of a pattern the device's target declares is
    priced as one op (:func:`~partition_lab.core.patterns.composite_node`: one launch, its
    intermediates never in memory, as the compiler that maps it to one kernel runs it).

    With a profile, a unit is priced as it was measured: whole if its composite was timed, as
    its ops where only they were (the runner that timed them runs them one by one).

    The unit's time is shared among its nodes in proportion to their own times, so that a plan
    prices the same whichever node a region boundary names; strategies keep a unit on one device.
    """
    many = getattr(model, "op_times", None)
    times = list(many(graph.nodes, device)) if many else [model.op_time(n, device) for n in graph]
    measured = getattr(model, "is_measured", None)
    for unit in priced_whole(platform, device, units):
        composite = composite_node(graph, unit)
        if measured and not measured(composite, device) and all(
                measured(graph[n], device) for n in unit.nodes):
            continue
        whole = model.op_time(composite, device)
        own = [times[n] for n in unit.nodes]
        total = sum(own)
        for node, alone in zip(unit.nodes, own, strict=True):
            times[node] = whole * (alone / total if total > 0 else 1 / len(own))
    return times


def priced_whole(platform: Platform, device: str, units: Sequence[Unit]) -> list[Unit]:
    """The units that ``device`` runs as one op: those whose pattern its target declares."""
    if not units or device not in platform.names:
        return []
    declared = getattr(platform.devices[platform.index(device)].target, "patterns", ())
    return [unit for unit in units if unit.name in declared]


def evaluate(plan: PartitionPlan, model: CostModel) -> CostBreakdown:
    """Predicted time of a plan under ``model``, explained per region and per cut; units of
    patterns priced as one op each where their device declares the pattern (:func:`node_times`).
    """
    graph = plan.graph
    units = plan.support.units
    by_device = {device: node_times(model, graph, plan.platform, device, units)
                 for device in {d.device for d in plan.decisions}} if units else {}
    node_times_ = tuple(by_device[d.device][d.node] if units
                        else model.op_time(graph[d.node], d.device) for d in plan.decisions)
    regions = tuple(
        RegionCost(
            region=r.id, label=r.label, device=r.device, ops=len(r.nodes),
            compute=sum(node_times_[n] for n in r.nodes),
            # CPU islands are plain host code: no invocation overhead unless the model says so.
            overhead=model.region_overhead(r.device),
        )
        for r in plan.regions
    )
    cuts = tuple(
        CutCost(
            tensor=t.key, producer=t.producer,
            consumers=tuple(c for c in t.consumers if plan.device_of(c) == dst),
            src=src, dst=dst, shape=t.spec.shape, dtype=t.spec.dtype, nbytes=t.nbytes,
            time=model.transfer_time(t.nbytes, src, dst),
        )
        for t, src, dst in plan.crossing_tensors()
    )
    check_times(node_times_, "an op", model)
    check_times((r.overhead for r in regions), "a region's overhead", model)
    check_times((c.time for c in cuts), "a copy", model)
    breakdown = CostBreakdown(model.name, regions, cuts, node_times_)
    check_times((breakdown.total,), "the plan (in total)", model)  # a sum can still overflow
    return breakdown
