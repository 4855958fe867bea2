"""Two-operand einsums that are batched matrix products, as ``nn.batch_matmul``.

Attention written with ``torch.einsum`` ("bhid,bhjd->bhij", "bhij,bhjd->bhid") reaches Relay as
``einsum``, which no accelerator's op list names, so each one was a host island although it is
the ``nn.batch_matmul`` a target takes. :func:`batch_matmul_of` rewrites such an einsum into the
form TVM's ONNX importer gives ``MatMul``: operands transposed where their axes are out of
order, flattened to 3-D, ``nn.batch_matmul`` with ``transpose_b=True`` (the form every target's
rules expect, Tensor Core's template included), and the product reshaped (and transposed, if
the output asks) to the einsum's result. Any other einsum (one operand, a diagonal, several
contracted or free labels, broadcast batch axes) is left as it is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import tvm
from tvm import relay

#: One operand's (or the output's) subscripts: a label per axis; an ellipsis's axes get labels
#: of their own (".0", ".1", ...), numbered from the right as broadcasting aligns them.
Subscripts = tuple[str, ...]


@dataclass(frozen=True)
class _Product:
    """The roles of the labels of ``a,b->out`` as a batched matrix product."""

    batch: Subscripts  # shared by both operands and the output, in the output's order
    free_a: str
    free_b: str
    contracted: str


def subscripts(equation: str, ranks: tuple[int, ...]) -> tuple[list[Subscripts], Subscripts] | None:
    """Each operand's subscripts and the output's, for operands of ``ranks``; None for an
    equation this cannot read (or whose labels do not fit the ranks). Without ``->`` the output
    is numpy's implicit one: the ellipsis, then the labels used once, in alphabetical order."""
    equation = "".join(equation.split())
    inputs, arrow, output = equation.partition("->")
    terms = inputs.split(",")
    if len(terms) != len(ranks):
        return None
    operands = [_expanded(term, rank) for term, rank in zip(terms, ranks, strict=True)]
    widths = [rank - len(term.replace("...", "")) for term, rank in zip(terms, ranks, strict=True)]
    if not arrow:
        letters = [c for c in inputs if c.isalpha()]
        output = ("..." if "..." in inputs else "") + \
            "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    width = max(widths) if "..." in inputs else 0
    if width and "..." not in output:
        return None  # ellipsis axes summed away: not a product this reads
    out = _expanded(output, len(output.replace("...", "")) + width)
    if out is None or any(o is None for o in operands):
        return None
    return [o for o in operands if o is not None], out


def _expanded(term: str, rank: int) -> Subscripts | None:
    """``term``'s labels for a tensor of ``rank`` axes, its ellipsis expanded."""
    head, dots, tail = term.partition("...")
    if not all(c.isalpha() for c in head + tail):
        return None
    width = rank - len(head) - len(tail)
    if width < 0 or (width and not dots):
        return None
    return (*head, *(f".{width - 1 - i}" for i in range(width)), *tail)


def product_roles(a: Subscripts, b: Subscripts, out: Subscripts) -> _Product | None:
    """The labels' roles when ``a,b->out`` is a batched matrix product (batch labels on both
    operands and the output, one contracted label, one free label per operand), else None."""
    if any(len(set(s)) != len(s) for s in (a, b, out)) or not set(out) <= set(a) | set(b):
        return None
    contracted = [label for label in a if label in b and label not in out]
    free_a = [label for label in a if label not in b]
    free_b = [label for label in b if label not in a]
    if len(contracted) != 1 or len(free_a) != 1 or len(free_b) != 1:
        return None
    if free_a[0] not in out or free_b[0] not in out:
        return None  # a label summed over one operand alone
    batch = tuple(label for label in out if label in a and label in b)
    return _Product(batch, free_a[0], free_b[0], contracted[0])


