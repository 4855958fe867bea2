"""ONNX file -> Relay.

``relay.frontend.from_onnx`` already puts each ONNX node's name on the span of the calls it
makes (and names unnamed nodes ``<OpType>_<k>``), so this module reads and checks the file,
works out the input shapes, separates the weights (returned as params, by initializer name)
and turns TVM's exceptions into partition_lab errors.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import tvm
from google.protobuf.message import DecodeError
from onnx import external_data_helper, numpy_helper
from tvm import relay
from tvm.relay.frontend import onnx as onnx_frontend

from ..._audience import shapes_hint
from ..._io import check_regular_file
from ..._stages import stage
from ...core.provenance import exporter_of
from ...errors import InputShapeError, ModelFormatError, UnsafeModelError, UnsupportedOperatorError
from ._cache import note_read
from ._common import DeclaredDim, Shape, finish_module, resolve_declared_shapes
from ._incremental import incremental_inference

Params = dict[str, tvm.nd.NDArray]
#: Float initializers up to this size (scales, scalars) are frozen into the module, not params.
MAX_FROZEN_ELEMENTS = 8


def load_onnx(path: Path, input_shapes: Mapping[str, object] | None, *,
              check: bool = True) -> tuple[tvm.IRModule, Params]:
    """Read the ONNX file at ``path`` and convert it to Relay (weights returned as params).

    With ``check`` (the default) a model that ``onnx.checker`` rejects, or whose opset is
    missing or newer than the installed onnx knows, is a :class:`ModelFormatError`: TVM
    converts many such models without a word and gets them wrong (a file cut before its
    ``opset_import`` falls back to opset 1, where ``Squeeze`` changes the output shape).
    ``check=False`` (the CLI's ``--no-onnx-check``) converts anyway, with a warning.
    """
    with stage("load"):
        model = read_onnx(path)
    with stage("convert"):
        return load_onnx_model(model, path.name, input_shapes, check=check)


def load_onnx_model(model: onnx.ModelProto, label: str,
                    input_shapes: Mapping[str, object] | None, *,
                    check: bool = True) -> tuple[tvm.IRModule, Params]:
    """:func:`load_onnx` on a model already in memory (changed in place: its weights are
    lifted); ``label`` names it in messages (a file name, or what the PyTorch frontend
    exported)."""
    invalid = checker_problem(model) or opset_problem(model)
    if invalid is not None and check:
        raise ModelFormatError(
            f"{label} is not a valid ONNX model: {invalid.rstrip('.')}; fix or re-export it "
            "(or pass --no-onnx-check to convert it anyway)")
    declared, dtypes = declared_inputs(model)
    shapes = resolve_declared_shapes(declared, input_shapes)
    check_supported_ops(model)
    weights = lift_weights(model)
    shapes.update({name: array.shape for name, array in weights.items()})
    dtypes.update({name: array.dtype.name for name, array in weights.items()})
    try:
        mod = _convert(model, label, shapes, dtypes, invalid)
    except tvm.error.TVMError as exc:
        cause = fixed_reshape_error(exc, model, label, declared, shapes)
        if cause is None:
            raise
        raise cause from exc
    if invalid is not None:
        warnings.warn(f"{label}: onnx.checker: {invalid} (TVM converted it anyway)",
                      stacklevel=3)
    used = {param.name_hint for param in mod["main"].params}
    params = {name: tvm.nd.array(array) for name, array in weights.items() if name in used}
    return finish_module(mod, exporter_of(model)), params


def _convert(
    model: onnx.ModelProto,
    label: str,
    shapes: Mapping[str, tuple[int, ...]],
    dtypes: Mapping[str, str],
    invalid: str | None,
) -> tvm.IRModule:
    """``from_onnx`` with TVM's exceptions turned into partition_lab errors."""
    try:
        # freeze_params=True freezes only what lift_weights left as initializers (shapes, axes,
        # scales), and makes TVM run DynamicToStatic: mxnet.onnx computes Reshape targets with
        # Shape/Slice/Concat, which would otherwise stay dynamic reshapes of unknown rank.
        with warnings.catch_warnings(), incremental_inference(), _multi_axis_reductions(), \
                _axes_input_reductions(), _one_sided_clip(), _scatter_nd_reduction_none(), \
                _naming_the_failing_node(label):
            warnings.simplefilter("ignore")  # TVM re-runs the checker and warns what it finds
            mod, _ = relay.frontend.from_onnx(model, shape=dict(shapes), dtype=dict(dtypes),
                                              freeze_params=True)
    except (tvm.error.OpNotImplemented, tvm.error.OpAttributeUnImplemented) as exc:
        raise UnsupportedOperatorError(
            f"TVM's ONNX frontend cannot convert part of {label}: {_first_line(exc)}. "
            "Replace that operator in the model (or re-export it with a different opset)"
        ) from exc
    except Exception as exc:
        if invalid is None:
            raise
        raise ModelFormatError(
            f"{label!r} parses as ONNX but is not a valid model ({invalid}), and TVM "
            f"cannot convert it ({_first_line(exc)}); the file may be truncated or corrupt. "
            "Re-export it and check it with onnx.checker.check_model"
        ) from exc
    return mod


@contextlib.contextmanager
def _multi_axis_reductions() -> Iterator[None]:
    """Convert ``Reduce*`` nodes whose axes come as a constant input with all their axes.

    From opset 18 (13 for ReduceSum) the axes of ReduceMean, ReduceMax... are an input, not an
    attribute, and TVM 0.19's converter keeps only the first of them: PyTorch's exporter writes
    ``AdaptiveAvgPool2d(1)`` as ReduceMean over axes (-1, -2), which TVM turns into a mean over
    the last axis alone (silently wrong, or a Reshape that no longer fits). Runs inside
    :func:`incremental_inference`, whose lock keeps one conversion at a time.
    """
    original = onnx_frontend.Reduce.__dict__["_impl_v13"]

    def converted(cls: type, inputs: Any, attr: dict, params: Any) -> relay.Expr:
        axes = inputs[1] if len(inputs) == 2 else None
        if isinstance(axes, relay.Constant) and axes.data.numpy().size > 1:
            every_axis = [int(axis) for axis in axes.data.numpy().reshape(-1)]
            return cls.run_calculation([inputs[0]], every_axis, attr.get("keepdims", True))
        return original.__func__(cls, inputs, attr, params)

    onnx_frontend.Reduce._impl_v13 = classmethod(converted)
    try:
        yield
    finally:
        onnx_frontend.Reduce._impl_v13 = original


#: The ``Reduce*`` ops whose converters in TVM 0.19 read their axes from the attribute only
#: (they have ``_impl_v1`` alone), with what each gives for ``noop_with_empty_axes`` and no
#: axes: the reduction of each element alone, as onnxruntime computes it (onnx's reference
#: evaluator returns the input unchanged, but squared for ReduceSumSquare).
_ATTRIBUTE_AXES_ONLY: dict[str, Callable[[relay.Expr], relay.Expr]] = {
    "ReduceL1": relay.abs,
    "ReduceL2": relay.abs,
    "ReduceLogSum": relay.log,
    "ReduceSumSquare": lambda data: data * data,
}


@contextlib.contextmanager
def _axes_input_reductions() -> Iterator[None]:
    """Convert ReduceL1, ReduceL2, ReduceLogSum and ReduceSumSquare from opset 18, where their
    axes are an (optional) input, not an attribute.

    TVM 0.19 has only these ops' opset-1 converters (the other ``Reduce*`` ops share
    ``Reduce._impl_v13``, which reads the input): they hand every input to ``sum``, so the axes
    input arrives as ``sum``'s positional ``axis`` as well as the keyword one, and conversion
    fails ("sum() got multiple values for argument 'axis'"); PyTorch's exporter writes
    ``F.normalize`` and ``weight_norm`` as ReduceL2 at opset 18. Each gets an ``_impl_v18``
    that moves constant axes to the attribute and runs the opset-1 converter. Runs inside
    :func:`incremental_inference`, whose lock keeps one conversion at a time.
    """
    patched = [getattr(onnx_frontend, name) for name in _ATTRIBUTE_AXES_ONLY]
    patched = [cls for cls in patched if "_impl_v18" not in cls.__dict__]  # a TVM that has one
    for cls in patched:
        cls._impl_v18 = classmethod(_reduce_with_axes_input)
    try:
        yield
    finally:
        for cls in patched:
            del cls._impl_v18


def _reduce_with_axes_input(cls: type, inputs: Any, attr: dict, params: Any) -> relay.Expr:
    """Opset 18's form of a :data:`_ATTRIBUTE_AXES_ONLY` op, by its opset-1 converter: no
    axes (or an empty list) mean every axis, or the no-op with ``noop_with_empty_axes``."""
    axes = inputs[1] if len(inputs) > 1 else None
    if axes is not None and not isinstance(axes, relay.Constant):
        raise ValueError("axes computed in the graph are not supported, only constant ones")
    listed = [] if axes is None else [int(axis) for axis in axes.data.numpy().reshape(-1)]
    if not listed and attr.get("noop_with_empty_axes", 0):
        return _ATTRIBUTE_AXES_ONLY[cls.__name__](inputs[0])
    attr = {key: value for key, value in attr.items() if key != "noop_with_empty_axes"}
    if listed:
        attr["axes"] = listed
    return cls._impl_v1([inputs[0]], attr, params)


@contextlib.contextmanager
def _one_sided_clip() -> Iterator[None]:
    """Convert ``Clip`` (opset 11+) with one constant bound and the other left out.

    TVM 0.19's converter moves a constant bound to the attribute and then, the other bound
    missing, returns the input unclipped: PyTorch's ``clamp_min`` (``F.normalize``'s guard
    against a zero norm) is dropped, and a zero vector normalises to NaN instead of zero. The
    missing bound is the infinity it stands for.
    """
    original = onnx_frontend.Clip.__dict__["_impl_v11"]

    def converted(cls: type, inputs: Any, attr: dict, params: Any) -> relay.Expr:
        bounds = [inputs[1] if len(inputs) > 1 else None, inputs[2] if len(inputs) > 2 else None]
        if (any(bound is not None for bound in bounds)
                and all(bound is None or isinstance(bound, relay.Constant) for bound in bounds)):
            low, high = (default if bound is None else bound.data.numpy().item()
                         for bound, default in zip(bounds, (-np.inf, np.inf), strict=True))
            return cls.convert_attributes([inputs[0]], {**attr, "min": low, "max": high}, params)
        return original.__func__(cls, inputs, attr, params)

    onnx_frontend.Clip._impl_v11 = classmethod(converted)
    try:
        yield
    finally:
        onnx_frontend.Clip._impl_v11 = original


@contextlib.contextmanager
def _naming_the_failing_node(label: str) -> Iterator[None]:
    """A converter that fails on one node (an assertion on an attribute it does not handle, a
    shape it did not expect) raises :class:`UnsupportedOperatorError` naming that node, its op
    and the opset; a node exported from PyTorch is named by its module path
    (``features.1.1.attn/...``)."""
    original = onnx_frontend.GraphProto.__dict__["_convert_operator"]

    def converting(self: Any, op_name: str, inputs: Any, attrs: dict, opset: int) -> Any:
        try:
            return original(self, op_name, inputs, attrs, opset)
        # TVM's own errors (type inference: a Reshape that no longer fits the input shapes)
        # are explained by the callers; these are a converter not expecting its node.
        except (AssertionError, ValueError, IndexError, KeyError, TypeError) as exc:
            node = attrs.get("tvm_custom", {}).get("name", "?")
            raise UnsupportedOperatorError(
                f"TVM's ONNX frontend cannot convert node {node!r} of {label} ({op_name}, "
                f"opset {opset}): {_first_line(exc) or type(exc).__name__}. Replace that "
                "operator in the model (or re-export it with a different opset)") from exc

    onnx_frontend.GraphProto._convert_operator = converting
    try:
        yield
    finally:
        onnx_frontend.GraphProto._convert_operator = original


@contextlib.contextmanager
def _scatter_nd_reduction_none() -> Iterator[None]:
    """Convert ``ScatterND`` with ``reduction="none"``, the spelling opset 16+ exporters write.

    ONNX names the plain update ``"none"`` (its default); TVM 0.19's converter knows it only as a
    missing attribute and rejects ``"none"`` (Swin-T's window shifts, exported by ``torch.onnx``
    at opset 18, do not load). ``"none"`` is converted as the plain update it is.
    """
    originals = {version: onnx_frontend.ScatterND.__dict__[version]
                 for version in ("_impl_v16", "_impl_v18")}

    def plain_update(original: Any) -> Any:
        def converted(cls: type, inputs: Any, attr: dict, params: Any) -> relay.Expr:
            if attr.get("reduction") in (b"none", "none"):
                attr = {key: value for key, value in attr.items() if key != "reduction"}
            return original.__func__(cls, inputs, attr, params)
        return classmethod(converted)

    for version, original in originals.items():
        setattr(onnx_frontend.ScatterND, version, plain_update(original))
    try:
        yield
    finally:
        for version, original in originals.items():
            setattr(onnx_frontend.ScatterND, version, original)


#: TVM's report when a Reshape's target does not hold as many elements as its input.
_RESHAPE_MISMATCH = re.compile(r"Input tensor shape\(([\d, ]*)\) and reshaped shape\(([\d, ]*)\) "
                               r"are not compatible")


def fixed_reshape_error(
    exc: BaseException,
    model: onnx.ModelProto,
    name: str,
    declared: Mapping[str, list[DeclaredDim]],
    shapes: Mapping[str, tuple[int, ...]],
) -> InputShapeError | None:
    """An :class:`InputShapeError` when TVM failed because a Reshape with a constant target
    (exported for the declared input shapes) cannot take the other input shapes the caller
    gave; None for any other failure (a model that fails with its own shapes is broken, and
    TVM's words say how).

    Exporters often write a Reshape's target as constants (``(1, 16, 4, 16)``) instead of
    ``0``/``-1`` for the batch axis: the model then only converts with the shapes it was
    exported for, and TVM's report says neither which node nor what to do. Two forms:

    - the inputs are declared static (the TorchScript exporter without ``dynamic_axes``): the
      declared shape is the one to keep;
    - an input's batch is declared dynamic (``dim_param``) and a Reshape still holds the
      example's batch: torch.onnx's dynamo export specializes a batch of 1 even with
      ``dynamic_axes`` (a ``torch.nn.TransformerEncoder``'s attention). The exported batch is
      the given one divided by how many times more elements the Reshape got than it holds.
    """
    match = _RESHAPE_MISMATCH.search(str(exc))
    if match is None:
        return None
    inputs = {k: v for k, v in shapes.items() if k in declared}
    got, target = (tuple(int(d) for d in group.split(",") if d.strip())
                   for group in match.groups())
    ratio = math.prod(got) / max(math.prod(target), 1)
    symbolic = {k for k, dims in declared.items() if k in inputs
                and any(not isinstance(d, int) or d <= 0 for d in dims)}
    fixed = {k: tuple(dims) for k, dims in declared.items()
             if k in inputs and k not in symbolic}
    changed = {k for k in fixed if fixed[k] != inputs[k]}
    if symbolic and not changed:
        return _dynamic_batch_fixed(model, name, declared, inputs, symbolic, target, ratio)
    if not changed:
        return None
    node = _fixed_reshape(model, target)
    where = f"in Reshape node {node!r}" if node else "in a Reshape"
    batch_only = all(fixed[k][1:] == inputs[k][1:] for k in changed)
    given = _given(inputs)
    keep = f" or keep its shape ({shapes_hint({k: fixed[k] for k in sorted(changed)})})"
    if batch_only:
        return InputShapeError(
            f"{name} fixes its batch {where} (to {','.join(map(str, target))}), so it cannot "
            f"take input shape {given}: export it with a dynamic batch (0 or -1 as the "
            f"Reshape's batch axis){keep}")
    return InputShapeError(
        f"{name} fixes a shape {where} (to {','.join(map(str, target))}) that input shape "
        f"{given} does not fit: export it for these shapes (or with 0 or -1 in the "
        f"Reshape's target){keep}")


def _given(inputs: Mapping[str, tuple[int, ...]]) -> str:
    return ", ".join(f"{k}=" + ",".join(map(str, v)) for k, v in inputs.items())


def _dynamic_batch_fixed(model: onnx.ModelProto, name: str,
                         declared: Mapping[str, list[DeclaredDim]],
                         inputs: Mapping[str, tuple[int, ...]], symbolic: set[str],
                         target: tuple[int, ...], ratio: float) -> InputShapeError | None:
    """The message of :func:`fixed_reshape_error` for inputs with a dimension declared dynamic
    (the batch: axis 0, or axis 1 of a sequence-first ``TransformerEncoder``); None when they
    have several dynamic dimensions of different sizes (no one size the exporter fixed)."""
    axes = [(k, axis, dim) for k in sorted(symbolic) for axis, dim in enumerate(declared[k])
            if not isinstance(dim, int) or dim <= 0]
    sizes = {inputs[k][axis] for k, axis, _ in axes}
    if len(sizes) != 1:
        return None
    node = _fixed_reshape(model, target)
    where = f"in Reshape node {node!r}" if node else "in a Reshape"
    exported = sizes.pop() / ratio if ratio >= 1 else 0.0
    keep = ""
    if exported >= 1 and exported.is_integer():
        kept = {k: tuple(int(exported) if (k, axis) in {(a, b) for a, b, _ in axes} else size
                         for axis, size in enumerate(inputs[k])) for k in sorted(symbolic)}
        keep = f", or keep the batch it was exported at ({shapes_hint(kept)})"
    dims = ", ".join(f"{k!r} dimension {axis}" + (f" ({dim})" if dim else "")
                     for k, axis, dim in axes)
    return InputShapeError(
        f"{name} declares a dynamic batch ({dims}) but fixes it {where} (to "
        f"{','.join(map(str, target))}), so it cannot take input shape {_given(inputs)}: the "
        "exporter wrote the example's batch into the graph (torch.onnx's dynamo export does "
        "so for an example batch of 1, even with dynamic_axes); export it with an example batch "
        f"of 2 or more (or at this batch){keep}")


def _fixed_reshape(model: onnx.ModelProto, target: tuple[int, ...]) -> str | None:
    """The name of the first Reshape whose constant target gives ``target`` (its ``-1`` and
    ``0`` entries match any size); None if there is no such node."""
    constants = {init.name: init for init in model.graph.initializer}
    constants.update({node.output[0]: attr.t for node in model.graph.node
                      if node.op_type == "Constant" for attr in node.attribute
                      if attr.name == "value"})
    for index, node in enumerate(model.graph.node):
        if node.op_type != "Reshape" or len(node.input) < 2 or node.input[1] not in constants:
            continue
        written = numpy_helper.to_array(constants[node.input[1]]).tolist()
        if len(written) == len(target) and all(
                w in (-1, 0, t) for w, t in zip(written, target, strict=True)):
            return node.name or f"Reshape_{index}"
    return None


def lift_weights(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    """Turn weight initializers into graph inputs (in place) and return their values.

    Weights are the floating-point initializers with more than :data:`MAX_FROZEN_ELEMENTS`
    elements; the others (integer shapes and axes, float scales and scalars) stay initializers,
    so that TVM folds them into the module as constants.
    """
    graph = model.graph
    declared = {value.name for value in graph.input}
    weights: dict[str, np.ndarray] = {}
    kept = []
    for init in graph.initializer:
        array = numpy_helper.to_array(init)
        if array.dtype.kind == "f" and array.size > MAX_FROZEN_ELEMENTS:
            weights[init.name] = array
            if init.name not in declared:
                graph.input.append(
                    onnx.helper.make_tensor_value_info(init.name, init.data_type, array.shape)
                )
        else:
            kept.append(init)
    del graph.initializer[:]
    graph.initializer.extend(kept)
    return weights


def read_onnx(path: Path) -> onnx.ModelProto:
    """Parse the file; :class:`ModelFormatError` when it is not ONNX or holds no graph (or a
    graph without outputs), :class:`UnsafeModelError` when its external data lies outside the
    model's folder."""
    try:
        # external data is read apart, after its locations are checked (load_external_data)
        model = onnx.load(str(path), load_external_data=False)
    except (DecodeError, RuntimeWarning, ValueError, OSError) as exc:
        raise ModelFormatError(
            f"{str(path)!r} is not a readable ONNX model ({_first_line(exc)}); the file may be "
            "truncated or not ONNX at all. Re-export or re-download it"
        ) from exc
    if not model.graph.node:
        # Any bytes that happen to parse (an empty file, another protobuf) give an empty model.
        raise ModelFormatError(
            f"{str(path)!r} holds no ONNX graph (no nodes); the file is empty, truncated or not "
            "an ONNX model. Re-export it"
        )
    if not model.graph.output:
        raise ModelFormatError(
            f"{str(path)!r} declares no graph outputs, so there is nothing to compute; "
            "re-export it with its outputs")
    load_external_data(model, path)
    return model


def load_external_data(model: onnx.ModelProto, path: Path) -> None:
    """Read the weights the model keeps in files beside it (in place).

    onnx refuses a location with ``..`` or an absolute path, but follows symbolic links: a link
    in the model's folder to any file the user can read would be read as weights and copied
    into an export. Each location is resolved (links followed) and must stay inside the
    model's folder, and be a regular file (a FIFO would block the read).
    """
    tensors = [tensor for tensor in external_data_helper._get_all_tensors(model)
               if external_data_helper.uses_external_data(tensor)]
    if not tensors:
        return
    folder = path.parent
    for tensor in tensors:
        location = external_data_helper.ExternalDataInfo(tensor).location
        resolved = Path(os.path.realpath(folder / location))
        if not resolved.is_relative_to(os.path.realpath(folder)):
            raise UnsafeModelError(
                f"{str(path)!r} keeps weight {tensor.name!r} in {location!r}, which resolves to "
                f"{str(resolved)!r}, outside the model's folder; partition_lab reads external "
                "data only from inside that folder: copy the file there (not a link)")
        check_regular_file(resolved, f"{str(path)!r}'s external data file", ModelFormatError)
        note_read(resolved)  # the converted-model cache checks this file too
    try:
        external_data_helper.load_external_data_for_model(model, str(folder))
    except (OSError, ValueError, onnx.checker.ValidationError) as exc:
        raise ModelFormatError(
            f"{str(path)!r} cannot read its external data ({_first_line(exc)}); keep the data "
            "files beside the model, as it was saved") from exc


def checker_problem(model: onnx.ModelProto) -> str | None:
    """What ``onnx.checker`` finds wrong with the model, or None.

    One finding is let pass: a graph output declared without a shape. The loader infers every
    output's type itself, so the declaration is never read, and exporters often leave it out.
    """
    bare = [value for value in model.graph.output
            if value.type.HasField("tensor_type") and not value.type.tensor_type.HasField("shape")]
    for value in bare:
        value.type.tensor_type.shape.SetInParent()  # declared, with no dims, for the check only
    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError as exc:
        return _first_line(exc)
    finally:
        for value in bare:
            value.type.tensor_type.ClearField("shape")
    return None


def opset_problem(model: onnx.ModelProto) -> str | None:
    """What is wrong with the model's default-domain opset, or None."""
    versions = [int(opset.version) for opset in model.opset_import
                if opset.domain in ("", "ai.onnx")]
    newest = onnx.defs.onnx_opset_version()
    if not versions:
        return "it imports no default-domain opset (is the file truncated?)"
    if not 1 <= versions[0] <= newest:
        return (f"opset {versions[0]} is not one the installed onnx {onnx.__version__} knows "
                f"(1 to {newest})")
    return None


def declared_inputs(
    model: onnx.ModelProto,
) -> tuple[dict[str, list[DeclaredDim]], dict[str, str]]:
    """Shapes (dynamic dims as their symbol or None) and dtypes of the graph's real inputs."""
    initializers = {init.name for init in model.graph.initializer}
    shapes: dict[str, list[DeclaredDim]] = {}
    dtypes: dict[str, str] = {}
    for value in model.graph.input:
        if value.name in initializers:
            continue  # old exporters list weights as inputs too
        tensor_type = value.type.tensor_type
        if not value.type.HasField("tensor_type") or tensor_type.elem_type == 0:
            raise InputShapeError(
                f"input {value.name!r} of the ONNX model is not a tensor with a known element "
                "type; partition_lab supports tensor inputs only"
            )
        dtypes[value.name] = onnx.helper.tensor_dtype_to_np_dtype(tensor_type.elem_type).name
        shapes[value.name] = [_declared_dim(dim) for dim in tensor_type.shape.dim]
    return shapes, dtypes


def check_supported_ops(model: onnx.ModelProto) -> None:
    """:class:`UnsupportedOperatorError` naming every op type TVM cannot convert, with nodes."""
    opset = _default_opset(model)
    convert_map = onnx_frontend._get_convert_map(opset)
    convertible = set(convert_map) | {"Constant"} | set(onnx_frontend._identity_list)
    unsupported: dict[str, list[str]] = {}
    for index, node in enumerate(model.graph.node):
        if node.op_type not in convertible:
            label = node.name or f"{node.op_type}_{index}"
            unsupported.setdefault(_qualified(node), []).append(label)
    if unsupported:
        listing = "; ".join(f"{op} (nodes {names[:5]})" for op, names in unsupported.items())
        raise UnsupportedOperatorError(
            f"TVM's ONNX frontend (opset {opset}) cannot convert: {listing}. Replace these "
            "operators in the model or export it without them"
        )


def _declared_dim(dim: onnx.TensorShapeProto.Dimension) -> DeclaredDim:
    if dim.HasField("dim_value"):
        return int(dim.dim_value)
    if dim.HasField("dim_param"):
        return dim.dim_param
    return None


def _default_opset(model: onnx.ModelProto) -> int:
    for opset in model.opset_import:
        if opset.domain in ("", "ai.onnx"):
            return int(opset.version)
    return 1


def _qualified(node: onnx.NodeProto) -> str:
    return f"{node.domain}.{node.op_type}" if node.domain not in ("", "ai.onnx") else node.op_type


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


__all__ = ["Shape", "load_onnx", "load_onnx_model"]
