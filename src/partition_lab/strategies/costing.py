"""Fast plan costing for strategies that search: the cost model's numbers, tabulated once.

:class:`CostTables` holds every op's time on every device of the platform and every tensor's
crossing time between every pair of domains (memory space, precision), so a strategy can price a
whole assignment (``total``) or one move (``move_delta``) without building plans. ``total``
equals ``evaluate(plan, model).total`` for the plan of the same assignment (tests check it):
compute per node, one invocation overhead per region, and one crossing per tensor per
destination domain (graph inputs start on the host, outputs end there).

An assignment here is a list of device indices (the platform's device order).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from ..core.graph import OpGraph
from ..core.patterns import Unit
from ..core.platform import Platform
from ..cost_models.base import CostModel, check_times, node_times

#: The uncertainty interface of a cost model (see :mod:`partition_lab.strategies.robust`).
UNCERTAINTY_METHODS = ("op_sigma", "transfer_sigma", "overhead_sigma", "device_sigma")


class CostTables:
    """Per-(device, node) and per-tensor times of one graph under one cost model.

    ``time[d][n]``: node ``n`` on device ``d`` (``inf`` where ``d`` does not support it when
    ``support`` is given). ``overhead[d]``: one region on ``d``. ``dom[d]``: the domain index of
    device ``d``; ``cross[t][a * K + b]``: tensor ``t`` from domain ``a`` to ``b``. Tensors are
    columns of parallel lists: ``producer`` (-1 for a graph input), ``consumers``, ``is_output``.
    ``touching[n]`` lists the tensors node ``n`` produces or consumes; ``neighbours[n]`` its
    producers and consumers.
    """

    def __init__(self, graph: OpGraph, model: CostModel, platform: Platform,
                 units: Sequence[Unit] = ()) -> None:
        self.graph = graph
        self.model = model
        self.platform = platform
        names = platform.names
        self.devices = len(names)
        self.host = platform.host_index
        # Units of a pattern a device declares cost one op there (cost_models.base.node_times).
        self.time: list[list[float]] = [node_times(model, graph, platform, name, units)
                                        for name in names]
        self.overhead = [model.region_overhead(name) for name in names]
        domains = platform.domains()
        self.domain_count = len(domains)
        self.dom = [domains.index(d.domain) for d in platform.devices]
        self.host_dom = self.dom[self.host]
        # A representative device per domain: transfer_time takes device names.
        reps = [names[self.dom.index(k)] for k in range(len(domains))]
        pairs = [(a, b) for a in range(len(domains)) for b in range(len(domains)) if a != b]
        K = self.domain_count
        priced: dict[tuple[float, int, int], float] = {}  # tensors of one size cost the same

        def crossing(nbytes: float, a: int, b: int) -> float:
            key = (nbytes, a, b)
            if key not in priced:
                priced[key] = model.transfer_time(nbytes, reps[a], reps[b])
            return priced[key]

        self.producer: list[int] = []
        self.consumers: list[tuple[int, ...]] = []
        self.is_output: list[bool] = []
        self.cross: list[list[float]] = []
        self.touching: list[list[int]] = [[] for _ in range(len(graph))]
        for index, t in enumerate(graph.tensors):
            producer = -1 if t.producer is None else t.producer
            self.producer.append(producer)
            self.consumers.append(t.consumers)
            self.is_output.append(t.is_output)
            row = [0.0] * (K * K)
            for a, b in pairs:
                row[a * K + b] = crossing(t.nbytes, a, b)
            self.cross.append(row)
            if producer >= 0:
                self.touching[producer].append(index)
            for c in t.consumers:
                if c != producer:
                    self.touching[c].append(index)
        self.neighbours: list[list[int]] = [[] for _ in range(len(graph))]
        for u, v in graph.nx.edges:
            self.neighbours[u].append(v)
            self.neighbours[v].append(u)
        self._uncertainty(model, graph, names, reps, pairs)
        self._check(model)

    def _check(self, model: CostModel) -> None:
        """Every price finite and non-negative before a search compares plans by them (an
        infinite price would tie with the ``inf`` that marks an unsupported device)."""
        for row in self.time:
            check_times(row, "an op", model)
        check_times(self.overhead, "a region's overhead", model)
        for row in self.cross:
            check_times(row, "a copy", model)
        for row in self.sigma:
            check_times(row, "an op's uncertainty", model)
        check_times([*self.overhead_sigma, self.cross_sigma, *self.drift_sigma],
                    "an uncertainty", model)

    def _uncertainty(self, model: CostModel, graph: OpGraph, names: list[str], reps: list[str],
                     pairs: list[tuple[int, int]]) -> None:
        """Relative standard deviations from the model's uncertainty interface (0 without one).

        ``sigma[d][n]`` per op; ``overhead_sigma[d]`` per device; ``cross_sigma`` one figure for
        every copy (the largest over domain pairs, priced for a 1 MB tensor: copies of one link
        share their error); ``drift_sigma[d]`` the error shared by everything on device ``d``
        (its speed when the plan runs vs when it was measured), which does not shrink with the
        number of ops the way independent op errors do.
        """
        op_sigma, transfer_sigma, overhead_sigma, device_sigma = (
            getattr(model, m, None) for m in UNCERTAINTY_METHODS)
        self.uncertain = any(f is not None for f in (op_sigma, transfer_sigma, overhead_sigma,
                                                     device_sigma))
        self.sigma = [[op_sigma(node, name) for node in graph] if op_sigma else
                      [0.0] * len(graph) for name in names]
        self.overhead_sigma = [overhead_sigma(name) if overhead_sigma else 0.0 for name in names]
        self.cross_sigma = max((transfer_sigma(1e6, reps[a], reps[b]) for a, b in pairs),
                               default=0.0) if transfer_sigma else 0.0
        self.drift_sigma = [device_sigma(name) if device_sigma else 0.0 for name in names]
        # A model calibrated on measurements widens what it states (ProfiledCostModel).
        self.gain_scale = float(getattr(model, "gain_sigma_scale", 1.0))
        self.total_scale = float(getattr(model, "total_sigma_scale", 1.0))

    @property
    def tensor_count(self) -> int:
        return len(self.producer)

    def restrict(self, allowed: Sequence[Sequence[int]]) -> None:
        """Set ``time[d][n]`` to ``inf`` where ``d`` is not in ``allowed[n]``."""
        for d in range(self.devices):
            row = self.time[d]
            for n, ok in enumerate(allowed):
                if d not in ok:
                    row[n] = math.inf

    # ------------------------------------------------------------------ pieces
    def tensor_cost(self, index: int, device: Sequence[int]) -> float:
        """Crossings of one tensor: at most one per destination domain."""
        dom = self.dom
        producer = self.producer[index]
        src = self.host_dom if producer < 0 else dom[device[producer]]
        cost = 0.0
        seen = 1 << src
        row = self.cross[index]
        base = src * self.domain_count
        for c in self.consumers[index]:
            k = dom[device[c]]
            if not seen >> k & 1:
                seen |= 1 << k
                cost += row[base + k]
        if self.is_output[index] and not seen >> self.host_dom & 1:
            cost += row[base + self.host_dom]
        return cost

    def compute(self, device: Sequence[int]) -> float:
        time = self.time
        return sum(time[d][n] for n, d in enumerate(device))

    def transfer(self, device: Sequence[int]) -> float:
        cost = self.tensor_cost
        return sum(cost(i, device) for i in range(self.tensor_count))

    def overhead_of(self, device: Sequence[int], regions: Iterable[Sequence[int]]) -> float:
        overhead = self.overhead
        return sum(overhead[device[members[0]]] for members in regions)

    def total(self, device: Sequence[int], regions: Iterable[Sequence[int]]) -> float:
        """Predicted time of the assignment whose regions are ``regions``."""
        return self.compute(device) + self.transfer(device) + self.overhead_of(device, regions)

    # ------------------------------------------------------------------ moves
    def touched(self, nodes: Iterable[int]) -> set[int]:
        touching = self.touching
        return {i for n in nodes for i in touching[n]}

    def move_delta(self, nodes: Sequence[int], device: list[int],
                   targets: Sequence[int]) -> tuple[float, float]:
        """(compute, transfer) change if each of ``nodes`` (distinct) moved to its ``targets``.

        Region overheads are left out: they depend on how regions re-form. ``device`` is
        restored before returning.
        """
        touched = self.touched(nodes)
        cost = self.tensor_cost
        before = sum(cost(i, device) for i in touched)
        time = self.time
        compute = 0.0
        old = [device[n] for n in nodes]
        for n, to in zip(nodes, targets, strict=True):
            compute += time[to][n] - time[device[n]][n]
            device[n] = to
        after = sum(cost(i, device) for i in touched)
        for n, was in zip(nodes, old, strict=True):
            device[n] = was
        return compute, after - before

    def copies_of(self, nodes: Iterable[int], device: Sequence[int]) -> float:
        """Crossing time of the tensors that enter or leave ``nodes`` under ``device``."""
        cost = self.tensor_cost
        return sum(cost(i, device) for i in self.touched(nodes))
