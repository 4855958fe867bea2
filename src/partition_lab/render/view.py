"""The view model of a drawing: what each region, op and cut shows, independent of DOT.

:class:`_PlanView` holds a plan with its cost breakdown and answers the drawing's questions: each
device's colours and role, each op's reason (grouped by the text it shows, as the plan's summary
does; never naming a region that is not drawn), the cuts and their copy times, and
the header's summary and legend lines. Text helpers (short reasons, histograms, wrapping) live
here too.
"""

from __future__ import annotations

import colorsys
import hashlib
import re
import textwrap
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from .._units import counted, format_bytes, format_time  # noqa: F401  (re-exported by render)
from ..core.graph import OpGraph, OpNode, Tensor
from ..core.plan import PartitionPlan, Region
from ..core.platform import HOST, Device, Platform
from ..cost_models.base import CostBreakdown, CutCost

CPU_FILL, CPU_LINE = "#f2f2f2", "#7f7f7f"


TARGET_COLOURS = {
    "tensorcore": ("#5f9400", "#e6f4cc"),
    "neuron": ("#d97f00", "#ffecd1"),
}


REASON_WIDTH = 42


"""Characters per line of a visible reason. Reasons wrap and are never cut: a PNG or PDF has no
tooltip to hold the rest."""


HEADER_WIDTH = 96


"""Characters per line of the summary in the header (long notes wrap)."""


ISLAND_REASONS = 4


"""Distinct reasons shown on a collapsed region or CPU island; the node says how many ops have
other reasons (each op's is in plan.json and the SVG tooltip)."""


SMALL_REGION = 4


"""A collapsed region of at most this many ops lists them by name instead of by histogram."""


# ---------------------------------------------------------------------------------- public API


def target_colours(target: str) -> tuple[str, str]:
    """(line, fill) colours of a target: fixed for built-ins, a stable hash for user targets."""
    family = target.split("@", 1)[0]
    if family in TARGET_COLOURS:
        return TARGET_COLOURS[family]
    # A hash of the name, not Python's hash(), so the colour is the same in every run.
    hue = int.from_bytes(hashlib.sha256(family.encode()).digest()[:2], "big") / 65536
    return _hsv(hue, 0.75, 0.70), _hsv(hue, 0.16, 1.0)


def device_colours(platform: Platform) -> dict[str, tuple[str, str]]:
    """(line, fill) colours of every device of a platform, distinct between devices.

    The host is grey (its ops are drawn dashed). A BYOC device of a built-in family (neuron,
    tensorcore) keeps the family's colours, the same in every picture of that family;
    any other device takes its platform colour (``Device.colour``) with a light fill of the same
    hue, or, without one, a stable hash of its name. A colour already taken by a more preferred
    device is replaced by the hash colour, so each device has its own.
    """
    colours: dict[str, tuple[str, str]] = {}
    used = {CPU_LINE}
    for device in platform.devices:
        if device.is_host:
            colours[device.name] = (CPU_LINE, CPU_FILL)
            continue
        line, fill = _own_colours(device)
        if line.lower() in used:
            line, fill = target_colours(device.name)
        salt = 0
        while line.lower() in used:  # two hashes alike: step round the colour wheel
            salt += 1
            line, fill = target_colours(f"{device.name}#{salt}")
        used.add(line.lower())
        colours[device.name] = (line, fill)
    return colours


def _own_colours(device: Device) -> tuple[str, str]:
    family = device.name.split("@", 1)[0]
    if device.role == "byoc" and family in TARGET_COLOURS:
        return TARGET_COLOURS[family]
    if _is_hex_colour(device.colour):
        return device.colour, _tint(device.colour)
    return target_colours(device.name)


def _is_hex_colour(text: str) -> bool:
    return len(text) == 7 and text.startswith("#") and all(
        c in "0123456789abcdefABCDEF" for c in text[1:])


def _tint(colour: str) -> str:
    """A light fill of the same hue as ``colour`` (``#rrggbb``)."""
    r, g, b = (int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5))
    hue, saturation, _ = colorsys.rgb_to_hsv(r, g, b)
    return _hsv(hue, 0.16 if saturation > 0.05 else 0.0, 1.0 if saturation > 0.05 else 0.95)


def role_text(device: Device) -> str:
    """How a device's regions run, for the legend: ``BYOC, Compiler tensorcore``."""
    if device.is_host:
        return "host"
    if device.role == "main":
        return "main target, inline"
    return f"BYOC, Compiler {device.compiler}" if device.compiler else "BYOC"


