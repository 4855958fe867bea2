"""Two plans of one ONNX model (through Relay and through Relax) compared per ONNX node.

No TVM here: both venvs import this file (``relay_plans.py`` in the Relay one writes the Relay
side's records, ``test_routes.py`` in the Relax one compares, ``bench/routes.py`` reports). Both
importers put the ONNX node's name on every op they build for it (``source_name``), so a plan
reads as ``{ONNX node: [its ops]}``; each op is recorded by :func:`op_record`.

A node *agrees* when its ops are on the same devices and carry the same reasons (code, deciding
device and rule) on both sides. A node that does not is a *difference*, classified by
:func:`classify` into one of :data:`CLASSES`; ``route_differences.json`` lists the differences
the project knows and explains (``docs/evidence/routes.md``), and :func:`unexplained` finds the others.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

PLATFORMS = ("tensorcore", "neuron", "neuron@2020", "cpu")
KNOWN_FILE = Path(__file__).resolve().parent / "route_differences.json"

#: The causes of a difference, in the order :func:`classify` tries them.
CLASSES = (
    # one side (or both) has no op named after the node here, while a plan of the model names
    # it: an importer folded it away, or a pass left its ops unnamed
    "missing",
    # the importers build different ops for the node (Gemm as dense + add or as matmul + add)
    "importer",
    # the same ops, prepared differently (another dtype or layout: a pass one IR runs or skips)
    "preparation",
    # the same ops and types, and a multi-op pattern (a composite: layer_norm, attention) takes
    # them on one side only, because the ops of the nodes around them differ
    "pattern",
    # the same ops and types, but a support rule decides otherwise (an attribute read wrongly)
    "rule",
    # the same verdicts, but the strategy's region rules place the node otherwise, because of
    # its neighbours (no anchor op in its region, a region under min_ops)
    "region",
    # the same verdicts, and the cost model prices the node otherwise (cost strategy)
    "cost",
)


def op_record(node: Mapping[str, Any]) -> dict[str, Any]:
    """What is compared of one op of a plan JSON node: its op, the type of its first output, its
    device, its reason (``code|deciding device|rule``) and each device's verdict
    (``+rule``/``-rule``)."""
    why = node.get("why") or {}
    out = node["outputs"][0] if node.get("outputs") else None
    return {
        "op": node["op"],
        "type": f"{out['dtype']}{out['shape']}".replace(" ", "") if out else "",
        "device": node["device"],
        "reason": f"{why.get('code', '')}|{why.get('device', '')}|{why.get('rule', '')}",
        "support": {name: ("+" if v["supported"] else "-") + (v.get("rule") or "")
                    for name, v in sorted((node.get("support") or {}).items())},
    }


def node_records(plan: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """``{ONNX node name: [op records, sorted]}`` of a plan JSON (``PartitionResult.to_dict``);
    ops without a source name are left out."""
    found: dict[str, list[dict[str, Any]]] = {}
    for node in plan["nodes"]:
        if node.get("source_name"):
            found.setdefault(node["source_name"], []).append(op_record(node))
    return {name: sorted(ops, key=_op_key) for name, ops in sorted(found.items())}


def _op_key(op: Mapping[str, Any]) -> tuple[str, ...]:
    return op["op"], op["type"], op["device"], op["reason"]


def summary(ops: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    """The node's devices and reasons, each sorted and once (what agreement compares)."""
    return {"devices": sorted({op["device"] for op in ops}),
            "reasons": sorted({op["reason"] for op in ops})}


def classify(relay: Sequence[Mapping[str, Any]], relax: Sequence[Mapping[str, Any]],
             strategy: str = "greedy") -> str:
    """The class (:data:`CLASSES`) of a node whose plans differ."""
    if not relay or not relax:
        return "missing"
    if sorted(op["op"] for op in relay) != sorted(op["op"] for op in relax):
        return "importer"
    if sorted((op["op"], op["type"]) for op in relay) != \
            sorted((op["op"], op["type"]) for op in relax):
        return "preparation"
    verdicts = [sorted((op["op"], str(op["support"])) for op in side) for side in (relay, relax)]
    if verdicts[0] != verdicts[1]:
        patterns = any("pattern:" in rule for side in (relay, relax) for op in side
                       for rule in op["support"].values())
        return "pattern" if patterns else "rule"
    return "cost" if strategy not in ("greedy", "min_size", "no_mac") and _priced(relay, relax) \
        else "region"


