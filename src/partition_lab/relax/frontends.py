"""Relax frontends: an ONNX file or model, or a PyTorch ``ExportedProgram``, -> Relax IRModule.

>>> mod, params = load_model("resnet50.onnx")                 # doctest: +SKIP

ONNX goes through ``tvm.relax.frontend.onnx.from_onnx``, which leaves no span on its calls, so
that users can exclude nodes by their ONNX names (neuron-cc's ``excl_node_names``) this loader
puts the ONNX node name on each call the importer builds for a node, as Relay's importer did
(``call.span.source_name.name``). It does so by wrapping the importer's per-node converter
(``ONNXGraphImporter._convert_operator``, an internal of TVM) and ``BlockBuilder.emit`` while
the import runs; where a TVM lacks the converter method the model still loads, with nodes named
after their bindings.

PyTorch: ``tvm.relax.frontend.torch.from_exported_program`` (torch is not a dependency).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np
import tvm
from tvm import relax

from ..errors import ModelFormatError, ModelNotFoundError, UnsupportedOperatorError

Shapes = Mapping[str, Sequence[int]]


def load_model(source: Any, shapes: Shapes | None = None, *,
               dtypes: str | Mapping[str, str] = "float32") -> tuple[tvm.IRModule, dict]:
    """A Relax module of ``source`` and its separate weights (always ``{}``: weights are bound
    as constants), the pair the Relay ``load_model`` returns.

    ``source`` is a ``.onnx`` path, an ``onnx.ModelProto`` or a ``torch.export.ExportedProgram``;
    ``shapes`` gives static input shapes (``{"x": (1, 3, 224, 224)}``) where the file has
    symbolic ones.
    """
    if isinstance(source, (str, PathLike)):
        path = Path(source)
        if not path.exists():
            raise ModelNotFoundError(f"model file {str(path)!r} does not exist")
        if path.suffix.lower() != ".onnx":
            raise ModelFormatError(f"{path.name}: the Relax loader reads .onnx files and "
                                   "torch.export programs (other formats: the Relay stack)")
        import onnx

        try:
            model = onnx.load(str(path))
        except Exception as exc:  # protobuf's DecodeError and friends
            raise ModelFormatError(f"{path.name} is not a readable ONNX model: {exc}") from exc
        return from_onnx(model, shapes, dtypes=dtypes, name=path.stem), {}
    if type(source).__name__ == "ModelProto":
        return from_onnx(source, shapes, dtypes=dtypes, name=source.graph.name), {}
    if type(source).__name__ == "ExportedProgram":
        from tvm.relax.frontend.torch import from_exported_program

        return from_exported_program(source, keep_params_as_input=False), {}
    raise ModelFormatError(f"cannot load a {type(source).__name__} with the Relax loader: give "
                           "an .onnx path, an onnx.ModelProto or a torch.export.ExportedProgram")


def from_onnx(model: Any, shapes: Shapes | None = None, *,
              dtypes: str | Mapping[str, str] = "float32", name: str = "") -> tvm.IRModule:
    """``tvm.relax.frontend.onnx.from_onnx`` with ONNX node names on the calls' spans."""
    from tvm.relax.frontend.onnx import from_onnx as relax_from_onnx

    shape_dict = {k: list(v) for k, v in (shapes or {}).items()} or None
    with _named_calls():
        try:
            mod = relax_from_onnx(model, shape_dict=shape_dict, dtype_dict=dtypes,
                                  keep_params_in_input=False)
        except tvm.error.OpNotImplemented as exc:
            raise UnsupportedOperatorError(str(exc).strip().splitlines()[-1]) from exc
    return mod.with_attr("partition_lab.name", name) if name else mod


