"""Build the graphviz DOT of a plan from its view: clusters, summary nodes, edges, header.

:func:`draw` is the entry point; :data:`COLLAPSE_ABOVE` decides between drawing every op and one
summary node per region.
"""

from __future__ import annotations

from collections.abc import Iterable

import graphviz

from ..core.graph import OpNode, Tensor
from ..core.plan import PartitionPlan, Region
from ..core.platform import HOST
from ..cost_models.base import CostBreakdown
from .view import (
    CPU_FILL,
    CPU_LINE,
    HEADER_WIDTH,
    REASON_WIDTH,
    _contents_lines,
    _Cut,
    _dot_id,
    _Flow,
    _flow_lines,
    _histogram,
    _node_id,
    _op_lines,
    _PlanView,
    _reason_lines,
    _region_flows,
    _region_id,
    _size_line,
    _summary_lines,
    _wrap,
    format_bytes,
    format_time,
    role_text,
)

COLLAPSE_ABOVE = 150


"""Graphs with more ops than this are drawn collapsed unless the caller says otherwise."""


FONT = "Helvetica,Arial,sans-serif"


CUT_COLOUR = "#d62728"


HOST_FILL = "#ffffff"
# (line, fill) per built-in BYOC target family: NVIDIA green for Tensor Cores, AWS orange for
# Neuron. A device of such a family keeps these; other devices get their platform colour.


def draw(
    plan: PartitionPlan,
    cost: CostBreakdown | None = None,
    *,
    collapse: bool | None = None,
    title: str | None = None,
) -> graphviz.Digraph:
    """Build the graphviz drawing of a plan.

    Parameters
    ----------
    plan:
        The partition to draw.
    cost:
        Its predicted cost (``cost_models.base.evaluate(plan, model)``). Without it, cut edges
        show shape and bytes but no time, and the summary no predicted total.
    collapse:
        True draws one summary node per region, False one node per op; None (default) collapses
        graphs of more than :data:`COLLAPSE_ABOVE` ops.
    title:
        First line of the summary; defaults to "<graph> on <target>, strategy <strategy>".

    Returns
    -------
    graphviz.Digraph
        Its ``.source`` is the DOT text; :func:`write` renders it to a file.
    """
    if collapse is None:
        collapse = len(plan.graph) > COLLAPSE_ABOVE
    view = _PlanView(plan, cost)
    dot = graphviz.Digraph(name=_dot_id(plan.graph.name or "plan"))
    dot.attr("graph", rankdir="TB", fontname=FONT, fontsize="12", nodesep="0.25",
             ranksep="0.35", newrank="true", tooltip=" ")
    dot.attr("node", fontname=FONT, fontsize="10", shape="box", style="rounded,filled",
             margin="0.08,0.04", height="0.3")
    dot.attr("edge", fontname=FONT, fontsize="9", color="#555555", arrowsize="0.6")
    _add_header(dot, view, title)
    if collapse:
        _draw_collapsed(dot, view)
    else:
        _draw_expanded(dot, view)
    return dot


def _draw_expanded(dot: graphviz.Digraph, view: _PlanView) -> None:
    """One node per op; regions off the host as clusters in their device's colour; every edge
    drawn."""
    _add_inputs(dot, view)
    plan, graph = view.plan, view.graph
    for region in plan.regions:
        if region.is_accelerator:
            _add_region_cluster(dot, view, region)
        else:
            for node in region.nodes:
                _add_cpu_node(dot, view, graph[node])
    dot.node("out", _text(["output"]), shape="oval", style="filled", fillcolor=HOST_FILL,
             color=CPU_LINE)
    for tensor in graph.tensors:
        for consumer in sorted(tensor.consumers):
            _add_tensor_edge(dot, view, tensor, _node_id(consumer),
                             plan.device_of(consumer))
        if tensor.is_output:
            _add_tensor_edge(dot, view, tensor, "out", HOST)


def _add_region_cluster(dot: graphviz.Digraph, view: _PlanView, region: Region) -> None:
    line, fill = view.colour(region.device)
    head = f"{region.label}: {region.device}, {_size_line(view, region)}"
    with dot.subgraph(name=f"cluster_{region.label}") as cluster:
        cluster.attr(label=_text([head]), style="rounded,filled", color=line,
                     fillcolor=fill, penwidth="1.6", fontsize="11", labeljust="l",
                     tooltip=_text([head, _histogram(view.graph[n].op for n in region.nodes)]))
        for node in region.nodes:
            op = view.graph[node]
            reason = view.reasons[node]
            lines = _op_lines(op) + (_wrap(reason.short, REASON_WIDTH) if reason else [])
            cluster.node(_node_id(node), _text(lines), fillcolor="white", color=line,
                         tooltip=_text(_op_tooltip(op, view.tooltip_reasons(node))))


