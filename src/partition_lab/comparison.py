"""Side-by-side comparison of partitioning strategies on one graph, target and cost model.

:func:`compare_plans` runs every strategy (or the ones asked for) on an
:class:`~partition_lab.core.graph.OpGraph` with its support verdicts and prices each plan with
:func:`~partition_lab.cost_models.base.evaluate`. The Relay-level entry point
``partition_lab.compare(mod, target, ...)`` (in api.py) wraps it.

Each plan has two uncertainties, from one error model (:mod:`.strategies.robust`):
``total_sigma_s``, of its own predicted total (how long it takes), and ``gain_sigma_s``, of its
gain over greedy's plan (whether it is faster: only what differs from greedy's plan counts). The
second is what ``cost`` and ``optimal`` test before they leave greedy's plan, so it is the one
their notes quote; "best" is decided by the same rule.

JSON schema ``partition_lab.compare/3`` (:meth:`Comparison.to_dict`; keys always present;
``compare/1`` had no ``devices``, ``ops_by_device`` or ``compute_by_device_s``; ``compare/2``
had no ``gain_s``, ``gain_sigma_s``, ``robust``, ``best_reason`` or ``default_strategy``, its
``best`` was the lowest predicted total, and its ``total_sigma_s`` took each region's launch
error as independent)::

    {"schema": "partition_lab.compare/3",
     "graph": str, "target": str, "cost_model": str, "ops": int,
     "devices": [str],                         # the platform's devices, most preferred first
     "default_strategy": str,                  # partition's strategy for these prices
     "best": str | null,                       # the row whose plan is best: cost's, where compared
     "best_reason": str | null,                # why, where it is not the lowest total
     "rows": [{"strategy": str, "applicable": bool,
               "accel_regions": int | null, "ops_on_accel": int | null,
               "tensors_crossing": int | null, "bytes_crossing": float | null,
               "compute_cpu_s": float | null, "compute_accel_s": float | null,
               "ops_by_device": {device: int} | null,
               "compute_by_device_s": {device: float} | null,
               "total_sigma_s": float | null,  # uncertainty of total_s (1 sigma)
               "gain_s": float | null,         # greedy's total_s minus this plan's
               "gain_sigma_s": float | null,   # uncertainty of gain_s (1 sigma)
               "robust": {...} | null,         # cost/optimal: their decision on greedy's plan
               "ops_measured": int | null,     # ops whose time on their device is a measurement
               "transfer_s": float | null, "overhead_s": float | null, "total_s": float | null,
               "partition_s": float,           # wall time of the strategy itself
               "notes": [str]}]}               # strategy notes, or why it is not applicable

``robust`` (:meth:`~.strategies.robust.RobustChoice.to_dict`): ``{"left_greedy": bool,
"gain_s", "gain_sigma_s", "threshold_s", "greedy_total_s", "candidate_total_s",
"confidence_z", "min_gain"}``, the best other plan the strategy found and whether its gain
cleared the threshold; where ``left_greedy`` is false the row's plan is greedy's. Numbers are
null exactly when ``applicable`` is false (``all_accel`` on a graph with an unsupported op),
and the sigmas also where the model states no uncertainty.
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
from .cost_models.profiled import ProfiledCostModel
from .strategies import (
    NotApplicableError,
    Strategy,
    available_strategies,
    default_strategy,
    get_strategy,
)
from .strategies.base import ms
from .strategies.costing import UNCERTAINTY_METHODS, CostTables
from .strategies.robust import RobustChoice, RobustOptions, clears, gain_sigma, plan_sigma

# Wide enough that a plain-text table never wraps: lines are as long as their cells.
_PLAIN_WIDTH = 1000

SCHEMA = "partition_lab.compare/3"
#: The rule "best" applies where ``cost`` was not compared: ``cost``'s own defaults.
_Z, _MIN_GAIN = RobustOptions.confidence_z, RobustOptions.min_gain


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
    gain_s: float | None = None
    gain_sigma_s: float | None = None
    robust: RobustChoice | None = None

    @property
    def kept_greedy(self) -> bool:
        """Whether the strategy found a faster plan but kept greedy's (within the model's error)."""
        return self.robust is not None and not self.robust.leave

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
            "gain_s": self.gain_s, "gain_sigma_s": self.gain_sigma_s,
            "robust": self.robust.to_dict() if self.robust is not None else None,
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
    #: The strategy ``partition`` uses for these prices (``cost`` where they are measured).
    default_strategy: str = "greedy"
    #: Greedy's plan, which every row's gain is over (compared or not).
    greedy_plan: PartitionPlan | None = None

    def row(self, strategy: str) -> ComparisonRow:
        for row in self.rows:
            if row.strategy == strategy:
                return row
        raise KeyError(strategy)

    def _priced(self) -> list[ComparisonRow]:
        return [r for r in self.rows if r.applicable and r.total_s is not None]

    def lowest(self) -> ComparisonRow | None:
        """The applicable row with the lowest predicted total (first in row order on ties)."""
        ranked = [(r.total_s, i, r) for i, r in enumerate(self._priced())]
        return min(ranked)[2] if ranked else None

    def best(self) -> ComparisonRow | None:
        """The row whose plan is best: ``cost``'s where it was compared (it keeps greedy's plan
        unless the gain clears ``confidence_z`` sigmas of the gain's uncertainty); else the same
        rule applied to the lowest predicted total against greedy's row; else the lowest."""
        priced = self._priced()
        cost = next((r for r in priced if r.strategy == "cost"), None)
        if cost is not None:
            return cost
        lowest = self.lowest()
        greedy = next((r for r in priced if r.strategy == "greedy"), None)
        if lowest is not None and greedy is not None and lowest is not greedy and \
                not _clears(lowest):
            return greedy
        return lowest

    def best_reason(self) -> str | None:
        """Why :meth:`best` is not simply the lowest predicted total (None where it is)."""
        best, lowest = self.best(), self.lowest()
        if best is None or lowest is None:
            return None
        if best.kept_greedy and best.robust is not None:
            return f"{best.strategy} keeps greedy's plan: {_declined(best.robust)}"
        if best is lowest or (best.total_s or 0.0) <= (lowest.total_s or 0.0):
            return None
        if best.strategy == "cost":
            return (f"{lowest.strategy}'s plan predicts {ms(lowest.total_s)}, which cost's "
                    "search did not reach")
        return (f"{lowest.strategy}'s plan predicts {ms(lowest.total_s)}, a gain over greedy's "
                f"of {ms(lowest.gain_s)}, within {_Z:g} sigma = "
                f"{ms(_Z * (lowest.gain_sigma_s or 0.0))} (the rule of cost, which was not "
                "compared)")

    def best_text(self) -> str | None:
        """The line under the table: "best: greedy's plan, kept by cost (8.42 ms predicted):
        the best other plan it found predicts 3.03 ms, a gain of 5.39 ms within 2 sigma = ..."."""
        best = self.best()
        if best is None:
            return None
        predicted = f"({_time(best.total_s)} predicted)"
        if best.kept_greedy and best.robust is not None:
            return (f"best: greedy's plan, kept by {best.strategy} {predicted}: "
                    f"{_declined(best.robust)}")
        if best.strategy != "greedy" and self._is_greedys(best.strategy):
            predicted = f"({_time(best.total_s)} predicted, greedy's plan)"
        line = f"best: {best.strategy} {predicted}"
        reason = self.best_reason()
        if reason:
            line += f"; {reason}"
        if self.default_strategy == "greedy" and not self._is_greedys(best.strategy):
            line += ("; these prices are not measured, and partition's default strategy for "
                     "them is greedy")
        return line

    def _is_greedys(self, strategy: str) -> bool:
        """Whether the row's plan is greedy's (every op on the same device)."""
        return _same_plan(self.plans.get(strategy), self.greedy_plan)

    def to_dict(self) -> dict[str, Any]:
        best = self.best()
        return {
            "schema": SCHEMA, "graph": self.graph.name, "target": self.platform_name,
            "cost_model": self.cost_model, "ops": len(self.graph), "devices": list(self.devices),
            "default_strategy": self.default_strategy,
            "best": best.strategy if best else None, "best_reason": self.best_reason(),
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
        legend = self.legend()
        if legend:
            console.print(legend, markup=False, soft_wrap=True)
        best = self.best_text()
        if best:
            console.print(best, markup=False, soft_wrap=True)
        for row in self.rows:
            for note in row.notes:
                console.print(f"  {note}" if note.startswith(row.strategy) else
                              f"  {row.strategy}: {note}", markup=False, soft_wrap=True)

    def legend(self) -> str:
        """What the uncertainty and gain columns hold (the parts this table uses)."""
        parts = []
        if any(r.total_sigma_s is not None for r in self.rows):
            parts.append("+-2 sd: of the plan's own total.")
        parts.append("gain: greedy's predicted total minus the plan's" + (
            "; its +-2 sd counts only what differs from greedy's plan (what cost and optimal "
            "test)." if any(r.gain_sigma_s is not None for r in self.rows) else "."))
        if any(r.kept_greedy for r in self.rows):
            parts.append("In parentheses: the gain a strategy declined.")
        return " ".join(parts)

    def rich_table(self, *, box: Box | None = HEAVY_HEAD) -> Table:
        """One row per strategy: regions, ops placed, copies, predicted times (each with its
        unit), the total's uncertainty, the gain over greedy's plan and its uncertainty, how
        many ops were measured and the strategy's own run time. A strategy that kept greedy's
        plan says so in its cell, with the gain it judged too small."""
        many = len(self.devices) > 2
        table = Table(box=box, show_edge=box is not None, pad_edge=False)
        table.add_column("strategy", no_wrap=True)
        for name in ("regions", "ops per device" if many else "ops on accel", "cuts", "copied",
                     "cpu", "accel", "copies", "launches", "total", "+-2 sd", "gain",
                     "gain +-2 sd", "measured", "partition"):
            table.add_column(name, justify="right", no_wrap=True)
        for row in self.rows:
            table.add_row(*self._cells(row, many), style=None if row.applicable else "dim")
        return table

    def _cells(self, row: ComparisonRow, many: bool) -> list[str]:
        partition = format_time(row.partition_s)
        if not row.applicable:
            return [row.strategy, "n/a", *[""] * 12, partition]
        ops = ("/".join(str(c) for c in (row.ops_by_device or {}).values()) if many
               else f"{row.ops_on_accel}/{len(self.graph)}")
        label, gain, gain_sd = row.strategy, _signed_time(row.gain_s), _twice(row.gain_sigma_s)
        if row.kept_greedy and row.robust is not None:
            # The row is greedy's plan; the gain cells show, in parentheses, what was declined.
            label += " (kept greedy's plan)"
            gain, gain_sd = f"({_signed_time(row.robust.gain)})", f"({_twice(row.robust.sigma)})"
        return [label, str(row.accel_regions), ops, str(row.tensors_crossing),
                format_bytes(row.bytes_crossing or 0),
                *(_time(s) for s in (row.compute_cpu_s, row.compute_accel_s, row.transfer_s,
                                     row.overhead_s, row.total_s)),
                _twice(row.total_sigma_s), gain, gain_sd,
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
                            support.platform.names, default_strategy=_default_strategy(cost_model))
    # Every gain is over greedy's plan (the robust rule's reference), compared or not.
    reference = get_strategy("greedy").run(graph, support, cost_model=cost_model)
    reference_total = evaluate(reference, cost_model).total
    comparison.greedy_plan = reference
    for strategy in chosen:
        start = time.perf_counter()
        choice = None
        try:
            if isinstance(strategy, RobustOptions):
                plan, choice = strategy.run_with_choice(graph, support, cost_model=cost_model)
            else:
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
        gain_sd = _gain_sigma(tables, reference, plan) if tables is not None else None
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
                          if is_measured else None),
            gain_s=reference_total - cost.total, gain_sigma_s=gain_sd, robust=choice))
    return comparison