# ---------------------------------------------------------------------------------- plan view


@dataclass(frozen=True)
class _Cut:
    """One tensor copied to one device, with the consumer whose edge carries the label."""

    tensor: Tensor
    src: str
    dst: str
    nbytes: float
    time: float | None
    label_on: str  # DOT id of the node whose incoming edge is labelled


@dataclass(frozen=True)
class _Reason:
    """Why an op is not on a more preferred device, as the drawing shows it.

    ``key`` says what kind of reason it is: ``("rejected", devices, rule, op)`` for an op that
    every more preferred device rejected (``devices`` lists them, ``rule`` is the most
    preferred one's verdict's rule), ``("moved", device, gist)`` for an op a strategy put off
    its preferred device (by the strategy's reason, without names of regions that are not
    drawn). Summaries group ops by ``gist``, the text they show.
    """

    key: tuple[str, ...]
    gist: str  # short text, with the op's name (summaries mix ops)
    short: str  # short text under the op's own name (without it)
    full: str  # the whole text, for tooltips

    @property
    def rejected(self) -> bool:
        return self.key[0] == "rejected"


class _PlanView:
    """Derived facts about a plan that the drawing needs, computed once, in a fixed order."""

    def __init__(self, plan: PartitionPlan, cost: CostBreakdown | None) -> None:
        self.plan = plan
        self.graph: OpGraph = plan.graph
        self.cost = cost
        self.platform = plan.platform
        self.colours = device_colours(self.platform)
        self.domain = {d.name: d.domain for d in self.platform.devices}
        self.labels = {r.label for r in plan.regions}
        self._label_words = _label_pattern(plan)
        self.input_ids = {name: f"in{i}" for i, name in enumerate(sorted(self.graph.graph_inputs))}
        self.cuts = self._cuts()
        self.reasons = [self._reason(n) for n in range(len(self.graph))]

    def colour(self, device: str) -> tuple[str, str]:
        """(line, fill) of a device (a stable hash colour for a name the platform lacks)."""
        return self.colours.get(device) or target_colours(device)

    def crosses(self, src: str, dst: str) -> bool:
        """Whether a tensor going from device ``src`` to ``dst`` leaves its domain."""
        return self.domain.get(src, src) != self.domain.get(dst, dst)

    def relabel(self, text: str, *, keep_drawn: bool = False) -> str:
        """``text`` without region labels the reader could misread.

        Strategies word reasons with region labels of their search state ("region accel7 (3
        ops) excluded: ..."): numbers of regions that were re-formed afterwards, so even a label
        that this plan also has names another region (the cost strategy's reasons name
        greedy's regions). In reasons every label becomes "its region" (or "another region").
        With ``keep_drawn`` (plan notes) labels of drawn regions stay.
        """
        def keep_or_drop(match: re.Match[str]) -> str:
            if keep_drawn and match.group(2) in self.labels:
                return match.group(0)
            return "its region" if match.group(1) else "another region"

        return self._label_words.sub(keep_or_drop, text)

    def _reason(self, node: int) -> _Reason | None:
        """Why ``node`` is not on a more preferred device; None on the most preferred one."""
        plan, platform = self.plan, self.platform
        decision = plan.decisions[node]
        index = platform.index(decision.device)
        if index == 0:
            return None
        support = plan.support
        op = self.graph[node].op
        if support.preferred(node) == index:  # every device ahead rejected it
            rejectors = [d.name for d in platform.devices[:index]]
            verdict = support.verdict(node, 0)  # the most preferred device's says it first
            gist, short = _short_reason(verdict.reason, ""), _short_reason(verdict.reason, op)
            full = verdict.reason
            if len(platform.accelerators) > 1:  # say which devices rejected it
                who = _and(rejectors) + (" rejects" if len(rejectors) == 1 else " reject")
                gist, short = f"{who} {gist}", f"{who} it: {short}"
                full = "\n".join(f"{name} rejects it: {support.verdict(node, i).reason}"
                                  for i, name in enumerate(rejectors))
            key = ("rejected", ",".join(rejectors), verdict.rule, op)
            return _Reason(key, gist, short, full)
        text = self.relabel(decision.reason)
        gist = _short_reason(text, "")
        return _Reason(("moved", decision.device, gist), gist, _short_reason(text, op), text)

    def tooltip_reasons(self, node: int) -> list[str]:
        """The full reasons of a node: the strategy's, then each rejecting device's verdict
        that the strategy's text does not already hold."""
        text = self.relabel(self.plan.decisions[node].reason)
        reason = self.reasons[node]
        if reason is None or not reason.rejected:
            return [text]
        index = self.platform.index(self.plan.device_of(node))
        verdicts = [self.plan.support.verdict(node, i).reason for i in range(index)]
        if all(v in text for v in verdicts):
            return [text]
        return [text, *reason.full.split("\n")]

    def source_of(self, tensor: Tensor) -> str:
        """DOT id of the node a tensor comes from (an op or a graph input)."""
        if tensor.producer is None:
            return self.input_ids[tensor.input_name or ""]
        return _node_id(tensor.producer)

    def region_time(self, region: Region) -> float | None:
        if self.cost is None:
            return None
        return self.cost.regions[region.id].total

    def cut(self, tensor: Tensor, device: str) -> _Cut | None:
        """The copy that makes ``tensor`` available on ``device`` (None if it needs none)."""
        return self.cuts.get((tensor.key, self.domain.get(device, (device, ""))))

    def _cuts(self) -> dict[tuple[str, tuple[str, str]], _Cut]:
        """Crossing tensors keyed by (tensor key, destination domain): one copy per domain."""
        costed: Mapping[tuple[str, str], CutCost] = (
            {(c.tensor, c.dst): c for c in self.cost.cuts} if self.cost else {})
        cuts = {}
        for tensor, src, dst in self.plan.crossing_tensors():
            domain = self.domain[dst]
            at_dst = sorted(c for c in tensor.consumers
                            if self.domain[self.plan.device_of(c)] == domain)
            label_on = _node_id(at_dst[0]) if at_dst else "out"
            known = costed.get((tensor.key, dst))
            cuts[(tensor.key, domain)] = _Cut(tensor, src, dst, tensor.nbytes,
                                              known.time if known else None, label_on)
        return cuts


