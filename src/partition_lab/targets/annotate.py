"""Support verdicts for every (node, device): each device's rules, then the user's exclusions.

TVM-free, so that the Relay and the Relax adapters (``partition_lab.relay``,
``partition_lab.relax``) share it; ``partition_lab.relay.passes.annotate`` re-exports it.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence
from typing import Any

from .._audience import option
from ..core.graph import OpGraph
from ..core.patterns import Unit, find_units
from ..core.platform import HOST, Platform, pattern_library
from ..core.support import Support, Verdict, host_verdict
from ..errors import ExclusionError

#: The suffix a frontend gives the second, third... call of one source node, where the source
#: reuses a name (a PyTorch module called several times: ``layer1.0.relu#2``).
REPEATED_CALL = re.compile(r"#\d+$")


def first_call_name(name: str) -> str:
    """``name`` without its repeated-call suffix: ``layer1.0.relu#2`` -> ``layer1.0.relu``."""
    return REPEATED_CALL.sub("", name)


def support_table(
    graph: OpGraph,
    platform: Platform,
    excl_node_names: Iterable[str] = (),
    exclude_ops: Iterable[str] = (),
) -> Support:
    """Every device's verdict per node; exclusions keep nodes off every device but the host.

    The host supports every op. ``excl_node_names`` / ``exclude_ops`` as in
    :func:`support_verdicts`, applied to each non-host device.
    """
    names = list(dict.fromkeys(excl_node_names))
    ops = list(dict.fromkeys(exclude_ops))
    _check_exclusions(graph, names, ops)
    units = find_units(graph, pattern_library(platform))
    # A target that reads its units from the IR (tvm:<backend>: the composites its pattern
    # table makes) brings its own, and they replace the library's: a unit is what it offloads.
    owned = [d.target.units_in(graph) for d in platform.devices if hasattr(d.target, "units_in")]
    if owned:
        units = [unit for found in owned for unit in found]
    table = {}
    for device in platform.devices:
        if device.name == HOST:
            table[HOST] = [host_verdict() for _ in range(len(graph))]
        else:
            table[device.name] = support_verdicts(graph, device.target, names, ops, units)
    return Support(platform, table, units)


def support_verdicts(
    graph: OpGraph,
    target: Any,
    excl_node_names: Iterable[str] = (),
    exclude_ops: Iterable[str] = (),
    units: Sequence[Unit] | None = None,
) -> list[Verdict]:
    """The target's verdict per node, with excluded nodes turned into rejections that say why.

    ``excl_node_names`` match a node's source name (ONNX/MXNet node name, as neuron-cc's
    ``excl_node_names``) or its unique name; a PyTorch module called several times has its
    later calls named ``layer1.0.relu#2``, ``#3``..., and ``layer1.0.relu`` excludes all of them
    (the module, as the user wrote it), ``layer1.0.relu#2`` that call alone. ``exclude_ops``
    match Relay op names. An exclusion matching nothing raises ExclusionError listing what
    exists.
    """
    verdicts = list(target.check_graph(graph, units))
    names = list(dict.fromkeys(excl_node_names))
    ops = list(dict.fromkeys(exclude_ops))
    _check_exclusions(graph, names, ops)
    name_set, op_set = set(names), set(ops)
    for node in graph:
        hit = name_set & _names_of(node)
        if hit:
            verdicts[node.id] = Verdict(
                False, f"excluded by name {sorted(hit)[0]!r} (excl_node_names)", "excluded-by-name")
        elif node.op in op_set:
            verdicts[node.id] = Verdict(
                False, f"excluded by op type {node.op!r} (exclude_ops)", "excluded-by-op")
    return verdicts


def _names_of(node: Any) -> set[str]:
    """The names an exclusion may use for ``node``: its source name, its unique name, and for a
    repeated call of a PyTorch module the module's own name."""
    names = {node.source_name, node.name}
    if node.source_name:
        names.add(first_call_name(node.source_name))
    return names


def _check_exclusions(graph: OpGraph, names: Sequence[str], ops: Sequence[str]) -> None:
    """Raise ExclusionError for an exclusion that matches nothing, naming the option as the
    user wrote it (``--exclude-node`` on the command line, ``excl_node_names`` in Python)."""
    model = graph.name or "the model"
    known_names = {name for n in graph for name in _names_of(n) if name}
    missing = [name for name in names if name not in known_names]
    if missing:
        hints = "; ".join(_with_close_matches(name, known_names) for name in missing)
        sample = ", ".join(sorted(known_names)[:8])
        raise ExclusionError(
            f"{option('excl_node_names', '--exclude-node')}: no node named {hints} in {model}; "
            f"it has {len(known_names)} names, e.g. {sample}")
    present_ops = graph.op_counts()
    missing_ops = [op for op in ops if op not in present_ops]
    if missing_ops:
        hints = ", ".join(_with_close_matches(op, present_ops) for op in missing_ops)
        raise ExclusionError(
            f"{option('exclude_ops', '--exclude-op')}: {hints} not in {model}; "
            f"its ops are {', '.join(present_ops)}")


def _with_close_matches(name: str, known: Iterable[str]) -> str:
    """``'nn.batchnorm' (did you mean nn.batch_norm?)``, or just the quoted name."""
    close = difflib.get_close_matches(name, sorted(known), n=3)
    return f"{name!r}" + (f" (did you mean {', '.join(close)}?)" if close else "")
