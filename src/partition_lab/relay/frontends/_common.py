"""Helpers shared by the frontends: file checks, input shapes, the finished module."""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from pathlib import Path

import tvm
from tvm import relay

from ..._audience import shape_name, shapes_hint, shapes_option
from ..._io import check_regular_file
from ..._text import MAX_QUOTED, first_line  # noqa: F401 - first_line: the frontends import it here
from ...core.provenance import EXPORTER_ATTR
from ...errors import InputShapeError, ModelFormatError, ModelNotFoundError

Shape = tuple[int, ...]
#: One input dimension as a model declares it: a size, or a symbol/None when it is dynamic.
DeclaredDim = int | str | None

EXAMPLE_SHAPE = (1, 3, 224, 224)


MAX_INPUT_ELEMENTS = 2**32
"""The most elements an input may have (16 GiB of float32): a larger shape is a typo, and
would pass unnoticed until a cost estimate or a build overflows."""


def existing_file(path: str | Path, what: str = "model file") -> Path:
    """``path`` as a Path, or :class:`ModelNotFoundError` when there is no such file
    (:class:`ModelFormatError` when it is a FIFO or device, which would block the reader)."""
    if not str(path).strip():
        raise ModelNotFoundError(f"the {what} path is empty; give the path of a file")
    path = Path(path).expanduser()
    check_regular_file(path, what, ModelFormatError)
    if not path.exists():
        raise ModelNotFoundError(f"{what} {str(path)!r} does not exist; check the path")
    if not path.is_file():
        raise ModelNotFoundError(f"{what} {str(path)!r} is not a file (a directory?); pass a file")
    return path


def example_hint(names: Sequence[str]) -> str:
    """How to give these inputs a shape, as the user would type it (a CLI flag or a Python
    argument), with an example shape per input."""
    return shapes_hint(dict.fromkeys(names, EXAMPLE_SHAPE))


def checked_shape(name: str, shape: object) -> Shape:
    """``shape`` as a tuple of positive ints, or :class:`InputShapeError` naming the input."""
    dims = tuple(shape) if isinstance(shape, tuple | list) else None
    if dims is None or not all(_is_positive_int(d) for d in dims):
        raise InputShapeError(
            f"{shape_name(name)} = {shape!r} is not a shape; give a tuple of positive ints "
            f"such as {EXAMPLE_SHAPE}"
        )
    return check_size(name, tuple(int(d) for d in dims))


def check_size(name: str, shape: Shape) -> Shape:
    """``shape``, or :class:`InputShapeError` if it has more than :data:`MAX_INPUT_ELEMENTS`."""
    elements = math.prod(shape)
    if elements > MAX_INPUT_ELEMENTS:
        raise InputShapeError(
            f"input {name!r} of shape {shape} would have {elements:.3g} elements "
            f"({elements * 4 / 2**40:.3g} TiB as float32), more than the limit of 2**32; "
            f"check {shape_name(name)}")
    return shape


def check_known_names(given: Mapping[str, object], known: Sequence[str]) -> None:
    """:class:`InputShapeError` when ``input_shapes`` names an input the model does not have."""
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise InputShapeError(
            f"{shapes_option()} names {unknown}, which the model does not have as inputs; "
            f"its inputs are {list(known)}"
        )


def resolve_declared_shapes(
    declared: Mapping[str, Sequence[DeclaredDim]],
    given: Mapping[str, object] | None,
) -> dict[str, Shape]:
    """Static shapes for inputs the model declares, with ``given`` overriding the model's.

    A declared dimension that is a string (ONNX ``dim_param``), None, 0 or negative is dynamic;
    an input with a dynamic dimension must be given in ``given``.
    """
    given = dict(given or {})
    check_known_names(given, list(declared))
    shapes: dict[str, Shape] = {}
    for name, dims in declared.items():
        if name in given:
            shape = checked_shape(name, given[name])
            if len(shape) != len(dims):
                raise InputShapeError(
                    f"{shape_name(name)} = {shape} has rank {len(shape)} but the model's "
                    f"input {name!r} has rank {len(dims)} ({_format_dims(dims)})"
                )
            shapes[name] = shape
            continue
        for index, dim in enumerate(dims):
            if not isinstance(dim, int) or dim <= 0:
                raise InputShapeError(
                    f"input {name!r} dimension {index} is dynamic ({dim!r}); pass "
                    f"{example_hint([name])} with the size you want (model declares "
                    f"{_format_dims(dims)})"
                )
        shapes[name] = check_size(name, tuple(int(d) for d in dims))  # type: ignore[arg-type]  # checked above
    return shapes


