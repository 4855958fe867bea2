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

import tvm
from tvm import relax

from .._audience import shape_name, shapes_option
from ..core.provenance import EXPORTER_ATTR, exporter_of, printable
from ..errors import (
    InputShapeError,
    ModelFormatError,
    ModelNotFoundError,
    UnsupportedOperatorError,
)

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
        import torch
        from tvm.relax.frontend.torch import from_exported_program

        mod = from_exported_program(source, keep_params_as_input=False)
        return _with_exporter(mod, f"torch.export (torch {torch.__version__}; no ONNX: "
                                   "tvm.relax.frontend.torch.from_exported_program)"), {}
    raise ModelFormatError(f"cannot load a {type(source).__name__} with the Relax loader: give "
                           "an .onnx path, an onnx.ModelProto or a torch.export.ExportedProgram")


def from_onnx(model: Any, shapes: Shapes | None = None, *,
              dtypes: str | Mapping[str, str] = "float32", name: str = "") -> tvm.IRModule:
    """``tvm.relax.frontend.onnx.from_onnx`` with ONNX node names on the calls' spans."""
    from tvm.relax.frontend.onnx import from_onnx as relax_from_onnx

    _check_shapes(model, shapes or {})
    shape_dict = {k: list(v) for k, v in (shapes or {}).items()} or None
    if not shape_dict:  # with shapes given, the file's own may be symbolic: nothing to fold
        model = fold_static_shapes(model)
    with _named_calls():
        try:
            mod = relax_from_onnx(model, shape_dict=shape_dict, dtype_dict=dtypes,
                                  keep_params_in_input=False)
        except tvm.error.OpNotImplemented as exc:
            raise UnsupportedOperatorError(str(exc).strip().splitlines()[-1]) from exc
    # Every node's result is bound (see _named_calls), so the function's output is an alias of
    # the last one, which ToMixedPrecision would cast to float16 and back: bind it as the output.
    mod = relax.transform.CanonicalizeBindings()(mod)
    mod = _with_exporter(mod, exporter_of(model))
    return mod.with_attr("partition_lab.name", name) if name else mod


def _with_exporter(mod: tvm.IRModule, exporter: str) -> tvm.IRModule:
    """``mod`` with what wrote its graph on ``main`` (:mod:`partition_lab.core.provenance`), which
    the preparation passes keep and the plan shows."""
    if not exporter:
        return mod
    mod = mod.clone() if hasattr(mod, "clone") else tvm.IRModule(dict(mod.functions.items()),
                                                                  attrs=mod.attrs)
    mod["main"] = mod["main"].with_attr(EXPORTER_ATTR, printable(exporter))
    return mod


def _check_shapes(model: Any, shapes: Shapes) -> None:
    """:class:`InputShapeError` (one line) for a shape given to an input the model does not have,
    or of another rank than the input's: TVM's importer ignores the first and fails on the
    second deep inside a converter, with the expression printed."""
    weights = {init.name for init in model.graph.initializer}
    ranks = {i.name: len(i.type.tensor_type.shape.dim) for i in model.graph.input
             if i.name not in weights}
    unknown = sorted(set(shapes) - set(ranks))
    if unknown:
        raise InputShapeError(f"{shapes_option()} names {unknown}, which the model does not have "
                              f"as inputs; its inputs are {list(ranks)}")
    for name, shape in shapes.items():
        if ranks[name] and len(shape) != ranks[name]:  # rank 0: the file declares no shape
            raise InputShapeError(f"{shape_name(name)} = {tuple(shape)} has rank {len(shape)} "
                                  f"but the model's input {name!r} has rank {ranks[name]}")


#: Initializers up to this many elements count as shape data when folding (a reshape's target,
#: a slice's bounds), so that folding never evaluates a computation on weights.
_SMALL = 64


def fold_static_shapes(model: Any) -> Any:
    """``model`` with the shape computations on static shapes replaced by constants.

    Exporters write a reshape to a size known only from another tensor as ``Shape`` followed by
    arithmetic (mxnet.onnx's ``FullyConnected(flatten=False)``, ``reshape_like``, ``split`` of a
    shape; the zoo's BERT, CenterNet, AlphaPose and DANet). TVM 0.27's importer makes ``Shape``
    a ``ShapeExpr``, which only a dozen converters take ("Node ... cannot handle ShapeExpr
    inputs", at ``Sub``, ``Add``, ``Split``). Where ONNX shape inference gives the input of a
    ``Shape`` static dimensions, its value is known, and so is every node computed from such
    values and small constants alone: those nodes are evaluated here (``onnx.reference``) and
    their outputs become initializers, as Relay's importer folded them. A model with no
    ``Shape`` node, or none with a static input, is returned as it is.
    """
    # A reshape to a folded shape gives shape inference the static shape of its output, and
    # so the next Shape's value: fold again until a pass folds nothing.
    for _ in range(_MAX_FOLDS):
        fixed = _fold_once(model)
        if fixed is None:
            break
        model = fixed
    return model


