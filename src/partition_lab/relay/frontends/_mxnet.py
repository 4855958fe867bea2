"""MXNet symbol file, Symbol object or Gluon HybridBlock -> Relay, with MXNet node names.

``relay.frontend.from_mxnet`` puts no span on the calls it makes. While it converts,
:func:`mxnet_node_spans` wraps its per-node steps: ``_get_op_params`` (called once per non-variable
JSON node, with the node) pushes the node's (op, name), and each converter pops it and rebuilds
the calls it created with a span carrying the MXNet node name (``resnetv10_conv0_fwd``,
``batchnormcudnnoff0_fwd``), which is what neuron-cc's ``excl_node_names`` uses.
"""

from __future__ import annotations

import contextlib
import functools
import json
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import tvm
from tvm import relay

from ..._audience import params_hint
from ...errors import (
    InputShapeError,
    ModelFormatError,
    ModelNotFoundError,
    UnsupportedOperatorError,
)
from ._common import existing_file, finish_module, require_shapes
from ._spans import SpanRebuilder, make_span

Params = dict[str, tvm.nd.NDArray]

# MXNet's dtype codes in a symbol's ``__dtype__`` variable attribute (mshadow type flags).
_MXNET_DTYPES = {
    0: "float32", 1: "float64", 2: "float16", 3: "uint8", 4: "int32", 5: "int8", 6: "int64",
    7: "bool", 12: "bfloat16",
}
_SYMBOL_SUFFIX = "-symbol.json"
# Conversion patches module globals of TVM's MXNet frontend, so one conversion at a time.
_PATCH_LOCK = threading.Lock()


# ---------------------------------------------------------------------------- entry points
def load_mxnet_symbol_file(
    path: Path,
    input_shapes: Mapping[str, object] | None,
    params_path: str | Path | None = None,
    input_dtypes: Mapping[str, str] | None = None,
) -> tuple[tvm.IRModule, Params]:
    """Convert ``<prefix>-symbol.json`` and its ``.params`` file (found beside it if not given)."""
    graph = read_symbol_json(path)
    check_supported_ops(graph)
    params_file = existing_file(params_path, "MXNet params file") if params_path else \
        find_params_file(path)
    symbol = symbol_from_json(graph, path)
    arg_params, aux_params = read_params_file(params_file, symbol)
    dtypes = {**declared_dtypes(graph), **dict(input_dtypes or {})}
    return load_mxnet_symbol(symbol, input_shapes, arg_params, aux_params, dtypes)


def load_mxnet_symbol(
    symbol: Any,
    input_shapes: Mapping[str, object] | None,
    arg_params: Mapping[str, Any] | None,
    aux_params: Mapping[str, Any] | None,
    input_dtypes: Mapping[str, str] | None = None,
) -> tuple[tvm.IRModule, Params]:
    """Convert an ``mxnet.symbol.Symbol`` with its weights (``mx.nd`` arrays by name)."""
    arg_params, aux_params = dict(arg_params or {}), dict(aux_params or {})
    graph = json.loads(symbol.tojson())
    known = set(arg_params) | set(aux_params)
    inputs = [name for name in symbol.list_inputs() if name not in known]
    shapes = require_shapes(inputs, input_shapes, "an MXNet symbol")
    dtypes = {**declared_dtypes(graph), **dict(input_dtypes or {})}
    check_supported_ops(graph)
    with mxnet_node_spans():
        mod, params = _convert(
            lambda: relay.frontend.from_mxnet(
                symbol, shapes, dtypes, arg_params=arg_params, aux_params=aux_params
            )
        )
    return finish_module(mod), dict(params)


def load_gluon_block(
    block: Any,
    input_shapes: Mapping[str, object] | None,
    input_dtypes: Mapping[str, str] | None = None,
) -> tuple[tvm.IRModule, Params]:
    """Convert an initialised Gluon ``HybridBlock``; its inputs are named by ``input_shapes``."""
    if not input_shapes:
        raise InputShapeError(
            "a Gluon block has neither input names nor shapes; pass them in call order, e.g. "
            "input_shapes={'data': (1, 3, 224, 224)}"
        )
    shapes = require_shapes(list(input_shapes), input_shapes, "a Gluon block")
    dtypes = dict(input_dtypes or {}) or "float32"
    _finish_deferred_init(block, shapes, dtypes)
    with mxnet_node_spans():
        mod, params = _convert(lambda: relay.frontend.from_mxnet(block, shapes, dtypes))
    return finish_module(mod), dict(params)