def _add_cpu_node(dot: graphviz.Digraph, view: _PlanView, op: OpNode) -> None:
    reason = view.reasons[op.id]
    lines = _op_lines(op) + (_wrap(reason.short, REASON_WIDTH) if reason else [])
    dot.node(_node_id(op.id), _text(lines), style="rounded,filled,dashed", fillcolor=CPU_FILL,
             color=CPU_LINE, fontcolor="#333333",
             tooltip=_text(_op_tooltip(op, view.tooltip_reasons(op.id))))


def _add_inputs(dot: graphviz.Digraph, view: _PlanView) -> None:
    for name, node_id in view.input_ids.items():
        spec = view.graph.graph_inputs[name].spec
        dot.node(node_id, _text([f"input {name}", str(spec)]), shape="oval", style="filled",
                 fillcolor=HOST_FILL, color=CPU_LINE)


def _add_tensor_edge(dot: graphviz.Digraph, view: _PlanView, tensor: Tensor, head: str,
                     head_device: str) -> None:
    tail = view.source_of(tensor)
    src_device = HOST if tensor.producer is None else view.plan.device_of(tensor.producer)
    cut = view.cut(tensor, head_device) if view.crosses(src_device, head_device) else None
    if cut is None:
        dot.edge(tail, head, tooltip=_text([f"{tensor.key}: {tensor.spec}"]))
        return
    attrs = {"color": CUT_COLOUR, "penwidth": "1.8", "fontcolor": CUT_COLOUR,
             "tooltip": _text(_cut_tooltip(cut))}
    if cut.label_on == head:  # one label per tensor per destination: the copy is paid once
        attrs["label"] = _text(_cut_label(cut))
    dot.edge(tail, head, **attrs)


# ---------------------------------------------------------------------------------- collapsed


def _draw_collapsed(dot: graphviz.Digraph, view: _PlanView) -> None:
    """One summary node per region (and per CPU island); edges aggregated between regions."""
    _add_inputs(dot, view)
    for region in view.plan.regions:
        if region.is_accelerator:
            _add_region_summary(dot, view, region)
        else:
            _add_island_summary(dot, view, region)
    dot.node("out", _text(["output"]), shape="oval", style="filled", fillcolor=HOST_FILL,
             color=CPU_LINE)
    for (tail, head), flow in sorted(_region_flows(view).items()):
        _add_flow_edge(dot, tail, head, flow)


def _add_region_summary(dot: graphviz.Digraph, view: _PlanView, region: Region) -> None:
    line, fill = view.colour(region.device)
    ops = [view.graph[n].op for n in region.nodes]
    head = f"{region.label}: {region.device}"
    reason_lines, reason_tips = _reason_lines(view, region)
    with dot.subgraph(name=f"cluster_{region.label}") as cluster:
        cluster.attr(label="", style="rounded,filled", color=line, fillcolor=fill,
                     penwidth="1.6", margin="6", tooltip=_text([head]))
        cluster.node(_region_id(region), _text([head, _size_line(view, region),
                                                *_contents_lines(view, region),
                                                *reason_lines]),
                     fillcolor="white", color=line, fontsize="11",
                     tooltip=_text([head, _histogram(ops, top=None), *reason_tips]))


def _add_island_summary(dot: graphviz.Digraph, view: _PlanView, region: Region) -> None:
    ops = [view.graph[n].op for n in region.nodes]
    reason_lines, reason_tips = _reason_lines(view, region)
    tooltip = [f"{region.label}: CPU island", _histogram(ops, top=None), *reason_tips]
    dot.node(_region_id(region),
             _text([f"{region.label}: CPU", _size_line(view, region),
                    *_contents_lines(view, region), *reason_lines]),
             style="rounded,filled,dashed", fillcolor=CPU_FILL, color=CPU_LINE,
             fontcolor="#333333", tooltip=_text(tooltip))


