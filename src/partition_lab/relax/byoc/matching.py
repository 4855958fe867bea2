"""Which bindings a TVM backend's pattern table takes, and why it leaves the others.

:func:`match` tags every op call of ``main`` with its node id (a span ``pl#<id>``), runs TVM's
own ``FuseOpsByPattern(patterns, bind_constants=False, annotate_codegen=False)`` on the tagged
module with every pattern's check wrapped, and reads back:

* the composites (``Composite=<backend>.<pattern>`` functions) and the nodes in each: the units
  the backend offloads, as ``partition_for_*`` groups them;
* every call of a check: the pattern, the nodes its structural match covered, and the verdict;
  for a ``False`` the line of the check's source that returned it (traced with
  ``sys.settrace`` in the check's own frame) and the values of the simple local names on the
  condition before it (``data_layout='NHWC'``); a check that raises is recorded with its error
  (and counted as ``False``, so the pass goes on).
"""

from __future__ import annotations

import ast
import functools
import linecache
import os
import sys
from dataclasses import dataclass, field
from typing import Any

import tvm
from tvm import relax

from ..graph import RelaxGraph

TAG = "pl#"


@dataclass
class CheckCall:
    """One call of a pattern's check: the pattern, the nodes its match covered, the outcome."""

    pattern: str
    nodes: tuple[int, ...]
    accepted: bool
    check: str  # ``_check_conv2d (cutlass.py:123)``
    why: str = ""  # for a rejection: where and on what it returned False
    error: str = ""  # one line, for a check that raised


@dataclass
class Matching:
    """What one pattern table makes of one module."""

    composites: list[tuple[str, tuple[int, ...]]] = field(default_factory=list)
    calls: list[CheckCall] = field(default_factory=list)


def tagged_module(rg: RelaxGraph) -> tvm.IRModule:
    """``rg.module`` with each node's call spanned ``pl#<node id>`` (the rest unchanged)."""
    func = rg.function
    blocks = []
    for block in func.body.blocks:
        bindings = []
        for binding in block.bindings:
            value = binding.value
            node = rg.node_of_var.get(binding.var)
            if node is not None:
                span = tvm.ir.Span(tvm.ir.SourceName(f"{TAG}{node}"), 0, 0, 0, 0)
                value = relax.Call(value.op, value.args, value.attrs, value.ty_args, span)
            bindings.append(relax.VarBinding(binding.var, value))
        kind = relax.DataflowBlock if isinstance(block, relax.DataflowBlock) else relax.BindingBlock
        blocks.append(kind(bindings))
    tagged = relax.Function(func.params, relax.SeqExpr(blocks, func.body.body), func.ret_ty,
                            func.is_pure, func.attrs)
    mod = tvm.IRModule(dict(rg.module.functions_items()), attrs=rg.module.attrs)
    mod["main"] = tagged
    return relax.transform.Normalize()(mod)


def node_of(expr: Any) -> int | None:
    """The node id a tagged call carries, or None."""
    span = getattr(expr, "span", None)
    if span is None or span.source_name is None:
        return None
    name = str(span.source_name.name)
    return int(name[len(TAG):]) if name.startswith(TAG) else None


def nodes_in(expr: Any) -> list[int]:
    """The tagged calls in ``expr`` (local functions included), in visiting order."""
    found: list[int] = []

    def visit(e: Any) -> None:
        if isinstance(e, relax.Call):
            node = node_of(e)
            if node is not None and node not in found:
                found.append(node)

    relax.analysis.post_order_visit(expr, visit)
    return found


def offloaded_nodes(mod: tvm.IRModule) -> set[int]:
    """The tagged nodes inside any function but ``main`` (composites, Codegen functions)."""
    found: set[int] = set()
    for gvar, func in mod.functions_items():
        if gvar.name_hint != "main" and isinstance(func, relax.Function):
            found.update(nodes_in(func))
    return found


def match(rg: RelaxGraph, patterns: list[Any]) -> Matching:
    """Run the table on ``rg``'s module (see the module docstring)."""
    result = Matching()
    wrapped = [_wrapped(p, result) for p in patterns]
    fused = relax.transform.FuseOpsByPattern(wrapped, bind_constants=False,
                                             annotate_codegen=False)(tagged_module(rg))
    for _, func in fused.functions_items():
        attrs = func.attrs if isinstance(func, relax.Function) else None
        if attrs is not None and "Composite" in attrs.keys():
            nodes = tuple(sorted(nodes_in(func)))
            if nodes:
                result.composites.append((str(attrs["Composite"]), nodes))
    result.composites.sort(key=lambda c: c[1])
    return result


def _wrapped(pattern: Any, result: Matching) -> Any:
    check, getter = pattern.check, pattern.attrs_getter
    made = [0]

    def attrs(annotated: Any) -> dict[str, str]:
        # A distinct attribute per composite: TVM adds a function structurally equal to one
        # it has (the same op on the same shapes) only once, which would hide its other nodes.
        made[0] += 1
        found = dict(getter(annotated)) if getter is not None else {}
        return {**found, "partition_lab.composite": f"{pattern.name}#{made[0]}"}

    if check is None:
        return relax.transform.FusionPattern(pattern.name, pattern.pattern,
                                             pattern.annotation_patterns, None, attrs)

    def traced(context: Any) -> bool:
        nodes = _context_nodes(context)
        tracer = _Tracer(check)
        previous = sys.gettrace()
        sys.settrace(tracer.call)
        try:
            accepted = bool(check(context))
        except Exception as error:  # noqa: BLE001 - a raising check is reported on its ops
            sys.settrace(previous)
            text = (str(error).strip().splitlines() or ["no message"])[0]
            result.calls.append(CheckCall(pattern.name, nodes, False, tracer.name(),
                                          error=f"{type(error).__name__}: {text}"))
            return False
        finally:
            sys.settrace(previous)
        result.calls.append(CheckCall(pattern.name, nodes, accepted, tracer.name(),
                                      "" if accepted else tracer.why()))
        return accepted

    return relax.transform.FusionPattern(pattern.name, pattern.pattern,
                                         pattern.annotation_patterns, traced, attrs)