def _finish_deferred_init(block: Any, shapes: Mapping[str, tuple[int, ...]], dtypes: Any) -> None:
    """Give every parameter its data: run one forward pass if some shapes were left to infer."""
    import mxnet as mx

    params = block.collect_params().values()
    uninitialised = [p.name for p in params if p._data is None and p._deferred_init == ()]
    if uninitialised:
        raise ModelFormatError(
            f"the Gluon block has parameters that are not initialised ({uninitialised[:3]}...); "
            "call block.initialize() (or load its parameters) first"
        )
    if any(p._data is None for p in params):
        # initialize() without in_channels defers shapes until the first forward pass.
        block(*[
            mx.nd.zeros(shape, dtype=dtypes.get(name, "float32") if isinstance(dtypes, dict)
                        else dtypes)
            for name, shape in shapes.items()
        ])


# ---------------------------------------------------------------------------- files
def read_symbol_json(path: Path) -> dict[str, Any]:
    """The symbol's JSON graph; :class:`ModelFormatError` if the file is not an MXNet symbol."""
    try:
        graph = json.loads(path.read_text(encoding="utf-8"))
    except RecursionError as exc:
        raise ModelFormatError(f"{str(path)!r} nests its JSON too deeply to be an MXNet symbol "
                               "file") from exc
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelFormatError(
            f"{str(path)!r} is not JSON ({_first_line(exc)}), so not an MXNet symbol file; pass "
            "the '<prefix>-symbol.json' that HybridBlock.export or Module.save_checkpoint wrote"
        ) from exc
    nodes = graph.get("nodes") if isinstance(graph, dict) else None
    if not isinstance(nodes, list) or "heads" not in graph or not all(
        isinstance(n, dict) and {"op", "name", "inputs"} <= n.keys() for n in nodes
    ):
        raise ModelFormatError(
            f"{str(path)!r} is JSON but not an MXNet symbol (it needs 'nodes' with op/name/inputs "
            "and 'heads'); pass the '<prefix>-symbol.json' that HybridBlock.export wrote"
        )
    return graph


def symbol_from_json(graph: Mapping[str, Any], path: Path | str = "<json>") -> Any:
    """Rebuild an ``mxnet.symbol.Symbol`` from its JSON graph, node by node, names kept.

    ``mx.sym.load`` is not used on purpose: once TVM is imported, MXNet 1.9.1's C++ JSON loader
    fails with ``std::bad_alloc`` (both libraries bundle dmlc-core), while building symbols
    through the Python op functions works in either import order.
    """
    import mxnet as mx

    built: list[Any] = []
    for node in graph["nodes"]:
        attrs = dict(node.get("attrs") or node.get("attr") or node.get("param") or {})
        if node["op"] == "null":
            built.append(mx.sym.var(node["name"], attr=attrs))
            continue
        inputs = [built[entry[0]][entry[1]] for entry in node["inputs"]]
        try:
            built.append(_mxnet_op(node["op"])(*inputs, name=node["name"], **attrs))
        except mx.base.MXNetError as exc:
            raise ModelFormatError(
                f"MXNet cannot rebuild node {node['name']!r} ({node['op']}) of {str(path)!r}: "
                f"{_first_line(exc)}; was the symbol saved by another MXNet version?"
            ) from exc
    heads = [built[entry[0]][entry[1]] for entry in graph["heads"]]
    return heads[0] if len(heads) == 1 else mx.sym.Group(heads)


def _mxnet_op(op: str) -> Callable[..., Any]:
    import mxnet as mx

    namespaces = [(mx.sym, op), (mx.sym._internal, op)]
    if op.startswith("_contrib_"):
        namespaces.insert(0, (mx.sym.contrib, op[len("_contrib_"):]))
    for namespace, name in namespaces:
        if hasattr(namespace, name):
            return getattr(namespace, name)
    raise ModelFormatError(f"MXNet {mx.__version__} has no operator {op!r}; cannot rebuild it")


def find_params_file(symbol_path: Path) -> Path:
    """The params file beside a symbol file: ``<prefix>-NNNN.params`` (latest) or ``<prefix>.params``."""
    name = symbol_path.name
    prefix = name[: -len(_SYMBOL_SUFFIX)] if name.endswith(_SYMBOL_SUFFIX) else symbol_path.stem
    folder = symbol_path.parent
    epochs = sorted(folder.glob(f"{prefix}-[0-9][0-9][0-9][0-9].params"))
    candidates = [*reversed(epochs), folder / f"{prefix}.params"]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise ModelNotFoundError(
        f"no params file for {str(symbol_path)!r}: looked for {prefix}-NNNN.params and "
        f"{prefix}.params in {str(folder)!r}; {params_hint(prefix)}"
    )


