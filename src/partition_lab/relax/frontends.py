"""Relax frontends: an ONNX file or model, or a PyTorch ``ExportedProgram``, -> Relax IRModule.

>>> mod, params = load_model("resnet50.onnx")                 # doctest: +SKIP

ONNX goes through ``tvm.relax.frontend.onnx.from_onnx``, which leaves no span on its calls, so
that users can exclude nodes by their ONNX names (neuron-cc's ``excl_node_names``) this loader
puts the ONNX node name on each call the importer builds for a node, as Relay's importer did
(``call.span.source_name.name``). It does so by wrapping the importer's per-node converter
(``ONNXGraphImporter._convert_operator``, an internal of TVM); where a TVM lacks it the model
still loads, with nodes named after their bindings. Calls an importer binds while converting a
node (a reshaped bias) keep no span.

PyTorch: ``tvm.relax.frontend.torch.from_exported_program`` (torch is not a dependency).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from os import PathLike
from pathlib import Path
from typing import Any

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
    """While importing, wrap the ONNX importer's converter so that calls carry node names."""
    try:
        from tvm.relax.frontend.onnx.onnx_frontend import ONNXGraphImporter
    except ImportError:
        yield
        return
    original = getattr(ONNXGraphImporter, "_convert_operator", None)
    if original is None:
        yield
        return

    def convert(self: Any, op_name: str, inputs: Any, attrs: dict, opset: int) -> Any:
        result = original(self, op_name, inputs, attrs, opset)
        node_name = (attrs.get("tvm_custom") or {}).get("name") or ""
        if not node_name or not isinstance(result, tvm.ir.Expr):
            return result
        span = tvm.ir.Span(tvm.ir.SourceName(str(node_name)), 0, 0, 0, 0)
        stop = [x for x in inputs if isinstance(x, tvm.ir.Expr)]
        return self.bb.normalize(_with_span(result, span, stop))

    ONNXGraphImporter._convert_operator = convert
    try:
        yield
    finally:
        ONNXGraphImporter._convert_operator = original


def _with_span(expr: Any, span: Any, stop: list[Any]) -> Any:
    """``expr`` with ``span`` on every call the node built (not on its operands, ``stop``,
    which belong to the nodes that made them)."""
    if any(expr.same_as(s) for s in stop):
        return expr
    if isinstance(expr, tvm.ir.Call):
        args = [_with_span(a, span, stop) for a in expr.args]
        return relax.Call(expr.op, args, expr.attrs, expr.ty_args, span)
    if isinstance(expr, relax.Tuple):
        return relax.Tuple([_with_span(f, span, stop) for f in expr.fields])
    return expr