def _priced(*sides: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a reason of these ops is a cost model's (moved, region-excluded, single device)."""
    priced = ("moved|", "region-excluded|", "single-device|", "optimum|")
    return any(op["reason"].startswith(priced) for ops in sides for op in ops)


def detail(relay: Sequence[Mapping[str, Any]], relax: Sequence[Mapping[str, Any]],
           types: bool = False) -> str:
    """One line saying how the node's two plans differ: each side's ops by device and reason
    (with their output types where ``types``)."""
    def side(ops: Sequence[Mapping[str, Any]]) -> str:
        if not ops:
            return "no op"
        groups: dict[tuple[str, str], list[str]] = {}
        for op in ops:
            label = f"{op['op']} {op['type']}" if types else op["op"]
            groups.setdefault((op["device"], op["reason"]), []).append(label)
        return "; ".join(f"{_counted(labels)} on {device} ({_short(reason)})"
                         for (device, reason), labels in groups.items())

    return f"Relay: {side(relay)} | Relax: {side(relax)}"


def _counted(labels: Sequence[str]) -> str:
    counts: dict[str, int] = {}
    for label in labels:
        counts[label] = counts.get(label, 0) + 1
    return ", ".join(label if n == 1 else f"{n}x {label}" for label, n in counts.items())


def _short(reason: str) -> str:
    code, device, rule = reason.split("|")
    return " ".join(part for part in (code, rule, f"by {device}" if device else "") if part)


def compare_model(model: str, platform: str, onnx_nodes: Iterable[tuple[str, str]],
                  relay: Mapping[str, Sequence[Mapping[str, Any]]],
                  relax: Mapping[str, Sequence[Mapping[str, Any]]],
                  strategy: str = "greedy", named: Iterable[str] | None = None) -> dict[str, Any]:
    """Per ONNX node (``(name, op_type)`` of the file, in its order) of one model and platform.

    ``named`` are the nodes some plan of the model names (on any platform, either side; default:
    these two plans'): a node in none has no op anywhere (a Shape, a Constant, an Identity) and
    is not counted. Returns ``nodes`` (the counted ones), ``agree`` (same devices and reasons),
    ``same_devices`` (same devices, whatever the reasons),
    ``other_ops`` (agreeing nodes whose ops or their types differ: an importer or preparation
    difference that moved nothing) and ``differences`` (one dict per differing node: model, platform, node, ONNX op
    type, class, detail)."""
    counted = set(relay) | set(relax) if named is None else set(named)
    differences = []
    count = agree = other_ops = same_devices = 0
    for name, op_type in onnx_nodes:
        if name not in counted:
            continue
        count += 1
        mine, theirs = relay.get(name, ()), relax.get(name, ())
        same_devices += bool(mine and theirs) and \
            summary(mine)["devices"] == summary(theirs)["devices"]
        if mine and theirs and summary(mine) == summary(theirs):
            agree += 1
            other_ops += _types(mine) != _types(theirs)
            continue
        cls = classify(mine, theirs, strategy)
        differences.append({"model": model, "platform": platform, "node": name,
                            "onnx_op": op_type, "class": cls,
                            "detail": detail(mine, theirs, types=cls == "preparation")})
    return {"nodes": count, "agree": agree, "other_ops": other_ops, "same_devices": same_devices,
            "differences": differences}


def _types(ops: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    return sorted((op["op"], op["type"]) for op in ops)


def known_differences(path: Path = KNOWN_FILE) -> list[dict[str, Any]]:
    """The differences the project knows and ``docs/evidence/routes.md`` explains, each ``{id, class,
    onnx_ops, models, platforms, nodes, why}``: ONNX op types, models and nodes are lists of
    shell patterns (nodes default to all), platforms a list or ``"*"``."""
    return json.loads(path.read_text())["differences"]


def explains(entry: Mapping[str, Any], difference: Mapping[str, Any]) -> bool:
    """Whether the known difference ``entry`` covers an observed ``difference``."""
    def matches(value: str, patterns: Iterable[str]) -> bool:
        return any(fnmatch.fnmatchcase(value, pattern) for pattern in patterns)

    platforms = entry.get("platforms", "*")
    return (entry["class"] == difference["class"]
            and matches(difference["onnx_op"], entry["onnx_ops"])
            and matches(difference["model"], entry["models"])
            and (platforms == "*" or difference["platform"] in platforms)
            and matches(difference["node"], entry.get("nodes", ["*"])))


def unexplained(differences: Iterable[Mapping[str, Any]],
                known: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The ``differences`` that no entry of ``known`` covers."""
    return [d for d in differences if not any(explains(entry, d) for entry in known)]


def unseen(known: Sequence[Mapping[str, Any]], differences: Sequence[Mapping[str, Any]],
           models: Iterable[str]) -> list[str]:
    """The ids of the entries of ``known`` about ``models`` that none of ``differences`` (the
    plans of those models) matches any more: fixed, so the list should lose them."""
    models = list(models)
    return [entry["id"] for entry in known
            if any(fnmatch.fnmatchcase(m, p) for m in models for p in entry["models"])
            and not any(explains(entry, d) for d in differences)]
