"""Exact assignment of the ops of a graph to N devices, as a mixed-integer linear program.

The problem
-----------
Each of ``n`` ops is placed on one of ``D`` devices. Devices are grouped into *domains* (a memory
space and a precision): two devices of one domain exchange tensors for free, while a tensor that
lives in domain ``k1`` and is read in domain ``k2`` costs ``cross_time[t, k1, k2]`` to copy, once
per destination domain however many consumers read it there. A graph input lives in the host
domain and a graph output must end up there. A device used by at least one op pays its
``launch`` cost once. The objective of an assignment ``dev`` is::

    sum_n node_time[dev[n], n]
    + sum_t sum_{k in dest(t) - {src(t)}} cross_time[t, src(t), k]
    + sum_d launch[d] * [d is used]

(:func:`objective` evaluates it directly.)

The formulation (:func:`solve_milp`, HiGHS through :func:`scipy.optimize.milp`)
----------------------------------------------------------------------------------
* ``x[n, d]`` binary, only where ``node_time[d, n]`` is finite; ``sum_d x[n, d] = 1``.
  ``s[n, k] = sum_{d in k} x[n, d]`` (an expression, not a variable) says op ``n`` is in ``k``.
* ``z[t, k]`` in [0, 1], "domain ``k`` holds a reader of ``t``": ``z[t, k] >= s[c, k]`` for each
  consumer ``c``; for a graph output ``z[t, host]`` is the constant 1.
* ``w[t, k1, k2]`` in [0, 1] with cost ``cross_time[t, k1, k2]``, "``t`` is copied from ``k1`` to
  ``k2``", for each domain ``k1`` the producer ``p`` may use (only the host for a graph input)
  and ``k2 != k1`` with a positive cost: ``w[t, k1, k2] <= s[p, k1]``, and the paid copies plus
  the sources that reach ``k2`` for free (``k2`` itself, zero-cost domains) cover the readers::

      sum_{k1 paid} w[t, k1, k2] + sum_{k1 free} s[p, k1] >= z[t, k2]

  This implies the textbook linearisation ``w >= s[p, k1] + z[t, k2] - 1`` (subtract the other
  sources' ``w <= s``), and is tighter for three or more domains: with uniform copy costs its LP
  is the Calinescu-Karloff-Rabani multiway-cut relaxation, and solves much faster (CHANGELOG).
* ``y[d]`` in [0, 1] with cost ``launch[d]``: ``y[d] >= x[n, d]`` for every op ``n``.

Copies and launches that cost nothing get no variables. Costs are rescaled to order one before
HiGHS sees them (its tolerances are absolute, and op times in seconds are small), both gap
tolerances default to zero so that "optimal" means optimal, and presolve is off (with it, HiGHS
1.8 called plans above the optimum optimal; CHANGELOG). Unless HiGHS proves its solution, the
rounded LP solution and each op on its fastest device compete with it.

With two domains and no launch costs this is Stone's two-processor min-cut (H. S. Stone,
"Multiprocessor scheduling with the aid of network flow algorithms", IEEE TSE SE-3(1), 1977)
and its LP relaxation is integral; launch costs and three or more domains (a multiway cut) make
it NP-hard in general, but HiGHS closes graphs of a thousand ops in seconds.

What it does not model
----------------------
The objective ignores region contiguity and acyclicity: it prices ops and tensor copies, not the
regions a backend would compile. Callers re-form regions from the assignment and price the true
plan. One launch per device *used* is a lower bound on one launch per *region*, so (with exact
op and copy prices) :attr:`MilpResult.lower_bound` bounds every plan from below.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

Tensor = tuple[int, tuple[int, ...], bool]
"""``(producer, consumers, is_output)``; ``producer`` is a node id or -1 for a graph input."""


@dataclass
class AssignmentProblem:
    """The inputs of an N-device assignment; see the module docstring for their meaning.

    Arrays are converted to float numpy arrays and every shape and index is checked on
    construction (:class:`ValueError` on a mismatch).
    """

    node_time: np.ndarray  # (D, n) seconds; inf: the device cannot run the node
    tensors: Sequence[Tensor]
    domain_of_device: Sequence[int]  # (D,) domain index per device
    host_domain: int
    cross_time: np.ndarray  # (T, K, K) copy time of tensor t from domain k1 to k2
    launch: np.ndarray  # (D,) paid once per device that runs any node
    fixed: Mapping[int, int] = field(default_factory=dict)  # node -> its required device

    def __post_init__(self) -> None:
        self.node_time = np.asarray(self.node_time, dtype=float)
        self.cross_time = np.asarray(self.cross_time, dtype=float)
        self.launch = np.asarray(self.launch, dtype=float)
        self.domain_of_device = [int(k) for k in self.domain_of_device]
        self.tensors = [(int(p), tuple(int(c) for c in cs), bool(out))
                        for p, cs, out in self.tensors]
        self.fixed = {int(v): int(d) for v, d in self.fixed.items()}
        _check_shapes(self)
        _check_tensors(self)
        _check_allowed(self)

    @property
    def n_nodes(self) -> int:
        return self.node_time.shape[1]

    @property
    def n_devices(self) -> int:
        return self.node_time.shape[0]

    @property
    def n_domains(self) -> int:
        return self.cross_time.shape[1]

    def allowed(self, node: int) -> list[int]:
        """The devices ``node`` may use: its fixed device, or every device with a finite time."""
        if node in self.fixed:
            return [self.fixed[node]]
        return [int(d) for d in np.flatnonzero(np.isfinite(self.node_time[:, node]))]

    def fastest(self) -> list[int]:
        """Each node on its fastest allowed device (ignoring copies and launches)."""
        return [min(self.allowed(v), key=lambda d, v=v: self.node_time[d, v])
                for v in range(self.n_nodes)]


def _check_shapes(p: AssignmentProblem) -> None:
    if p.node_time.ndim != 2:
        raise ValueError(f"node_time must be (devices, nodes), got shape {p.node_time.shape}")
    n_dev = p.node_time.shape[0]
    if p.cross_time.ndim != 3 or p.cross_time.shape[1] != p.cross_time.shape[2]:
        raise ValueError(f"cross_time must be (tensors, K, K), got shape {p.cross_time.shape}")
    if p.cross_time.shape[0] != len(p.tensors):
        raise ValueError(f"cross_time has {p.cross_time.shape[0]} tensors, "
                         f"tensors has {len(p.tensors)}")
    if p.launch.shape != (n_dev,):
        raise ValueError(f"launch must have shape ({n_dev},), got {p.launch.shape}")
    if len(p.domain_of_device) != n_dev:
        raise ValueError(f"domain_of_device has {len(p.domain_of_device)} entries "
                         f"for {n_dev} devices")
    n_dom = p.cross_time.shape[1]
    if any(not 0 <= k < n_dom for k in [*p.domain_of_device, p.host_domain]):
        raise ValueError(f"domain indices must lie in range({n_dom})")
    if np.isnan(p.node_time).any() or (p.node_time < 0).any():
        raise ValueError("node_time must be >= 0 (inf for unsupported), without NaN")
    for name, arr in (("cross_time", p.cross_time), ("launch", p.launch)):
        if not np.isfinite(arr).all() or (arr < 0).any():
            raise ValueError(f"{name} must be finite and >= 0")


def _check_tensors(p: AssignmentProblem) -> None:
    n = p.n_nodes
    for t, (producer, consumers, _) in enumerate(p.tensors):
        if not -1 <= producer < n:
            raise ValueError(f"tensor {t}: producer {producer} not in [-1, {n})")
        if any(not 0 <= c < n for c in consumers):
            raise ValueError(f"tensor {t}: consumer not in range({n}): {consumers}")


def _check_allowed(p: AssignmentProblem) -> None:
    for v, d in p.fixed.items():
        if not (0 <= v < p.n_nodes and 0 <= d < p.n_devices):
            raise ValueError(f"fixed: node {v} -> device {d} out of range")
        if not math.isfinite(p.node_time[d, v]):
            raise ValueError(f"fixed: node {v} cannot run on device {d} (infinite time)")
    stuck = np.flatnonzero(~np.isfinite(p.node_time).any(axis=0))
    if stuck.size:
        raise ValueError(f"nodes without any finite device time: {stuck[:10].tolist()}")


def objective(dev: Sequence[int], problem: AssignmentProblem) -> float:
    """The cost of the assignment ``dev`` (node -> device), straight from the formula.

    Infinite when a node sits on a device that cannot run it; ``problem.fixed`` is not checked.
    """
    p = problem
    if len(dev) != p.n_nodes:
        raise ValueError(f"assignment has {len(dev)} entries for {p.n_nodes} nodes")
    dom = [p.domain_of_device[d] for d in dev]
    total = sum(float(p.node_time[d, v]) for v, d in enumerate(dev))
    for t, (producer, consumers, is_output) in enumerate(p.tensors):
        src = p.host_domain if producer < 0 else dom[producer]
        dests = {dom[c] for c in consumers} | ({p.host_domain} if is_output else set())
        total += sum(float(p.cross_time[t, src, k]) for k in dests - {src})
    return float(total + sum(float(p.launch[d]) for d in set(dev)))


@dataclass
class MilpResult:
    """What :func:`solve_milp` found."""

    assignment: list[int]  # node -> device
    objective: float  # objective(assignment), recomputed from the formula
    lower_bound: float  # best of HiGHS's dual bound and lp_bound, capped at objective
    proven: bool  # HiGHS proved the assignment optimal
    lp_bound: float  # the LP relaxation's value (-inf if it did not finish)
    seconds: float  # wall-clock time of the whole call
    status: str  # "optimal", or what stopped the search


@dataclass(frozen=True)
class _Expr:
    """A linear expression ``sum(coef * var) + const`` over model columns."""

    terms: tuple[tuple[int, float], ...] = ()
    const: float = 0.0


_ONE = _Expr(const=1.0)


def _sum(exprs: Sequence[_Expr]) -> _Expr:
    """The sum of linear expressions."""
    return _Expr(tuple(term for e in exprs for term in e.terms), sum(e.const for e in exprs))


class _Model:
    """Columns and sparse rows of a MILP, collected one by one."""

    def __init__(self) -> None:
        self.cost: list[float] = []
        self.integer: list[int] = []
        self.rows: list[int] = []
        self.cols: list[int] = []
        self.vals: list[float] = []
        self.row_lo: list[float] = []
        self.row_hi: list[float] = []

    def var(self, cost: float, integer: bool = False) -> int:
        """A new column in [0, 1]; its index."""
        self.cost.append(cost)
        self.integer.append(int(integer))
        return len(self.cost) - 1

    def row(self, terms: Sequence[tuple[int, float]], lo: float, hi: float = math.inf) -> None:
        """The constraint ``lo <= sum(coef * var) <= hi``."""
        r = len(self.row_lo)
        for col, coef in terms:
            self.rows.append(r)
            self.cols.append(col)
            self.vals.append(coef)
        self.row_lo.append(lo)
        self.row_hi.append(hi)

    def at_least(self, big: _Expr, small: _Expr) -> None:
        """The constraint ``big >= small``."""
        terms = list(big.terms) + [(c, -a) for c, a in small.terms]
        self.row(terms, small.const - big.const)


@dataclass
class _Formulation:
    model: _Model
    x: list[dict[int, int]]  # node -> {device: column}


def _build(p: AssignmentProblem) -> _Formulation:
    """The model of ``p`` (costs unscaled)."""
    model = _Model()
    x = [_add_node(model, p, v) for v in range(p.n_nodes)]
    form = _Formulation(model, x)
    for t, tensor in enumerate(p.tensors):
        _add_tensor(form, p, t, tensor)
    for d in range(p.n_devices):
        _add_launch(form, p, d)
    return form


def _add_node(model: _Model, p: AssignmentProblem, v: int) -> dict[int, int]:
    """``x[v, d]`` for the allowed devices, summing to one."""
    cols = {d: model.var(float(p.node_time[d, v]), integer=True) for d in p.allowed(v)}
    model.row([(c, 1.0) for c in cols.values()], 1.0, 1.0)
    return cols


def _in_domain(form: _Formulation, p: AssignmentProblem, v: int, k: int) -> _Expr:
    """``s[v, k]``: 1 when node ``v`` runs in domain ``k``."""
    return _Expr(tuple((c, 1.0) for d, c in form.x[v].items() if p.domain_of_device[d] == k))


def _domains(p: AssignmentProblem, v: int) -> set[int]:
    return {p.domain_of_device[d] for d in p.allowed(v)}


def _add_tensor(form: _Formulation, p: AssignmentProblem, t: int, tensor: Tensor) -> None:
    """The copies of tensor ``t`` into each domain that may read it (see the module docstring)."""
    producer, consumers, is_output = tensor
    if producer < 0:
        sources = {p.host_domain: _ONE}
    else:
        sources = {k: _in_domain(form, p, producer, k) for k in _domains(p, producer)}
    dests = set().union(*(_domains(p, c) for c in consumers))
    if is_output:
        dests.add(p.host_domain)
    for k2 in sorted(dests):
        paid = {k1: float(p.cross_time[t, k1, k2]) for k1 in sources if k1 != k2}
        paid = {k1: cost for k1, cost in paid.items() if cost > 0.0}
        if paid:
            held = _holder(form, p, consumers, is_output, k2)
            _add_copies(form.model, sources, paid, held)


def _add_copies(model: _Model, sources: Mapping[int, _Expr], paid: Mapping[int, float],
                held: _Expr) -> None:
    """``w[k1] <= s[p, k1]`` per paid source; paid copies plus free sources cover ``held``."""
    cover = [s for k1, s in sources.items() if k1 not in paid]
    for k1, cost in paid.items():
        w = _Expr(((model.var(cost), 1.0),))
        if sources[k1] is not _ONE:
            model.at_least(sources[k1], w)
        cover.append(w)
    model.at_least(_sum(cover), held)


def _holder(form: _Formulation, p: AssignmentProblem, consumers: Sequence[int],
            is_output: bool, k: int) -> _Expr:
    """``z[t, k]``: at least each consumer's ``s[c, k]``; the constant 1 for an output at host."""
    if is_output and k == p.host_domain:
        return _ONE
    z = _Expr(((form.model.var(0.0), 1.0),))
    for c in consumers:
        reads = _in_domain(form, p, c, k)
        if reads.terms:
            form.model.at_least(z, reads)
    return z


