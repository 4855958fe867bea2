"""``optimal``: the minimum predicted time over all legal plans, or the best plan found with its gap.

Legal plans: any subset of the supported ops on the accelerator, regions formed by
:func:`~partition_lab.regions.form_regions`, every accelerator region holding an anchor op on
anchored targets. The objective is ``evaluate(plan, cost_model).total``.

1. **Lower bound** (Stone's two-processor min-cut, 1977, written as an integer program and solved
   with HiGHS through ``scipy.optimize.milp``): binary ``x_v`` per supported op, and per tensor
   ``u_t >= x_c - x_p`` (a host-to-accelerator copy) and ``w_t >= x_p - x_c`` (a copy back; also
   ``w_t >= x_p`` for graph outputs). The constraint matrix is a network matrix, so the LP is
   integral and HiGHS solves it at the root. It prices compute and copies exactly but ignores
   region launches and anchors, so ``min(all_cpu, LP + one launch)`` bounds every legal plan.
2. **Candidates**: the min-cut assignment made legal and refined by the ``cost`` moves, plus the
   plans of every other strategy (greedy, min_size for 2..5 ops, no_mac, cost, all_cpu,
   all_accel). The cheapest wins, so ``optimal`` is never above another strategy.
3. **Exact search** when the supported ops are few (``exact_limit``): branch and bound over all
   assignments, pruned by a bound (fixed compute and copies, ``min`` of both devices for the
   undecided ops, one launch once any op is on the accelerator). The result is then proven.

The plan's notes say whether the result is proven optimal, or its gap to the lower bound.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import coo_matrix

from ..cost_models.base import CostModel
from ..errors import PartitionLabError
from ..graph import OpGraph
from ..plan import PartitionPlan, Verdict
from .all_accel import AllAccel
from .all_cpu import AllCpu
from .base import Assignment, Strategy, is_anchored, legalize, make_plan, ms
from .cost import CostBased
from .costing import CostTables
from .greedy import Greedy
from .local_search import improve
from .min_size import MinSize
from .no_mac import NoMac


@dataclass(frozen=True)
class Optimal(Strategy):
    """Exact minimum of the cost model where provable, else the best plan with its gap."""

    name = "optimal"
    summary = "minimum predicted time: min-cut bound + refinement + every strategy; exact when small"
    needs_cost_model = True
    exact_limit: int = field(default=16, metadata={
        "help": "search all assignments exactly when at most this many ops are supported"})
    exact_budget: int = field(default=2_000_000, metadata={
        "help": "... and 2**supported_ops * graph_ops is at most this"})
    time_limit_s: float = field(default=60.0, metadata={
        "help": "time limit of the HiGHS min-cut solve, in seconds"})

    def check_options(self) -> None:
        for key in ("exact_limit", "exact_budget"):
            if getattr(self, key) < 0:
                raise PartitionLabError(f"strategy 'optimal': option {key} must be >= 0")
        if not self.time_limit_s > 0:
            raise PartitionLabError("strategy 'optimal': option time_limit_s must be > 0")

    def run(self, graph: OpGraph, verdicts: Sequence[Verdict], *, target: str,
            cost_model: CostModel | None = None) -> PartitionPlan:
        model = self.require_model(cost_model)
        start = time.perf_counter()
        tables = CostTables(graph, model)
        base = Assignment.supported(graph, verdicts, target)
        supported = [n for n, on in enumerate(base.on_accel)
                     if on and math.isfinite(tables.accel[n])]
        candidates = _strategy_candidates(graph, verdicts, target, model, tables)
        bound = min_cut_bound(tables, supported, self.time_limit_s)
        candidates.append(_from_min_cut(base, bound, tables))
        best = min(candidates, key=lambda c: c.total)
        all_cpu_total = next(c.total for c in candidates if c.source == "all_cpu")
        lower = min(all_cpu_total, bound.value + tables.overhead_accel) if supported else \
            all_cpu_total
        exact = None
        if len(supported) <= self.exact_limit and \
                2 ** len(supported) * max(1, len(graph)) <= self.exact_budget:
            exact = branch_and_bound(base, supported, tables, best)
            best = exact.best
        notes = [_note(best, lower, bound, exact, tables, time.perf_counter() - start)]
        state = best.state
        _explain_cpu_ops(state, tables)
        return make_plan(self, state, best.regions, notes)


# ---------------------------------------------------------------------------- candidates
@dataclass
class Candidate:
    source: str
    state: Assignment
    regions: list[list[int]]
    total: float


def _strategy_candidates(graph: OpGraph, verdicts: Sequence[Verdict], target: str,
                         model: CostModel, tables: CostTables) -> list[Candidate]:
    strategies: list[Strategy] = [Greedy(), NoMac(), CostBased(), AllCpu(), AllAccel()]
    strategies += [MinSize(min_ops=k) for k in (2, 3, 4, 5)]
    out = []
    for strategy in strategies:
        try:
            plan = strategy.run(graph, verdicts, target=target, cost_model=model)
        except PartitionLabError:
            continue  # all_accel where some op is unsupported
        on_accel = [d.device != "cpu" for d in plan.decisions]
        # Keep the other strategy's reasons, except all_cpu's "baseline" wording: if that plan
        # wins, each op gets the optimum's own explanation instead.
        reasons = {} if isinstance(strategy, AllCpu) else {
            d.node: d.reason for d in plan.decisions if d.device == "cpu"}
        state = Assignment(graph, verdicts, target, on_accel, reasons)
        regions = [list(r.nodes) for r in plan.regions]
        label = strategy.name + (f"(min_ops={strategy.min_ops})"
                                 if isinstance(strategy, MinSize) else "")
        out.append(Candidate(label, state, regions, tables.total(state.on_accel, regions)))
    return out


def _from_min_cut(base: Assignment, bound: MinCutBound, tables: CostTables) -> Candidate:
    state = base.copy()
    for n in bound.supported:
        if not bound.on_accel[n]:
            state.on_accel[n] = False
    result = improve(state, legalize(state), tables)
    return Candidate("min-cut + cost moves", state, result.regions, result.total)


# ---------------------------------------------------------------------------- lower bound
@dataclass
class MinCutBound:
    """The compute + copy minimum over all assignments (no launches, no anchors)."""

    value: float
    on_accel: list[bool]
    supported: list[int]
    status: str


def min_cut_bound(tables: CostTables, supported: Sequence[int],
                  time_limit_s: float = 60.0) -> MinCutBound:
    """Solve the min-cut integer program; ``value`` is a valid lower bound on compute + copies."""
    n = len(tables.cpu)
    cpu_total = sum(tables.cpu)
    on = [False] * n
    if not supported:
        return MinCutBound(cpu_total + _fixed_copies(tables, on), on, [], "no supported op")
    var = {v: i for i, v in enumerate(supported)}
    costs = [tables.accel[v] - tables.cpu[v] for v in supported]
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []

    def new_var(cost: float) -> int:
        costs.append(cost)
        return len(costs) - 1

    def add_row(plus: int | None, minus: int | None, aux: int) -> None:
        row = rows[-1] + 1 if rows else 0
        for col, val in ((plus, 1.0), (minus, -1.0), (aux, -1.0)):
            if col is not None:
                rows.append(row)
                cols.append(col)
                vals.append(val)

    for t in tables.tensors:
        p = var.get(t.producer)
        accel_consumers = [var[c] for c in t.consumers if c in var]
        if accel_consumers and t.to_accel > 0:
            u = new_var(t.to_accel)
            for c in accel_consumers:
                add_row(c, p, u)  # x_c - x_p - u <= 0
        if p is not None and t.to_cpu > 0:
            w = new_var(t.to_cpu)
            for c in t.consumers:
                add_row(p, var.get(c), w)  # x_p - x_c - w <= 0 (x_c = 0 off the accelerator)
            if t.is_output:
                add_row(p, None, w)
    count = len(costs)
    integrality = np.zeros(count)
    integrality[:len(supported)] = 1
    constraints = []
    if rows:
        matrix = coo_matrix((vals, (rows, cols)), shape=(rows[-1] + 1, count)).tocsr()
        constraints.append(LinearConstraint(matrix, -np.inf, 0.0))
    res = milp(np.array(costs), constraints=constraints, integrality=integrality,
               bounds=Bounds(0.0, 1.0), options={"time_limit": time_limit_s})
    if res.x is None:
        raise PartitionLabError(f"optimal: the min-cut solve failed: {res.message}")
    for v, i in var.items():
        on[v] = bool(res.x[i] > 0.5)
    # A time-limited solve reports its dual bound, which is still a valid lower bound.
    dual = getattr(res, "mip_dual_bound", None)
    objective = res.fun if res.status == 0 or dual is None or not np.isfinite(dual) else dual
    return MinCutBound(cpu_total + float(objective), on, list(supported),
                       "optimal" if res.status == 0 else str(res.message))


def _fixed_copies(tables: CostTables, on: Sequence[bool]) -> float:
    return sum(tables.tensor_cost(i, on) for i in range(len(tables.tensors)))


# ---------------------------------------------------------------------------- exact search
@dataclass
class ExactResult:
    best: Candidate
    leaves: int = 0
    proven: bool = True


def branch_and_bound(base: Assignment, supported: Sequence[int], tables: CostTables,
                     incumbent: Candidate) -> ExactResult:
    """Search every assignment of the supported ops, pruning with a lower bound."""
    search = _BranchAndBound(base, list(supported), tables, incumbent)
    search.descend(0)
    return ExactResult(search.best, search.leaves)


class _BranchAndBound:
    def __init__(self, base: Assignment, supported: list[int], tables: CostTables,
                 incumbent: Candidate) -> None:
        self.base = base
        self.vars = supported
        self.tables = tables
        self.best = incumbent
        self.leaves = 0
        self.anchored = is_anchored(base.verdicts)
        self.on = [False] * len(tables.cpu)
        self.decided = [not base.on_accel[n] for n in range(len(tables.cpu))]
        self.undecided_min = [min(tables.cpu[v], tables.accel[v]) for v in supported]
        # Suffix sums: the cheapest the undecided ops can be.
        self.rest = [0.0] * (len(supported) + 1)
        for k in range(len(supported) - 1, -1, -1):
            self.rest[k] = self.rest[k + 1] + self.undecided_min[k]

    def bound(self, k: int) -> float:
        tables, on, decided = self.tables, self.on, self.decided
        total = self.rest[k]
        for n in range(len(on)):
            if decided[n]:
                total += tables.accel[n] if on[n] else tables.cpu[n]
        for i, t in enumerate(tables.tensors):
            ends = t.consumers if t.producer < 0 else (t.producer, *t.consumers)
            if all(decided[e] for e in ends):
                total += tables.tensor_cost(i, on)
        if any(on):
            total += tables.overhead_accel
        return total

    def descend(self, k: int) -> None:
        margin = 1e-12 * max(1.0, self.best.total)
        if self.bound(k) >= self.best.total - margin:
            return
        if k == len(self.vars):
            self.leaf()
            return
        v = self.vars[k]
        self.decided[v] = True
        for value in sorted((False, True), key=lambda a: self._op_time(v, a)):
            self.on[v] = value
            self.descend(k + 1)
        self.on[v] = False
        self.decided[v] = False

    def _op_time(self, v: int, accel: bool) -> float:
        return self.tables.accel[v] if accel else self.tables.cpu[v]

    def leaf(self) -> None:
        self.leaves += 1
        state = self.base.copy()
        state.on_accel = list(self.on)
        regions = state.regions()
        if self.anchored and any(
                state.on_accel[r[0]] and not any(state.verdicts[n].anchor for n in r)
                for r in regions):
            return  # an accelerator region without an anchor op is not a legal plan
        total = self.tables.total(state.on_accel, regions)
        if total < self.best.total - 1e-12 * max(1.0, self.best.total):
            state.reasons = {}
            self.best = Candidate("exhaustive search", state, regions, total)


# ---------------------------------------------------------------------------- wording
def _note(best: Candidate, lower: float, bound: MinCutBound, exact: ExactResult | None,
          tables: CostTables, seconds: float) -> str:
    launches = sum(1 for r in best.regions if best.state.on_accel[r[0]])
    found = f"best plan from {best.source}: {ms(best.total)}"
    if exact is not None:
        return (f"optimal: proven optimal by exhaustive branch and bound over "
                f"2^{len(bound.supported)} assignments ({exact.leaves} evaluated); {found}; "
                f"{seconds:.2f} s")
    gap = (best.total - lower) / lower if lower > 0 else 0.0
    solve = "" if bound.status == "optimal" else f" (min-cut solve: {bound.status})"
    if gap <= 1e-9:
        return f"optimal: proven optimal (equals the min-cut lower bound){solve}; {found}"
    return (f"optimal: within {gap:.1%} of the lower bound {ms(lower)} (min-cut ignoring "
            f"{launches} region launch(es) of {ms(tables.overhead_accel)} and anchor rules); "
            f"not proven optimal{solve}; {found}; {seconds:.2f} s")


def _explain_cpu_ops(state: Assignment, tables: CostTables) -> None:
    """Give every supported op the optimum left on the CPU a reason with numbers."""
    for n, on in enumerate(state.on_accel):
        if on or not state.verdicts[n].supported or n in state.reasons:
            continue
        node = state.graph[n]
        compute, transfer = tables.move_delta((n,), state.on_accel)
        change = compute + transfer
        detail = (f"{node.op} {ms(tables.accel[n])} on {state.target} vs {ms(tables.cpu[n])} "
                  f"on CPU, copies {'+' if transfer >= 0 else '-'}{ms(abs(transfer))}")
        if change >= 0:
            state.reasons[n] = (f"kept on the CPU by the optimum: alone on {state.target} it "
                                f"would add {ms(change)} ({detail})")
        else:
            state.reasons[n] = (f"kept on the CPU by the optimum: alone on {state.target} it "
                                f"would save {ms(-change)} ({detail}) but need a region launch "
                                f"of {ms(tables.overhead_accel)} or an anchor op to ride along "
                                "with")