def _context_nodes(context: Any) -> tuple[int, ...]:
    nodes = set(nodes_in(context.matched_expr))
    for value in context.matched_bindings.values():
        node = node_of(value)
        if node is not None:
            nodes.add(node)
    return tuple(sorted(nodes))


class _Tracer:
    """Follows the check's own frame: the function's code where Python gives it, else the
    first Python frame entered under it (a check TVM wrapped in an FFI function calls back
    into the Python function the backend registered)."""

    def __init__(self, check: Any) -> None:
        func = check.func if isinstance(check, functools.partial) else check
        self.code: Any = getattr(func, "__code__", None)
        self.label = getattr(func, "__qualname__", "") or type(func).__name__
        self.frame_code: Any = None
        self.lines: list[int] = []
        self.frame_locals: dict[str, Any] = {}
        self.returned: Any = None

    def call(self, frame: Any, event: str, arg: Any) -> Any:
        if event != "call" or self.frame_code is not None:
            return None
        if self.code is not None and frame.f_code is not self.code:
            return None
        self.frame_code = frame.f_code
        return self.local

    def local(self, frame: Any, event: str, arg: Any) -> Any:
        if frame.f_code is not self.frame_code:
            return None
        if event == "line":
            self.lines.append(frame.f_lineno)
        elif event == "return":
            self.returned = arg
            self.frame_locals = dict(frame.f_locals)
        return self.local

    def name(self) -> str:
        code = self.frame_code
        if code is None:
            return f"{self.label} (no Python source to trace)"
        return f"{code.co_name} ({os.path.basename(code.co_filename)}:{code.co_firstlineno})"

    def why(self) -> str:
        """Where the check returned False and on what condition, with the values it read."""
        code = self.frame_code
        if code is None or not self.lines:
            return "its source cannot be traced"
        line = self.lines[-1]
        where = f"{os.path.basename(code.co_filename)}:{line}"
        test = _condition(code.co_filename, line)
        if test is None:
            return f"returned False at {where} (`{_source(code.co_filename, line)}`)"
        seen = [f"{text}={shown}" for text, value in _operands(test, self.frame_locals)
                if (shown := _short(value))]
        there = f"; there {', '.join(seen[:5])}" if seen else ""
        return f"returned False at {where}, on `if {ast.unparse(test)}`{there}"


def _source(filename: str, line: int) -> str:
    return linecache.getline(filename, line).strip()


@functools.lru_cache(maxsize=32)
def _tree(filename: str) -> ast.AST | None:
    try:
        return ast.parse("".join(linecache.getlines(filename)))
    except SyntaxError:
        return None


def _condition(filename: str, line: int) -> ast.expr | None:
    """The test of the innermost ``if`` whose body holds the statement at ``line``."""
    tree = _tree(filename)
    if tree is None:
        return None
    best = None
    for node in ast.walk(tree):
        if (isinstance(node, ast.If) and any(stmt.lineno == line for stmt in node.body)
                and (best is None or node.lineno > best.lineno)):
            best = node
    return None if best is None else best.test


def _operands(test: ast.expr, frame_locals: dict[str, Any]) -> list[tuple[str, Any]]:
    """``(source, value)`` of each name or attribute chain (no calls) in ``test`` that the
    check's locals resolve, largest first: ``data.ty.dtype``, ``data_layout``."""
    found: list[tuple[str, Any]] = []
    seen: set[str] = set()
    for node in ast.walk(test):
        if not isinstance(node, (ast.Name, ast.Attribute)):
            continue
        text = ast.unparse(node)
        if text in seen or any(text in s for s in seen):
            continue
        ok, value = _resolve(node, frame_locals)
        if ok:
            seen.add(text)
            found.append((text, value))
    return found


def _resolve(node: ast.expr, frame_locals: dict[str, Any]) -> tuple[bool, Any]:
    if isinstance(node, ast.Name):
        return (node.id in frame_locals), frame_locals.get(node.id)
    if isinstance(node, ast.Attribute):
        ok, base = _resolve(node.value, frame_locals)
        if ok:
            try:
                return True, getattr(base, node.attr)
            except Exception:  # noqa: BLE001 - an attribute that cannot be read is left out
                return False, None
    return False, None


def _short(value: Any) -> str:
    """A local's value for a message: plain values and dtype strings; '' for anything large."""
    if isinstance(value, (bool, int, float, str)):
        text = repr(value)
    elif isinstance(value, (tuple, list)) and len(value) <= 6 and all(
            isinstance(v, (bool, int, float, str)) for v in value):
        text = repr(tuple(value))
    else:
        try:
            text = str(value)
        except Exception:  # noqa: BLE001 - a value that cannot print is left out
            return ""
        if "\n" in text or len(text) > 60 or "object at 0x" in text:
            return ""
    return text if len(text) <= 60 else ""
