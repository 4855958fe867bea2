"""A TVM dataflow pattern in a few words: ``add(nn.conv2d(*, *), *)``, for reasons that say what
a pattern needs where it names an op but does not match the call."""

from __future__ import annotations

from typing import Any

from tvm.relax.dpl import pattern as dpl

LIMIT = 110


def pattern_text(pattern: Any, depth: int = 0) -> str:
    """The pattern as nested calls, op names without ``relax.``; ``*`` any value, ``const`` a
    constant, ``a|b`` alternatives, ``x[dtype=float16]`` / ``x[attrs]`` constraints."""
    text = _text(pattern, depth)
    return text if len(text) <= LIMIT else text[:LIMIT - 3] + "..."


def _text(p: Any, depth: int) -> str:
    if depth > 8:
        return "..."
    if isinstance(p, dpl.CallPattern):
        op = p.op
        name = _op_name(op.expr) if isinstance(op, dpl.ExprPattern) else _text(op, depth + 1)
        return f"{name}({', '.join(_text(a, depth + 1) for a in p.args)})"
    if isinstance(p, dpl.WildcardPattern):
        return "*"
    if isinstance(p, dpl.ConstantPattern):
        return "const"
    if isinstance(p, dpl.OrPattern):
        return f"{_text(p.left, depth + 1)}|{_text(p.right, depth + 1)}"
    if isinstance(p, dpl.AndPattern):
        return f"{_text(p.left, depth + 1)}&{_text(p.right, depth + 1)}"
    if isinstance(p, dpl.DataTypePattern):
        return f"{_text(p.pattern, depth + 1)}[dtype={p.dtype}]"
    if isinstance(p, dpl.ShapePattern):
        return f"{_text(p.pattern, depth + 1)}[shape]"
    if isinstance(p, dpl.AttrPattern):
        keys = ", ".join(str(k) for k in p.attrs.keys()) if hasattr(p.attrs, "keys") else "attrs"
        return f"{_text(p.pattern, depth + 1)}[{keys}]"
    if isinstance(p, dpl.ExprPattern):
        return _op_name(p.expr)
    if isinstance(p, dpl.TupleGetItemPattern):
        return f"{_text(p.tuple, depth + 1)}[{p.index}]"
    if isinstance(p, dpl.TuplePattern):
        return f"({', '.join(_text(f, depth + 1) for f in p.fields)})"
    return type(p).__name__.replace("Pattern", "").lower() or "?"


def _op_name(expr: Any) -> str:
    name = str(getattr(expr, "name", expr))
    return name[len("relax."):] if name.startswith("relax.") else name
