"""The N-device assignment MILP against brute force, by hand, and at a thousand nodes."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oracles import brute_force
from partition_lab.strategies.milp import AssignmentProblem, objective, solve_milp

GPU, HOST = 0, 1  # domains of the two-domain problems: devices 0 and 1 on the GPU, 2 on the host
TWO_DOMAINS = [GPU, GPU, HOST]
THREE_DOMAINS = [0, 1, 2, 2]  # e.g. fp16 accelerator, fp32 accelerator, two host devices


@st.composite
def problems(draw: st.DrawFn, domain_of_device: list[int], max_nodes: int) -> AssignmentProblem:
    """A random DAG (edges from lower to higher ids) with random prices; the last domain is host."""
    n_dev, n_dom = len(domain_of_device), max(domain_of_device) + 1
    n = draw(st.integers(1, max_nodes))
    unit = draw(st.sampled_from([1.0, 1e-3, 1e-6]))  # seconds-sized costs exercise the scaling
    price = st.integers(0, 1000).map(lambda v: v / 100 * unit)
    node_time = np.array([[draw(price) for _ in range(n)] for _ in range(n_dev)])
    for v in range(n):
        keep = draw(st.integers(0, n_dev - 1))
        for d in range(n_dev):
            if d != keep and draw(st.integers(0, 4)) == 0:
                node_time[d, v] = math.inf
    tensors = []
    for v in range(n):
        consumers = tuple(c for c in range(v + 1, n) if draw(st.booleans()))
        tensors.append((v, consumers, draw(st.booleans())))
    for _ in range(draw(st.integers(0, 2))):
        tensors.append((-1, tuple(c for c in range(n) if draw(st.booleans())), False))
    cross = np.array([[[0.0 if k1 == k2 else draw(price) for k2 in range(n_dom)]
                       for k1 in range(n_dom)] for _ in tensors]).reshape(-1, n_dom, n_dom)
    launch = np.array([draw(price) for _ in range(n_dev)])
    fixed = {}
    if draw(st.booleans()):
        v = draw(st.integers(0, n - 1))
        fixed[v] = draw(st.sampled_from(np.flatnonzero(np.isfinite(node_time[:, v])).tolist()))
    return AssignmentProblem(node_time, tensors, domain_of_device, n_dom - 1, cross, launch,
                             fixed=fixed)


def check_against_brute_force(problem: AssignmentProblem) -> None:
    result = solve_milp(problem, time_limit=20)
    best, optimum = brute_force(problem)
    assert result.proven, result.status
    assert result.objective == pytest.approx(optimum, rel=1e-9, abs=1e-12)
    assert result.objective == objective(result.assignment, problem)
    assert all(result.assignment[v] == d for v, d in problem.fixed.items())
    assert objective(best, problem) == optimum
    assert result.lower_bound <= result.objective + 1e-9
    assert result.lp_bound <= result.objective * (1 + 1e-9) + 1e-12


@settings(max_examples=60, deadline=None)
@given(problems(TWO_DOMAINS, max_nodes=9))
def test_two_domains_match_brute_force(problem: AssignmentProblem) -> None:
    check_against_brute_force(problem)


@settings(max_examples=40, deadline=None)
@given(problems(THREE_DOMAINS, max_nodes=7))
def test_three_domains_match_brute_force(problem: AssignmentProblem) -> None:
    check_against_brute_force(problem)


def chain_problem(copy: float) -> AssignmentProblem:
    """input -> a -> b -> c -> output; the host runs ``b`` 1 s faster than the GPU does."""
    inf = math.inf
    node_time = np.array([[1.0, 3.0, 1.0],  # device 0, GPU
                          [inf, inf, inf],  # device 1, GPU, runs nothing
                          [5.0, 2.0, 5.0]])  # device 2, host
    tensors = [(-1, (0,), False), (0, (1,), False), (1, (2,), False), (2, (), True)]
    cross = np.zeros((4, 2, 2))
    cross[:, GPU, HOST] = cross[:, HOST, GPU] = copy
    return AssignmentProblem(node_time, tensors, TWO_DOMAINS, HOST, cross, np.zeros(3))


def test_copies_make_the_single_device_plan_win() -> None:
    # Moving b to the host saves 1 s of compute but costs two 0.75 s copies.
    result = solve_milp(chain_problem(copy=0.75))
    assert result.assignment == [0, 0, 0]
    assert result.objective == pytest.approx(0.75 + 5.0 + 0.75)
    assert objective([0, 2, 0], chain_problem(copy=0.75)) == pytest.approx(4 * 0.75 + 4.0)
    assert objective([2, 2, 2], chain_problem(copy=0.75)) == pytest.approx(12.0)
    # With cheap copies, b moves.
    assert solve_milp(chain_problem(copy=0.25)).assignment == [0, 2, 0]


def test_a_tensor_is_copied_once_per_domain() -> None:
    node_time = np.ones((3, 4))
    tensors = [(0, (1, 2, 3), False)]
    cross = np.array([[[0.0, 10.0], [20.0, 0.0]]])
    problem = AssignmentProblem(node_time, tensors, TWO_DOMAINS, HOST, cross,
                                np.array([0.5, 0.25, 0.0]))
    # Three consumers, two of them on the host (devices 2): one copy GPU -> host.
    assert objective([0, 1, 2, 2], problem) == 4 + 10 + 0.5 + 0.25
    assert objective([2, 0, 1, 0], problem) == 4 + 20 + 0.5 + 0.25
    assert objective([2, 2, 2, 2], problem) == 4


def test_fixed_nodes_stay_put() -> None:
    problem = chain_problem(copy=0.75)
    problem = AssignmentProblem(problem.node_time, problem.tensors, TWO_DOMAINS, HOST,
                                problem.cross_time, problem.launch, fixed={1: 2})
    result = solve_milp(problem)
    assert result.assignment[1] == 2
    assert result.objective == brute_force(problem)[1]


@pytest.mark.parametrize("change, message", [
    ({"node_time": np.ones(3)}, "node_time"),
    ({"launch": np.zeros(2)}, "launch"),
    ({"domain_of_device": [0, 1]}, "domain_of_device"),
    ({"domain_of_device": [0, 0, 2]}, "range"),
    ({"cross_time": np.zeros((2, 2, 2))}, "tensors"),
    ({"tensors": [(-1, (0,), False), (0, (3,), False), (1, (2,), False), (2, (), True)]},
     "consumer"),
    ({"fixed": {1: 1}}, "cannot run"),
    ({"node_time": np.full((3, 3), math.inf)}, "finite"),
])
def test_bad_shapes_are_rejected(change: dict, message: str) -> None:
    base = chain_problem(copy=1.0)
    args = {"node_time": base.node_time, "tensors": base.tensors,
            "domain_of_device": TWO_DOMAINS, "host_domain": HOST,
            "cross_time": base.cross_time, "launch": base.launch, **change}
    with pytest.raises(ValueError, match=message):
        AssignmentProblem(**args)


def layered_problem(n: int, seed: int, width: int = 25) -> AssignmentProblem:
    """A layered random DAG: each node reads 1-3 nodes of the two layers before it."""
    rng = np.random.default_rng(seed)
    consumers: list[list[int]] = [[] for _ in range(n)]
    for v in range(width, n):
        lo, hi = max(0, (v // width - 2) * width), (v // width) * width
        for u in rng.choice(np.arange(lo, hi), size=rng.integers(1, 4), replace=False):
            consumers[u].append(v)
    tensors = [(v, tuple(cs), not cs) for v, cs in enumerate(consumers)]
    tensors.append((-1, tuple(range(width)), False))
    host_time = rng.lognormal(-9, 1, size=n)
    node_time = np.vstack([host_time * rng.uniform(0.1, 0.5, n),
                           host_time * rng.uniform(0.2, 0.8, n), host_time])
    node_time[:2, rng.random(n) < 0.1] = math.inf  # ops the GPU devices do not support
    size = rng.lognormal(-10, 1, size=len(tensors))
    cross = np.zeros((len(tensors), 2, 2))
    cross[:, GPU, HOST], cross[:, HOST, GPU] = 1.2 * size, size
    return AssignmentProblem(node_time, tensors, TWO_DOMAINS, HOST, cross,
                             np.array([2e-4, 1e-4, 0.0]))


def test_a_thousand_nodes_are_proven() -> None:
    # Seed 1: the LP relaxation is integral, and HiGHS 1.8 with presolve on called a 0.3% worse
    # assignment optimal (why solve_milp turns presolve off).
    problem = layered_problem(1000, seed=1)
    result = solve_milp(problem, time_limit=60)
    assert result.proven, result.status
    assert result.lower_bound == pytest.approx(result.objective, rel=1e-9)
    assert result.lp_bound == pytest.approx(result.objective, rel=1e-9)
    assert result.objective < objective(problem.fastest(), problem)
    assert result.objective < objective([2] * 1000, problem)
