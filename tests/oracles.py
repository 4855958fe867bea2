"""Test oracles: answers computed the slow, obvious way, to check the fast ones against.

``brute_force`` enumerates every allowed assignment of an
:class:`~partition_lab.strategies.milp.AssignmentProblem` (what ``solve_milp`` must match).
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from partition_lab.strategies.milp import AssignmentProblem, objective

BRUTE_FORCE_LIMIT = 5_000_000


def brute_force(problem: AssignmentProblem) -> tuple[list[int], float]:
    """The optimum by enumerating every allowed assignment (for tests; a few million at most)."""
    p = problem
    choices = [p.allowed(v) for v in range(p.n_nodes)]
    count = math.prod(len(c) for c in choices)
    if count > BRUTE_FORCE_LIMIT:
        raise ValueError(f"{count} assignments: too many to enumerate")
    dev = np.array(list(itertools.product(*choices)), dtype=np.intp).reshape(count, p.n_nodes)
    best = dev[int(np.argmin(_batch_objective(dev, p)))].tolist()
    return best, objective(best, p)


def _batch_objective(dev: np.ndarray, p: AssignmentProblem) -> np.ndarray:
    """:func:`objective` of each row of ``dev`` (assignments x nodes), vectorised."""
    rows = np.arange(dev.shape[0])
    dom = np.asarray(p.domain_of_device, dtype=np.intp)[dev]
    total = p.node_time[dev, np.arange(p.n_nodes)].sum(axis=1)
    for t, (producer, consumers, is_output) in enumerate(p.tensors):
        src = np.full(len(rows), p.host_domain) if producer < 0 else dom[:, producer]
        held = np.zeros((len(rows), p.n_domains), dtype=bool)
        for c in consumers:
            held[rows, dom[:, c]] = True
        held[:, p.host_domain] |= is_output
        held[rows, src] = False
        total += (held * p.cross_time[t][src]).sum(axis=1)
    used = np.zeros((len(rows), p.n_devices), dtype=bool)
    for v in range(p.n_nodes):
        used[rows, dev[:, v]] = True
    return total + used @ p.launch
