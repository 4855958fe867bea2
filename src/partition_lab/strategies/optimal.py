"""``optimal``: the minimum predicted time over all legal plans, or the best plan found with its gap.

Legal plans: any subset of the supported ops on the accelerator, regions formed by
:func:`~partition_lab.regions.form_regions`, every accelerator region holding an anchor op on
anchored targets. The objective is ``evaluate(plan, cost_model).total``.

1. **Lower bound** (Stone's two-processor min-cut, 1977, as a linear program solved with HiGHS
   through ``scipy.optimize.linprog``): ``x_v`` in [0, 1] per supported op, and per tensor
   ``u_t >= x_c - x_p`` (a host-to-accelerator copy) and ``w_t >= x_p - x_c`` (a copy back; also
   ``w_t >= x_p`` for graph outputs). This is a min-cut LP (each ``u_t`` is an auxiliary node), so
   it is integral: a threshold cut of its solution is an optimal 0/1 assignment. It prices compute
   and copies exactly but ignores region launches and anchors, so ``min(all_cpu, LP + one
   launch)`` bounds every legal plan.
2. **Candidates**: the min-cut assignment made legal and refined by the ``cost`` moves, plus the
   plans of every other strategy with default options (greedy, min_size, no_mac, cost, all_cpu,
   all_accel). The cheapest wins, so ``optimal`` is never above another (default) strategy.
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
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import breadth_first_order, maximum_flow

from ..cost_models.base import CostModel
from ..errors import PartitionLabError
from ..graph import OpGraph
from ..plan import PartitionPlan, Verdict
from .all_accel import AllAccel, NotApplicableError
from .base import Assignment, Strategy, greedy_start, is_anchored, legalize, make_plan, ms
from .costing import CostTables
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

    def check_options(self) -> None:
        for key in ("exact_limit", "exact_budget"):
            if getattr(self, key) < 0:
                raise PartitionLabError(f"strategy 'optimal': option {key} must be >= 0")

    def run(self, graph: OpGraph, verdicts: Sequence[Verdict], *, target: str,
            cost_model: CostModel | None = None) -> PartitionPlan:
        model = self.require_model(cost_model)
        start = time.perf_counter()
        tables = CostTables(graph, model)
        base = Assignment.supported(graph, verdicts, target)
        supported = [n for n, on in enumerate(base.on_accel)
                     if on and math.isfinite(tables.accel[n])]
        candidates = _strategy_candidates(graph, verdicts, target, model, tables)
        bound = min_cut_bound(tables, supported)
        candidates.append(_from_min_cut(base, bound, tables))
        best = min(candidates, key=lambda c: c.total)
        all_cpu = next(c.total for c in candidates if c.source == "all_cpu")
        lower = _lower_bound(tables, supported, bound, all_cpu)
        exact = None
        if len(supported) <= self.exact_limit and \
                2 ** len(supported) * max(1, len(graph)) <= self.exact_budget:
            exact = branch_and_bound(base, supported, tables, best)
            best = exact.best
        notes = [_note(best, lower, bound, exact, tables, time.perf_counter() - start)]
        state = best.state
        _explain_cpu_ops(state, tables)
        return make_plan(self, state, best.regions, notes)


def _lower_bound(tables: CostTables, supported: Sequence[int], bound: MinCutBound,
                 all_cpu: float) -> float:
    """No legal plan costs less: all_cpu is the only plan without an accelerator op, and any
    other one pays at least the min-cut optimum (and each op's faster device) plus a launch."""
    if not supported:
        return all_cpu
    fastest = list(tables.cpu)
    for n in supported:
        fastest[n] = min(tables.cpu[n], tables.accel[n])
    return min(all_cpu, max(sum(fastest), bound.value) + tables.overhead_accel)


# ---------------------------------------------------------------------------- candidates
@dataclass
class Candidate:
    source: str
    state: Assignment
    regions: list[list[int]]
    total: float


def _strategy_candidates(graph: OpGraph, verdicts: Sequence[Verdict], target: str,
                         model: CostModel, tables: CostTables) -> list[Candidate]:
    """The plans of the other strategies, all grown from one greedy start."""
    start, regions = greedy_start(graph, verdicts, target)
    out = [Candidate("greedy", start, regions, tables.total(start.on_accel, regions))]

    def add(source: str, state: Assignment, found: list[list[int]]) -> None:
        out.append(Candidate(source, state, found, tables.total(state.on_accel, found)))

    for pruner, label in [(NoMac(), "no_mac"), (MinSize(), "min_size")]:
        state = start.copy()
        add(label, state, pruner.prune(state, regions))
    state = start.copy()
    result = improve(state, regions, tables)
    add("cost", state, result.regions)
    cpu_only = Assignment(graph, verdicts, target, [False] * len(graph), {})
    add("all_cpu", cpu_only, cpu_only.regions())
    if all(v.supported for v in verdicts):
        try:
            plan = AllAccel().run(graph, verdicts, target=target, cost_model=model)
        except NotApplicableError:
            pass  # an anchored target with a region that has no anchor op
        else:
            everything = start.copy()
            everything.on_accel = [True] * len(graph)
            add("all_accel", everything, [list(r.nodes) for r in plan.regions])
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

    value: float  # a lower bound: the cut with capacities rounded down
    on_accel: list[bool]
    supported: list[int]
    slack: float  # how far rounding may have pushed value below the true minimum


def min_cut_bound(tables: CostTables, supported: Sequence[int]) -> MinCutBound:
    """Stone's min-cut over the supported ops; ``value`` is a lower bound on compute + copies.

    Source side = CPU, sink side = accelerator. Per op, the extra time of its slower device is
    an edge from the source (paid on the accelerator) or to the sink (paid on the CPU). A copy
    to the accelerator is paid when the producer is on the CPU side and any consumer on the
    accelerator side: an auxiliary node that every consumer pulls to the accelerator side, and
    one finite edge from the producer to it; copies back mirror this. Capacities are rounded
    down to integer units of at most 1e-9 of the total, so the cut value stays a lower bound.
    """
    n = len(tables.cpu)
    base = sum(tables.cpu)
    if not supported:
        return MinCutBound(base, [False] * n, [], 0.0)
    node = {v: k + 2 for k, v in enumerate(supported)}  # 0: source (CPU), 1: sink (accel)
    edges: list[tuple[int, int, float]] = []  # capacity math.inf = may not be cut
    for v in supported:
        extra = tables.accel[v] - tables.cpu[v]
        base += min(extra, 0.0)
        if extra > 0:
            edges.append((0, node[v], extra))
        elif extra < 0:
            edges.append((node[v], 1, -extra))
    count = len(supported) + 2
    for t in range(tables.tensor_count):
        producer = node.get(tables.producer[t], 0)
        consumers = [node[c] for c in tables.consumers[t] if c in node]
        if consumers and tables.to_accel[t] > 0:
            count = _fan_edge(edges, count, producer, consumers, tables.to_accel[t], True)
        if producer and tables.to_cpu[t] > 0:
            pinned = tables.is_output[t] or len(consumers) < len(tables.consumers[t])
            count = _fan_edge(edges, count, producer, [0] if pinned else consumers,
                              tables.to_cpu[t], False)
    cut_value, sink_side = _max_flow(edges, count)
    on = [False] * n
    for v in supported:
        on[v] = node[v] in sink_side
    return MinCutBound(base + cut_value[0], on, list(supported), cut_value[1])


def _fan_edge(edges: list[tuple[int, int, float]], count: int, producer: int,
              consumers: list[int], cost: float, to_accel: bool) -> int:
    """Edges charging ``cost`` once if the producer and any consumer are on opposite sides."""
    if len(consumers) == 1:
        a, b = (producer, consumers[0]) if to_accel else (consumers[0], producer)
        edges.append((a, b, cost))
        return count
    aux = count
    for c in consumers:
        edges.append((aux, c, math.inf) if to_accel else (c, aux, math.inf))
    edges.append((producer, aux, cost) if to_accel else (aux, producer, cost))
    return count + 1


def _max_flow(edges: list[tuple[int, int, float]], count: int) -> tuple[tuple[float, float], set[int]]:
    """((min-cut value in s, rounding slack in s), nodes on the sink side) via scipy's Dinic."""
    finite = [cap for _, _, cap in edges if math.isfinite(cap)]
    unit = max(sum(finite) / 1e9, 1e-15)
    never = 2 ** 31 - 1  # scipy's max flow takes int32 capacities; finite ones sum to <= 1e9
    rows = np.array([a for a, _, _ in edges], dtype=np.int64)
    cols = np.array([b for _, b, _ in edges], dtype=np.int64)
    caps = np.array([min(never, math.floor(c / unit)) if math.isfinite(c) else never
                     for _, _, c in edges], dtype=np.int64)
    graph = csr_matrix((caps, (rows, cols)), shape=(count, count))
    graph.data = np.minimum(graph.data, never).astype(np.int32)  # duplicates were summed
    flow = maximum_flow(graph, 0, 1, method="dinic")
    residual = (graph.astype(np.int64) - flow.flow.astype(np.int64)).tocsr()
    residual.data = (residual.data > 0).astype(np.int8)
    residual.eliminate_zeros()
    source_side = set(breadth_first_order(residual, 0, directed=True,
                                          return_predecessors=False).tolist())
    sink_side = set(range(count)) - source_side
    return (flow.flow_value * unit, len(finite) * unit), sink_side


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
        for i in range(tables.tensor_count):
            producer = tables.producer[i]
            if (producer < 0 or decided[producer]) and all(decided[c] for c in tables.consumers[i]):
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
    if best.total - lower <= bound.slack + 1e-12 * max(1.0, best.total):
        return f"optimal: proven optimal (equals the min-cut lower bound); {found}"
    gap = (best.total - lower) / lower if lower > 0 else math.inf
    return (f"optimal: within {gap:.1%} of the lower bound {ms(lower)} (min-cut ignoring "
            f"{launches} region launch(es) of {ms(tables.overhead_accel)} and anchor rules); "
            f"not proven optimal; {found}; {seconds:.2f} s")


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