def read_params_file(path: Path, symbol: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(arg_params, aux_params)`` from a checkpoint (``arg:``/``aux:`` keys) or a Gluon file."""
    import mxnet as mx

    try:
        loaded = mx.nd.load(str(path))
    except mx.base.MXNetError as exc:
        raise ModelFormatError(
            f"{str(path)!r} is not an MXNet params file ({_first_line(exc)}); pass the "
            "'.params' file saved with the symbol"
        ) from exc
    if not isinstance(loaded, dict):
        raise ModelFormatError(f"{str(path)!r} holds a list of arrays, not named MXNet params")
    aux_names = set(symbol.list_auxiliary_states())
    arg_params: dict[str, Any] = {}
    aux_params: dict[str, Any] = {}
    for key, value in loaded.items():
        kind, _, name = key.partition(":") if key[:4] in ("arg:", "aux:") else ("", "", key)
        is_aux = kind == "aux" or (not kind and name in aux_names)
        (aux_params if is_aux else arg_params)[name] = value
    return arg_params, aux_params


def declared_dtypes(graph: Mapping[str, Any]) -> dict[str, str]:
    """Dtypes that variable nodes declare through their ``__dtype__`` attribute."""
    dtypes = {}
    for node in graph["nodes"]:
        code = (node.get("attrs") or {}).get("__dtype__")
        if node["op"] == "null" and code is not None and int(code) in _MXNET_DTYPES:
            dtypes[node["name"]] = _MXNET_DTYPES[int(code)]
    return dtypes


# ---------------------------------------------------------------------------- conversion
def check_supported_ops(graph: Mapping[str, Any]) -> None:
    """:class:`UnsupportedOperatorError` naming every MXNet op TVM cannot convert, with nodes."""
    from tvm.relay.frontend import mxnet as mxnet_frontend

    unsupported: dict[str, list[str]] = {}
    for node in graph["nodes"]:
        if node["op"] != "null" and node["op"] not in mxnet_frontend._convert_map:
            unsupported.setdefault(node["op"], []).append(node["name"])
    if unsupported:
        listing = "; ".join(f"{op} (nodes {names[:5]})" for op, names in unsupported.items())
        raise UnsupportedOperatorError(
            f"TVM's MXNet frontend cannot convert: {listing}. Replace these operators in the "
            "model, or export it to ONNX and load that"
        )


def _convert(run: Callable[[], tuple[tvm.IRModule, Params]]) -> tuple[tvm.IRModule, Params]:
    try:
        return run()
    except (tvm.error.OpNotImplemented, tvm.error.OpAttributeUnImplemented) as exc:
        raise UnsupportedOperatorError(
            f"TVM's MXNet frontend cannot convert an operator: {_first_line(exc)}. Replace it "
            "in the model"
        ) from exc


@contextlib.contextmanager
def mxnet_node_spans() -> Iterator[None]:
    """While active, calls made by ``relay.frontend.from_mxnet`` carry their MXNet node name."""
    from tvm.relay.frontend import mxnet as mxnet_frontend

    with _PATCH_LOCK:
        original_get_op_params = mxnet_frontend._get_op_params
        original_converters = dict(mxnet_frontend._convert_map)
        pending: list[tuple[str, str]] = []  # (op, node name), innermost node last
        rebuilder = SpanRebuilder()

        def get_op_params(children, attrs, op_name, node, params):  # type: ignore[no-untyped-def]
            pending.append((op_name, node["name"]))
            return original_get_op_params(children, attrs, op_name, node, params)

        mxnet_frontend._get_op_params = get_op_params
        mxnet_frontend._convert_map.update(
            {op: _named_converter(op, fn, pending, rebuilder) for op, fn in original_converters.items()}
        )
        try:
            yield
        finally:
            mxnet_frontend._get_op_params = original_get_op_params
            mxnet_frontend._convert_map.clear()
            mxnet_frontend._convert_map.update(original_converters)


def _named_converter(
    op: str,
    convert: Callable[..., Any],
    pending: list[tuple[str, str]],
    rebuilder: SpanRebuilder,
) -> Callable[..., Any]:
    @functools.wraps(convert)
    def converter(*args: Any) -> Any:
        pending_op, node_name = pending.pop()
        # The frontend fetches a node's params just before converting that same node.
        assert pending_op == op, f"MXNet span tracking lost sync: {pending_op} != {op}"
        return _with_span(convert(*args), make_span(node_name), rebuilder)

    return converter


def _with_span(result: Any, span: tvm.ir.Span, rebuilder: SpanRebuilder) -> Any:
    if isinstance(result, relay.expr.TupleWrapper):
        return relay.expr.TupleWrapper(rebuilder.attach(result.tuple_value, span), result.size)
    if isinstance(result, relay.Expr):
        return rebuilder.attach(result, span)
    if isinstance(result, list | tuple):
        return type(result)(_with_span(item, span, rebuilder) for item in result)
    return result  # None: conversion deferred (RNN state); nothing was created yet


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
