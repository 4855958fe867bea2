"""Names written into Relay text, escaped so that the text still says what the module is.

TVM's printer writes a call's source name raw inside its ``/* ty=... span=NAME:0:0 */``
comment and a variable's name raw after ``%``. A name is data from the model file: a node named
``a */ * 0f /* b`` closes the comment and puts ``* 0f`` into the code, so the text read back
multiplies by zero; an input named ``input.1`` makes text the parser rejects.

:func:`printable` gives a module whose names are safe to print: a source name with characters
outside printable ASCII, or with ``*`` or ``%``, is percent-encoded (``a%20%2A%2F``), which
:func:`unescape_span_name` reverses when the text is read back; a variable name that is not a
Relay identifier has its other characters replaced by ``_``. A module whose names are all safe
is returned as it is, so ordinary models print exactly as ``astext()`` prints them.
"""

from __future__ import annotations

import re
from urllib.parse import quote, unquote

import tvm
from tvm import relay

from ..errors import PartitionLabError
from .frontends._spans import make_span

#: Characters a source name keeps as they are: printable ASCII but for the comment markers'
#: ``*``, the escape's own ``%`` and space.
_SAFE_SPAN = "".join(chr(c) for c in range(33, 127) if chr(c) not in "*%")
#: What the Relay parser reads as a local variable's name after ``%``.
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def escape_span_name(name: str) -> str:
    """``name`` as it may stand inside a ``/* ... */`` comment (percent-encoded)."""
    return quote(name, safe=_SAFE_SPAN)


def unescape_span_name(text: str) -> str:
    """The source name :func:`escape_span_name` wrote as ``text``."""
    return unquote(text)


def variable_name(name: str) -> str:
    """``name`` as the parser reads it after ``%``: other characters become ``_`` (the printer
    makes clashing names unique)."""
    if _IDENTIFIER.fullmatch(name):
        return name
    return re.sub(r"[^A-Za-z0-9_]", "_", name) or "v"


def printable(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` with every name escaped for the text printer (itself when none needs it)."""
    if not _needs_escaping(mod):
        return mod
    functions = {gvar: _rebuilt(func) if isinstance(func, relay.Function) else func
                 for gvar, func in mod.functions.items()}
    return relay.transform.InferType()(tvm.IRModule(functions, mod.type_definitions))


def _span_name(node: object) -> str | None:
    span = getattr(node, "span", None)
    return None if span is None or span.source_name is None else str(span.source_name.name)


def _needs_escaping(mod: tvm.IRModule) -> bool:
    unsafe: list[bool] = []

    def visit(node: relay.Expr) -> None:
        name = _span_name(node)
        if (name is not None and escape_span_name(name) != name) or \
                (isinstance(node, relay.Var) and variable_name(node.name_hint) != node.name_hint):
            unsafe.append(True)

    for func in mod.functions.values():
        if isinstance(func, relay.Function):
            relay.analysis.post_order_visit(func, visit)
    return bool(unsafe)


def _span(node: object) -> tvm.ir.Span | None:
    name = _span_name(node)
    return None if name is None else make_span(escape_span_name(name))


def _rebuilt(func: relay.Function) -> relay.Function:
    """``func`` rebuilt bottom-up with escaped names (no Python recursion: a chain of thousands
    of calls is deeper than Python's recursion limit)."""
    memo: dict[relay.Expr, relay.Expr] = {}

    def new(node: relay.Expr) -> relay.Expr:
        return memo.get(node, node)

    def rebuild(node: relay.Expr) -> None:
        if isinstance(node, relay.Var):
            memo[node] = relay.Var(variable_name(node.name_hint), node.type_annotation,
                                   _span(node))
        elif isinstance(node, relay.Call):
            memo[node] = relay.Call(new(node.op), [new(a) for a in node.args], node.attrs,
                                    node.type_args, _span(node))
        elif isinstance(node, relay.Tuple):
            memo[node] = relay.Tuple([new(f) for f in node.fields], _span(node))
        elif isinstance(node, relay.TupleGetItem):
            memo[node] = relay.TupleGetItem(new(node.tuple_value), node.index, _span(node))
        elif isinstance(node, relay.Constant):
            memo[node] = relay.Constant(node.data, _span(node))
        elif isinstance(node, relay.Let):
            memo[node] = relay.Let(new(node.var), new(node.value), new(node.body), _span(node))
        elif isinstance(node, relay.If):
            memo[node] = relay.If(new(node.cond), new(node.true_branch),
                                  new(node.false_branch), _span(node))
        elif isinstance(node, relay.Function):
            memo[node] = relay.Function([new(p) for p in node.params], new(node.body),
                                        node.ret_type, node.type_params, node.attrs,
                                        _span(node))
        elif not isinstance(node, (tvm.ir.Op, relay.GlobalVar, relay.Constructor)):
            raise PartitionLabError(
                f"cannot write this module as Relay text with its names escaped: it uses "
                f"{type(node).__name__}; rename its nodes and inputs to plain identifiers")

    relay.analysis.post_order_visit(func, rebuild)
    return memo[func]
