"""Make TVM 0.19's ONNX importer linear instead of quadratic.

While converting, ``relay.frontend.from_onnx`` asks for the type of a node's inputs (every
Conv, MatMul, ...) with ``infer_type``/``infer_shape``, and folds shape arithmetic with
``fold_constant``. Both work on the whole graph built so far, so importing costs O(n^2):
22 s for ResNet-152 and over 2 minutes for the 100-step matmul chain on this machine.

:func:`incremental_inference` swaps in versions that reuse earlier work: types are attached in
place with ``InferTypeLocal``, node by node, and only nodes without a type are visited;
``fold_constant`` folds a copy in which the already-typed, non-constant part of the graph is
cut off behind typed variables, then substitutes the originals back. The resulting module is
the same (the tests compare both imports with ``structural_equal``).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import tvm
from tvm import relay
from tvm.relay.frontend import common
from tvm.relay.frontend import onnx as onnx_frontend

_LOCK = threading.Lock()
_ORIGINAL_INFER_TYPE = common.infer_type
_ORIGINAL_FOLD_CONSTANT = common.fold_constant
# Whether an expression depends on constants only, by identity; expressions are immutable, so
# the answers hold for a whole conversion (cleared when it ends).
_CONSTANT_VALUED: dict[relay.Expr, bool] = {}
# Folded expressions that came out constant, by structural hash of what was folded.
_CONSTANT_FOLDS: dict[int, list[tuple[relay.Expr, relay.Constant]]] = {}


class _Unsupported(Exception):
    """An expression kind the incremental path does not handle; use TVM's own function."""


@contextlib.contextmanager
def incremental_inference() -> Iterator[None]:
    """While active, the ONNX frontend types and folds incrementally."""
    with _LOCK:
        patched = [(common, "infer_type", infer_type), (onnx_frontend, "infer_type", infer_type),
                   (common, "fold_constant", fold_constant),
                   (onnx_frontend, "fold_constant", fold_constant)]
        saved = [(module, name, getattr(module, name)) for module, name, _ in patched]
        for module, name, function in patched:
            setattr(module, name, function)
        try:
            yield
        finally:
            for module, name, function in saved:
                setattr(module, name, function)
            _CONSTANT_VALUED.clear()
            _CONSTANT_FOLDS.clear()


def infer_type(node: relay.Expr, mod: Any = None) -> relay.Expr:
    """``common.infer_type`` that types ``node`` in place, visiting only untyped nodes."""
    if mod is not None or isinstance(node, relay.Function):
        return _ORIGINAL_INFER_TYPE(node, mod)
    try:
        type_in_place(node)
    except (_Unsupported, tvm.error.TVMError):
        return _ORIGINAL_INFER_TYPE(node, mod)
    return node


def fold_constant(node: relay.Expr, mod: Any = None) -> relay.Expr:
    """``common.fold_constant`` on the part of ``node`` that is new since the last call."""
    if mod is not None:
        return _ORIGINAL_FOLD_CONSTANT(node, mod)
    try:
        fresh = type_in_place(node)
        copies: dict[relay.Expr, relay.Expr] = {}
        small = _cut_old_part(node, fresh, copies, is_root=True)
    except (_Unsupported, tvm.error.TVMError):
        return _ORIGINAL_FOLD_CONSTANT(node, mod)
    folded = _fold_small(small)
    originals = {copy: original for original, copy in copies.items()}
    return _restore(folded, originals, {})


def _fold_small(small: relay.Expr) -> relay.Expr:
    """FoldConstant, remembering results that came out as constants.

    FoldConstant evaluates constant subexpressions by compiling them; the MatMul converter
    builds the same shape arithmetic for every MatMul of a chain (about 19 kernel builds each).
    """
    key = tvm.ir.structural_hash(small, map_free_vars=True)
    for seen, folded in _CONSTANT_FOLDS.get(key, []):
        if tvm.ir.structural_equal(seen, small, map_free_vars=True):
            return folded
    folded = relay.transform.FoldConstantExpr(small, tvm.IRModule())
    if isinstance(folded, relay.Constant):
        _CONSTANT_FOLDS.setdefault(key, []).append((small, folded))
    return folded


