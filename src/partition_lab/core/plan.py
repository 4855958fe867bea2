"""PartitionPlan: which device and region every op of an OpGraph goes to, and why.

A plan is the output of a strategy and the input of the Relay outliner, the drawing and the cost
report. Every node goes to one device of a :class:`~partition_lab.core.platform.Platform`; regions
cover every node exactly once, each on one device (accelerator regions, regions on a GPU's CUDA
cores, host islands on ``"cpu"``). The graph of regions must be acyclic, or the outlined program
could not be scheduled. :class:`Support` holds every (op, device) verdict.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from ..errors import PartitionLabError, PlanError
from .graph import OpGraph
from .platform import HOST, Platform, accelerator_platform

CPU = HOST
PLAN_SCHEMA = "partition_lab.plan/2"


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
    """A set of nodes executed together on one device.

    ``prefix`` names the device in labels: ``accel3`` on a one-accelerator platform,
    ``tensorcore0`` / ``cuda1`` where several devices could be meant, ``cpu2`` for host islands.
    """

    id: int
    device: str
    nodes: tuple[int, ...]
    prefix: str = ""

    @property
    def is_accelerator(self) -> bool:
        """Whether the region runs off the host (any non-host device)."""
        return self.device != CPU

    @property
    def label(self) -> str:
        return f"{self.prefix or ('accel' if self.is_accelerator else 'cpu')}{self.id}"


class Support:
    """Every (op, device) verdict of a platform: ``of(device)[node]``.

    The host supports every op. ``allowed(node)`` lists the device indices that support a node,
    most preferred first (the platform's device order is its preference order).
    """

    def __init__(self, platform: Platform, verdicts: Mapping[str, Sequence[Verdict]]) -> None:
        self.platform = platform
        n = None
        table = []
        for device in platform.devices:
            if device.name not in verdicts:
                raise PartitionLabError(f"no verdicts for device {device.name!r} of platform "
                                        f"{platform.name!r}")
            row = tuple(verdicts[device.name])
            if n is not None and len(row) != n:
                raise PartitionLabError("every device needs one verdict per node")
            n = len(row)
            table.append(row)
        self.table: tuple[tuple[Verdict, ...], ...] = tuple(table)
        self.size = n or 0
        self._allowed = [tuple(d for d in range(len(table)) if table[d][v].supported)
                         for v in range(self.size)]
        host = platform.host_index
        for v, allowed in enumerate(self._allowed):
            if host not in allowed:
                raise PartitionLabError(f"node {v}: the host must support every op")

    @classmethod
    def single(cls, verdicts: Sequence[Verdict], target: str) -> Support:
        """One accelerator named ``target`` with these verdicts, plus the host."""
        from ..targets.base import TargetSpec

        if target == CPU:
            platform = accelerator_platform(TargetSpec(CPU, supports_all=True))
            return cls(platform, {CPU: [host_verdict() for _ in verdicts]})
        platform = accelerator_platform(TargetSpec(target, supports_all=True))
        return cls(platform, {target: list(verdicts), CPU: [host_verdict() for _ in verdicts]})

    def __len__(self) -> int:
        return self.size

    def of(self, device: str | int) -> tuple[Verdict, ...]:
        index = device if isinstance(device, int) else self.platform.index(device)
        return self.table[index]

    def verdict(self, node: int, device: str | int) -> Verdict:
        if isinstance(device, int):
            return self.table[device][node]
        return self.of(device)[node]

    def allowed(self, node: int) -> tuple[int, ...]:
        """Device indices that support ``node``, most preferred first (the host is last)."""
        return self._allowed[node]

    def preferred(self, node: int) -> int:
        return self._allowed[node][0]

    def fallback(self, node: int, device: int) -> int:
        """The next device after ``device`` (in preference order) that supports ``node``."""
        for d in self._allowed[node]:
            if d > device:
                return d
        return self.platform.host_index

    @property
    def primary(self) -> tuple[Verdict, ...]:
        """The verdicts of the most preferred accelerator (the host's on the cpu platform)."""
        return self.of(self.platform.primary.name)

    def anchored(self, device: int) -> bool:
        """Whether regions on ``device`` must hold an anchor op."""
        return any(v.anchor for v in self.table[device])


def host_verdict() -> Verdict:
    return Verdict(True, "runs on the host", "host")


def as_support(verdicts: Support | Sequence[Verdict], target: str | None) -> Support:
    """A :class:`Support` as is, or one accelerator's verdict list (named ``target``) + the host."""
    if isinstance(verdicts, Support):
        return verdicts
    return Support.single(verdicts, target or "accel")


@dataclass(frozen=True)
class Reason:
    """Why a node is on its device, as data: a code, the rule that decided, the numbers.

    ``code`` is one of :data:`REASON_CODES`; ``rule`` names the support rule (``op-table``,
    ``tensorcore-shape``, ``excluded-by-name``) or the strategy rule (``min_ops=3``) that decided;
    ``device`` the device whose rule or region it was (the one that rejected the op, or the one
    it left); ``numbers`` the predicted seconds behind a cost decision. ``text`` renders it for
    people and never names a region label (labels belong to one plan's drawing).
    """

    code: str
    text: str
    rule: str = ""
    device: str = ""
    numbers: Mapping[str, float] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.text

    def group_key(self) -> tuple[str, str, str]:
        """What a summary or drawing groups by: ops with one key share one explanation."""
        return self.code, self.device, self.rule or self.text

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "text": self.text, "rule": self.rule, "device": self.device,
                "numbers": dict(self.numbers)}


#: Reason codes, most common first.
REASON_CODES = {
    "preferred": "on the most preferred device that supports it",
    "rejected": "a more preferred device's rule rejects it",
    "no-anchor": "its group holds no anchor op of the anchored device, so it fell back",
    "min-size": "its region was smaller than min_ops (min_size)",
    "no-mac": "its region did no multiply-accumulate work (no_mac)",
    "region-excluded": "the cost model predicted its region cheaper on the fallback device",
    "moved": "the cost model predicted this op alone cheaper on another device",
    "single-device": "the cost model predicted every op on one device cheapest",
    "optimum": "the optimum (optimal) keeps it there",
    "baseline": "a baseline strategy (all_cpu) put it there",
    "strategy": "the strategy put it there",
}


@dataclass(frozen=True)
class Decision:
    """Where one node went and why (the reason a user reads when asking "why is this on the CPU?").

    ``reason`` is the rendered text; ``why`` the same as data (:class:`Reason`).
    """

    node: int
    device: str
    region: int
    reason: str
    why: Reason | None = None

    @property
    def code(self) -> str:
        return self.why.code if self.why else "strategy"


@dataclass(frozen=True)
class ReasonGroup:
    """Ops on one device for one structured reason (code, deciding device, rule).

    ``details`` splits them by their exact text, largest first, as ``(text, decisions)``;
    ``headline`` is what the whole group shares: the text when there is one, else the
    reason code or the rejecting rule in words.
    """

    device: str
    why: Reason
    decisions: tuple[Decision, ...]
    details: tuple[tuple[str, tuple[Decision, ...]], ...]

    @classmethod
    def of(cls, decisions: Sequence[Decision]) -> ReasonGroup:
        """The group of ``decisions`` (which share their device and reason key)."""
        texts: dict[str, list[Decision]] = {}
        for d in decisions:
            texts.setdefault(d.reason, []).append(d)
        details = sorted(texts.items(), key=lambda kv: (-len(kv[1]), kv[1][0].node))
        first = decisions[0]
        return cls(first.device, first.why or Reason("strategy", first.reason), tuple(decisions),
                   tuple((text, tuple(ds)) for text, ds in details))

    @property
    def headline(self) -> str:
        if len(self.details) == 1:
            return self.details[0][0]
        if self.why.code == "rejected" and self.why.rule:
            return f"rule {self.why.rule} of {self.why.device} rejects them"
        return REASON_CODES.get(self.why.code, self.why.code)

    def to_dict(self) -> dict[str, Any]:
        return {"device": self.device, "code": self.why.code, "rule": self.why.rule,
                "decided_by": self.why.device, "text": self.headline,
                "nodes": [d.node for d in self.decisions],
                "details": [{"text": text, "nodes": [d.node for d in ds]}
                            for text, ds in self.details]}


@dataclass
class PartitionPlan:
    """Regions and per-node decisions for one graph, platform and strategy.

    Build one with :meth:`from_devices` (strategies do). ``target`` is the platform's name;
    ``support`` every (op, device) verdict. ``notes`` carry strategy remarks a user should see
    (for example that an exact search fell back to an approximation).
    """

    graph: OpGraph
    target: str
    strategy: str
    regions: tuple[Region, ...]
    decisions: tuple[Decision, ...]
    support: Support
    options: Mapping[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

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
        from .regions import form_regions  # local: regions imports plan types

        if groups is None:
            groups = form_regions(graph, devices, default_device=support.platform.main.name)
        platform = support.platform
        prefixes = _label_prefixes(platform)
        regions = []
        region_of = [0] * len(graph)
        for region_id, group in enumerate(groups):
            members = tuple(sorted(group))
            device = devices[members[0]]
            regions.append(Region(region_id, device, members, prefixes.get(device, device)))
            for n in members:
                region_of[n] = region_id
        given = dict(reasons or {})
        decisions = []
        for n in range(len(graph)):
            why = given.get(n) or default_reason_for(support, n, devices[n])
            if isinstance(why, str):
                why = Reason("strategy", why)
            decisions.append(Decision(n, devices[n], region_of[n], why.text, why))
        decisions = tuple(decisions)
        return cls(graph, platform.name, strategy, tuple(regions), decisions, support,
                   dict(options or {}), list(notes))

    @classmethod
    def from_assignment(
        cls,
        graph: OpGraph,
        target: str,
        strategy: str,
        on_accelerator: Iterable[int],
        verdicts: Sequence[Verdict] | Support,
        reasons: Mapping[int, str] | None = None,
        options: Mapping[str, Any] | None = None,
        notes: Iterable[str] = (),
    ) -> PartitionPlan:
        """The plan that puts ``on_accelerator`` on the platform's primary accelerator and every
        other node on the host (one-accelerator platforms; ``verdicts`` may be a list of the
        accelerator's verdicts, then the platform is that accelerator named ``target`` + host).
        """
        support = as_support(verdicts, target)
        accel = set(on_accelerator)
        primary = support.platform.primary.name
        devices = [primary if i in accel else CPU for i in range(len(graph))]
        return cls.from_devices(graph, support, strategy, devices, reasons, options, notes)

    @classmethod
    def from_dict(cls, graph: OpGraph, data: Mapping[str, Any],
                  platform: Platform | None = None) -> PartitionPlan:
        """The inverse of :meth:`to_dict` for a plan of ``graph`` (node ids must match).

        Reads schema ``partition_lab.plan/2`` (per-device verdicts) and the older ``plan/1``
        (one accelerator + the host). ``platform`` supplies the device objects; without it a
        platform is rebuilt from the names in the file (support rules are not re-derived).
        """
        from .plan_validation import check_plan_data

        check_plan_data(graph, data)  # PlanError naming the key, never a KeyError
        nodes = data["nodes"]
        if data.get("schema", "partition_lab.plan/1") == "partition_lab.plan/1":
            verdicts = [Verdict(n["supported"], n["support_reason"], n.get("support_rule", ""),
                                n.get("anchor", False)) for n in nodes]
            support = Support.single(verdicts, data["target"]) if platform is None else \
                Support(platform, {platform.primary.name: verdicts,
                                   CPU: [host_verdict() for _ in nodes]})
        else:
            names = [d["name"] for d in data["devices"]]
            table = {name: [Verdict(**n["support"][name]) for n in nodes] for name in names}
            support = Support(platform or _platform_from_names(data), table)
        prefixes = _label_prefixes(support.platform)
        regions = tuple(Region(r["id"], r["device"], tuple(r["nodes"]),
                               prefixes.get(r["device"], r["device"])) for r in data["regions"])
        decisions = tuple(Decision(n["id"], n["device"], n["region"], n["reason"],
                                   _reason_from(n)) for n in nodes)
        plan = cls(graph, data["target"], data["strategy"], regions, decisions, support,
                   dict(data.get("options", {})), list(data.get("notes", [])))
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
        return [d.node for d in self.decisions if d.device != CPU]

    def regions_on(self, device: str) -> list[Region]:
        return [r for r in self.regions if r.device == device]

    def ops_per_device(self) -> dict[str, int]:
        """Op count per device of the platform (every device listed, in preference order)."""
        counts = dict.fromkeys(self.platform.names, 0)
        for d in self.decisions:
            counts[d.device] = counts.get(d.device, 0) + 1
        return counts

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
            src = CPU if tensor.producer is None else self.device_of(tensor.producer)
            targets: dict[tuple[str, str], str] = {}
            for c in tensor.consumers:
                dst = self.device_of(c)
                targets.setdefault(domain[dst], dst)
            if tensor.is_output:
                targets[domain[CPU]] = CPU
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
            "target": self.target,
            "strategy": self.strategy,
            "devices": [
                {"name": d.name, "role": d.role, "memory": d.memory, "compiler": d.compiler,
                 "precision": d.precision, "preference": d.preference, "colour": d.colour}
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
            "why": (d.why or Reason("strategy", d.reason)).to_dict(),
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
        lines = [
            f"{self.graph.name or 'graph'} on {self.target} ({self.strategy}): "
            f"{len(self.accelerator_regions)} accelerator region(s), {len(self.cpu_regions)} "
            f"CPU island(s); ops: {per_device}",
        ]
        for region in self.accelerator_regions:
            ops = _op_histogram(self.graph[n].op for n in region.nodes)
            lines.append(f"  {region.label} on {region.device}: {len(region.nodes)} ops ({ops})")
        lines.extend(self._cpu_reason_lines(limit=8))
        lines.extend(f"  note: {note}" for note in self.notes)
        return "\n".join(lines)

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
            why = d.why or Reason("strategy", d.reason)
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
            where = "CPU" if group.device == CPU else group.device
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
        return (f"PartitionPlan({self.graph.name or 'graph'!r}, target={self.target!r}, "
                f"strategy={self.strategy!r}, {len(self.regions)} regions, "
                f"{len(self.graph)} ops)")


def _label_prefixes(platform: Platform) -> dict[str, str]:
    """``accel`` for the only accelerator of a platform, else each device's own name."""
    accelerators = platform.accelerators
    prefixes = {CPU: "cpu"}
    for d in accelerators:
        prefixes[d.name] = "accel" if len(accelerators) == 1 else d.name
    return prefixes


def _check_loaded(plan: PartitionPlan, platform: Platform | None) -> None:
    """A plan from a file holds its invariants, and, when ``platform`` carries real rules,
    no verdict that the rules contradict (see :mod:`.plan_validation`)."""
    from .plan_validation import check_verdicts, has_rules

    plan.validate()
    if platform is not None and has_rules(platform):
        check_verdicts(plan, platform)


def _platform_from_names(data: Mapping[str, Any]) -> Platform:
    """A platform with the devices a plan file names (no support rules: every op allowed)."""
    from ..targets.base import TargetSpec
    from .platform import Device, host_device

    devices = []
    for entry in data["devices"]:
        if entry["role"] == "host":
            devices.append(host_device(entry.get("precision", "as-prepared")))
            continue
        devices.append(Device(entry["name"], TargetSpec(entry["name"], supports_all=True),
                              role=entry["role"], memory=entry["memory"],
                              compiler=entry.get("compiler"), precision=entry["precision"],
                              preference=entry["preference"], colour=entry.get("colour", "")))
    return Platform(data["target"], tuple(devices))


def default_reason_for(support: Support, node: int, device: str) -> Reason:
    """The reason recorded for a node when a strategy gives none.

    On its preferred device: the device's own verdict, after why each more preferred device
    did not take it (its rule). On a less preferred one: that the strategy chose so.
    """
    platform = support.platform
    index = platform.index(device)
    verdict = support.verdict(node, index)
    rejecting = _first_rejection(support, node, min(index, support.preferred(node)))
    if index == support.preferred(node):
        if rejecting is not None:
            name, rejection = rejecting
            if device == CPU:
                return Reason("rejected", _all_rejections(support, node, index) or
                              rejection.reason, rejection.rule, name)
            accepted = f"supported by {device}: {verdict.reason}" if verdict.reason else \
                f"supported by {device}"
            return Reason("rejected", f"{rejection.reason}; {accepted}", rejection.rule, name)
        text = f"supported by {device}: {verdict.reason}" if verdict.reason else \
            f"supported by {device}"
        return Reason("preferred", verdict.reason if device == CPU else text, verdict.rule, device)
    better = platform.names[support.preferred(node)]
    prefix = f"{rejecting[1].reason}; " if rejecting else ""
    where = "kept it on the CPU" if device == CPU else f"put it on {device}"
    return Reason("strategy", f"{prefix}supported by {better}, but the strategy {where}",
                  "", better)


def _first_rejection(support: Support, node: int, before: int) -> tuple[str, Verdict] | None:
    """The most preferred device (index < ``before``) that rejects ``node``, with its verdict."""
    for d in range(before):
        verdict = support.verdict(node, d)
        if not verdict.supported:
            return support.platform.names[d], verdict
    return None


def _all_rejections(support: Support, node: int, before: int) -> str:
    """``"npu: <reason>; dsp: <reason>"`` when more than one device rejects ``node``."""
    rejections = [(support.platform.names[d], support.verdict(node, d)) for d in range(before)
                  if not support.verdict(node, d).supported]
    if len(rejections) < 2:
        return ""
    return "; ".join(f"{name}: {verdict.reason}" for name, verdict in rejections)


def _reason_from(node: Mapping[str, Any]) -> Reason:
    why = node.get("why")
    if isinstance(why, Mapping):
        return Reason(str(why.get("code", "strategy")), str(why.get("text", node["reason"])),
                      str(why.get("rule", "")), str(why.get("device", "")),
                      dict(why.get("numbers", {})))
    return Reason("strategy", node["reason"])


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
