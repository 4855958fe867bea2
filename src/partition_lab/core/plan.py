"""PartitionPlan: which device and region every op of an OpGraph goes to, and why.

A plan is the output of a strategy and the input of the Relay outliner, the drawing and the cost
report. Every node goes to one device of a :class:`~partition_lab.core.platform.Platform`; regions
cover every node exactly once, each on one device (accelerator regions, regions on a GPU's CUDA
cores, host islands on ``"cpu"``). The graph of regions must be acyclic, or the outlined program
could not be scheduled. :class:`~.support.Support` holds every (op, device) verdict, a
:class:`~.reasons.Decision` per node says where it went and why.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from .._units import counted
from ..errors import PlanError
from .graph import OpGraph
from .hazards import NumericHazard
from .pattern_library import PATTERNS
from .patterns import units_from_data, units_to_data
from .plan_validation import check_plan_data, check_verdicts, has_rules
from .platform import (
    HOST,
    Platform,
    device_patterns,
    one_accelerator_platform,
    platform_from_records,
)
from .reasons import Decision, Reason, ReasonCode, ReasonGroup, default_reason_for, reason_from_dict
from .regions import form_regions
from .support import Support, Verdict

PLAN_SCHEMA = "partition_lab.plan/2"


@dataclass(frozen=True)
class Region:
    """A set of nodes executed together on one device.

    ``prefix`` names the device in labels: ``accel3`` on a one-accelerator platform,
    ``tensorcore0`` / ``cuda1`` where several devices could be meant, ``cpu2`` for host islands.
    ``number`` counts the regions of one prefix in plan order (accel0, accel1, ... beside
    cpu0, cpu1, ...), so that labels do not skip the numbers of the other devices' regions;
    ``id`` stays the region's index in the plan (what plan JSON nodes refer to).
    """

    id: int
    device: str
    nodes: tuple[int, ...]
    prefix: str = ""
    number: int | None = None

    @property
    def is_accelerator(self) -> bool:
        """Whether the region runs off the host (any non-host device)."""
        return self.device != HOST

    @property
    def label(self) -> str:
        number = self.id if self.number is None else self.number
        return f"{self.prefix or ('accel' if self.is_accelerator else 'cpu')}{number}"


@dataclass
class PartitionPlan:
    """Regions and per-node decisions for one graph, platform and strategy.

    Build one with :meth:`from_devices` (strategies do). ``platform_name`` is the platform's
    name (the ``target`` key of the plan JSON);
    ``support`` every (op, device) verdict. ``notes`` carry strategy remarks a user should see
    (for example that an exact search fell back to an approximation).
    """

    graph: OpGraph
    platform_name: str
    strategy: str
    regions: tuple[Region, ...]
    decisions: tuple[Decision, ...]
    support: Support
    options: Mapping[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: How the plan was chosen by timing candidates (:mod:`partition_lab.choice`), if it was.
    choice: Mapping[str, Any] | None = None
    #: Constants that overflow the dtype a device computes in (:mod:`~.hazards`), by op.
    hazards: tuple[NumericHazard, ...] = ()

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_devices(
        cls,
        graph: OpGraph,
        support: Support,
        strategy: str,
        devices: Sequence[str],
        reasons: Mapping[int, Reason | str] | None = None,
        options: Mapping[str, Any] | None = None,
        notes: Iterable[str] = (),
        groups: Iterable[Iterable[int]] | None = None,
    ) -> PartitionPlan:
        """The plan for a device name per node; regions are formed unless ``groups`` are given.

        ``reasons`` overrides the default reason of a node (why it is not on a more preferred
        device, or which device's rule accepted it).
        """
        if groups is None:
            groups = form_regions(graph, devices, default_device=support.platform.main.name)
        platform = support.platform
        prefixes = _label_prefixes(platform)
        regions = []
        numbers = _LabelNumbers()
        region_of = [0] * len(graph)
        for region_id, group in enumerate(groups):
            members = tuple(sorted(group))
            device = devices[members[0]]
            prefix = prefixes.get(device, device)
            regions.append(Region(region_id, device, members, prefix, numbers.next(prefix)))
            for n in members:
                region_of[n] = region_id
        given = dict(reasons or {})
        decisions = []
        for n in range(len(graph)):
            why = given.get(n) or default_reason_for(support, n, devices[n])
            if isinstance(why, str):
                why = Reason(ReasonCode.STRATEGY, why)
            decisions.append(Decision(n, devices[n], region_of[n], why.text, why))
        decisions = tuple(decisions)
        return cls(graph, platform.name, strategy, tuple(regions), decisions, support,
                   dict(options or {}), list(notes))

    @classmethod
    def from_dict(cls, graph: OpGraph, data: Mapping[str, Any],
                  platform: Platform | None = None) -> PartitionPlan:
        """The inverse of :meth:`to_dict` for a plan of ``graph`` (node ids must match).

        Reads schema ``partition_lab.plan/2`` (per-device verdicts) and the older ``plan/1``
        (one accelerator + the host). ``platform`` supplies the device objects; without it a
        platform is rebuilt from the names in the file (support rules are not re-derived).
        """
        check_plan_data(graph, data)  # PlanError naming the key, never a KeyError
        nodes = data["nodes"]
        if data.get("schema", "partition_lab.plan/1") == "partition_lab.plan/1":
            verdicts = [Verdict(n["supported"], n["support_reason"], n.get("support_rule", ""),
                                n.get("anchor", False)) for n in nodes]
            support = Support.with_host(platform or one_accelerator_platform(data["target"]),
                                        {(platform.primary.name if platform else
                                          data["target"]): verdicts})
        else:
            names = [d["name"] for d in data["devices"]]
            table = {name: [Verdict(**n["support"][name]) for n in nodes] for name in names}
            support = Support(platform or platform_from_records(data["target"], data["devices"]),
                              table, units_from_data(data.get("units", ()), PATTERNS))
        prefixes = _label_prefixes(support.platform)
        regions: list[Region] = []
        numbers = _LabelNumbers()
        for r in data["regions"]:  # labels numbered again: files of older versions skip numbers
            prefix = prefixes.get(r["device"], r["device"])
            regions.append(Region(r["id"], r["device"], tuple(r["nodes"]), prefix,
                                  numbers.next(prefix)))
        decisions = tuple(Decision(n["id"], n["device"], n["region"], n["reason"],
                                   reason_from_dict(n)) for n in nodes)
        plan = cls(graph, data["target"], data["strategy"], tuple(regions), decisions, support,
                   dict(data.get("options", {})), list(data.get("notes", [])),
                   data.get("choice"),
                   tuple(NumericHazard.from_dict(h) for h in data.get("numeric_hazards", ())))
        _check_loaded(plan, platform)
        return plan

    # ------------------------------------------------------------------ queries
    @property
    def platform(self) -> Platform:
        return self.support.platform

    @property
    def verdicts(self) -> tuple[Verdict, ...]:
        """The primary accelerator's verdicts (see :attr:`support` for every device's)."""
        return self.support.primary

    def device_of(self, node: int) -> str:
        return self.decisions[node].device

    def region_of(self, node: int) -> Region:
        return self.regions[self.decisions[node].region]

    @property
    def accelerator_regions(self) -> list[Region]:
        """Regions off the host (on any accelerator or the GPU's CUDA cores)."""
        return [r for r in self.regions if r.is_accelerator]

    @property
    def cpu_regions(self) -> list[Region]:
        return [r for r in self.regions if not r.is_accelerator]

    @property
    def accelerator_nodes(self) -> list[int]:
        return [d.node for d in self.decisions if d.device != HOST]

    def regions_on(self, device: str) -> list[Region]:
        return [r for r in self.regions if r.device == device]

    def ops_per_device(self) -> dict[str, int]:
        """Op count per device of the platform (every device listed, in preference order)."""
        counts = dict.fromkeys(self.platform.names, 0)
        for d in self.decisions:
            counts[d.device] = counts.get(d.device, 0) + 1
        return counts

    def regions_per_device(self) -> dict[str, int]:
        """Region count per device that has regions, in plan order (the legends' counts)."""
        return dict(Counter(r.device for r in self.regions))

    def crossing_tensors(self) -> list[tuple[Any, str, str]]:
        """Tensors that leave their domain as ``(tensor, from_device, to_device)``.

        A domain is (memory space, precision): a tensor is copied (and/or cast) once per
        destination domain, however many consumers it has there; ``to_device`` is the first
        consumer's device in that domain (the host for graph outputs). Graph inputs start on the
        host; graph outputs must end there.
        """
        platform = self.platform
        domain = {d.name: d.domain for d in platform.devices}
        crossings = []
        for tensor in self.graph.tensors:
            src = HOST if tensor.producer is None else self.device_of(tensor.producer)
            targets: dict[tuple[str, str], str] = {}
            for c in tensor.consumers:
                dst = self.device_of(c)
                targets.setdefault(domain[dst], dst)
            if tensor.is_output:
                targets[domain[HOST]] = HOST
            targets.pop(domain[src], None)
            for dom in sorted(targets):
                crossings.append((tensor, src, targets[dom]))
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

        Every node in exactly one region and its decision agreeing with it; region ids equal
        to their positions; regions on one device of the platform; the region graph acyclic; no
        region holding a node its device rejected; on anchored devices, every region holding
        an anchor op.
        """
        n = len(self.graph)
        if len(self.decisions) != n or len(self.support) != n:
            raise PlanError(f"the plan has {len(self.decisions)} decisions and "
                            f"{len(self.support)} verdicts for a graph of {n} nodes")
        known = set(self.platform.names)
        seen = [0] * n
        for position, region in enumerate(self.regions):
            if region.id != position:
                raise PlanError(f"region {region.label} is at position {position}")
            if region.device not in known:
                raise PlanError(f"region {region.label} is on {region.device!r}, not a device "
                                f"of {self.platform.name} ({', '.join(sorted(known))})")
            if not region.nodes:
                raise PlanError(f"region {region.label} is empty")
            for node in region.nodes:
                if not 0 <= node < n:
                    raise PlanError(f"region {region.label} holds unknown node {node}")
                seen[node] += 1
                decision = self.decisions[node]
                if decision.node != node or decision.region != region.id or \
                        decision.device != region.device:
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
        for region in self.regions:
            self._validate_region(region)

    def _validate_region(self, region: Region) -> None:
        index = self.platform.index(region.device)
        verdicts = self.support.of(index)
        for node in region.nodes:
            verdict = verdicts[node]
            if not verdict.supported:
                raise PlanError(
                    f"region {region.label} holds {self.graph[node].name}, which "
                    f"{region.device} rejected: {verdict.reason}")
        if self.support.anchored(index) and self.options.get("require_anchor", True) and \
                not any(verdicts[node].anchor for node in region.nodes):
            raise PlanError(f"region {region.label} on {region.device} has no anchor op")

    # ------------------------------------------------------------------ reporting
    def to_dict(self, node_times: Sequence[float] | None = None) -> dict[str, Any]:
        """A JSON-ready description (schema ``partition_lab.plan/2``): nodes in id order.

        Each node carries its input, output and weight tensors (shape and dtype), its FLOPs and,
        with ``node_times`` (a cost model's prediction per node, e.g.
        ``CostBreakdown.node_times``), its predicted seconds on its device (else null).
        ``reason_groups`` lists the ops off the most preferred device by structured reason.
        """
        if node_times is not None and len(node_times) != len(self.graph):
            raise PlanError(f"{len(node_times)} node times for a graph of {len(self.graph)} nodes")
        platform = self.platform
        return {
            "schema": PLAN_SCHEMA,
            "graph": self.graph.name,
            # Only where the loader knows what wrote the graph, so that other plans read as before.
            **({"exporter": self.graph.exporter} if getattr(self.graph, "exporter", "") else {}),
            "target": self.platform_name,
            "strategy": self.strategy,
            "devices": [
                {"name": d.name, "role": d.role, "memory": d.memory, "compiler": d.compiler,
                 "precision": d.precision, "preference": d.preference, "colour": d.colour,
                 **device_patterns(d)}
                for d in platform.devices
            ],
            "options": {k: _jsonable(v) for k, v in sorted(self.options.items())},
            "notes": list(self.notes),
            "regions": [
                {"id": r.id, "label": r.label, "device": r.device, "nodes": list(r.nodes),
                 "ops": len(r.nodes)}
                for r in self.regions
            ],
            "nodes": [self._node_dict(d, None if node_times is None else node_times[d.node])
                      for d in self.decisions],
            "reason_groups": [group.to_dict() for group in self.reason_groups()],
            # Only where patterns were found, so that plans without them read as before.
            **({"units": units_to_data(self.support.units)} if self.support.units else {}),
            **({"choice": _jsonable(dict(self.choice))} if self.choice is not None else {}),
            **({"numeric_hazards": [h.to_dict() for h in self.hazards]} if self.hazards else {}),
        }

    def _node_dict(self, d: Decision, time: float | None) -> dict[str, Any]:
        node = self.graph[d.node]
        return {
            "id": d.node, "name": node.name, "op": node.op, "source_name": node.source_name,
            "device": d.device, "region": d.region, "reason": d.reason,
            "inputs": [_tensor_dict(t) for t in node.inputs],
            "outputs": [_tensor_dict(t) for t in node.outputs],
            "weights": [_tensor_dict(t) for t in node.weights],
            "flops": float(node.flops), "time_s": None if time is None else float(time),
            "why": (d.why or Reason(ReasonCode.STRATEGY, d.reason)).to_dict(),
            "support": {name: {"supported": v.supported, "reason": v.reason, "rule": v.rule,
                               "anchor": v.anchor}
                        for name, v in ((dev.name, self.support.verdict(d.node, i))
                                        for i, dev in enumerate(self.platform.devices))},
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=False)

    def summary(self) -> str:
        """A few lines for a terminal: regions per device, and the host ops with reasons."""
        counts = self.ops_per_device()
        per_device = ", ".join(f"{c} on {name}" for name, c in counts.items())
        exporter = getattr(self.graph, "exporter", "")
        lines = [
            f"{self.graph.name or 'graph'} on {self.platform_name} ({self.strategy}): "
            f"{self.regions_text()}; ops: {per_device}"
            + (f"; graph from {exporter}" if exporter else ""),
        ]
        for region in self.accelerator_regions:
            ops = _op_histogram(self.graph[n].op for n in region.nodes)
            lines.append(f"  {region.label} on {region.device}: {len(region.nodes)} ops ({ops})")
        lines.extend(self._cpu_reason_lines(limit=8))
        lines.extend(f"  note: {note}" for note in self.notes)
        lines.extend(f"  numeric hazard: {hazard.text()}" for hazard in self.hazards)
        return "\n".join(lines)

    def regions_text(self) -> str:
        """The regions per device, said of the device that runs them: "1 region on cuda, 0 CPU
        islands" (a plan whose ops all fell back to the CUDA cores has no Tensor Core region,
        and says so by naming where its one region runs)."""
        per_device = Counter(r.device for r in self.accelerator_regions)
        parts = [f"{counted(n, 'region')} on {device}" for device, n in per_device.items()]
        return ", ".join([*(parts or ["no region off the host"]),
                          counted(len(self.cpu_regions), "CPU island")])

    def reason_groups(self) -> list[ReasonGroup]:
        """Ops that are not on the platform's most preferred device, grouped by the structured
        reason (their device, code, deciding device and rule), largest group first.

        Each group splits further into its distinct texts (:attr:`ReasonGroup.details`): one
        rule rejects a stem conv for its channels and a dense for its batch, and each op keeps
        its own words.
        """
        top = self.platform.names[0] if len(self.platform.names) > 1 else None
        groups: dict[tuple[str, tuple[str, str, str]], list[Decision]] = {}
        for d in self.decisions:
            if top is None or d.device == top:
                continue
            why = d.why or Reason(ReasonCode.STRATEGY, d.reason)
            groups.setdefault((d.device, why.group_key()), []).append(d)
        ordered = sorted(groups.values(), key=lambda ds: (-len(ds), ds[0].node))
        return [ReasonGroup.of(decisions) for decisions in ordered]

    def _cpu_reason_lines(self, limit: int, details: int = 4) -> list[str]:
        """Ops off the most preferred device, grouped by structured reason, largest first; a
        group whose ops have different texts lists each text (up to ``details``) on its own line.
        """
        ordered = self.reason_groups()
        lines = []
        for group in ordered[:limit]:
            where = "CPU" if group.device == HOST else group.device
            if len(group.details) == 1:
                text, decisions = group.details[0]
                lines.append(f"  on {where}: {self._names(decisions)}: {text}")
                continue
            ops = _op_histogram(self.graph[d.node].op for d in group.decisions)
            lines.append(f"  on {where}: {len(group.decisions)} ops ({ops}): {group.headline}:")
            for text, decisions in group.details[:details]:
                lines.append(f"    {self._names(decisions)}: {text}")
            if len(group.details) > details:
                rest = sum(len(ds) for _, ds in group.details[details:])
                lines.append(f"    {rest} more op(s) with {len(group.details) - details} other "
                             "detail(s)")
        if len(ordered) > limit:
            rest = sum(len(g.decisions) for g in ordered[limit:])
            lines.append(f"  {rest} more op(s) for {len(ordered) - limit} other reason(s)")
        return lines

    def _names(self, decisions: Sequence[Decision], shown: int = 3) -> str:
        names = [self.graph[d.node].name for d in decisions]
        more = f" and {len(names) - shown} more" if len(names) > shown else ""
        return ", ".join(names[:shown]) + more

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:  # short: a plan holds the whole graph
        return (f"PartitionPlan({self.graph.name or 'graph'!r}, platform={self.platform_name!r}, "
                f"strategy={self.strategy!r}, {len(self.regions)} regions, "
                f"{len(self.graph)} ops)")


class _LabelNumbers:
    """Region label numbers counted per prefix, in plan order."""

    def __init__(self) -> None:
        self._used: dict[str, int] = {}

    def next(self, prefix: str) -> int:
        number = self._used.get(prefix, 0)
        self._used[prefix] = number + 1
        return number


def _label_prefixes(platform: Platform) -> dict[str, str]:
    """``accel`` for the only accelerator of a platform, else each device's own name."""
    accelerators = platform.accelerators
    prefixes = {HOST: "cpu"}
    for d in accelerators:
        prefixes[d.name] = "accel" if len(accelerators) == 1 else d.name
    return prefixes


def _check_loaded(plan: PartitionPlan, platform: Platform | None) -> None:
    """A plan from a file holds its invariants, and, when ``platform`` carries real rules,
    no verdict that the rules contradict (see :mod:`.plan_validation`)."""
    plan.validate()
    if platform is not None and has_rules(platform):
        check_verdicts(plan.graph, plan.support, platform)


def _op_histogram(ops: Iterable[str]) -> str:
    counts: dict[str, int] = {}
    for op in ops:
        counts[op] = counts.get(op, 0) + 1
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    text = ", ".join(f"{count} {op}" for op, count in top[:4])
    return text + (", ..." if len(top) > 4 else "")


def _tensor_dict(tensor: Any) -> dict[str, Any]:
    return {"shape": [int(d) for d in tensor.shape], "dtype": tensor.dtype}


def _jsonable(value: Any) -> Any:
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return str(value)