# ---------------------------------------------------------------------------------- expanded


def _reason_lines(view: _PlanView, region: Region) -> tuple[list[str], list[str]]:
    """Visible lines (the first :data:`ISLAND_REASONS` groups) and tooltip lines (every full
    reason with its count) of the ops of a region that are not on a more preferred device."""
    lines: list[str] = []
    ranked = _region_reasons(view, region)
    for gist, count in ranked[:ISLAND_REASONS]:
        lines.extend(_wrap(f"{count}x {gist}" if len(region.nodes) > 1 else gist,
                           REASON_WIDTH + 8))
    if len(ranked) > ISLAND_REASONS:
        more = len(ranked) - ISLAND_REASONS
        ops = sum(count for _, count in ranked[ISLAND_REASONS:])
        lines.append(f"and {ops} op{'s' if ops > 1 else ''} for {more} other "
                     f"reason{'s' if more > 1 else ''}")
    full: dict[str, int] = {}
    for node in region.nodes:
        reason = view.reasons[node]
        if reason is not None:
            full[reason.full] = full.get(reason.full, 0) + 1
    return lines, [f"{count}x {text}" for text, count in sorted(full.items())]


def _region_reasons(view: _PlanView, region: Region) -> list[tuple[str, int]]:
    """The reasons of a region's ops grouped by their text, with counts: what a more preferred
    device rejected first, then what the strategy moved, each largest first.

    Ops share a line only when their reasons read the same, as in the text summary: one rule
    that rejects a stem conv for its channels and a dense for its batch gives two lines, so
    no line shows one op's words for another.
    """
    groups: Counter[tuple[bool, str]] = Counter()
    for node in region.nodes:
        reason = view.reasons[node]
        if reason is not None:
            groups[(not reason.rejected, reason.gist)] += 1
    ranked = sorted(groups.items(), key=lambda item: (item[0][0], -item[1], item[0][1]))
    return [(gist, count) for (_, gist), count in ranked]


def _contents_lines(view: _PlanView, region: Region) -> list[str]:
    """What a summary node holds: each op with its source name for a small region (the names
    that ``excl_node_names`` takes), the op histogram for a large one."""
    if len(region.nodes) <= SMALL_REGION:
        return [" ".join(_op_lines(view.graph[n])) for n in region.nodes]
    return _histogram_lines([view.graph[n].op for n in region.nodes])


