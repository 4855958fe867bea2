"""Relay text file (``mod.astext()``) -> Relay.

The parser drops the ``span=NAME:line:col`` comments that ``astext()`` prints after each call,
so this module reads them back: the printer writes one comment per call, innermost call first,
which is the order in which ``post_order_visit`` meets the parsed calls. The names are restored
only when the count and every call's printed type agree; otherwise (hand-written text, edited
text) each call is named ``<op>_<k>`` after its op and its rank among calls of that op. Names
partition_lab wrote percent-encoded (:mod:`partition_lab.relay._names`) are decoded.
"""

from __future__ import annotations

import contextlib
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import tvm
from tvm import relay
from tvm.ir.diagnostics import override_renderer

from ..._audience import shapes_hint
from ...errors import InputShapeError, ModelFormatError
from .._names import unescape_span_name
from ._common import check_known_names, check_size, checked_shape, example_hint, finish_module
from ._spans import calls_in_order, make_span

Params = dict[str, tvm.nd.NDArray]

# One call annotation as astext() prints it: "/* ty=Tensor[(1, 4), float32] span=name:0:0 */".
_CALL_COMMENT = re.compile(r"/\* ty=(?P<ty>.*?)(?: span=(?P<span>\S+?):\d+:\d+)? \*/")


def load_relay_text(
    path: Path, input_shapes: Mapping[str, object] | None
) -> tuple[tvm.IRModule, Params]:
    """Parse the Relay text at ``path``; constants stay in the module, so params are empty."""
    text = _read_text(path)
    check_nesting(text, path)
    messages: list[str] = []
    try:
        with _diagnostics(messages):
            mod = tvm.relay.fromtext(text, source_name=str(path))
    except tvm.error.TVMError as exc:
        raise ModelFormatError(
            f"{str(path)!r} is not valid Relay text ({_diagnostic(exc, messages, text)}); "
            "write it with mod.astext() (including the metadata section if it has constants)"
        ) from exc
    if "main" not in [gv.name_hint for gv in mod.get_global_vars()]:
        raise ModelFormatError(f"{str(path)!r} defines no @main function; nothing to load")
    mod = _with_input_shapes(finish_module(mod), input_shapes)
    return finish_module(_with_source_names(mod, text)), {}