def type_in_place(node: relay.Expr) -> set[relay.Expr]:
    """Give every untyped node under ``node`` its checked type; return the nodes it typed."""
    fresh: set[relay.Expr] = set()
    stack: list[tuple[relay.Expr, bool]] = [(node, False)]
    while stack:
        expr, children_done = stack.pop()
        if _has_type(expr):
            continue
        if children_done:
            relay.transform.InferTypeLocal(expr)
            fresh.add(expr)
            continue
        stack.append((expr, True))
        stack.extend((child, False) for child in _children(expr) if not _has_type(child))
    return fresh


def _cut_old_part(
    expr: relay.Expr,
    fresh: set[relay.Expr],
    copies: dict[relay.Expr, relay.Expr],
    is_root: bool = False,
) -> relay.Expr:
    """A copy of ``expr`` whose old, non-constant subgraphs are typed variables.

    ``copies`` maps each original expression to its stand-in (a copy, or a variable).
    """
    if expr in copies:
        return copies[expr]
    if isinstance(expr, relay.Constant | relay.Var | tvm.ir.Op):
        result = expr
    elif not is_root and expr not in fresh and not _is_constant_valued(expr):
        result = relay.var("cut", type_annotation=expr.checked_type)
    elif isinstance(expr, relay.Call):
        args = [_cut_old_part(arg, fresh, copies) for arg in expr.args]
        result = relay.Call(expr.op, args, expr.attrs, expr.type_args, expr.span)
    elif isinstance(expr, relay.Tuple):
        result = relay.Tuple([_cut_old_part(f, fresh, copies) for f in expr.fields], expr.span)
    elif isinstance(expr, relay.TupleGetItem):
        result = relay.TupleGetItem(_cut_old_part(expr.tuple_value, fresh, copies), expr.index)
    else:
        raise _Unsupported(type(expr).__name__)
    copies[expr] = result
    return result


def _restore(
    expr: relay.Expr, originals: dict[relay.Expr, relay.Expr], memo: dict[relay.Expr, relay.Expr]
) -> relay.Expr:
    """Undo the copy: stand-ins become their originals again (so sharing is kept), and only
    what folding changed is rebuilt. FoldConstant returns unchanged nodes as they were."""
    if expr in originals:
        return originals[expr]
    if expr in memo:
        return memo[expr]
    if isinstance(expr, relay.Call):
        args = [_restore(arg, originals, memo) for arg in expr.args]
        result: relay.Expr = relay.Call(expr.op, args, expr.attrs, expr.type_args, expr.span)
    elif isinstance(expr, relay.Tuple):
        result = relay.Tuple([_restore(f, originals, memo) for f in expr.fields], expr.span)
    elif isinstance(expr, relay.TupleGetItem):
        result = relay.TupleGetItem(_restore(expr.tuple_value, originals, memo), expr.index)
    else:
        result = expr  # constants made by folding, vars of the model
    memo[expr] = result
    return result


def _is_constant_valued(expr: relay.Expr) -> bool:
    """Whether ``expr`` depends on constants only (FoldConstant could fold it)."""
    memo = _CONSTANT_VALUED
    stack = [expr]
    while stack:
        node = stack[-1]
        if node in memo:
            stack.pop()
            continue
        if isinstance(node, relay.Constant):
            memo[node] = True
        elif isinstance(node, relay.Var):
            memo[node] = False
        else:
            pending = [c for c in _children(node) if c not in memo]
            if pending:
                stack.extend(pending)
                continue
            memo[node] = all(memo[c] for c in _children(node))
        stack.pop()
    return memo[expr]


def _children(expr: relay.Expr) -> list[relay.Expr]:
    if isinstance(expr, relay.Call):
        if not isinstance(expr.op, tvm.ir.Op):
            raise _Unsupported("call of a function")
        return list(expr.args)
    if isinstance(expr, relay.Tuple):
        return list(expr.fields)
    if isinstance(expr, relay.TupleGetItem):
        return [expr.tuple_value]
    if isinstance(expr, relay.Constant | relay.Var):
        return []
    raise _Unsupported(type(expr).__name__)


def _has_type(expr: relay.Expr) -> bool:
    return expr._checked_type_ is not None
