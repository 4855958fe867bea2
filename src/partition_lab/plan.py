"""PartitionPlan: which device and region every op of an OpGraph goes to, and why.

A plan is the output of a strategy and the input of the Relay outliner, the drawing and the cost
report. Regions cover every node exactly once: accelerator regions (device = the target's name)
and CPU islands (device = ``"cpu"``). The graph of regions must be acyclic, or the outlined
program could not be scheduled.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from .errors import PlanError
from .graph import OpGraph

CPU = "cpu"


@dataclass(frozen=True)
class Verdict:
    """A target's answer for one op: can it run there, and why (or why not).

    ``rule`` names the rule that decided (``"op-table"``, ``"tensorcore-shape"``,
    ``"excluded-by-name"``...). ``anchor`` marks compute ops that a region must contain on
    targets where other ops only ride along (Tensor Core: conv2d/dense/batch_matmul).
    """

    supported: bool
    reason: str
    rule: str = ""
    anchor: bool = False


@dataclass(frozen=True)
class Region:
    """A set of nodes executed together on one device."""

    id: int
    device: str
    nodes: tuple[int, ...]

    @property
    def is_accelerator(self) -> bool:
        return self.device != CPU

    @property
    def label(self) -> str:
        kind = "accel" if self.is_accelerator else "cpu"
        return f"{kind}{self.id}"


@dataclass(frozen=True)
class Decision:
    """Where one node went and why (the reason a user reads when asking "why is this on the CPU?")."""

    node: int
    device: str
    region: int
    reason: str


@dataclass
class PartitionPlan:
    """Regions and per-node decisions for one graph, target and strategy.

    Build one with :meth:`from_assignment`; strategies do. ``notes`` carry strategy remarks a user
    should see (for example that an exact search fell back to an approximation).
    """

    graph: OpGraph
    target: str
    strategy: str
    regions: tuple[Region, ...]
    decisions: tuple[Decision, ...]
    verdicts: tuple[Verdict, ...]
    options: Mapping[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_assignment(
        cls,
        graph: OpGraph,
        target: str,
        strategy: str,
        on_accelerator: Iterable[int],
        verdicts: Sequence[Verdict],
        reasons: Mapping[int, str] | None = None,
        options: Mapping[str, Any] | None = None,
        notes: Iterable[str] = (),
    ) -> PartitionPlan:
        """Form cycle-safe regions for a device assignment and record a reason per node.

        ``reasons`` overrides the default reason of a node (the target's verdict reason for
        nodes on the CPU that the target rejected, "supported by <target>" otherwise).
        """
        from .regions import form_regions  # local: regions imports plan types

        accel = set(on_accelerator)
        devices = [target if i in accel else CPU for i in range(len(graph))]
        return cls.from_regions(graph, target, strategy, devices, form_regions(graph, devices),
                                verdicts, reasons, options, notes)

    @classmethod
    def from_regions(
        cls,
        graph: OpGraph,
        target: str,
        strategy: str,
        devices: Sequence[str],
        groups: Iterable[Iterable[int]],
        verdicts: Sequence[Verdict],
        reasons: Mapping[int, str] | None = None,
        options: Mapping[str, Any] | None = None,
        notes: Iterable[str] = (),
    ) -> PartitionPlan:
        """The plan for per-node ``devices`` whose regions (``groups``) are already formed."""
        regions = []
        region_of = [0] * len(graph)
        for region_id, group in enumerate(groups):
            members = tuple(sorted(group))
            regions.append(Region(region_id, devices[members[0]], members))
            for n in members:
                region_of[n] = region_id
        reasons = dict(reasons or {})
        decisions = tuple(
            Decision(n, devices[n], region_of[n],
                     reasons.get(n) or default_reason(verdicts[n], devices[n], target))
            for n in range(len(graph))
        )
        return cls(graph, target, strategy, tuple(regions), decisions, tuple(verdicts),
                   dict(options or {}), list(notes))

    @classmethod
    def from_dict(cls, graph: OpGraph, data: Mapping[str, Any]) -> PartitionPlan:
        """The inverse of :meth:`to_dict` for a plan of ``graph`` (node ids must match)."""
        nodes = data["nodes"]
        if len(nodes) != len(graph):
            raise PlanError(f"the plan has {len(nodes)} nodes but the graph has {len(graph)}")
        regions = tuple(Region(r["id"], r["device"], tuple(r["nodes"])) for r in data["regions"])
        decisions = tuple(Decision(n["id"], n["device"], n["region"], n["reason"]) for n in nodes)
        verdicts = tuple(Verdict(n["supported"], n["support_reason"], n.get("support_rule", ""),
                                 n.get("anchor", False)) for n in nodes)
        return cls(graph, data["target"], data["strategy"], regions, decisions, verdicts,
                   dict(data.get("options", {})), list(data.get("notes", [])))

    # ------------------------------------------------------------------ queries
    def device_of(self, node: int) -> str:
        return self.decisions[node].device

    def region_of(self, node: int) -> Region:
        return self.regions[self.decisions[node].region]

    @property
    def accelerator_regions(self) -> list[Region]:
        return [r for r in self.regions if r.is_accelerator]

    @property
    def cpu_regions(self) -> list[Region]:
        return [r for r in self.regions if not r.is_accelerator]

    @property
    def accelerator_nodes(self) -> list[int]:
        return [d.node for d in self.decisions if d.device != CPU]

    def crossing_tensors(self) -> list[tuple[Any, str, str]]:
        """Tensors that cross devices as ``(tensor, from_device, to_device)``.

        A tensor is copied once per destination device, however many consumers it has there.
        Graph inputs start on the CPU (host); graph outputs must end on the CPU.
        """
        crossings = []
        for tensor in self.graph.tensors:
            src = CPU if tensor.producer is None else self.device_of(tensor.producer)
            destinations = {self.device_of(c) for c in tensor.consumers}
            if tensor.is_output:
                destinations.add(CPU)
            for dst in sorted(destinations - {src}):
                crossings.append((tensor, src, dst))
        return crossings

    def region_graph(self) -> nx.DiGraph:
        """The quotient graph: one node per region, an edge where a tensor flows between two."""
        quotient = nx.DiGraph()
        quotient.add_nodes_from(r.id for r in self.regions)
        for u, v in self.graph.nx.edges:
            ru, rv = self.decisions[u].region, self.decisions[v].region
            if ru != rv:
                quotient.add_edge(ru, rv)
        return quotient

    # ------------------------------------------------------------------ validation
    def validate(self) -> None:
        """Check the plan's invariants; raise PlanError naming the first broken one.

        Every node in exactly one region and its decision agreeing with it; regions on one
        device; the region graph acyclic; no accelerator region holding a node the target
        rejected; on anchored targets, every accelerator region holding an anchor op.
        """
        n = len(self.graph)
        seen = [0] * n
        for region in self.regions:
            if not region.nodes:
                raise PlanError(f"region {region.label} is empty")
            for node in region.nodes:
                if not 0 <= node < n:
                    raise PlanError(f"region {region.label} holds unknown node {node}")
                seen[node] += 1
                decision = self.decisions[node]
                if decision.region != region.id or decision.device != region.device:
                    raise PlanError(
                        f"node {self.graph[node].name} is in region {region.label} but its "
                        f"decision says region {decision.region} on {decision.device}")
        for node, count in enumerate(seen):
            if count != 1:
                raise PlanError(f"node {self.graph[node].name} is in {count} regions, not 1")
        quotient = self.region_graph()
        if not nx.is_directed_acyclic_graph(quotient):
            cycle = nx.find_cycle(quotient)
            labels = " -> ".join(self.regions[u].label for u, _ in cycle)
            raise PlanError(f"the region graph has a cycle: {labels}")
        anchored = any(v.anchor for v in self.verdicts)
        for region in self.accelerator_regions:
            for node in region.nodes:
                verdict = self.verdicts[node]
                if not verdict.supported:
                    raise PlanError(
                        f"accelerator region {region.label} holds {self.graph[node].name}, "
                        f"which {self.target} rejected: {verdict.reason}")
            if anchored and self.options.get("require_anchor", True) and not any(
                    self.verdicts[node].anchor for node in region.nodes):
                raise PlanError(f"accelerator region {region.label} has no anchor op")

    # ------------------------------------------------------------------ reporting
    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready description: stable keys, nodes in id order."""
        return {
            "schema": "partition_lab.plan/1",
            "graph": self.graph.name,
            "target": self.target,
            "strategy": self.strategy,
            "options": {k: _jsonable(v) for k, v in sorted(self.options.items())},
            "notes": list(self.notes),
            "regions": [
                {"id": r.id, "label": r.label, "device": r.device, "nodes": list(r.nodes),
                 "ops": len(r.nodes)}
                for r in self.regions
            ],
            "nodes": [
                {"id": d.node, "name": self.graph[d.node].name, "op": self.graph[d.node].op,
                 "source_name": self.graph[d.node].source_name, "device": d.device,
                 "region": d.region, "reason": d.reason,
                 "supported": self.verdicts[d.node].supported,
                 "support_reason": self.verdicts[d.node].reason,
                 "support_rule": self.verdicts[d.node].rule,
                 "anchor": self.verdicts[d.node].anchor}
                for d in self.decisions
            ],
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=False)

    def summary(self) -> str:
        """A few lines for a terminal: regions, ops per device, and the CPU ops with reasons."""
        accel = self.accelerator_regions
        lines = [
            f"{self.graph.name or 'graph'} on {self.target} ({self.strategy}): "
            f"{len(accel)} accelerator region(s), {len(self.cpu_regions)} CPU island(s), "
            f"{len(self.accelerator_nodes)}/{len(self.graph)} ops on the accelerator",
        ]
        for region in accel:
            ops = _op_histogram(self.graph[n].op for n in region.nodes)
            lines.append(f"  {region.label}: {len(region.nodes)} ops ({ops})")
        lines.extend(self._cpu_reason_lines(limit=8))
        lines.extend(f"  note: {note}" for note in self.notes)
        return "\n".join(lines)

    def _cpu_reason_lines(self, limit: int) -> list[str]:
        """CPU ops grouped by the rule (or strategy reason) that put them there, largest first."""
        groups: dict[str, list[Decision]] = {}
        for d in self.decisions:
            if d.device == CPU:
                verdict = self.verdicts[d.node]
                key = verdict.rule if not verdict.supported and verdict.rule else d.reason
                groups.setdefault(key, []).append(d)
        ordered = sorted(groups.values(), key=lambda ds: (-len(ds), ds[0].node))
        lines = []
        for decisions in ordered[:limit]:
            names = [self.graph[d.node].name for d in decisions]
            shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
            lines.append(f"  on CPU: {shown}: {decisions[0].reason}")
        if len(ordered) > limit:
            rest = sum(len(ds) for ds in ordered[limit:])
            lines.append(f"  on CPU: {rest} more op(s) for {len(ordered) - limit} other reason(s)")
        return lines

    def __str__(self) -> str:
        return self.summary()


def default_reason(verdict: Verdict, device: str, target: str) -> str:
    """The reason recorded for a node when a strategy gives none."""
    if device != CPU:
        return f"supported by {target}: {verdict.reason}" if verdict.reason else f"supported by {target}"
    if not verdict.supported:
        return verdict.reason
    return f"supported by {target}, but the strategy kept it on the CPU"


def _op_histogram(ops: Iterable[str]) -> str:
    counts: dict[str, int] = {}
    for op in ops:
        counts[op] = counts.get(op, 0) + 1
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    text = ", ".join(f"{count} {op}" for op, count in top[:4])
    return text + (", ..." if len(top) > 4 else "")


def _jsonable(value: Any) -> Any:
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return str(value)