@dataclass
class _Flow:
    """Tensors flowing from one region (or input) to another, aggregated for one edge."""

    tensors: int = 0
    nbytes: float = 0.0
    spec: str = ""  # the tensor's type, kept while the flow holds a single tensor
    cut_time: float | None = None
    crosses: bool = False
    costed: bool = False


def _region_flows(view: _PlanView) -> dict[tuple[str, str], _Flow]:
    """Aggregate tensors by (source region, destination region); a cut's time goes to the
    edge whose destination holds the consumer that carries the cut's label."""
    plan = view.plan
    flows: dict[tuple[str, str], _Flow] = {}
    for tensor in view.graph.tensors:
        if tensor.producer is None:
            tail, src_device = view.source_of(tensor), HOST
        else:
            tail, src_device = _region_id(plan.region_of(tensor.producer)), plan.device_of(
                tensor.producer)
        heads = {(_region_id(plan.region_of(c)), plan.device_of(c), _node_id(c))
                 for c in tensor.consumers}
        if tensor.is_output:
            heads.add(("out", HOST, "out"))
        seen: set[str] = set()
        for head, device, member in sorted(heads):
            if head == tail:
                continue
            flow = flows.setdefault((tail, head), _Flow())
            if head not in seen:
                flow.tensors += 1
                flow.nbytes += tensor.nbytes
                flow.spec = str(tensor.spec) if flow.tensors == 1 else ""
                seen.add(head)
            cut = view.cut(tensor, device) if view.crosses(src_device, device) else None
            if cut is not None:
                flow.crosses = True
                flow.costed = cut.time is not None
                if cut.label_on == member and cut.time is not None:
                    flow.cut_time = (flow.cut_time or 0.0) + cut.time
    return flows


def _flow_lines(flow: _Flow) -> list[str]:
    """The label of an aggregated edge: the tensor's type (or how many tensors), the bytes, and
    the copy's predicted time where the edge carries it."""
    if flow.spec:
        lines = [flow.spec, format_bytes(flow.nbytes)]
    else:
        lines = [f"{flow.tensors} tensors", format_bytes(flow.nbytes)]
    if flow.cut_time is not None:
        lines[-1] += f", copy {format_time(flow.cut_time)}"
    elif flow.crosses and flow.costed:
        lines.append("(copy counted on a sibling edge)")
    return lines


def _summary_lines(view: _PlanView) -> list[str]:
    plan, graph, cost = view.plan, view.graph, view.cost
    several = len(view.platform.accelerators) > 1
    if several:
        lines = [f"{plan.regions_text()}, {len(graph)} ops on "
                 f"{len(view.platform.devices)} devices"]
    else:
        lines = [f"{plan.regions_text()}, "
                 f"{len(plan.accelerator_nodes)}/{len(graph)} ops on {plan.platform_name}"]
    nbytes = sum(cut.nbytes for cut in view.cuts.values())
    lines.append(f"{len(view.cuts)} tensor copies between devices, {format_bytes(nbytes)}")
    if cost is not None:
        if several:
            by_device = cost.compute_by_device()
            compute = " + ".join(
                f"{'CPU' if d.is_host else d.name} {format_time(by_device[d.name])}"
                for d in view.platform.devices if d.name in by_device)
        else:
            compute = (f"CPU {format_time(cost.compute_cpu)}"
                       f" + accelerator {format_time(cost.compute_accel)}")
        lines.append(f"predicted {format_time(cost.total)} = {compute}"
                     f" + copies {format_time(cost.transfer)}"
                     f" + invocations {format_time(cost.overhead)}")
        lines.append(f"cost model: {cost.model}")
    lines.extend(f"note: {view.relabel(note, keep_drawn=True)}" for note in plan.notes)
    return lines


def _op_lines(op: OpNode) -> list[str]:
    name = op.source_name or op.name
    return [op.op] if name == f"{op.op}_{op.id}" else [op.op, *_chunks(name, 40)]


def _size_line(view: _PlanView, region: Region) -> str:
    line = f"{len(region.nodes)} op" + ("" if len(region.nodes) == 1 else "s")
    time = view.region_time(region)
    return line if time is None else f"{line}, {format_time(time)}"