def require_shapes(
    names: Sequence[str], given: Mapping[str, object] | None, model_kind: str
) -> dict[str, Shape]:
    """Shapes for a model that declares none (an MXNet symbol, a Gluon block)."""
    given = dict(given or {})
    check_known_names(given, names)
    missing = [name for name in names if name not in given]
    if missing:
        raise InputShapeError(
            f"{model_kind} does not record input shapes; input(s) {missing} have no shape. "
            f"Pass {example_hint(missing)} (the sizes your model expects)"
        )
    return {name: checked_shape(name, given[name]) for name in names}


def finish_module(mod: tvm.IRModule, exporter: str = "") -> tvm.IRModule:
    """Run type inference so that every call has its checked type; ``exporter`` (what wrote the
    graph, :func:`~partition_lab.core.provenance.exporter_of`) is recorded on ``main``."""
    mod = relay.transform.InferType()(mod)
    mod = _global_pools_1d_as_reductions(mod)
    if exporter:
        mod["main"] = mod["main"].with_attr(EXPORTER_ATTR, exporter)
    return mod


#: 1-D adaptive pools whose attributes TVM 0.19 does not register in Python (a plain ``Object``
#: without fields), and the reduction each is when its output has one element per channel.
_POOL_1D = {"nn.adaptive_avg_pool1d": relay.mean, "nn.adaptive_max_pool1d": relay.max}


def _global_pools_1d_as_reductions(mod: tvm.IRModule) -> tvm.IRModule:
    """A global 1-D pool (ONNX ``GlobalAveragePool`` of a 3-D tensor: the TorchScript export of
    Swin's ``AdaptiveAvgPool1d(1)``) as the ``mean``/``max`` over its last axis it computes,
    keeping its span: TVM 0.19's ``AdaptivePool1DAttrs`` cannot be read from Python, so no
    graph reader sees its layout. Other 1-D pools are left as they are."""
    found = []
    relay.analysis.post_order_visit(mod["main"], lambda e: found.append(
        isinstance(e, relay.Call) and str(getattr(e.op, "name", "")) in _POOL_1D))
    if not any(found):
        return mod

    class Rewrite(relay.ExprMutator):
        def visit_call(self, call: relay.Call) -> relay.Expr:
            new = super().visit_call(call)
            name = str(getattr(call.op, "name", ""))
            shape = [int(d) for d in getattr(call.checked_type, "shape", ())]
            given = [int(d) for d in getattr(call.args[0].checked_type, "shape", ())]
            if name not in _POOL_1D or len(shape) != 3 or shape[2] != 1 or \
                    len(given) != 3 or given[1] != shape[1]:
                return new  # not a global pool over the last axis of NCW
            reduced = _POOL_1D[name](new.args[0], axis=[2], keepdims=True)
            return relay.Call(reduced.op, reduced.args, reduced.attrs, None, call.span)

    main = mod["main"]
    body = Rewrite().visit(main.body)
    mod["main"] = relay.Function(main.params, body, main.ret_type, main.type_params, main.attrs,
                                 main.span)
    return relay.transform.InferType()(mod)


def _is_positive_int(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and value > 0


def _format_dims(dims: Sequence[DeclaredDim]) -> str:
    return "(" + ", ".join("?" if d is None else str(d) for d in dims) + ")"