#: Folding passes at most (each one reaches at least one Shape node further down the graph).
_MAX_FOLDS = 32


def _fold_once(model: Any) -> Any:
    """One pass of :func:`fold_static_shapes`: the folded model, or None where nothing folds."""
    import numpy as np
    import onnx
    from onnx import numpy_helper
    from onnx.reference import ReferenceEvaluator

    graph = model.graph
    if not any(node.op_type == "Shape" for node in graph.node):
        return None
    try:
        inferred = onnx.shape_inference.infer_shapes(model).graph
    except Exception:  # noqa: BLE001  (inference is an aid here; the importer reports errors)
        return None
    dims: dict[str, list[int]] = {}
    for info in [*inferred.input, *inferred.value_info, *inferred.output]:
        shape = info.type.tensor_type.shape.dim
        if info.type.tensor_type.HasField("shape") and all(d.HasField("dim_value") for d in shape):
            dims[info.name] = [d.dim_value for d in shape]
    small = {init.name: numpy_helper.to_array(init) for init in graph.initializer
             if np.prod(init.dims, dtype=np.int64) <= _SMALL}
    opsets = {o.domain or "": o.version for o in model.opset_import}
    folded: dict[str, Any] = {}  # outputs computed here
    kept = []
    for node in graph.node:
        value = None
        if node.op_type == "Constant":  # kept; a small one is shape data like an initializer
            tensor = next((a.t for a in node.attribute if a.name == "value"), None)
            if tensor is None or np.prod(tensor.dims, dtype=np.int64) <= _SMALL:
                small[node.output[0]] = np.asarray(
                    ReferenceEvaluator(node, opsets=opsets).run(None, {})[0])
        elif node.op_type == "Shape" and node.input[0] in dims:
            value = _shape_value(node, dims[node.input[0]])
        elif all(not name or name in folded or name in small for name in node.input) and any(
                name in folded for name in node.input):
            inputs = {name: folded.get(name, small.get(name)) for name in node.input if name}
            if all(v is None or v.size <= _SMALL for v in inputs.values()):
                try:
                    value = ReferenceEvaluator(node, opsets=opsets).run(None, inputs)
                except Exception:  # noqa: BLE001  (an op onnx.reference lacks: leave it to TVM)
                    value = None
        if value is None:
            kept.append(node)
            continue
        values = value if isinstance(value, list) else [value]
        for name, array in zip(node.output, values, strict=True):
            folded[name] = np.asarray(array)
    used = {name for node in kept for name in node.input} | {o.name for o in graph.output}
    if not folded:
        return None
    fixed = onnx.ModelProto()
    fixed.CopyFrom(model)
    del fixed.graph.node[:]
    fixed.graph.node.extend(kept)
    fixed.graph.initializer.extend(numpy_helper.from_array(array, name)
                                   for name, array in folded.items() if name in used)
    return fixed


def _shape_value(node: Any, shape: list[int]) -> Any:
    """The value of a ``Shape`` node (with its opset-15 ``start``/``end``) on a static shape."""
    import numpy as np

    attrs = {a.name: a.i for a in node.attribute}
    # Python's slice clamps and counts negative ends from the back, as ONNX does.
    return np.array(shape[attrs.get("start", 0):attrs.get("end", len(shape))], dtype=np.int64)


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

    def convert(self: Any, op_name: str, inputs: Any, attrs: dict, opset: int) -> Any:
        node_name = str((attrs.get("tvm_custom") or {}).get("name") or "")
        if not node_name:
            return original(self, op_name, inputs, attrs, opset)
        span = tvm.ir.Span(tvm.ir.SourceName(node_name), 0, 0, 0, 0)
        current.append((span, [x for x in inputs if isinstance(x, tvm.ir.Expr)]))
        try:
            if op_name == "Resize":
                inputs = _resize_without_empty_scales(inputs)
            if op_name == "Clip":
                clipped = _clip_op(inputs, attrs, opset)
                if clipped is not None:
                    return _bound(self.bb, self.bb.normalize(clipped))
            return _bound(self.bb, original(self, op_name, inputs, attrs, opset))
        finally:
            current.pop()

    def _bound(bb: Any, result: Any) -> Any:
        # A converter returns its last call unbound (normalized, not emitted): the next node
        # would find it among its operands, and normalizing a call whose operands are unbound
        # calls binds them and rebuilds the call without its span (a BatchNormalization or a
        # Gemm's matmul after a Conv or a Flatten lost its name so). Bound here, with its name,
        # every node's result is a variable.
        if isinstance(result, relax.Call):
            return original_emit(bb, result)
        return result

    # Every call a conversion builds passes through emit or normalize (the importer normalizes
    # the expression a converter returns, binding the calls nested in it).
    def emit(self: Any, expr: Any, name_hint: str = "") -> Any:
        if current:
            expr = _with_span(expr, *current[-1], lambda e: original_emit(self, e))
        return original_emit(self, expr, name_hint)

    def normalize(self: Any, expr: Any) -> Any:
        if not current:
            return original_normalize(self, expr)
        result = original_normalize(
            self, _with_span(expr, *current[-1], lambda e: original_emit(self, e)))
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