@contextlib.contextmanager
def _named_calls() -> Iterator[None]:
    """While importing, put the ONNX node's name on the calls its conversion builds: those it
    binds itself (``bb.emit``: a Conv's conv2d before the bias add, a BatchNormalization's
    batch_norm) and those in the expression it returns."""
    try:
        from tvm.relax.frontend.onnx.onnx_frontend import ONNXGraphImporter
    except ImportError:
        yield
        return
    original = getattr(ONNXGraphImporter, "_convert_operator", None)
    if original is None:
        yield
        return
    original_emit = relax.BlockBuilder.emit
    original_normalize = relax.BlockBuilder.normalize
    current: list[tuple[Any, list[Any]]] = []  # (span, operands) of the node being converted

    def converted(self: Any, op_name: str, inputs: Any, attrs: dict, opset: int) -> Any:
        clip = _constant_clip(inputs) if op_name == "Clip" else None
        if clip is None:
            return original(self, op_name, inputs, attrs, opset)
        return self.bb.normalize(clip)  # as the importer does with a converter's result

    def convert(self: Any, op_name: str, inputs: Any, attrs: dict, opset: int) -> Any:
        node_name = str((attrs.get("tvm_custom") or {}).get("name") or "")
        if not node_name:
            return converted(self, op_name, inputs, attrs, opset)
        span = tvm.ir.Span(tvm.ir.SourceName(node_name), 0, 0, 0, 0)
        current.append((span, [x for x in inputs if isinstance(x, tvm.ir.Expr)]))
        try:
            return converted(self, op_name, inputs, attrs, opset)
        finally:
            current.pop()

    # Every call a conversion builds passes through emit or normalize (the importer normalizes
    # the expression a converter returns, binding the calls nested in it).
    def emit(self: Any, expr: Any, name_hint: str = "") -> Any:
        if current:
            expr = _with_span(expr, *current[-1])
        return original_emit(self, expr, name_hint)

    def normalize(self: Any, expr: Any) -> Any:
        if not current:
            return original_normalize(self, expr)
        result = original_normalize(self, _with_span(expr, *current[-1]))
        # Normalizing binds the nested calls and rebuilds the outer one without its span: name
        # the rebuilt call again (its arguments are variables now, so it stays as it is).
        if isinstance(result, tvm.ir.Call) and not _has_name(result):
            span = current[-1][0]
            result = original_normalize(self, relax.Call(result.op, result.args, result.attrs,
                                                         result.ty_args, span))
        return result

    ONNXGraphImporter._convert_operator = convert
    relax.BlockBuilder.emit = emit
    relax.BlockBuilder.normalize = normalize
    try:
        yield
    finally:
        ONNXGraphImporter._convert_operator = original
        relax.BlockBuilder.emit = original_emit
        relax.BlockBuilder.normalize = original_normalize


def _constant_clip(inputs: Any) -> Any:
    """``relax.op.clip`` for an ONNX Clip (opset 11+) whose bounds are both finite scalar
    constants (PyTorch's ReLU6), else None. TVM's importer builds such a Clip as two
    ``call_tir`` of TOPI's maximum and minimum (bounds as tensors, NaN-checked), which the
    graph cannot name as ops and ToMixedPrecision rejects; ``relax.clip`` is the same function
    as one op, as the importer itself builds for HardSigmoid and HardSwish."""
    if len(inputs) != 3 or not all(isinstance(b, tvm.ir.expr.Constant) for b in inputs[1:]) \
            or not str(getattr(inputs[0].ty, "dtype", "")).startswith("float"):
        return None
    bounds = [b.value.numpy() for b in inputs[1:]]
    if any(b.size != 1 or not np.isfinite(b).all() for b in bounds):
        return None
    low, high = (float(b.reshape(())) for b in bounds)
    return relax.op.clip(inputs[0], low, high)


def _with_span(expr: Any, span: Any, stop: list[Any]) -> Any:
    """``expr`` with ``span`` on every call the node built (not on its operands, ``stop``,
    which belong to the nodes that made them)."""
    if any(expr.same_as(s) for s in stop):
        return expr
    if isinstance(expr, tvm.ir.Call):
        if _has_name(expr):  # named already (an earlier emit, or another node's call)
            return expr
        args = [_with_span(a, span, stop) for a in expr.args]
        return relax.Call(expr.op, args, expr.attrs, expr.ty_args, span)
    if isinstance(expr, relax.Tuple):
        return relax.Tuple([_with_span(f, span, stop) for f in expr.fields])
    if isinstance(expr, relax.TupleGetItem):  # batch_norm's converter returns its item 0
        return relax.TupleGetItem(_with_span(expr.tuple_value, span, stop), expr.index)
    return expr


def _has_name(call: Any) -> bool:
    span = call.span
    return span is not None and span.source_name is not None and bool(span.source_name.name)
