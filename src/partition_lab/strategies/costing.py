"""Fast plan costing for strategies that search: the cost model's numbers, tabulated once.

:class:`CostTables` holds every op's time on both devices and every tensor's copy time in each
direction, so a strategy can price a whole assignment (``total``) or one move (``move_delta``)
without building plans. ``total`` equals ``evaluate(plan, model).total`` for the plan of the same
assignment (tests check it): compute per node, one invocation overhead per region, and one copy
per tensor per direction that it crosses (graph inputs start on the host, outputs end there).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..cost_models.base import CostModel
from ..graph import OpGraph


@dataclass(frozen=True)
class TensorCost:
    producer: int  # -1 for a graph input
    consumers: tuple[int, ...]
    is_output: bool
    to_accel: float  # copy time host -> accelerator
    to_cpu: float  # copy time accelerator -> host


class CostTables:
    """Per-node and per-tensor times of one graph under one cost model."""

    def __init__(self, graph: OpGraph, model: CostModel) -> None:
        self.graph = graph
        self.model = model
        self.cpu = [model.op_time(node, "cpu") for node in graph]
        self.accel = [model.op_time(node, "accel") for node in graph]
        self.overhead_accel = model.region_overhead("accel")
        self.overhead_cpu = model.region_overhead("cpu")
        self.tensors: list[TensorCost] = []
        self.touching: list[list[int]] = [[] for _ in range(len(graph))]
        for t in graph.tensors:
            index = len(self.tensors)
            self.tensors.append(TensorCost(
                -1 if t.producer is None else t.producer, t.consumers, t.is_output,
                model.transfer_time(t.nbytes, "cpu", "accel"),
                model.transfer_time(t.nbytes, "accel", "cpu")))
            for n in {*t.consumers, *([t.producer] if t.producer is not None else [])}:
                self.touching[n].append(index)

    # ------------------------------------------------------------------ pieces
    def tensor_cost(self, index: int, on_accel: Sequence[bool]) -> float:
        """Copies of one tensor: at most one per direction."""
        t = self.tensors[index]
        src_accel = t.producer >= 0 and on_accel[t.producer]
        if src_accel:
            return t.to_cpu if t.is_output or not all(on_accel[c] for c in t.consumers) else 0.0
        return t.to_accel if any(on_accel[c] for c in t.consumers) else 0.0

    def compute(self, on_accel: Sequence[bool]) -> float:
        return sum(a if on else c for a, c, on in zip(self.accel, self.cpu, on_accel, strict=True))

    def transfer(self, on_accel: Sequence[bool]) -> float:
        return sum(self.tensor_cost(i, on_accel) for i in range(len(self.tensors)))

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
    def move_delta(self, nodes: Iterable[int], on_accel: list[bool]) -> tuple[float, float]:
        """(compute, transfer) change if every node in ``nodes`` switched device.

        Region overheads are left out: they depend on how regions re-form.
        ``on_accel`` is restored before returning.
        """
        nodes = list(dict.fromkeys(nodes))
        touched = {i for n in nodes for i in self.touching[n]}
        before = sum(self.tensor_cost(i, on_accel) for i in touched)
        compute = 0.0
        for n in nodes:
            compute += (self.cpu[n] - self.accel[n]) if on_accel[n] else (self.accel[n] - self.cpu[n])
            on_accel[n] = not on_accel[n]
        after = sum(self.tensor_cost(i, on_accel) for i in touched)
        for n in nodes:
            on_accel[n] = not on_accel[n]
        return compute, after - before

    def copies_of(self, nodes: Iterable[int], on_accel: Sequence[bool]) -> float:
        """Copy time of the tensors that enter or leave ``nodes`` under ``on_accel``."""
        touched = {i for n in nodes for i in self.touching[n]}
        return sum(self.tensor_cost(i, on_accel) for i in touched)