#: The deepest nesting of brackets Relay text may have. TVM's parser is recursive and crashes
#: the process (a stack overflow, no message) some thousands of levels down; ``astext()``
#: binds each call to a ``%n`` variable, so a printed model nests a few levels only.
MAX_NESTING = 1000
#: What can hold brackets that do not nest code: comments and string literals (skipped whole).
_NESTING_TOKENS = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:[^"\\]|\\.)*"|[(\[{]|[)\]}]', re.DOTALL)


def check_nesting(text: str, path: Path) -> None:
    """:class:`ModelFormatError` when brackets in ``text`` nest deeper than
    :data:`MAX_NESTING`, before TVM's parser would crash on it."""
    depth = 0
    for match in _NESTING_TOKENS.finditer(text):
        token = match.group()
        if token in "([{":
            depth += 1
            if depth > MAX_NESTING:
                line = text.count("\n", 0, match.start()) + 1
                raise ModelFormatError(
                    f"{str(path)!r} nests brackets more than {MAX_NESTING} deep (line {line}), "
                    "deeper than TVM's parser can take; bind inner calls to variables "
                    "(%0 = ...;), as mod.astext() writes them")
        elif token in ")]}":
            depth = max(depth - 1, 0)


@contextlib.contextmanager
def _diagnostics(messages: list[str]) -> Iterator[None]:
    """Collect the parser's diagnostics as one line each (``message (line L, column C)``)
    instead of the report TVM prints to stderr and refers to as "diagnostic render"."""

    def render(context: Any) -> None:
        for diagnostic in context.diagnostics:
            span = diagnostic.span
            where = f" (line {span.line}, column {span.column})" if span is not None else ""
            messages.append(f"{diagnostic.message}{where}")

    override_renderer(render)
    try:
        yield
    finally:
        override_renderer(None)


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ModelFormatError(
            f"{str(path)!r} is not text, so not Relay text; pass a file written by mod.astext()"
        ) from exc


def _with_input_shapes(mod: tvm.IRModule, input_shapes: Mapping[str, object] | None) -> tvm.IRModule:
    """Retype ``main``'s parameters to ``input_shapes``; dynamic ones must be given."""
    func = mod["main"]
    given = dict(input_shapes or {})
    check_known_names(given, [p.name_hint for p in func.params])
    rebind: dict[relay.Var, relay.Var] = {}
    for param in func.params:
        name, ty = param.name_hint, param.type_annotation
        if name not in given:
            _check_declared(name, ty)
        if name in given:
            rebind[param] = relay.var(name, shape=checked_shape(name, given[name]), dtype=ty.dtype)
        elif isinstance(ty, relay.TensorType) and any(
            not isinstance(d, tvm.tir.IntImm) for d in ty.shape
        ):
            index = next(i for i, d in enumerate(ty.shape) if not isinstance(d, tvm.tir.IntImm))
            raise InputShapeError(
                f"input {name!r} dimension {index} is dynamic ({ty.shape[index]}); pass "
                f"{example_hint([name])} with the size you want"
            )
    if not rebind:
        return mod
    new_params = [rebind.get(p, p) for p in func.params]
    body = relay.bind(func.body, rebind)
    mod = tvm.IRModule.from_expr(relay.Function(new_params, body))
    return mod


def _check_declared(name: str, ty: tvm.ir.Type) -> None:
    """The checks other frontends make of a declared input shape: every dimension positive,
    at most :data:`MAX_INPUT_ELEMENTS` elements (the parser takes ``(-5, 4)`` and
    ``(100000, 100000, 100000)``)."""
    if not isinstance(ty, relay.TensorType) or not all(
            isinstance(d, tvm.tir.IntImm) for d in ty.shape):
        return  # dynamic: refused below unless a shape is given
    dims = tuple(int(d) for d in ty.shape)
    if any(d <= 0 for d in dims):
        raise InputShapeError(
            f"input {name!r} is declared with shape {dims}; every dimension must be positive. "
            f"Fix the declaration or pass {shapes_hint({name: tuple(max(d, 1) for d in dims)})}")
    check_size(name, dims)


def _with_source_names(mod: tvm.IRModule, text: str) -> tvm.IRModule:
    """Put a source name on every call: the printed ``span=`` comments or ``<op>_<k>``."""
    calls = calls_in_order(mod["main"])
    comments = [m for m in _CALL_COMMENT.finditer(text) if _is_call_comment(m)]
    names = _printed_names(calls, comments) or _op_rank_names(calls)
    renamed = _rename_calls(mod["main"], dict(zip(calls, names, strict=True)))
    return tvm.IRModule.from_expr(renamed)


def _is_call_comment(match: re.Match[str]) -> bool:
    # Comments on variables and constants have no span; after a call it follows a ")".
    index = match.start() - 1
    while index >= 0 and match.string[index].isspace():
        index -= 1
    return index >= 0 and match.string[index] == ")"


def _printed_names(calls: list[relay.Call], comments: list[re.Match[str]]) -> list[str] | None:
    """The names the comments give the calls, or None when they do not fit. A call of a
    function literal (an exported region) has no span: it keeps its ``call_<k>`` name."""
    if len(calls) != len(comments):
        return None
    names = []
    for call, match, fallback in zip(calls, comments, _op_rank_names(calls), strict=True):
        if _compact(_printed_type(call.checked_type)) != _compact(match["ty"]):
            return None
        if match["span"] is None and isinstance(call.op, tvm.ir.Op):
            return None
        names.append(fallback if match["span"] is None else unescape_span_name(match["span"]))
    return names


def _op_rank_names(calls: list[relay.Call]) -> list[str]:
    seen: Counter[str] = Counter()
    names = []
    for call in calls:
        op = call.op.name if isinstance(call.op, tvm.ir.Op) else "call"
        names.append(f"{op}_{seen[op]}")
        seen[op] += 1
    return names


def _rename_calls(func: relay.Function, names: dict[relay.Call, str]) -> relay.Function:
    """Rebuild ``func`` so that each call carries its name.

    The rebuild walks the nodes in TVM's post order (a C++ traversal) and keeps a memo, with
    no Python recursion: a recursive ``ExprMutator`` hits Python's recursion limit on a chain
    of a few thousand ops. Functions inline in ``@main`` (the regions of a partitioned module,
    :mod:`partition_lab.relay.export`) are kept; other Relay beyond dataflow (let, if) is
    rejected.
    """
    memo: dict[relay.Expr, relay.Expr] = {}
    unsupported: list[str] = []

    def rebuild(node: relay.Expr) -> None:
        if isinstance(node, relay.Call):
            memo[node] = relay.Call(memo.get(node.op, node.op), [memo[a] for a in node.args],
                                    node.attrs, node.type_args, make_span(names[node]))
        elif isinstance(node, relay.Tuple):
            memo[node] = relay.Tuple([memo[f] for f in node.fields], node.span)
        elif isinstance(node, relay.TupleGetItem):
            memo[node] = relay.TupleGetItem(memo[node.tuple_value], node.index)
        elif isinstance(node, relay.Function):  # @main, or a region function inline in it
            memo[node] = relay.Function(list(node.params), memo[node.body], node.ret_type,
                                        node.type_params, node.attrs)
        elif isinstance(node, (relay.Var, relay.Constant, tvm.ir.Op, relay.GlobalVar)):
            memo[node] = node
        else:
            unsupported.append(type(node).__name__)
            memo[node] = node

    relay.analysis.post_order_visit(func, rebuild)
    if unsupported:
        raise ModelFormatError(
            f"the Relay text's @main uses {sorted(set(unsupported))[0]}; partition_lab reads "
            "dataflow graphs (calls, tuples, constants), as mod.astext() prints a model")
    return memo[func]


def _printed_type(ty: tvm.ir.Type) -> str:
    """A type as ``astext()`` prints it in its ``ty=`` comments."""
    if isinstance(ty, relay.TensorType):
        dims = ", ".join(str(int(d)) if isinstance(d, tvm.tir.IntImm) else "?" for d in ty.shape)
        return f"Tensor[({dims}), {ty.dtype}]"
    if isinstance(ty, relay.TupleType):
        return "(" + ", ".join(_printed_type(field) for field in ty.fields) + ")"
    return str(ty)


def _compact(text: str) -> str:
    return re.sub(r"\s+", "", text)


def _diagnostic(exc: BaseException, messages: list[str], text: str) -> str:
    """The useful part of a parse failure: the first diagnostic the parser reported, or what
    its exception says (a module using ``meta[...]`` constants without its metadata section
    fails as "Found null pointer node")."""
    if messages:
        return messages[0][:200]
    if "null pointer" in str(exc) and "meta[" in text and "#[metadata]" not in text:
        return "it uses meta[...] constants but has no #[metadata] section"
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line.lower()]
    return (errors or lines or [type(exc).__name__])[-1][:200]