def plan_total_sigma(graph: OpGraph, support: Support, cost_model: CostModel | None,
                     plan: PartitionPlan) -> float | None:
    """The uncertainty (1 sigma) of ``plan``'s predicted total: the ``total_sigma_s`` its row
    of :func:`compare_plans` shows, and :func:`partition_lab.partition`'s summary and plan JSON;
    None where the cost model states no uncertainty."""
    if cost_model is None or not any(hasattr(cost_model, m) for m in UNCERTAINTY_METHODS):
        return None
    return _plan_sigma(CostTables(graph, cost_model, support.platform, support.units), plan)


def _default_strategy(cost_model: CostModel) -> str:
    return default_strategy(profiled=isinstance(cost_model, ProfiledCostModel))


def _assignment(plan: PartitionPlan) -> tuple[list[int], list[tuple[int, ...]]]:
    return ([plan.platform.index(d.device) for d in plan.decisions],
            [r.nodes for r in plan.regions])


def _plan_sigma(tables: CostTables, plan: PartitionPlan) -> float:
    return plan_sigma(tables, *_assignment(plan))


def _gain_sigma(tables: CostTables, greedy: PartitionPlan, plan: PartitionPlan) -> float:
    return gain_sigma(tables, *_assignment(greedy), *_assignment(plan))


