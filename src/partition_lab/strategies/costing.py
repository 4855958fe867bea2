"""Fast plan costing for strategies that search: the cost model's numbers, tabulated once.

:class:`CostTables` holds every op's time on both devices and every tensor's copy time in each
direction, so a strategy can price a whole assignment (``total``) or one move (``move_delta``)
without building plans. ``total`` equals ``evaluate(plan, model).total`` for the plan of the same
assignment (tests check it): compute per node, one invocation overhead per region, and one copy
per tensor per direction that it crosses (graph inputs start on the host, outputs end there).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..cost_models.base import CostModel
from ..graph import OpGraph


class CostTables:
    """Per-node and per-tensor times of one graph under one cost model.

    Tensors are columns of parallel lists: ``producer`` (-1 for a graph input), ``consumers``,
    ``is_output``, ``to_accel`` / ``to_cpu`` (copy time in each direction). ``touching[n]`` lists
    the tensors node ``n`` produces or consumes; ``neighbours[n]`` its producers and consumers.
    """

    def __init__(self, graph: OpGraph, model: CostModel) -> None:
        self.graph = graph
        self.model = model
        both = getattr(model, "op_times_both", None)  # a faster path some models offer
        if both is not None:
            self.cpu, self.accel = both(graph.nodes)
        else:
            self.cpu = [model.op_time(node, "cpu") for node in graph]
            self.accel = [model.op_time(node, "accel") for node in graph]
        self.overhead_accel = model.region_overhead("accel")
        self.overhead_cpu = model.region_overhead("cpu")
        self.producer: list[int] = []
        self.consumers: list[tuple[int, ...]] = []
        self.is_output: list[bool] = []
        self.to_accel: list[float] = []
        self.to_cpu: list[float] = []
        self.touching: list[list[int]] = [[] for _ in range(len(graph))]
        for index, t in enumerate(graph.tensors):
            producer = -1 if t.producer is None else t.producer
            self.producer.append(producer)
            self.consumers.append(t.consumers)
            self.is_output.append(t.is_output)
            self.to_accel.append(model.transfer_time(t.nbytes, "cpu", "accel"))
            self.to_cpu.append(model.transfer_time(t.nbytes, "accel", "cpu"))
            if producer >= 0:
                self.touching[producer].append(index)
            for c in t.consumers:
                if c != producer:
                    self.touching[c].append(index)
        self.neighbours: list[list[int]] = [[] for _ in range(len(graph))]
        for u, v in graph.nx.edges:
            self.neighbours[u].append(v)
            self.neighbours[v].append(u)

    @property
    def tensor_count(self) -> int:
        return len(self.producer)

    # ------------------------------------------------------------------ pieces
    def tensor_cost(self, index: int, on_accel: Sequence[bool]) -> float:
        """Copies of one tensor: at most one per direction."""
        producer = self.producer[index]
        if producer >= 0 and on_accel[producer]:
            if self.is_output[index]:
                return self.to_cpu[index]
            for c in self.consumers[index]:
                if not on_accel[c]:
                    return self.to_cpu[index]
            return 0.0
        for c in self.consumers[index]:
            if on_accel[c]:
                return self.to_accel[index]
        return 0.0

    def compute(self, on_accel: Sequence[bool]) -> float:
        return sum(a if on else c for a, c, on in zip(self.accel, self.cpu, on_accel, strict=True))

    def transfer(self, on_accel: Sequence[bool]) -> float:
        cost = self.tensor_cost
        return sum(cost(i, on_accel) for i in range(self.tensor_count))

    def overhead(self, on_accel: Sequence[bool], regions: Iterable[Sequence[int]]) -> float:
        accel = cpu = 0
        for members in regions:
            if on_accel[members[0]]:
                accel += 1
            else:
                cpu += 1
        return accel * self.overhead_accel + cpu * self.overhead_cpu

    def total(self, on_accel: Sequence[bool], regions: Iterable[Sequence[int]]) -> float:
        """Predicted time of the assignment whose regions are ``regions``."""
        return (self.compute(on_accel) + self.transfer(on_accel)
                + self.overhead(on_accel, regions))

    # ------------------------------------------------------------------ moves
    def touched(self, nodes: Iterable[int]) -> set[int]:
        touching = self.touching
        return {i for n in nodes for i in touching[n]}

    def move_delta(self, nodes: Sequence[int], on_accel: list[bool]) -> tuple[float, float]:
        """(compute, transfer) change if every node in ``nodes`` (distinct) switched device.

        Region overheads are left out: they depend on how regions re-form.
        ``on_accel`` is restored before returning.
        """
        touched = self.touched(nodes)
        cost = self.tensor_cost
        before = sum(cost(i, on_accel) for i in touched)
        compute = 0.0
        for n in nodes:
            compute += (self.cpu[n] - self.accel[n]) if on_accel[n] else (self.accel[n] - self.cpu[n])
            on_accel[n] = not on_accel[n]
        after = sum(cost(i, on_accel) for i in touched)
        for n in nodes:
            on_accel[n] = not on_accel[n]
        return compute, after - before

    def copies_of(self, nodes: Iterable[int], on_accel: Sequence[bool]) -> float:
        """Copy time of the tensors that enter or leave ``nodes`` under ``on_accel``."""
        cost = self.tensor_cost
        return sum(cost(i, on_accel) for i in self.touched(nodes))