def _add_flow_edge(dot: graphviz.Digraph, tail: str, head: str, flow: _Flow) -> None:
    lines = _flow_lines(flow)
    if flow.crosses:
        dot.edge(tail, head, label=_text(lines), color=CUT_COLOUR, fontcolor=CUT_COLOUR,
                 penwidth="2", tooltip=_text(lines))
    else:
        dot.edge(tail, head, label=_text(lines), tooltip=_text(lines))


# ---------------------------------------------------------------------------------- legend


def _legend_rows(view: _PlanView) -> list[str]:
    """One row per device the plan uses (and always the host: inputs and outputs live there),
    in preference order: its colour, its role and its op count; then the cut edges."""
    counts = view.plan.ops_per_device()
    regions = view.plan.regions_per_device()
    rows = []
    for device in view.platform.devices:
        ops = counts.get(device.name, 0)
        if not ops and not device.is_host:
            continue
        line, _ = view.colour(device.name)
        count = f"{ops} op{'' if ops == 1 else 's'}"
        if device.is_host:
            rows.append(f'<FONT COLOR="{line}" POINT-SIZE="14">&#9633;</FONT>  on the CPU '
                        f"({_html(role_text(device))}, {count}), with the reason "
                        "it is not on a more preferred device")
            continue
        held = regions.get(device.name, 0)
        rows.append(f'<FONT COLOR="{line}" POINT-SIZE="14">&#9632;</FONT>  '
                    f"{_html(device.name)} region ({_html(role_text(device))}): {count} in "
                    f"{held} region{'' if held == 1 else 's'}")
    copy = "shape, size, predicted copy time" if view.cost else "shape, size"
    rows.append(f'<FONT COLOR="{CUT_COLOUR}" POINT-SIZE="14"><B>&#8594;</B></FONT>  copy '
                f"between devices: {copy}")
    return rows


def _add_header(dot: graphviz.Digraph, view: _PlanView, title: str | None) -> None:
    """One HTML-table node on top: title, summary, and the legend: each device's colour, role
    and op count, dashes for the host, red edges for copies.

    A node rather than the graph label, so that it survives packing several drawings into one
    picture (``gvpack`` drops graph labels).
    """
    plan = view.plan
    title = title or f"{plan.graph.name or 'graph'} on {plan.platform_name}, strategy {plan.strategy}"
    # Coloured symbols inline, not swatch cells: a nested table would stretch to the header's
    # width and push the explanations away from their swatches.
    rows = [f'<FONT POINT-SIZE="14"><B>{_html(title)}</B></FONT>']
    rows += [_html(part) for line in _summary_lines(view) for part in _wrap(line, HEADER_WIDTH)]
    rows += _legend_rows(view)
    body = "".join(f'<TR><TD ALIGN="LEFT">{row}</TD></TR>' for row in rows)
    table = f'<<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="1" CELLPADDING="2">{body}</TABLE>>'
    with dot.subgraph(name="header") as header:
        header.attr(rank="source")
        header.node("header", table, shape="plaintext", style="", fontsize="11")


# ---------------------------------------------------------------------------------- text


def _op_tooltip(op: OpNode, reasons: list[str]) -> list[str]:
    outputs = ", ".join(str(t) for t in op.outputs)
    return [f"{op.name} ({op.op})", f"source name: {op.source_name or '-'}",
            f"outputs: {outputs}", *reasons]


def _cut_label(cut: _Cut) -> list[str]:
    size = format_bytes(cut.nbytes)
    if cut.time is not None:
        size += f", {format_time(cut.time)}"
    return [str(cut.tensor.spec), size]


def _cut_tooltip(cut: _Cut) -> list[str]:
    line = f"{cut.tensor.key}: {cut.src} -> {cut.dst}, {cut.tensor.spec}, {format_bytes(cut.nbytes)}"
    if cut.time is not None:
        line += f", predicted copy {format_time(cut.time)}"
    return [line]


def _text(lines: Iterable[str], *, left: bool = False) -> str:
    """A DOT label from lines: backslashes escaped (DOT reads them as escapes), lines centred
    (or left-aligned: ``\\l`` ends each line).

    ``nohtml`` keeps a label that happens to look like ``<...>`` from being read as HTML.
    """
    escaped = [line.replace("\\", "\\\\") for line in lines]
    if left:
        return graphviz.nohtml("".join(line + "\\l" for line in escaped))
    return graphviz.nohtml("\\n".join(escaped))


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
