"""What the pipeline returns: :class:`Analysis` (a model prepared for a platform, every verdict)
and :class:`PartitionResult` (the plan, the partitioned module, the predicted cost). Both are
the same whatever the IR; the IR-specific parts are the modules and ``ir``, the adapter's graph."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .._units import counted, format_bytes, format_time
from ..core.graph import OpGraph
from ..core.hazards import NumericHazard
from ..core.plan import PartitionPlan
from ..core.platform import Platform
from ..core.support import Support, Verdict
from ..cost_models.base import CostBreakdown, CostModel
from .adapters import IRAdapter, IRGraph


@dataclass(repr=False)
class Analysis:
    """A model prepared for a platform: its OpGraph and every (op, device) verdict.

    ``prepared_mod`` is the module as prepared (weights bound, layout and precision converted);
    ``ir`` the adapter's reading of it (``RelayGraph`` or ``RelaxGraph``, also as ``relay``);
    ``adapter`` the IR adapter that did both.
    """

    prepared_mod: Any
    ir: IRGraph
    platform: Platform
    support: Support
    cost_model: CostModel | None
    #: Constants that overflowed the dtype a device computes in, by the op that uses them.
    hazards: tuple[NumericHazard, ...] = ()
    adapter: IRAdapter | None = None

    def __repr__(self) -> str:
        return (f"Analysis({self.graph.name or 'graph'!r}, platform={self.platform.name!r}, "
                f"{len(self.graph)} ops)")

    @property
    def relay(self) -> Any:
        """The adapter's graph (the name older code and tests use, for either IR)."""
        return self.ir

    @property
    def graph(self) -> OpGraph:
        return self.ir.graph

    @property
    def target(self) -> Any:
        """The primary accelerator's TargetSpec (its rules and options)."""
        return self.platform.primary.target

    @property
    def verdicts(self) -> tuple[Verdict, ...]:
        """The primary accelerator's verdicts."""
        return self.support.primary


@dataclass(repr=False)
class PartitionResult:
    """What :func:`partition_lab.partition` returns, for any IR.

    ``mod`` is the partitioned module (accelerator regions outlined: ``Compiler`` functions in
    Relay, ``Codegen`` functions of ``Composite`` functions in Relax); ``prepared_mod`` the
    module as it was partitioned (params bound, layout/precision converted for the target),
    which is what ``mod`` must compute the same outputs as; ``ir`` the adapter's graph (also
    ``relay``, and ``relax`` for a Relax module); ``functions`` each outlined function's region
    and device by symbol, where the adapter records them (Relax).
    """

    mod: Any
    plan: PartitionPlan
    graph: OpGraph
    target: Any
    cost: CostBreakdown | None
    cost_model: CostModel | None
    prepared_mod: Any
    ir: IRGraph = field(repr=False)
    timings: dict[str, float] = field(default_factory=dict)
    functions: dict[str, Any] = field(default_factory=dict)
    #: The adapter's name ("relay", "relax").
    ir_name: str = ""
    #: The uncertainty (1 sigma) of ``cost.total``, the same ``compare`` shows for this plan
    #: (:func:`partition_lab.comparison.plan_total_sigma`); None where the model states none.
    total_sigma_s: float | None = None

    @property
    def relay(self) -> Any:
        """The adapter's graph (the name older code and tests use, for either IR)."""
        return self.ir

    @property
    def relax(self) -> Any:
        """The adapter's graph of a Relax module (a ``RelaxGraph``)."""
        return self.ir

    def summary(self) -> str:
        lines = [self.plan.summary()]
        if self.cost is not None:
            c = self.cost
            spread = (f" (+-2 sd {format_time(2 * self.total_sigma_s)})"
                      if self.total_sigma_s is not None else "")
            lines.append(
                f"  predicted ({c.model}): total {format_time(c.total)}{spread} = CPU "
                f"{format_time(c.compute_cpu)} + accelerator {format_time(c.compute_accel)} + "
                f"copies {format_time(c.transfer)} ({counted(len(c.cuts), 'tensor')}, "
                f"{format_bytes(c.transfer_bytes)}) + launches {format_time(c.overhead)}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        data = self.plan.to_dict(self.cost.node_times if self.cost is not None else None)
        data["cost"] = self.cost.to_dict() if self.cost is not None else None
        if data["cost"] is not None and self.total_sigma_s is not None:
            data["cost"]["total_sigma_s"] = self.total_sigma_s
        return data

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:  # short: the modules and the graph are megabytes of text
        total = f", predicted {format_time(self.cost.total)}" if self.cost is not None else ""
        return (f"PartitionResult({self.graph.name or 'graph'!r}, platform={self.plan.platform_name!r}, "
                f"strategy={self.plan.strategy!r}, {self.plan.regions_text()}, "
                f"{len(self.graph)} ops{total})")