def _add_launch(form: _Formulation, p: AssignmentProblem, d: int) -> None:
    """``y[d] >= x[v, d]`` for every node that may use ``d`` (skipped when free)."""
    if p.launch[d] == 0.0:
        return
    y = _Expr(((form.model.var(float(p.launch[d])), 1.0),))
    for cols in form.x:
        if d in cols:
            form.model.at_least(y, _Expr(((cols[d], 1.0),)))


@dataclass
class _Highs:
    """One HiGHS run, its costs scaled back to seconds."""

    status: int
    message: str
    x: np.ndarray | None
    value: float  # objective of x; nan without x
    dual_bound: float  # -inf when unknown


def _run_highs(model: _Model, integral: bool, time_limit: float, gap: float) -> _Highs:
    """Solve the model (or its LP relaxation) with costs rescaled to order one."""
    # Imported here: every command would pay scipy's import (0.1-0.3 s), few solve.
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import csr_matrix

    if not model.cost:
        return _Highs(0, "nothing to decide", np.zeros(0), 0.0, 0.0)
    if time_limit <= 0.0:
        return _Highs(1, "not run: time limit reached", None, math.nan, -math.inf)
    cost = np.asarray(model.cost)
    positive = cost[cost > 0]
    scale = float(np.median(positive)) if positive.size else 1.0
    matrix = csr_matrix((model.vals, (model.rows, model.cols)),
                        shape=(len(model.row_lo), len(cost)))
    constraints = LinearConstraint(matrix, model.row_lo, model.row_hi) if model.row_lo else None
    integrality = np.asarray(model.integer) if integral else np.zeros(len(cost))
    options = {"time_limit": time_limit, "mip_rel_gap": gap, "presolve": False}
    if integral:
        options["mip_abs_gap"] = 0.0  # HiGHS's own option; scipy passes it through, warning
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Unrecognized options", RuntimeWarning)
        res = milp(cost / scale, integrality=integrality, bounds=Bounds(0.0, 1.0),
                   constraints=constraints, options=options)
    value = float(res.fun) * scale if res.x is not None else math.nan
    bound = getattr(res, "mip_dual_bound", None)
    dual = float(bound) * scale if bound is not None and math.isfinite(bound) else -math.inf
    return _Highs(int(res.status), str(res.message), res.x, value, dual)


