"""TVM's own BYOC chain as a reference: AnnotateTarget -> MergeCompilerRegions -> PartitionGraph.

Used by the tests (our ``greedy`` must find the same regions) and by the benchmark (our whole
partition against this chain on the same model). A plain per-node support predicate is
registered as ``target.<name>`` op attributes; every call is tagged with a unique span first so
that the ops inside each partitioned function can be mapped back to OpGraph node ids.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass

import tvm
from tvm import relay

from ..relay_graph import RelayGraph

_TAG = "partition_lab.ref:"
_counter = itertools.count()
_current: dict[str, set[int]] = {}
_registered: set[tuple[str, str]] = set()


@dataclass
class ReferenceResult:
    regions: list[frozenset[int]]
    seconds: float
    module: tvm.IRModule
    # Compiler functions without a single op (they return their input): TVM makes these for
    # some tuple fields between regions (seen on DenseNet-201's concatenates with a random
    # predicate). They hold no op, so they are no region here.
    empty_functions: int = 0


def tvm_chain_regions(rg: RelayGraph, supported: Sequence[bool]) -> ReferenceResult:
    """Regions (sets of node ids) that TVM's three-pass chain forms for ``supported``."""
    name = f"plref{next(_counter)}"
    _current[name] = {i for i, ok in enumerate(supported) if ok}
    for op in {call.op.name for call in rg.calls}:
        _register(op, name)
    mod = tvm.IRModule.from_expr(_tagged(rg))
    mod = relay.transform.InferType()(mod)
    chain = tvm.transform.Sequential([
        relay.transform.AnnotateTarget([name]),
        relay.transform.MergeCompilerRegions(),
        relay.transform.PartitionGraph(),
    ])
    start = time.perf_counter()
    partitioned = chain(mod)
    seconds = time.perf_counter() - start
    del _current[name]
    regions = []
    for gvar in partitioned.get_global_vars():
        func = partitioned[gvar]
        if func.attrs is not None and "Compiler" in func.attrs.keys():
            members: set[int] = set()
            relay.analysis.post_order_visit(func.body, lambda e, m=members: _collect(e, m))
            regions.append(frozenset(members))
    empty = sum(1 for r in regions if not r)
    return ReferenceResult(sorted((r for r in regions if r), key=min), seconds, partitioned, empty)


def _register(op: str, name: str) -> None:
    if (op, name) in _registered:
        return

    def predicate(expr: relay.Expr, target: str = name) -> bool:
        node = _node_id(expr)
        return node is not None and node in _current.get(target, ())

    tvm.ir.register_op_attr(op, f"target.{name}", predicate)
    _registered.add((op, name))


def _node_id(expr: relay.Expr) -> int | None:
    span = getattr(expr, "span", None)
    if span is None or span.source_name is None:
        return None
    text = str(span.source_name.name)
    return int(text[len(_TAG):]) if text.startswith(_TAG) else None


def _collect(expr: relay.Expr, members: set[int]) -> None:
    if isinstance(expr, relay.Call) and isinstance(expr.op, tvm.ir.Op):
        node = _node_id(expr)
        if node is not None:
            members.add(node)


def _tagged(rg: RelayGraph) -> relay.Function:
    """A copy of the function whose calls carry spans ``partition_lab.ref:<node id>``."""
    new_of: dict[relay.Call, relay.Call] = {}

    def remap(expr: relay.Expr) -> relay.Expr:
        if isinstance(expr, relay.Call):
            return new_of[expr]
        if isinstance(expr, relay.TupleGetItem):
            return relay.TupleGetItem(remap(expr.tuple_value), expr.index)
        if isinstance(expr, relay.Tuple):
            return relay.Tuple([remap(f) for f in expr.fields])
        return expr

    for node, call in enumerate(rg.calls):
        span = tvm.ir.Span(tvm.ir.SourceName(f"{_TAG}{node}"), 0, 0, 0, 0)
        new_of[call] = relay.Call(call.op, [remap(a) for a in call.args], call.attrs,
                                  call.type_args, span)
    func = rg.function
    return relay.Function(func.params, remap(func.body), func.ret_type, func.type_params)