def _same_plan(a: PartitionPlan | None, b: PartitionPlan | None) -> bool:
    return a is not None and b is not None and \
        [d.device for d in a.decisions] == [d.device for d in b.decisions]


def _declined(choice: RobustChoice) -> str:
    """The plan a strategy found and did not take, and why, in the words of its note."""
    return (f"the best other plan it found predicts {ms(choice.total)}, a gain of "
            f"{ms(choice.gain)} within {choice.threshold_text()} (1 sigma = {ms(choice.sigma)}, "
            "the uncertainty of the difference between the two plans)")


def _clears(row: ComparisonRow) -> bool:
    """Whether ``row``'s gain over greedy's plan clears cost's default threshold."""
    if row.gain_s is None:
        return True
    return clears(row.gain_s, row.gain_sigma_s or 0.0, (row.total_s or 0.0) + row.gain_s,
                  z=_Z, min_gain=_MIN_GAIN)[0]


def _time(seconds: float | None) -> str:
    """A table cell's duration; ``-`` where there is none (or it is not finite)."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    return format_time(seconds)


def _twice(sigma: float | None) -> str:
    """A +-2 sd cell."""
    return "-" if sigma is None else _time(2 * sigma)


def _signed_time(seconds: float | None) -> str:
    """A gain cell: negative where the plan is predicted slower than greedy's."""
    if seconds is None or not math.isfinite(seconds) or seconds >= 0:
        return _time(seconds)
    return "-" + format_time(-seconds)
