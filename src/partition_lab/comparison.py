"""Side-by-side comparison of partitioning strategies on one graph, target and cost model.

:func:`compare_plans` runs every strategy (or the ones asked for) on an
:class:`~partition_lab.core.graph.OpGraph` with its support verdicts and prices each plan with
:func:`~partition_lab.cost_models.base.evaluate`. The Relay-level entry point
``partition_lab.compare(mod, target, ...)`` (in api.py) wraps it.

JSON schema ``partition_lab.compare/2`` (:meth:`Comparison.to_dict`; keys always present;
``compare/1`` had no ``devices``, ``ops_by_device`` or ``compute_by_device_s``)::

    {"schema": "partition_lab.compare/2",
     "graph": str, "target": str, "cost_model": str, "ops": int,
     "devices": [str],                         # the platform's devices, most preferred first
     "best": str | null,                       # strategy with the lowest total among applicable
     "rows": [{"strategy": str, "applicable": bool,
               "accel_regions": int | null, "ops_on_accel": int | null,
               "tensors_crossing": int | null, "bytes_crossing": float | null,
               "compute_cpu_s": float | null, "compute_accel_s": float | null,
               "ops_by_device": {device: int} | null,
               "compute_by_device_s": {device: float} | null,
               "total_sigma_s": float | null,  # the model's uncertainty of total_s (1 sigma)
               "ops_measured": int | null,     # ops whose time on their device is a measurement
               "transfer_s": float | null, "overhead_s": float | null, "total_s": float | null,
               "partition_s": float,           # wall time of the strategy itself
               "notes": [str]}]}               # strategy notes, or why it is not applicable

Numbers are null exactly when ``applicable`` is false (``all_accel`` on a graph with an
unsupported op).
"""

from __future__ import annotations

import io
import json
import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from rich.box import HEAVY_HEAD, Box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from ._units import format_bytes, format_time
from .core.graph import OpGraph
from .core.plan import PartitionPlan
from .core.support import Support
from .cost_models.base import CostBreakdown, CostModel, evaluate
from .strategies import NotApplicableError, Strategy, available_strategies, get_strategy
from .strategies.costing import UNCERTAINTY_METHODS, CostTables
from .strategies.robust import plan_sigma

# Wide enough that a plain-text table never wraps: lines are as long as their cells.
_PLAIN_WIDTH = 1000

SCHEMA = "partition_lab.compare/2"


@dataclass(frozen=True)
class ComparisonRow:
    """One strategy's plan, priced. Numbers are None when the strategy is not applicable."""

    strategy: str
    applicable: bool
    accel_regions: int | None = None
    ops_on_accel: int | None = None
    tensors_crossing: int | None = None
    bytes_crossing: float | None = None
    compute_cpu_s: float | None = None
    compute_accel_s: float | None = None
    transfer_s: float | None = None
    overhead_s: float | None = None
    total_s: float | None = None
    partition_s: float = 0.0
    notes: tuple[str, ...] = ()
    ops_by_device: dict[str, int] | None = None
    compute_by_device_s: dict[str, float] | None = None
    total_sigma_s: float | None = None
    ops_measured: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy, "applicable": self.applicable,
            "accel_regions": self.accel_regions, "ops_on_accel": self.ops_on_accel,
            "tensors_crossing": self.tensors_crossing, "bytes_crossing": self.bytes_crossing,
            "compute_cpu_s": self.compute_cpu_s, "compute_accel_s": self.compute_accel_s,
            "transfer_s": self.transfer_s, "overhead_s": self.overhead_s,
            "total_s": self.total_s, "partition_s": self.partition_s, "notes": list(self.notes),
            "ops_by_device": self.ops_by_device, "compute_by_device_s": self.compute_by_device_s,
            "total_sigma_s": self.total_sigma_s, "ops_measured": self.ops_measured,
        }


