"""``optimal``: the minimum predicted time over all legal plans, or the best plan found with its gap.

Legal plans: each op on a device that supports it, regions formed by
:func:`~partition_lab.core.regions.form_regions`, every region of an anchored device holding an anchor
op. The objective is ``evaluate(plan, cost_model).total``.

1. **Lower bound**, pricing compute and copies exactly but region launches only once per device
   used, and ignoring anchors. Two devices: Stone's min-cut (1977), an integral LP solved as a
   max-flow. More devices: an integer program over ``x[node, device]`` solved with HiGHS
   (:mod:`.milp`); its dual bound is the lower bound.
2. **Candidates**: the bound's assignment made legal and refined by the ``cost`` moves, plus the
   plans of every other strategy with default options (greedy, min_size, no_mac, cost, all_cpu,
   all_accel). The cheapest wins.
3. **Exact search** when the ops with a choice are few (``exact_limit``): branch and bound over
   all assignments, pruned by a bound (fixed compute and copies, the cheapest device for the
   undecided ops, one launch per device used). The result is then proven.

The plan's notes say whether the result is proven optimal, or its gap to the lower bound.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..core.graph import OpGraph
from ..core.plan import PartitionPlan
from ..core.reasons import Reason, ReasonCode
from ..core.support import Support
from ..cost_models.base import CostModel
from ..errors import PartitionLabError
from .all_accel import AllAccel, NotApplicableError
from .base import Assignment, Strategy, greedy_start, legalize, make_plan, ms
from .costing import CostTables
from .local_search import improve
from .milp import AssignmentProblem, solve_milp
from .min_size import MinSize
from .no_mac import NoMac
from .robust import RobustChoice, RobustOptions, decide


@dataclass(frozen=True)
class Optimal(RobustOptions, Strategy):
    """Exact minimum of the cost model where provable, else the best plan with its gap."""

    name = "optimal"
    summary = "minimum predicted time: min-cut bound + refinement + every strategy; exact when small"
    needs_cost_model = True
    exact_limit: int = field(default=16, metadata={
        "help": "search all assignments exactly when at most this many ops have a choice"})
    exact_budget: int = field(default=2_000_000, metadata={
        "help": "... and (assignments) * graph_ops is at most this"})
    milp_seconds: float = field(default=60.0, metadata={
        "help": "time limit of the integer program (three or more devices)"})

    def check_options(self) -> None:
        for key in ("exact_limit", "exact_budget"):
            if getattr(self, key) < 0:
                raise PartitionLabError(f"strategy 'optimal': option {key} must be >= 0")
        self.check_robust_options("optimal")

    def plan(self, graph: OpGraph, support: Support,
             cost_model: CostModel | None = None) -> PartitionPlan:
        return self.plan_with_choice(graph, support, cost_model)[0]

    def plan_with_choice(self, graph: OpGraph, support: Support, cost_model: CostModel | None
                         ) -> tuple[PartitionPlan, RobustChoice | None]:
        model = self.require_model(cost_model)
        start = time.perf_counter()
        tables = CostTables(graph, model, support.platform, support.units)
        tables.restrict([support.allowed(n) for n in range(len(graph))])
        free = [n for n in range(len(graph)) if len(support.allowed(n)) > 1]
        candidates = _strategy_candidates(graph, support, model, tables)
        bound = assignment_bound(tables, support, free, self.milp_seconds)
        candidates.append(_from_bound(graph, support, bound, tables))
        best = min(candidates, key=lambda c: c.total)
        all_cpu = next(c.total for c in candidates if c.source == "all_cpu")
        lower = _lower_bound(tables, free, bound, all_cpu)
        exact = None
        leaves = math.prod(len(support.allowed(n)) for n in free)
        if len(free) <= self.exact_limit and leaves * max(1, len(graph)) <= self.exact_budget:
            exact = branch_and_bound(graph, support, free, tables, best)
            best = exact.best
        notes = [_note(best, lower, bound, exact, tables, leaves, time.perf_counter() - start)]
        greedy = candidates[0]
        choice = None
        if best.state.device != greedy.state.device:
            choice = decide(tables, greedy.state.device, greedy.regions, greedy.total,
                            best.state.device, best.regions, best.total,
                            z=self.confidence_z, min_gain=self.min_gain)
            if tables.uncertain or self.min_gain:
                notes.append(choice.note("optimal"))
            if not choice.leave:
                best = greedy
        state = best.state
        _explain_moved_ops(state, tables)
        return make_plan(self, state, best.regions, notes), choice


def _lower_bound(tables: CostTables, free: Sequence[int], bound: Bound, all_cpu: float) -> float:
    """No legal plan costs less: all_cpu is the only plan on the host alone; any other one pays
    at least the bound (compute, copies, one launch per device used) and each op's fastest
    device, plus the cheapest launch off the host."""
    if not free:
        return all_cpu
    fastest = [min(tables.time[d][n] for d in range(tables.devices)) for n in range(len(tables.time[0]))]
    launches = [o for d, o in enumerate(tables.overhead) if d != tables.host]
    return min(all_cpu, max(sum(fastest) + min(launches, default=0.0), bound.value))


# ---------------------------------------------------------------------------- candidates
@dataclass
class Candidate:
    source: str
    state: Assignment
    regions: list[list[int]]
    total: float


def _strategy_candidates(graph: OpGraph, support: Support, model: CostModel,
                         tables: CostTables) -> list[Candidate]:
    """The plans of the other strategies, all grown from one greedy start."""
    start, regions = greedy_start(graph, support)
    out = [Candidate("greedy", start, regions, tables.total(start.device, regions))]

    def add(source: str, state: Assignment, found: list[list[int]]) -> None:
        out.append(Candidate(source, state, found, tables.total(state.device, found)))

    for pruner, label in [(NoMac(), "no_mac"), (MinSize(), "min_size")]:
        state = start.copy()
        add(label, state, pruner.prune(state, regions))
    state = start.copy()
    result = improve(state, regions, tables)
    add("cost", state, result.regions)
    cpu_only = Assignment.on_host(graph, support, Reason(ReasonCode.BASELINE, "all_cpu"))
    cpu_only.reasons = {}
    add("all_cpu", cpu_only, cpu_only.regions())
    try:
        plan = AllAccel().run(graph, support, cost_model=model)
    except NotApplicableError:
        pass  # the primary accelerator rejects an op, or a region has no anchor op
    else:
        index = support.platform.index(support.platform.primary.name)
        everything = Assignment(graph, support, [index] * len(graph), {})
        add("all_accel", everything, [list(r.nodes) for r in plan.regions])
    return out


def _from_bound(graph: OpGraph, support: Support, bound: Bound,
                tables: CostTables) -> Candidate:
    state = Assignment(graph, support, list(bound.device), {})
    result = improve(state, legalize(state), tables)
    return Candidate(f"{bound.method} + cost moves", state, result.regions, result.total)


# ---------------------------------------------------------------------------- lower bound
@dataclass
class Bound:
    """A lower bound on every plan but all-CPU, and the assignment that attains it."""

    value: float
    device: list[int]
    method: str  # "min-cut" or "integer program"
    slack: float  # how far rounding may have pushed value below the true minimum
    proven: bool = True  # False: the solver stopped early; value is its dual bound


def assignment_bound(tables: CostTables, support: Support, free: Sequence[int],
                     seconds: float) -> Bound:
    """Min-cut for two devices, the HiGHS integer program for more."""
    launches = [o for d, o in enumerate(tables.overhead) if d != tables.host]
    min_launch = min(launches, default=0.0)
    preferred = [support.preferred(n) for n in range(len(support))]
    if not free:
        return Bound(tables.compute(preferred) + tables.transfer(preferred), preferred,
                     "fixed", 0.0)
    if tables.devices == 2:
        cut = min_cut_bound(tables, free)
        other = 1 - tables.host
        device = [other if on else tables.host for on in cut.on_accel]
        for n in range(len(device)):
            if n not in cut.free_set:
                device[n] = preferred[n]
        return Bound(cut.value + min_launch, device, "min-cut", cut.slack)
    problem = AssignmentProblem(
        node_time=np.array(tables.time, dtype=float),
        tensors=[(tables.producer[t], tuple(tables.consumers[t]), tables.is_output[t])
                 for t in range(tables.tensor_count)],
        domain_of_device=list(tables.dom), host_domain=tables.host_dom,
        cross_time=np.array(tables.cross, dtype=float).reshape(
            tables.tensor_count, tables.domain_count, tables.domain_count),
        launch=np.array([0.0 if d == tables.host else o for d, o in enumerate(tables.overhead)]))
    result = solve_milp(problem, time_limit=seconds)
    return Bound(result.lower_bound, list(result.assignment), "integer program",
                 1e-9 * max(1.0, abs(result.objective)), result.proven)


@dataclass
class MinCutBound:
    """The compute + copy minimum over all two-device assignments (no launches, no anchors)."""

    value: float  # a lower bound: the cut with capacities rounded down
    on_accel: list[bool]
    free_set: set[int]
    slack: float  # how far rounding may have pushed value below the true minimum


def min_cut_bound(tables: CostTables, supported: Sequence[int]) -> MinCutBound:
    """Stone's min-cut over the ops with a choice; ``value`` bounds compute + copies.

    Two devices: the host (source side) and the other one (sink side). Per op, the extra time
    of its slower device is an edge from the source (paid off the host) or to the sink (paid on
    the host). A copy off the host is paid when the producer is on the source side and any
    consumer on the sink side: an auxiliary node that every consumer pulls to the sink side,
    and one finite edge from the producer to it; copies back mirror this. Capacities are
    rounded down to integer units of at most 1e-9 of the total, so the cut value stays a lower
    bound.
    """
    host, other = tables.host, 1 - tables.host
    cpu, accel = tables.time[host], tables.time[other]
    free = set(supported)
    n = len(cpu)
    # Ops without a choice sit where they must: fixed compute.
    on_fixed = [(n_ in free) or math.isinf(cpu[n_]) for n_ in range(n)]
    base = sum(accel[v] if (v not in free and on_fixed[v]) else cpu[v]
               for v in range(n) if v not in free)
    base += sum(cpu[v] for v in free)
    h, a = tables.host_dom, tables.dom[other]
    K = tables.domain_count
    to_accel = [row[h * K + a] for row in tables.cross] if h != a else [0.0] * tables.tensor_count
    to_cpu = [row[a * K + h] for row in tables.cross] if h != a else [0.0] * tables.tensor_count
    node = {v: k + 2 for k, v in enumerate(supported)}  # 0: source (host), 1: sink (other)
    for v in range(n):
        if v not in free and on_fixed[v]:
            node[v] = 1  # fixed off the host: the sink
    edges: list[tuple[int, int, float]] = []  # capacity math.inf = may not be cut
    for v in supported:
        extra = accel[v] - cpu[v]
        base += min(extra, 0.0)
        if extra > 0:
            edges.append((0, node[v], extra))
        elif extra < 0:
            edges.append((node[v], 1, -extra))
    count = len(supported) + 2
    for t in range(tables.tensor_count):
        producer = node.get(tables.producer[t], 0)
        consumers = list(dict.fromkeys(node.get(c, 0) for c in tables.consumers[t]))
        sinks = [c for c in consumers if c != 0]
        if sinks and to_accel[t] > 0 and producer != 1:
            count = _fan_edge(edges, count, producer, sinks, to_accel[t], True)
        if producer != 0 and to_cpu[t] > 0:
            pinned = tables.is_output[t] or 0 in consumers
            sources = [c for c in consumers if c != 1]
            if pinned:
                count = _fan_edge(edges, count, producer, [0], to_cpu[t], False)
            elif sources:
                count = _fan_edge(edges, count, producer, sources, to_cpu[t], False)
    cut_value, sink_side = _max_flow(edges, count)
    on = [bool(v not in free and on_fixed[v]) for v in range(n)]
    for v in supported:
        on[v] = node[v] in sink_side
    return MinCutBound(base + cut_value[0], on, free, cut_value[1])


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
    from scipy.sparse import csr_matrix  # here: see strategies/milp.py's _run_highs
    from scipy.sparse.csgraph import breadth_first_order, maximum_flow

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


def branch_and_bound(graph: OpGraph, support: Support, free: Sequence[int], tables: CostTables,
                     incumbent: Candidate) -> ExactResult:
    """Search every assignment of the ops with a choice, pruning with a lower bound."""
    search = _BranchAndBound(graph, support, list(free), tables, incumbent)
    search.descend(0)
    return ExactResult(search.best, search.leaves)


class _BranchAndBound:
    def __init__(self, graph: OpGraph, support: Support, free: list[int], tables: CostTables,
                 incumbent: Candidate) -> None:
        self.graph = graph
        self.support = support
        self.vars = free
        self.tables = tables
        self.best = incumbent
        self.leaves = 0
        self.anchored = [support.anchored(d) for d in range(tables.devices)]
        self.device = [support.preferred(n) for n in range(len(support))]
        self.decided = [len(support.allowed(n)) == 1 for n in range(len(support))]
        cheapest = [min(tables.time[d][v] for d in support.allowed(v)) for v in free]
        # Suffix sums: the cheapest the undecided ops can be.
        self.rest = [0.0] * (len(free) + 1)
        for k in range(len(free) - 1, -1, -1):
            self.rest[k] = self.rest[k + 1] + cheapest[k]

    def bound(self, k: int) -> float:
        tables, device, decided = self.tables, self.device, self.decided
        total = self.rest[k]
        used = set()
        for n in range(len(device)):
            if decided[n]:
                total += tables.time[device[n]][n]
                used.add(device[n])
        for i in range(tables.tensor_count):
            producer = tables.producer[i]
            if (producer < 0 or decided[producer]) and all(decided[c] for c in tables.consumers[i]):
                total += tables.tensor_cost(i, device)
        return total + sum(tables.overhead[d] for d in used)

    def descend(self, k: int) -> None:
        margin = 1e-12 * max(1.0, self.best.total)
        if self.bound(k) >= self.best.total - margin:
            return
        if k == len(self.vars):
            self.leaf()
            return
        v = self.vars[k]
        self.decided[v] = True
        for d in sorted(self.support.allowed(v), key=lambda d: self.tables.time[d][v]):
            self.device[v] = d
            self.descend(k + 1)
        self.device[v] = self.support.preferred(v)
        self.decided[v] = False

    def leaf(self) -> None:
        self.leaves += 1
        state = Assignment(self.graph, self.support, list(self.device), {})
        regions = state.regions()
        for r in regions:
            d = state.device[r[0]]
            if self.anchored[d] and not any(self.support.verdict(n, d).anchor for n in r):
                return  # a region of an anchored device without an anchor op is not legal
        total = self.tables.total(state.device, regions)
        if total < self.best.total - 1e-12 * max(1.0, self.best.total):
            self.best = Candidate("exhaustive search", state, regions, total)


# ---------------------------------------------------------------------------- wording
def _note(best: Candidate, lower: float, bound: Bound, exact: ExactResult | None,
          tables: CostTables, leaves: int, seconds: float) -> str:
    found = f"best plan from {best.source}: {ms(best.total)}"
    if exact is not None:
        return (f"optimal: proven optimal by exhaustive branch and bound over {leaves} "
                f"assignments ({exact.leaves} evaluated); {found}; {seconds:.2f} s")
    if bound.proven and best.total - lower <= bound.slack + 1e-12 * max(1.0, best.total):
        return f"optimal: proven optimal (equals the {bound.method} lower bound); {found}"
    gap = (best.total - lower) / lower if lower > 0 else math.inf
    launches = len(best.regions)
    stopped = "" if bound.proven else ", stopped at its time limit"
    return (f"optimal: within {gap:.1%} of the lower bound {ms(lower)} ({bound.method}{stopped}, "
            f"pricing launches once per device rather than per region ({launches} regions) and "
            f"ignoring anchor rules); not proven optimal; {found}; {seconds:.2f} s")


def _explain_moved_ops(state: Assignment, tables: CostTables) -> None:
    """Give every op the optimum left off its preferred device a reason with numbers."""
    support = state.support
    for n, d in enumerate(state.device):
        preferred = support.preferred(n)
        if d == preferred or n in state.reasons:
            continue
        node = state.graph[n]
        compute, transfer = tables.move_delta((n,), state.device, (preferred,))
        change = compute + transfer
        there = state.name(preferred)
        where = "the CPU" if d == state.host else state.name(d)
        detail = (f"{node.op} {ms(tables.time[preferred][n])} on {there} vs "
                  f"{ms(tables.time[d][n])} on {state.name(d)}, copies "
                  f"{'+' if transfer >= 0 else '-'}{ms(abs(transfer))}")
        numbers = {"change_s": change, "copies_s": transfer}
        if change >= 0:
            text = (f"kept on {where} by the optimum: alone on {there} it would add "
                    f"{ms(change)} ({detail})")
        else:
            text = (f"kept on {where} by the optimum: alone on {there} it would save "
                    f"{ms(-change)} ({detail}) but need a region launch of "
                    f"{ms(tables.overhead[preferred])} or an anchor op to ride along with")
        state.reasons[n] = Reason(ReasonCode.OPTIMUM, text, "optimal", there, numbers)