def _resize_without_empty_scales(inputs: Any) -> Any:
    """A Resize's inputs with an empty ``scales`` constant left out where ``sizes`` is given.

    ONNX (opset 13) lets an exporter pass an empty tensor for the input it does not use, and
    mxnet.onnx does (``<node>_scales_empty``: the zoo's FCN and DeepLab resizes); TVM 0.27's
    converter takes any constant as given and asserts "Only one of scales and sizes".
    """
    scales = inputs[2] if len(inputs) > 3 else None
    if inputs[3] is None or not _is_empty_constant(scales):
        return inputs
    fixed = type(inputs)(inputs)  # the importer's list type (None past the end)
    fixed[2] = None
    return fixed


def _constant_value(expr: Any) -> Any:
    """The numpy value of a tensor constant (the importer's initializers), else None."""
    if isinstance(expr, tvm.ir.GenericConst) and isinstance(expr.ty, relax.TensorType):
        return expr.value.numpy()
    return None


def _is_empty_constant(expr: Any) -> bool:
    value = _constant_value(expr)
    return value is not None and value.size == 0


def _clip_op(inputs: Any, attrs: dict, opset: int) -> Any:
    """``relax.clip(x, min, max)`` for a float Clip with constant scalar bounds, else None.

    TVM 0.27's converter writes every Clip as two ``call_tir`` (``topi.maximum``, then
    ``topi.minimum``): opaque calls that no rule can place on an accelerator and that
    ``ToMixedPrecision`` cannot pass, where Relay's importer made one ``clip`` (MobileNet's
    ReLU6). With constant bounds ``relax.clip`` is the same function (NaN bounds, which ONNX
    reads as unbounded, are left to TVM's converter).
    """
    import math

    data = inputs[0]
    dtype = getattr(getattr(data, "ty", None), "dtype", "")
    if not str(dtype).startswith(("float", "bfloat")):
        return None
    if opset < 11:
        bounds = [attrs.get("min", -math.inf), attrs.get("max", math.inf)]
    else:
        bounds = [inputs[1], inputs[2]]
        for i, default in enumerate((-math.inf, math.inf)):
            bound = bounds[i]
            if bound is None:
                bounds[i] = default
            elif (value := _constant_value(bound)) is not None and value.size == 1:
                bounds[i] = float(value.reshape(()))
            else:
                return None  # a bound computed at run time
    low, high = (float(b) for b in bounds)
    if math.isnan(low) or math.isnan(high):
        return None
    return relax.op.clip(data, low, high)  # as TVM's PyTorch importer writes ReLU6


def _with_span(expr: Any, span: Any, stop: list[Any], bind: Any = None,
               memo: list[tuple[Any, Any]] | None = None) -> Any:
    """``expr`` with ``span`` on every call the node built (not on its operands, ``stop``,
    which belong to the nodes that made them).

    With ``bind`` (the block builder's own emit), a call nested in another call is bound first,
    innermost first, each once (``memo``): TVM's normalizer, binding a nested call itself,
    rebuilds the call around it without its span (a Gemm's matmul of a transposed weight, or a
    BatchNormalization whose three outputs each held a copy of the call, lost their names so).
    """
    if any(expr.same_as(s) for s in stop):
        return expr
    memo = [] if memo is None else memo

    def operand(arg: Any) -> Any:  # what a call or tuple item reads: a variable where bound
        named = _with_span(arg, span, stop, bind, memo)
        if bind is None or not isinstance(named, tvm.ir.Call) or \
                any(arg.same_as(s) for s in stop):  # another node's: bound where it was made
            return named
        for original, var in memo:
            if original.same_as(arg):
                return var
        var = bind(named)
        memo.append((arg, var))
        return var

    if isinstance(expr, tvm.ir.Call):
        if _has_name(expr):  # named already (an earlier emit, or another node's call)
            return expr
        return relax.Call(expr.op, [operand(a) for a in expr.args], expr.attrs, expr.ty_args,
                          span)
    if isinstance(expr, relax.Tuple):
        return relax.Tuple([operand(f) for f in expr.fields])
    if isinstance(expr, relax.TupleGetItem):  # batch_norm's converter returns its item 0
        return relax.TupleGetItem(operand(expr.tuple_value), expr.index)
    return expr


def _has_name(call: Any) -> bool:
    span = call.span
    return span is not None and span.source_name is not None and bool(span.source_name.name)
