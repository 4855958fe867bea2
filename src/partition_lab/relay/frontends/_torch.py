"""PyTorch ``nn.Module`` (or the program of a ``.pt2`` file, read by ``_pt2``) -> ONNX ->
Relay, with each node named by its PyTorch module path.

Route: ``torch.export`` gives an ``ExportedProgram``; ``torch.onnx.export`` (the exporter built
on it, which needs onnxscript) writes ONNX; :func:`name_nodes_by_module` renames every ONNX node
after the module it came from, and the ONNX frontend converts it (it puts node names on spans).

Why not TVM's own ``relay.frontend.from_pytorch``: its TorchScript scopes name a module called
several times after the enclosing block, where this route names every call inside a leaf module
by its path (``layer1.0.relu``, ``layer1.0.relu#2``...) and the rest
``<enclosing module>/<op>`` (``layer1.0/add``); the measurement is in the CHANGELOG.
``torch.jit.trace`` is also deprecated in PyTorch 2.14, and a ``.pt2`` holds no TorchScript.

When the dynamo export fails, the TorchScript exporter (``torch.onnx.export(...,
dynamo=False)``, opset 17) is tried, and one line on stderr says so, with the construct and the
place the dynamo export failed on (:func:`~partition_lab._torch_onnx.export_module`): Swin's
attention (SDPA with a computed mask, then ``.reshape(*input_shape, -1)``) cannot be decomposed
by torch 2.14, and the TorchScript exporter loads it. Its nodes get the same module-path names
(from the scopes it writes, ``/encoder/layers.0/.../q_proj/MatMul``), and the model's metadata
says which exporter wrote it, so a plan says so too. Not when ``torch.export`` stops at a
shape or branch that depends on tensor values: tracing records one path through such code, so
the graph would hold the example's branch without a word. When both fail, one line names the
construct, the file and line, the fallback tried and a known fix (``use_cache=False`` for a
decoder returning its ``DynamicCache``).

The exporter's metadata is the source of the names: each node carries
``pkg.torch.onnx.name_scopes`` (``['', 'layer1', 'layer1.0', 'layer1.0.conv1', 'conv2d_1']``:
the module paths from the root down, then the FX node) and ``pkg.torch.onnx.class_hierarchy``
(the module classes, then the ATen op, ``aten.conv2d.default``).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType
from typing import Any

import onnx
import tvm

from ..._audience import shapes_option

# The export to ONNX needs no TVM (the zoo's tv: models use it on the Relax stack too): it lives
# in partition_lab._torch_onnx; its names stay importable from here.
from ..._torch_onnx import (  # noqa: F401
    TORCH_ONNX_OPSET,
    _export,
    export_failure,
    export_module,
    exported_program_to_onnx,
    module_path,
    module_to_onnx,
    name_nodes_by_module,
    quiet_torch,
    require_torch,
    tensor_args,
)
from ...errors import InputShapeError
from ._common import checked_shape

Params = dict[str, tvm.nd.NDArray]


def is_torch_module(source: object) -> bool:
    """Whether ``source`` is a ``torch.nn.Module``, without importing torch if it is not."""
    if not any(cls.__module__.startswith("torch") for cls in type(source).__mro__):
        return False
    import torch

    return isinstance(source, torch.nn.Module)


def load_torch_module(
    module: Any,
    example_inputs: Any,
    input_shapes: Mapping[str, object] | None,
) -> tuple[tvm.IRModule, Params]:
    """Export ``module`` (in eval mode) at ``example_inputs`` and convert it.

    ``example_inputs`` is a tensor or a tuple of tensors (the module's positional arguments);
    without it, ``input_shapes`` (in call order) gives float32 zeros of those shapes. Keys of
    ``input_shapes`` name the inputs (without it they are named after ``forward``'s arguments)
    and their shapes override the example's, as for an ONNX file.
    """
    torch = require_torch("loading a PyTorch module")
    args = _example_args(torch, example_inputs, input_shapes)
    names = list(input_shapes) if input_shapes else None
    if names is not None and len(names) != len(args):
        raise InputShapeError(
            f"{shapes_option()} names {len(names)} input(s) ({names}) but the module is called "
            f"with {len(args)} example input(s); name each one, in call order")
    label = f"the PyTorch module {type(module).__name__}"
    model = export_module(torch, module, args, names, label)
    return _convert(model, label, input_shapes)


def _example_args(torch: ModuleType, example_inputs: Any,
                  input_shapes: Mapping[str, object] | None) -> tuple[Any, ...]:
    if example_inputs is None:
        if not input_shapes:
            raise InputShapeError(
                "a PyTorch module needs example inputs: pass a tensor (or a tuple of them), e.g. "
                "load_model(module, torch.randn(1, 3, 224, 224)), or input_shapes={'x': (1, 3, "
                "224, 224)} in call order")
        return tuple(torch.zeros(checked_shape(name, shape))
                     for name, shape in input_shapes.items())
    return tensor_args(torch, example_inputs)


def _convert(model: onnx.ModelProto, label: str,
             input_shapes: Mapping[str, object] | None) -> tuple[tvm.IRModule, Params]:
    from ._onnx import load_onnx_model

    return load_onnx_model(model, label, input_shapes)


__all__ = ["export_failure", "exported_program_to_onnx", "is_torch_module", "load_torch_module",
           "module_path", "module_to_onnx", "name_nodes_by_module", "quiet_torch",
           "require_torch"]
