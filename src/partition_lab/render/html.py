"""The interactive view of a plan: one self-contained HTML file to explore a plan of any size.

``partition-lab viz MODEL -o plan.html`` (or :func:`write_html`) writes a page with pan and zoom,
search by op type, node name or module path, regions drawn as boxes that expand on click, each
op's device, region, reason, support verdicts, shapes and predicted time in a side panel, and
the legend. It needs no network when viewed: the script, the styles and the plan are inline, and
the page's Content-Security-Policy allows nothing else to load or run.

Why not graphviz: ``dot`` lays out clusters in time far worse than linear (minutes for 100
regions, hours for 1,400: :mod:`.graphviz`). Here the layout is split in two levels, each
computed by :func:`.layered.layered_layout` in Python: the region graph (what the page first
shows), and, for each region, the graph of its ops (shown when the region is expanded). The
page only turns ranks into coordinates, which is linear and fast, so expanding a region moves
its neighbours aside instead of overlapping them.

Names from models are untrusted: the plan goes into the page as JSON inside a
``<script type="application/json">`` with ``<``, ``>`` and ``&`` escaped, and the script puts
every name into the page as text (``textContent``), never as markup.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import math
import os
import re
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from .._outputs import write_together
from ..core.plan import PartitionPlan
from ..cost_models.base import CostBreakdown
from .dot import COLLAPSE_ABOVE, CUT_COLOUR
from .layered import layered_layout
from .view import (
    _contents_lines,
    _flow_lines,
    _histogram,
    _PlanView,
    _reason_lines,
    _region_flows,
    _size_line,
    _summary_lines,
    role_text,
)

SCHEMA = "partition_lab.html/1"
"""The version of the data the page's script reads (``DATA.schema``)."""

_ASSETS = ("page.html", "view.css", "layout.js", "view.js")
#: The page's one script, in this order: the coordinates, then the view that draws them.
_SCRIPTS = ("layout.js", "view.js")


def write_html(
    plan: PartitionPlan,
    path: str | os.PathLike[str],
    cost: CostBreakdown | None = None,
    *,
    collapse: bool | None = None,
    title: str | None = None,
) -> Path:
    """Write the interactive view of ``plan`` to ``path`` (atomically, as every output).

    ``collapse`` False opens with every region expanded; None (default) expands them when the
    graph has at most :data:`~.dot.COLLAPSE_ABOVE` ops. There is no size budget: the page
    lays out regions first and a region's ops only when it is expanded.
    """
    path = Path(path)
    write_together({path: html_page(plan, cost, collapse=collapse, title=title).encode("utf-8")})
    return path


def html_page(plan: PartitionPlan, cost: CostBreakdown | None = None, *,
              collapse: bool | None = None, title: str | None = None) -> str:
    """The page's text: the template with the styles, the script and the plan's data inline."""
    data = plan_data(plan, cost, collapse=collapse, title=title)
    css, js = _asset("view.css"), "\n".join(_asset(name) for name in _SCRIPTS)
    values = {
        "TITLE": html.escape(data["title"]),
        "CSS": css,
        "JS": js,
        "DATA": script_json(data),
        # Only this script and this style may run: a name that somehow became markup could
        # neither run code nor load anything from the network.
        "SCRIPT_HASH": _csp_hash(js),
        "STYLE_HASH": _csp_hash(css),
    }
    # One pass over the template: text substituted in is never scanned for placeholders.
    return re.sub(r"@@([A-Z_]+)@@", lambda m: values[m.group(1)], _asset("page.html"))