@dataclass(repr=False)
class Comparison:
    """The rows of a comparison plus every plan and its cost breakdown, by strategy name."""

    graph: OpGraph
    platform_name: str
    cost_model: str
    rows: list[ComparisonRow]
    devices: list[str] = field(default_factory=list)
    plans: dict[str, PartitionPlan] = field(default_factory=dict)
    breakdowns: dict[str, CostBreakdown] = field(default_factory=dict)

    def row(self, strategy: str) -> ComparisonRow:
        for row in self.rows:
            if row.strategy == strategy:
                return row
        raise KeyError(strategy)

    def best(self) -> ComparisonRow | None:
        """The applicable row with the lowest predicted total (first in row order on ties)."""
        ranked = [(r.total_s, i, r) for i, r in enumerate(self.rows)
                  if r.applicable and r.total_s is not None]
        return min(ranked)[2] if ranked else None

    def to_dict(self) -> dict[str, Any]:
        best = self.best()
        return {
            "schema": SCHEMA, "graph": self.graph.name, "target": self.platform_name,
            "cost_model": self.cost_model, "ops": len(self.graph), "devices": list(self.devices),
            "best": best.strategy if best else None,
            "rows": [row.to_dict() for row in self.rows],
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def to_table(self) -> str:
        """The table as plain text (no colour, no box), then the notes: what ``compare`` prints
        when stdout is not a terminal; stable for scripts and tests."""
        console = Console(file=io.StringIO(), width=_PLAIN_WIDTH, no_color=True,
                          highlight=False, force_terminal=False)
        self.print_to(console, box=None)
        lines = console.file.getvalue().splitlines()  # type: ignore[attr-defined]
        return "\n".join(line.rstrip() for line in lines)

    def print_to(self, console: Console, *, box: Box | None = HEAVY_HEAD) -> None:
        """Print the title, the table (a :class:`rich.table.Table`) and the notes to
        ``console``: on a terminal with rich's box and colours."""
        console.print(f"{self.graph.name or 'graph'} on {self.platform_name} "
                      f"({len(self.graph)} ops), cost model {self.cost_model}", markup=False)
        if len(self.devices) > 2:
            console.print(f"ops per device: {' / '.join(self.devices)}; 'accel' is every "
                          "device but the host", markup=False)
        table = self.rich_table(box=box)
        # A narrow terminal would cut every cell to "1.…"; wider lines wrap, numbers stay whole.
        needed = Measurement.get(console, console.options.update_width(_PLAIN_WIDTH), table).maximum
        console.width = max(console.width, needed)
        console.print(table)
        best = self.best()
        if best:
            console.print(f"best: {best.strategy} ({_time(best.total_s)} predicted)",
                          markup=False)
        for row in self.rows:
            for note in row.notes:
                console.print(f"  {note}" if note.startswith(row.strategy) else
                              f"  {row.strategy}: {note}", markup=False, soft_wrap=True)

    def rich_table(self, *, box: Box | None = HEAVY_HEAD) -> Table:
        """One row per strategy: regions, ops placed, copies, predicted times (each with its
        unit), the uncertainty, how many ops were measured and the strategy's own run time."""
        many = len(self.devices) > 2
        table = Table(box=box, show_edge=box is not None, pad_edge=False)
        table.add_column("strategy", no_wrap=True)
        for name in ("regions", "ops per device" if many else "ops on accel", "cuts", "copied",
                     "cpu", "accel", "copies", "launches", "total", "+-2 sd", "measured",
                     "partition"):
            table.add_column(name, justify="right", no_wrap=True)
        for row in self.rows:
            table.add_row(*self._cells(row, many), style=None if row.applicable else "dim")
        return table

    def _cells(self, row: ComparisonRow, many: bool) -> list[str]:
        partition = format_time(row.partition_s)
        if not row.applicable:
            return [row.strategy, "n/a", *[""] * 10, partition]
        ops = ("/".join(str(c) for c in (row.ops_by_device or {}).values()) if many
               else f"{row.ops_on_accel}/{len(self.graph)}")
        sigma = row.total_sigma_s
        return [row.strategy, str(row.accel_regions), ops, str(row.tensors_crossing),
                format_bytes(row.bytes_crossing or 0),
                *(_time(s) for s in (row.compute_cpu_s, row.compute_accel_s, row.transfer_s,
                                     row.overhead_s, row.total_s)),
                _time(2 * sigma) if sigma is not None else "-",
                f"{row.ops_measured}/{len(self.graph)}" if row.ops_measured is not None else "-",
                partition]

    def __repr__(self) -> str:  # short: the plans hold the whole graph (MBs of text)
        best = self.best()
        return (f"Comparison({self.graph.name or 'graph'!r}, platform={self.platform_name!r}, "
                f"{len(self.rows)} strategies, best={best.strategy if best else None!r})")

    def __str__(self) -> str:
        return self.to_table()


def compare_plans(
    graph: OpGraph,
    support: Support,
    *,
    strategies: Iterable[str | Strategy] | None = None,
    cost_model: CostModel,
) -> Comparison:
    """Run each strategy on ``graph`` and price its plan under ``cost_model``.

    Parameters
    ----------
    strategies:
        Names (default options) or configured :class:`~partition_lab.strategies.Strategy`
        objects; default: every registered strategy.

    Raises
    ------
    UnknownStrategyError
        For an unknown strategy name.
    PlanError
        If a strategy returns a plan that fails validation (a bug, reported with evidence).
    """
    chosen = [get_strategy(s) if isinstance(s, str) else s
              for s in (strategies if strategies is not None else available_strategies())]
    # The plans' uncertainty needs every op priced on every device: only when the model has one.
    tables = (CostTables(graph, cost_model, support.platform, support.units)
              if any(hasattr(cost_model, m) for m in UNCERTAINTY_METHODS) else None)
    is_measured = getattr(cost_model, "is_measured", None)
    rows: list[ComparisonRow] = []
    comparison = Comparison(graph, support.platform.name, cost_model.name, rows,
                            support.platform.names)
    for strategy in chosen:
        start = time.perf_counter()
        try:
            plan = strategy.run(graph, support, cost_model=cost_model)
        except NotApplicableError as err:
            rows.append(ComparisonRow(strategy.name, False,
                                      partition_s=time.perf_counter() - start,
                                      notes=(str(err),)))
            continue
        elapsed = time.perf_counter() - start
        plan.validate()
        cost = evaluate(plan, cost_model)
        comparison.plans[strategy.name] = plan
        comparison.breakdowns[strategy.name] = cost
        rows.append(ComparisonRow(
            strategy=strategy.name, applicable=True,
            accel_regions=len(plan.accelerator_regions),
            ops_on_accel=len(plan.accelerator_nodes),
            tensors_crossing=len(cost.cuts), bytes_crossing=cost.transfer_bytes,
            compute_cpu_s=cost.compute_cpu, compute_accel_s=cost.compute_accel,
            transfer_s=cost.transfer, overhead_s=cost.overhead, total_s=cost.total,
            partition_s=elapsed, notes=tuple(plan.notes), ops_by_device=plan.ops_per_device(),
            compute_by_device_s=cost.compute_by_device(),
            total_sigma_s=_plan_sigma(tables, plan) if tables is not None else None,
            ops_measured=(sum(bool(is_measured(graph[d.node], d.device)) for d in plan.decisions)
                          if is_measured else None)))
    return comparison


def _plan_sigma(tables: CostTables, plan: PartitionPlan) -> float:
    device = [plan.platform.index(d.device) for d in plan.decisions]
    return plan_sigma(tables, device, [r.nodes for r in plan.regions])


def _time(seconds: float | None) -> str:
    """A table cell's duration; ``-`` where there is none (or it is not finite)."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    return format_time(seconds)