def _short_reason(reason: str, op: str) -> str:
    """The gist of a reason: without a leading "<op>" (the node already shows it), without
    parenthesised remarks and after-semicolon commentary; never cut (callers wrap it).

    Parentheses that hold a tuple ("(batch, cin, cout) = (8, 16, 16)") are part of the gist and
    stay; those that hold prose ("(added in neuron-cc 1.0.24045)") go. A "; " followed by a word
    starts commentary; one followed by a tuple continues a list.
    """
    text = reason.strip()
    for prefix in (f"{op}:", f"{op} ") if op else ():  # "nn.dense: batch 1 ..." or "sign is ..."
        if text.startswith(prefix):
            text = text[len(prefix):].strip()
    gist = _COMMENTARY.split(_without_remarks(text), maxsplit=1)[0]
    return gist.strip() or text


_TUPLE = re.compile(r"\s*[^\s(),;:]+(?:\s*,\s*[^\s(),;:]+)+\s*")


_COMMENTARY = re.compile(r";\s+(?=[^\s(])")


def _without_remarks(text: str) -> str:
    """``text`` without its top-level parenthesised groups that are not tuples (nested groups
    go with their outer one); an unbalanced parenthesis is kept as text."""
    out: list[str] = []
    depth, start = 0, 0
    for i, char in enumerate(text):
        if char == "(":
            if depth == 0:
                start = i
            depth += 1
        elif char == ")" and depth:
            depth -= 1
            if depth == 0:
                group = text[start:i + 1]
                if _TUPLE.fullmatch(group[1:-1]):
                    out.append(group)
                else:
                    while out and out[-1].isspace():
                        out.pop()
                    if out and out[-1].endswith(" "):
                        out[-1] = out[-1].rstrip()
        elif depth == 0:
            out.append(char)
    if depth:
        out.append(text[start:])
    return "".join(out)


def _and(names: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _histogram(ops: Iterable[str], top: int | None = 4) -> str:
    counts: dict[str, int] = {}
    for op in ops:
        counts[op] = counts.get(op, 0) + 1
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    shown = ranked if top is None else ranked[:top]
    text = ", ".join(f"{count} {op}" for op, count in shown)
    return text + (", ..." if len(shown) < len(ranked) else "")


def _histogram_lines(ops: list[str], top: int = 4) -> list[str]:
    """The most frequent ops, one per line, for a summary node."""
    counts: dict[str, int] = {}
    for op in ops:
        counts[op] = counts.get(op, 0) + 1
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    lines = [f"{count} x {op}" for op, count in ranked[:top]]
    rest = sum(count for _, count in ranked[top:])
    if rest:
        lines.append(f"{rest} other op" + ("" if rest == 1 else "s"))
    return lines


def _wrap(text: str, width: int) -> list[str]:
    """Break ``text`` at spaces into lines of at most ``width`` characters (long words stay)."""
    return textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False)


class _NameWrapper(textwrap.TextWrapper):
    """Wraps a name (no spaces) after its ``.``, ``/`` and ``_``, the boundaries of module paths
    and MXNet names, and mid-part only where one part is longer than a line."""

    # TextWrapper splits text into chunks with this (capturing: the chunks are kept) and packs
    # them into lines; with break_on_hyphens off it is the only split.
    wordsep_simple_re = re.compile(r"([^./_]*[./_])")


def _chunks(text: str, width: int) -> list[str]:
    """A name without spaces in lines of ``width`` characters: wrapped at its ``.``, ``/`` and
    ``_``, never cut; the lines joined are the name."""
    wrapper = _NameWrapper(width, break_on_hyphens=False, drop_whitespace=False)
    return wrapper.wrap(text) or [""]


def _node_id(node: int) -> str:
    return f"n{node}"


def _region_id(region: Region) -> str:
    return f"r{region.id}"


def _label_pattern(plan: PartitionPlan) -> re.Pattern[str]:
    """Words that are region labels on the plan's platform (``accel3``, ``tensorcore0``,
    ``cpu2``: a label prefix and a number), with a "region " before them if there is one."""
    prefixes = {"accel", HOST, *plan.platform.names, *(r.prefix for r in plan.regions if r.prefix)}
    words = "|".join(re.escape(p) for p in sorted(prefixes, key=lambda p: (-len(p), p)))
    return re.compile(rf"(?<![\w@.])(region )?((?:{words})\d+)(?![\w@])")


def _dot_id(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in name) or "plan"


def _hsv(hue: float, saturation: float, value: float) -> str:
    r, g, b = colorsys.hsv_to_rgb(hue, saturation, value)
    return f"#{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}"