def script_json(data: Any) -> str:
    """JSON that is safe inside a ``<script>`` element: ``<``, ``>`` and ``&`` as ``\\u``
    escapes, so no name can close the element (``</script>``) or open a comment (``<!--``);
    non-finite numbers (JSON has none) become null."""
    try:
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError:  # rare (an infinite time or FLOP count): walking every value is slow
        text = json.dumps(_finite(data), ensure_ascii=False, separators=(",", ":"),
                          allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def plan_data(plan: PartitionPlan, cost: CostBreakdown | None = None, *,
              collapse: bool | None = None, title: str | None = None) -> dict[str, Any]:
    """What the page shows, as JSON-ready data (schema :data:`SCHEMA`).

    ``ops[i]`` is node ``i`` of ``plan.to_dict()["nodes"]`` in short keys, with repeated
    values (reasons, verdicts, tensor types) stored once in ``pool``: ``n`` name, ``o`` op type,
    ``s`` source name, ``d`` device index, ``r`` region, ``re`` reason, ``sh`` the short reason
    the box shows (null on the most preferred device), ``w`` why (structured reason), ``v`` one
    support verdict per device, ``i``/``u``/``k`` input, output and weight types, ``f`` FLOPs,
    ``t`` predicted seconds (null without a cost). ``top`` is the layout of the region graph
    (regions, then graph inputs, then the output), each region's ``layout`` that of its ops.
    """
    if collapse is None:
        collapse = len(plan.graph) > COLLAPSE_ABOVE
    view = _PlanView(plan, cost)
    pool = _Pool()
    devices = [d.name for d in plan.platform.devices]
    device_index = {name: i for i, name in enumerate(devices)}
    nodes = plan.to_dict(cost.node_times if cost is not None else None)["nodes"]
    return {
        "schema": SCHEMA,
        "title": title or (f"{plan.graph.name or 'graph'} on {plan.platform_name}, "
                           f"strategy {plan.strategy}"),
        "summary": _summary_lines(view),
        "devices": _devices(view),
        "cut_colour": CUT_COLOUR,
        "ops": [_op(view, node, pool, device_index) for node in nodes],
        "regions": [_region(view, region, device_index) for region in plan.regions],
        "inputs": [{"name": name, "spec": str(view.graph.graph_inputs[name].spec)}
                   for name in view.input_ids],
        "top": _top_layout(view),
        "expanded": [] if collapse else [r.id for r in plan.regions],
        "pool": pool.values,
    }


class _Pool:
    """Interned JSON values: a reason shared by 1,000 ops is stored once."""

    def __init__(self) -> None:
        self.values: list[Any] = []
        self._index: dict[str, int] = {}

    def add(self, value: Any) -> int:
        # Most values are strings: their own key, without encoding them.
        key = value if isinstance(value, str) else "\0" + json.dumps(value, sort_keys=True)
        if key not in self._index:
            self._index[key] = len(self.values)
            self.values.append(value)
        return self._index[key]


def _devices(view: _PlanView) -> list[dict[str, Any]]:
    """The legend: each device in preference order with its colours, role and counts."""
    counts = view.plan.ops_per_device()
    regions = view.plan.regions_per_device()
    out = []
    for device in view.platform.devices:
        line, fill = view.colour(device.name)
        out.append({"name": device.name, "line": line, "fill": fill, "host": device.is_host,
                    "role": role_text(device), "ops": counts.get(device.name, 0),
                    "regions": regions.get(device.name, 0)})
    return out


def _op(view: _PlanView, node: Mapping[str, Any], pool: _Pool,
        device_index: Mapping[str, int]) -> dict[str, Any]:
    reason = view.reasons[node["id"]]
    spec = view.graph[node["id"]]
    return {
        "n": node["name"], "o": node["op"], "s": node["source_name"],
        "d": device_index[node["device"]], "r": node["region"],
        "re": pool.add(node["reason"]),
        "sh": None if reason is None else pool.add(reason.short),
        "w": pool.add(node["why"]),
        "v": [pool.add(node["support"][name]) for name in device_index],
        # The same text as the static drawing (dtype[shape]), from the graph's own types.
        "i": [pool.add(str(t)) for t in spec.inputs],
        "u": [pool.add(str(t)) for t in spec.outputs],
        "k": [pool.add(str(t)) for t in spec.weights],
        "f": node["flops"], "t": node["time_s"],
    }


def _region(view: _PlanView, region: Any, device_index: Mapping[str, int]) -> dict[str, Any]:
    reason_lines, reason_tips = _reason_lines(view, region)
    inner = layered_layout(list(region.nodes), _edges_within(view, region.nodes))
    return {
        "label": region.label, "d": device_index[region.device],
        "size": _size_line(view, region), "time": view.region_time(region),
        "contents": _contents_lines(view, region), "reasons": reason_lines,
        "reasons_full": reason_tips,
        "histogram": _histogram((view.graph[n].op for n in region.nodes), top=None),
        "layout": inner.to_data(),
    }


def _edges_within(view: _PlanView, members: tuple[int, ...]) -> list[tuple[int, int]]:
    inside = set(members)
    return [(u, v) for u in members for v in view.graph.successors(u) if v in inside]


def _top_layout(view: _PlanView) -> dict[str, Any]:
    """The region graph's layout: node ``i`` is region ``i``, then the graph inputs, then the
    output; each edge carries its flow's label and whether it is a copy between devices."""
    regions = len(view.plan.regions)
    ids = {f"r{i}": i for i in range(regions)}
    for j, dot_id in enumerate(view.input_ids.values()):
        ids[dot_id] = regions + j
    ids["out"] = regions + len(view.input_ids)
    flows = {(ids[tail], ids[head]): flow for (tail, head), flow in _region_flows(view).items()}
    layout = layered_layout(list(range(len(ids))), sorted(flows))
    return {"ranks": layout.ranks,
            "edges": [[u, v, path, _flow_lines(flows[u, v]), flows[u, v].crosses]
                      for u, v, path in layout.edges]}


def _finite(value: Any) -> Any:
    """``value`` with every non-finite float replaced by None (JSON cannot hold them)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _csp_hash(text: str) -> str:
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return "sha256-" + base64.b64encode(digest).decode("ascii")


def _asset(name: str) -> str:
    assert name in _ASSETS
    return resources.files(__package__).joinpath("assets", name).read_text("utf-8")