def _read_assignment(form: _Formulation, x: np.ndarray) -> list[int]:
    """Each node's device: its largest ``x[v, d]``."""
    return [max(cols, key=lambda d, cols=cols: x[cols[d]]) for cols in form.x]


def solve_milp(problem: AssignmentProblem, time_limit: float = 60.0,
               mip_rel_gap: float = 0.0) -> MilpResult:
    """The cheapest assignment of ``problem`` (proven, unless HiGHS runs out of time).

    HiGHS solves the LP relaxation (for :attr:`MilpResult.lp_bound`) and then the MILP, within
    ``time_limit`` seconds in all (HiGHS may overrun it slightly). Unless the MILP is proven, its
    incumbent (if any) competes with two cheap assignments, the rounded LP solution and each node
    on its fastest device, and the cheapest wins. ``mip_rel_gap`` > 0 accepts a solution within
    that relative gap of the dual bound as "optimal".
    """
    start = time.perf_counter()
    form = _build(problem)
    lp = _run_highs(form.model, integral=False, time_limit=_left(start, time_limit),
                    gap=mip_rel_gap)
    lp_bound = lp.value if lp.status == 0 else -math.inf
    mip = _run_highs(form.model, integral=True, time_limit=_left(start, time_limit),
                     gap=mip_rel_gap)
    candidates = {"fastest device per node": problem.fastest()}
    if lp.x is not None:
        candidates["rounded LP"] = _read_assignment(form, lp.x)
    if mip.x is not None:
        candidates["MILP"] = _read_assignment(form, mip.x)
    # the MILP's assignment first, so that it wins ties (min keeps the first of equals)
    order = sorted(candidates, key=lambda name: name != "MILP")
    values = {name: objective(candidates[name], problem) for name in order}
    source = min(order, key=values.__getitem__)
    proven = mip.status == 0 and source == "MILP"
    status = "optimal" if proven else f"{source}; HiGHS: {mip.message}"
    value = values[source]
    bound = max(lp_bound, mip.dual_bound, value if proven else -math.inf)
    return MilpResult(assignment=candidates[source], objective=value,
                      lower_bound=min(bound, value), proven=proven, lp_bound=lp_bound,
                      seconds=time.perf_counter() - start, status=status)


def _left(start: float, time_limit: float) -> float:
    """Seconds left of ``time_limit`` since ``start``."""
    return time_limit - (time.perf_counter() - start)