def batch_matmul_of(call: relay.Call, args: list[relay.Expr]) -> relay.Expr | None:
    """The ``nn.batch_matmul`` form of ``call`` (a type-checked einsum whose tuple operand is
    rebuilt as ``args[0]``), every new call carrying the einsum's span; None when ``call`` is
    not a two-operand einsum of static shapes that is a batched matrix product."""
    if not (isinstance(call.op, tvm.ir.Op) and call.op.name == "einsum"):
        return None
    original, rebuilt = call.args[0], args[0]
    if not (isinstance(original, relay.Tuple) and isinstance(rebuilt, relay.Tuple)
            and len(original.fields) == 2):
        return None
    types = [field.checked_type for field in original.fields]
    if not all(isinstance(t, relay.TensorType) for t in types) or \
            str(types[0].dtype) != str(types[1].dtype):
        return None
    shapes = [_static(t) for t in types]
    if shapes[0] is None or shapes[1] is None:
        return None
    read = subscripts(str(call.attrs.equation), (len(shapes[0]), len(shapes[1])))
    if read is None:
        return None
    (a, b), out = read
    roles = product_roles(a, b, out)
    if roles is None:
        return None
    sizes_a, sizes_b = dict(zip(a, shapes[0], strict=True)), dict(zip(b, shapes[1], strict=True))
    if any(sizes_a[label] != sizes_b[label] for label in (*roles.batch, roles.contracted)):
        return None  # broadcast batch axes: not one batch_matmul
    return _built(rebuilt.fields, (a, b), out, roles, (sizes_a, sizes_b), call.span)


def _static(ty: relay.TensorType) -> tuple[int, ...] | None:
    dims = []
    for dim in ty.shape:
        if not isinstance(dim, tvm.tir.IntImm):
            return None
        dims.append(int(dim))
    return tuple(dims)


def _built(operands: tvm.ir.Array, labels: tuple[Subscripts, Subscripts], out: Subscripts,
           roles: _Product, sizes: tuple[dict[str, int], dict[str, int]],
           span: tvm.ir.Span | None) -> relay.Expr:
    """reshape/transpose of each operand, ``nn.batch_matmul`` (NT), reshape/transpose back."""
    first, second, free = 0, 1, (roles.free_a, roles.free_b)
    if out[-2:] == (roles.free_b, roles.free_a):  # b @ a^T gives out's order with no transpose
        first, second, free = 1, 0, (roles.free_b, roles.free_a)
    x = _as_3d(operands[first], labels[first], (*roles.batch, free[0], roles.contracted),
               sizes[first], span)
    y = _as_3d(operands[second], labels[second], (*roles.batch, free[1], roles.contracted),
               sizes[second], span)
    product = _spanned(relay.nn.batch_matmul(x, y, transpose_a=False, transpose_b=True), span)
    order = (*roles.batch, *free)
    every = {**sizes[0], **sizes[1]}
    result: relay.Expr = product
    if len(roles.batch) != 1:
        result = _reshaped(product, [every[label] for label in order], span)
    if order != out:
        result = _transposed(result, [order.index(label) for label in out], span)
    return result


def _as_3d(x: relay.Expr, labels: Subscripts, order: Subscripts, sizes: dict[str, int],
           span: tvm.ir.Span | None) -> relay.Expr:
    """``x`` (axes ``labels``) with its axes in ``order``, batch axes flattened into one."""
    if labels != order:
        x = _transposed(x, [labels.index(label) for label in order], span)
    if len(order) != 3:
        batch = math.prod(sizes[label] for label in order[:-2])
        x = _reshaped(x, [batch, sizes[order[-2]], sizes[order[-1]]], span)
    return x


def _transposed(x: relay.Expr, axes: list[int], span: tvm.ir.Span | None) -> relay.Expr:
    return _spanned(relay.transpose(x, axes), span)


def _reshaped(x: relay.Expr, shape: list[int], span: tvm.ir.Span | None) -> relay.Expr:
    return _spanned(relay.reshape(x, shape), span)


def _spanned(made: relay.Call, span: tvm.ir.Span | None) -> relay.Call:
    """``made`` carrying the einsum's span: its source name stays on every call it became."""
    return relay.Call(made.op, made.args, made.attrs, made.type_args, span)
