"""Checks for a plan read from a file: its shape against the schema and the graph, and its
verdicts against the ones the platform computes again.

A plan in a file is data someone may have edited. :meth:`PartitionPlan.from_dict` alone would
trust it: a missing key would raise a bare ``KeyError``, reordered regions would make
``region_of`` answer with the wrong region, and an op moved onto an accelerator would pass
``validate()`` as long as its stored verdict was flipped to ``supported`` too. Here the file is checked key by key
(:func:`check_plan_data`), the built plan against its invariants (``PartitionPlan.validate``),
and every stored "supported" against the platform's own rules (:func:`check_verdicts`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import PlanError

if TYPE_CHECKING:
    from .graph import OpGraph
    from .platform import Platform
    from .support import Support

SCHEMAS = ("partition_lab.plan/1", "partition_lab.plan/2")
_VERDICT_KEYS = {"supported": bool, "reason": str, "rule": str, "anchor": bool}


def check_plan_data(graph: OpGraph, data: Any) -> None:
    """:class:`PlanError` naming the first key of ``data`` that does not fit the schema or
    ``graph`` (node count, node ids, op types, region and device references)."""
    if not isinstance(data, Mapping):
        raise PlanError(f"a plan must be a JSON object, not {type(data).__name__}")
    schema = data.get("schema", SCHEMAS[0])
    if schema not in SCHEMAS:
        raise PlanError(f"plan schema {_short(schema)} is not one of {', '.join(SCHEMAS)}")
    for key in ("target", "strategy"):
        _typed(data, key, str, "plan")
    nodes = _typed(data, "nodes", list, "plan")
    regions = _typed(data, "regions", list, "plan")
    if len(nodes) != len(graph):
        raise PlanError(f"the plan has {len(nodes)} nodes but the graph has {len(graph)}")
    devices = _device_names(data) if schema == SCHEMAS[1] else None
    for index, node in enumerate(nodes):
        _check_node(graph, node, index, devices, len(regions))
    for index, region in enumerate(regions):
        _check_region(region, index, len(graph), devices)
    for index, unit in enumerate(_typed(data, "units", list, "plan") if "units" in data else ()):
        _check_unit(unit, index, len(graph))
    if "choice" in data:
        _check_choice(data["choice"])


def _check_choice(choice: Any) -> None:
    """A measured choice (``partition --choose``): its chosen name among its candidates'."""
    if not isinstance(choice, Mapping) or not isinstance(choice.get("chosen"), str) \
            or not isinstance(choice.get("candidates"), list):
        raise PlanError("plan choice: expected an object with a chosen plan name and candidates")
    names = []
    for index, candidate in enumerate(choice["candidates"]):
        times = candidate.get("measured_s") if isinstance(candidate, Mapping) else None
        confirming = candidate.get("confirm_s", []) if isinstance(candidate, Mapping) else []
        if not isinstance(candidate, Mapping) or not isinstance(candidate.get("plan"), str) \
                or not _are_seconds(times) or not _are_seconds(confirming):
            raise PlanError(f"plan choice candidates[{index}]: expected a plan name and "
                            "measured_s (and confirm_s where present), lists of finite "
                            "non-negative seconds; drop the "
                            "choice or choose again (partition --choose)")
        names.append(candidate["plan"])
    if choice["chosen"] not in names:
        raise PlanError(f"plan choice: chosen {_short(choice['chosen'])} is not one of its "
                        "candidates")


def _are_seconds(times: Any) -> bool:
    return isinstance(times, list) and all(
        isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t) and t >= 0
        for t in times)


def _check_unit(unit: Any, index: int, size: int) -> None:
    where = f"plan units[{index}]"
    if not isinstance(unit, Mapping) or not isinstance(unit.get("pattern"), str):
        raise PlanError(f"{where}: expected an object with a pattern name and nodes")
    if not unit["pattern"].isidentifier():  # it becomes a Composite name in the exported module
        raise PlanError(f"{where}: pattern {_short(unit['pattern'])} is not a name (letters, "
                        "digits and _)")
    if not isinstance(unit.get("form", ""), str):
        raise PlanError(f"{where}: form must be a string")
    nodes = unit.get("nodes")
    if (not isinstance(nodes, list) or not nodes
            or not all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n < size
                       for n in nodes)):
        raise PlanError(f"{where}: nodes must be a non-empty list of node ids below {size}")


