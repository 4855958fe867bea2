"""Units of a pattern judged as one: every node of a unit gets the unit's verdict.

A target that declares a pattern (``TargetSpec.patterns``) accepts or rejects each of its units
whole, as an accelerator compiler matches ``LayerNorm`` rather than the ``mean``, ``variance``...
an importer wrote: the ops the pattern stands for (``nn.layer_norm``) must be in the target's op
table, and their own rules (shapes, dtypes) must accept them; the other ops of the unit are parts
of that composite op. A pattern that stands for no single op is accepted where each of its ops is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ..core.graph import OpGraph
from ..core.patterns import Unit
from ..core.support import Verdict


class OpTable(Protocol):
    """What judging a unit asks of a target (a ``TargetSpec`` is one)."""

    name: str

    def supports_op(self, op: str) -> bool: ...

    def op_reason(self, op: str) -> str: ...


def pattern_rule(unit: Unit) -> str:
    """The rule name a unit's verdict carries: ``pattern:layer_norm``."""
    return f"pattern:{unit.name}"


def judge_units(target: OpTable, graph: OpGraph, verdicts: Sequence[Verdict],
                units: Sequence[Unit]) -> list[Verdict]:
    """``verdicts`` with every node of each unit given the unit's verdict."""
    judged = list(verdicts)
    for unit in units:
        verdict = judge_unit(target, graph, [verdicts[n] for n in unit.nodes], unit)
        for node in unit.nodes:
            judged[node] = verdict
    return judged


def judge_unit(target: OpTable, graph: OpGraph, members: Sequence[Verdict], unit: Unit) -> Verdict:
    """The verdict of ``target`` for ``unit`` whose nodes' own verdicts are ``members``."""
    pattern = unit.pattern
    ops = [graph[n].op for n in unit.nodes]
    what = f"{_construct(graph, unit)} ({len(ops)} ops: {_op_list(ops)})"
    anchor = any(v.anchor for v in members)
    for op, verdict in zip(ops, members, strict=True):
        if op in pattern.stands_for and not verdict.supported:
            return Verdict(False, f"{what}: its {op}: {verdict.reason}", verdict.rule, anchor)
    if pattern.stands_for:
        missing = [op for op in pattern.stands_for if not target.supports_op(op)]
        if missing:
            return Verdict(False, f"{what} is {missing[0]} as one op: "
                           f"{target.op_reason(missing[0])}", pattern_rule(unit), anchor)
        return Verdict(True, f"{what} is {pattern.stands_for[0]} as one op: "
                       f"{target.op_reason(pattern.stands_for[0])}", pattern_rule(unit), anchor)
    rejected = [(op, v) for op, v in zip(ops, members, strict=True) if not v.supported]
    if rejected:
        op, verdict = rejected[0]
        return Verdict(False, f"{what}: its {op}: {verdict.reason}", verdict.rule, anchor)
    return Verdict(True, f"{what} as one unit: {target.name} supports each of its ops",
                   pattern_rule(unit), anchor)


def _construct(graph: OpGraph, unit: Unit) -> str:
    """The unit in a reason's words: its pattern's ``construct`` (``{dtype}`` filled with the
    dtype of the first tensor it reads from outside), or the pattern's name."""
    construct = unit.pattern.construct
    if not construct:
        return unit.name
    inside = set(unit.nodes)
    outside = [t for node in unit.nodes for t in graph.tensors
               if node in t.consumers and t.producer not in inside]
    return construct.replace("{dtype}", outside[0].spec.dtype if outside else "?")


def _op_list(ops: Sequence[str], limit: int = 4) -> str:
    distinct = list(dict.fromkeys(ops))
    more = f", ... ({len(distinct) - limit} more)" if len(distinct) > limit else ""
    return ", ".join(distinct[:limit]) + more
