"""Source-name spans on Relay calls.

partition_lab keeps the name a model file gave each node (ONNX node name, MXNet node name) in the
Relay call's ``span.source_name.name``. Users exclude nodes by those names (neuron-cc's
``excl_node_names``) and drawings show them, so every frontend must leave a span on every call.
"""

from __future__ import annotations

from collections.abc import Iterable

import tvm
from tvm import relay

# The repeated-call suffix (``layer1.0.relu#2``) is defined once, beside the TVM-free support
# table that reads it.
from ...targets.annotate import first_call_name  # noqa: F401


def make_span(name: str) -> tvm.ir.Span:
    """A span that carries only a source name (line and column are meaningless here)."""
    return tvm.ir.Span(tvm.ir.SourceName(name), 0, 0, 0, 0)


def span_name(call: relay.Call) -> str | None:
    """The source name on ``call``'s span, or None when it has none."""
    span = call.span
    if span is None or span.source_name is None:
        return None
    name = str(span.source_name.name)
    return name or None


def calls_in_order(expr: relay.Expr) -> list[relay.Call]:
    """Every call reachable from ``expr`` (function bodies included), producers first."""
    calls: list[relay.Call] = []
    relay.analysis.post_order_visit(
        expr, lambda node: calls.append(node) if isinstance(node, relay.Call) else None
    )
    return calls


def calls_without_source_name(mod: tvm.IRModule) -> list[relay.Call]:
    """Calls of ``mod["main"]`` that carry no source name (an empty list is the contract)."""
    return [call for call in calls_in_order(mod["main"]) if span_name(call) is None]


class SpanRebuilder:
    """Rebuild freshly created calls so that they carry a given span.

    A frontend converter turns one source node into a few Relay calls on top of the calls that
    earlier nodes produced. :meth:`attach` walks from a converter's result back to expressions
    that are already finished (returned by earlier :meth:`attach` calls) and rebuilds everything
    new in between with the node's span. Finished expressions are kept in a dict keyed by object
    identity, which also keeps them alive.
    """

    def __init__(self) -> None:
        self._finished: dict[relay.Expr, relay.Expr] = {}

    def attach(self, expr: relay.Expr, span: tvm.ir.Span) -> relay.Expr:
        """Return ``expr`` with every call not yet finished rebuilt to carry ``span``."""
        memo: dict[relay.Expr, relay.Expr] = {}
        result = self._rebuild(expr, span, memo)
        for new in memo.values():
            self._finished[new] = new
        self._finished[result] = result
        return result

    def attach_all(self, exprs: Iterable[relay.Expr], span: tvm.ir.Span) -> list[relay.Expr]:
        return [self.attach(expr, span) for expr in exprs]

    def _rebuild(
        self, expr: relay.Expr, span: tvm.ir.Span, memo: dict[relay.Expr, relay.Expr]
    ) -> relay.Expr:
        if expr in self._finished:
            return expr
        if expr in memo:
            return memo[expr]
        if isinstance(expr, relay.Call):
            args = [self._rebuild(arg, span, memo) for arg in expr.args]
            new: relay.Expr = relay.Call(expr.op, args, expr.attrs, expr.type_args, span)
        elif isinstance(expr, relay.Tuple):
            new = relay.Tuple([self._rebuild(f, span, memo) for f in expr.fields], expr.span)
        elif isinstance(expr, relay.TupleGetItem):
            new = relay.TupleGetItem(self._rebuild(expr.tuple_value, span, memo), expr.index)
        else:
            # Vars, constants and functions (control flow bodies were converted node by node,
            # with their own spans) are kept as they are.
            new = expr
        memo[expr] = new
        return new