def check_verdicts(graph: OpGraph, stored: Support, platform: Platform) -> None:
    """:class:`PlanError` if the verdicts a plan stores (``stored``, a plan's ``support``, for
    ``graph``) say a device supports a node that the device's own rules (on ``platform``)
    reject. A stored rejection of a supported node is allowed: exclusions (``--exclude-node``)
    make those. Units of patterns (the plan's ``units``) are judged whole where the plan's device
    declared their pattern, as they were when the plan was made."""
    for device in platform.devices:
        if device.is_host or device.name not in stored.platform.names:
            continue
        said = stored.of(device.name)
        # judged with the patterns the plan's own device declared: a plan made op by op
        # (``without_patterns``) is checked op by op, though its platform has the same name
        declared = set(getattr(stored.platform.device(device.name).target, "patterns", ()))
        units = [unit for unit in stored.units if unit.name in declared]
        verdicts = device.target.check_graph(graph, units)
        for node in graph:
            if said[node.id].supported:
                verdict = verdicts[node.id]
                if not verdict.supported:
                    raise PlanError(
                        f"the plan says {device.name} supports node {node.name} ({node.op}), but "
                        f"{device.name} rejects it: {verdict.reason}; the file was edited or "
                        "written for other rules")


def has_rules(platform: Platform | None) -> bool:
    """Whether ``platform``'s devices carry real support rules (not the accept-everything
    specs a platform rebuilt from names gets)."""
    return platform is not None and any(
        not device.target.supports_all for device in platform.accelerators)


# ---------------------------------------------------------------------------- internals
def _check_node(graph: OpGraph, node: Any, index: int, devices: Sequence[str] | None,
                n_regions: int) -> None:
    where = f"plan: nodes[{index}]"
    _check_entry(node, index, "node", devices)
    op = _typed(node, "op", str, where) if "op" in node else graph[index].op  # plan/1: optional
    if op != graph[index].op:
        raise PlanError(f"{where}.op is {_short(op)} but node {index} of the graph is "
                        f"{graph[index].op!r}; the plan is for another graph")
    region = _typed(node, "region", int, where)
    if not 0 <= region < n_regions:
        raise PlanError(f"{where}.region {region} does not exist (the plan has {n_regions})")
    _typed(node, "reason", str, where)
    if devices is None:
        _typed(node, "supported", bool, where)
        _typed(node, "support_reason", str, where)
        return
    support = _typed(node, "support", Mapping, where)
    for name in devices:
        verdict = _typed(support, name, Mapping, f"{where}.support")
        for key, kind in _VERDICT_KEYS.items():
            if key in verdict and not isinstance(verdict[key], kind):
                raise PlanError(f"{where}.support.{name}.{key} must be a {kind.__name__}")
        unknown = sorted(set(verdict) - set(_VERDICT_KEYS))
        if unknown or "supported" not in verdict:
            raise PlanError(f"{where}.support.{name} must have supported (and reason, rule, "
                            f"anchor); got keys {sorted(verdict)}")


def _check_region(region: Any, index: int, n_nodes: int, devices: Sequence[str] | None) -> None:
    where = f"plan: regions[{index}]"
    _check_entry(region, index, "region", devices)
    members = _typed(region, "nodes", list, where)
    if not all(isinstance(m, int) and not isinstance(m, bool) and 0 <= m < n_nodes
               for m in members):
        raise PlanError(f"{where}.nodes must be node ids from 0 to {n_nodes - 1}")


def _check_entry(item: Any, index: int, kind: str, devices: Sequence[str] | None) -> None:
    """What nodes and regions share: an object whose id is its position, on a plan device."""
    where = f"plan: {kind}s[{index}]"
    if not isinstance(item, Mapping):
        raise PlanError(f"{where} must be an object, not {type(item).__name__}")
    if _typed(item, "id", int, where) != index:
        raise PlanError(f"{where} has id {item['id']} but is at position {index}; {kind} ids "
                        "must equal their positions")
    device = _typed(item, "device", str, where)
    if devices is not None and device not in devices:
        raise PlanError(f"{where}.device {_short(device)} is not a device of the plan "
                        f"({', '.join(devices)})")


def _device_names(data: Mapping[str, Any]) -> list[str]:
    devices = _typed(data, "devices", list, "plan")
    names = []
    for index, device in enumerate(devices):
        if not isinstance(device, Mapping):
            raise PlanError(f"plan: devices[{index}] must be an object")
        names.append(_typed(device, "name", str, f"plan: devices[{index}]"))
    if len(set(names)) != len(names) or not names:
        raise PlanError(f"plan: devices must name distinct devices; got {names}")
    return names


def _typed(data: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    if key not in data:
        raise PlanError(f"{where}: {key} is missing")
    value = data[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        name = "object" if kind is Mapping else kind.__name__
        raise PlanError(f"{where}.{key} must be a {name}, not {type(value).__name__}")
    return value


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
