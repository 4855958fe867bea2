"""PyTorch ``nn.Module`` or ``ExportedProgram`` -> ONNX with each node named by its PyTorch
module path: the part of the PyTorch route that needs no TVM.

The zoo's ``tv:``/``hf:`` models are exported through it on either TVM stack (the Relay stack's
ONNX frontend or the Relax one then reads the file); the Relay frontend for PyTorch input
(:mod:`partition_lab.relay.frontends._torch`, where the route is described) converts what it
returns. torch and onnxscript are imported only when a function needs them.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import io
import logging
import re
import sys
import warnings
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import onnx

from ._optional import MissingDependencyError, torch_fix
from ._text import first_line
from .core.provenance import ONNX_METADATA_KEY, torch_onnx_exporter
from .errors import InputShapeError, ModelFormatError
from .targets.annotate import first_call_name

#: The ONNX opset the exporter writes. 18 is the exporter's lowest: asking for less makes it
#: run ONNX's version converter, which fails on the Reduce nodes it writes.
TORCH_ONNX_OPSET = 18
_SCOPES = "pkg.torch.onnx.name_scopes"
_CLASSES = "pkg.torch.onnx.class_hierarchy"


def require_torch(what: str) -> ModuleType:
    """Import torch for ``what``, or raise a one-line
    :class:`~partition_lab._optional.MissingDependencyError` naming the fix.

    Triton (which CUDA builds of torch install) is hidden from torch unless it was imported
    already: TVM is loaded by now, and loading Triton's LLVM after TVM's crashes the process
    (``import tvm; import triton`` is a segmentation fault), while ``torch.export`` imports it
    only to ask whether it is there. Exporting needs no Triton.
    """
    if "triton" not in sys.modules:
        sys.modules["triton"] = None  # type: ignore[assignment]  # import triton -> ImportError
    for package in ("torch", "onnxscript"):
        try:
            importlib.import_module(package)
        except ImportError as exc:
            raise MissingDependencyError(f"{what} needs {package}, which is not installed; "
                                         f"{torch_fix()}") from exc
    return importlib.import_module("torch")


def module_to_onnx(module: Any, example_inputs: Any,
                   input_names: Sequence[str] | None = None) -> onnx.ModelProto:
    """``module`` (eval mode) exported at ``example_inputs`` as ONNX with module-path node names
    (what the zoo writes to its cache)."""
    torch = require_torch("exporting a PyTorch module")
    args = tensor_args(torch, example_inputs)
    label = f"the PyTorch module {type(module).__name__}"
    return exported_program_to_onnx(_export(torch, module, args, label), input_names, label)


def exported_program_to_onnx(program: Any, input_names: Sequence[str] | None,
                             label: str) -> onnx.ModelProto:
    """The program as ONNX (opset :data:`TORCH_ONNX_OPSET`), constants folded, every node named
    by :func:`name_nodes_by_module`.

    The exporter's own optimizer is left off: it folds each BatchNorm into the Conv before it and
    names the result after the BatchNorm, so ``layer1.0.conv1`` would disappear. Constant folding
    alone removes the shape arithmetic of the unfolded export; constants become initializers.
    The model's ``metadata_props["partition_lab.exporter"]`` says so (``torch.onnx (dynamo,
    opset 18, optimizer off; torch 2.5.1)``): the loaders record it on ``main`` and plans show
    it (:mod:`partition_lab.core.provenance`), since ``torch.onnx.export``'s defaults give the
    same module fewer ops under other names.
    """
    import onnx_ir
    import onnx_ir.passes.common
    import onnxscript.optimizer
    import torch

    try:
        with quiet_torch():
            exported = torch.onnx.export(program, (), dynamo=True, optimize=False,
                                         opset_version=TORCH_ONNX_OPSET,
                                         input_names=list(input_names) if input_names else None,
                                         verbose=False)
    except Exception as exc:  # the exporter wraps what it cannot translate in its own errors
        raise ModelFormatError(f"torch.onnx.export cannot export {label}: "
                               f"{first_line(exc)}") from exc
    program_ir = exported.model
    with quiet_torch():
        onnxscript.optimizer.fold_constants(program_ir)
    onnxscript.optimizer.remove_unused_nodes(program_ir)
    # Constant nodes with value_ints/value_floats (Resize's scales) are beyond TVM 0.19.
    onnx_ir.passes.common.LiftConstantsToInitializersPass(lift_all_constants=True,
                                                          size_limit=0)(program_ir)
    model = onnx_ir.to_proto(program_ir)
    name_nodes_by_module(model)
    # Which exporter wrote the graph, kept in the file (the zoo caches it) and, once loaded, on
    # main and in the plan: the exporter's own optimizer would give other ops and names.
    written = model.metadata_props.add()
    written.key = ONNX_METADATA_KEY
    written.value = torch_onnx_exporter(TORCH_ONNX_OPSET, torch.__version__, optimized=False)
    return model


def name_nodes_by_module(model: onnx.ModelProto) -> None:
    """Name each node (in place) after the PyTorch module that computed it.

    A node inside a leaf module (one that calls no other module: ``Conv2d``, ``ReLU``,
    ``AdaptiveAvgPool2d``) gets the module's path, ``layer1.0.conv1``. A node computed in the
    ``forward`` of a module that has submodules (a residual add, a flatten) gets that module's
    path and the ATen op, ``layer1.0/add``; the top-level module's path is empty (``/view``).
    ONNX wants node names unique, so when a name comes again (a module called several times,
    as ResNet's ``Bottleneck`` calls its one ``relu``) the later nodes get ``#2``, ``#3``...:
    ``layer1.0.relu``, ``layer1.0.relu#2``, ``layer1.0.relu#3``. Nodes without the exporter's
    metadata keep their names.
    """
    scopes = [_metadata_list(node, _SCOPES) for node in model.graph.node]
    # A module is a container if some node ran inside one of its submodules.
    containers = {path for chain in scopes if chain for path in chain[:-2]}
    seen: Counter[str] = Counter(node.name for node, chain in zip(model.graph.node, scopes,
                                                                  strict=True) if not chain)
    for node, chain in zip(model.graph.node, scopes, strict=True):
        if not chain:
            continue
        path = chain[-2] if len(chain) >= 2 else ""
        name = path if path and path not in containers else \
            f"{path}/{_aten_op(node, chain[-1])}"
        seen[name] += 1
        node.name = name if seen[name] == 1 else f"{name}#{seen[name]}"


def module_path(source: str) -> tuple[str, str | None]:
    """``(module path, op)`` of a source name :func:`name_nodes_by_module` gave:
    ``layer1.0.relu#2`` -> ``("layer1.0.relu", None)``, ``layer1.0/add`` ->
    ``("layer1.0", "add")``."""
    base = first_call_name(source)
    path, slash, op = base.rpartition("/")
    return (path, op) if slash else (base, None)


def _metadata_list(node: onnx.NodeProto, key: str) -> list[str]:
    for prop in node.metadata_props:
        if prop.key == key:
            with contextlib.suppress(ValueError, SyntaxError):
                value = ast.literal_eval(prop.value)
                return [str(item) for item in value] if isinstance(value, list) else []
    return []


def _aten_op(node: onnx.NodeProto, fx_name: str) -> str:
    """``add`` for ``aten.add.Tensor``; else the FX node name without its counter."""
    classes = _metadata_list(node, _CLASSES)
    if classes and classes[-1].startswith("aten."):
        return classes[-1].split(".")[1]
    return fx_name.rstrip("0123456789").rstrip("_") or fx_name


def tensor_args(torch: ModuleType, example_inputs: Any) -> tuple[Any, ...]:
    """``example_inputs`` (a tensor or a tuple of them: the module's positional arguments) as a
    tuple; :class:`InputShapeError` for anything that is not a tensor."""
    args = example_inputs if isinstance(example_inputs, tuple | list) else (example_inputs,)
    bad = [type(arg).__name__ for arg in args if not isinstance(arg, torch.Tensor)]
    if bad:
        raise InputShapeError(f"example inputs must be tensors (the module's positional "
                              f"arguments); got {', '.join(bad)}")
    return tuple(args)


def _export(torch: ModuleType, module: Any, args: tuple[Any, ...], label: str) -> Any:
    """``torch.export.export`` in eval mode (what is partitioned is inference); the module's
    training flag is restored afterwards."""
    training = module.training
    module.eval()
    try:
        with torch.no_grad(), quiet_torch():
            return torch.export.export(module, args)
    except Exception as exc:  # torch.export raises many kinds (UserError, Unsupported...)
        raise ModelFormatError(f"torch.export cannot export {label}: {export_failure(exc)}") \
            from exc
    finally:
        module.train(training)


#: torch's exceptions for a guard on a value only known when the model runs.
_DATA_DEPENDENT = frozenset({"GuardOnDataDependentSymNode", "DataDependentOutputException",
                             "DynamicOutputShapeException"})


#: Where torch says a guard came from: ``Caused by: (torchvision/ops/boxes.py:103 in f)``.
_CAUSED_BY = re.compile(r"Caused by: \(?([^\s()]+):(\d+) in ([\w.<>]+)\)?")
_UNHINTED = re.compile(r"\s*\(unhinted:.*$")
#: A frame of user code in torch's messages, with its code line:
#: ``File "/x/ssd.py", line 404, in forward`` then ``    if x.sum() > 0:``.
_USER_FRAME = re.compile(r'File "([^"]+)", line (\d+), in ([\w.<>]+)\n[ \t]*([^\n]*)')


def export_failure(exc: BaseException) -> str:
    """What stopped ``torch.export``, in one bounded line: the construct, where in the model's
    code it is, and what to do.

    torch's own message can be a few thousand characters (the graph traced so far, a symbolic
    expression) over a dozen lines of debugging advice; the line kept here is at most a few
    hundred characters.
    """
    where = _failure_location(exc)
    at = f" at {where}" if where else ""
    if type(exc).__name__ in _DATA_DEPENDENT or "data-dependent" in first_line(exc):
        # "Could not guard on data-dependent expression Eq(u0, 1) (unhinted: Eq(u0, 1)). ..."
        guard = first_line(_UNHINTED.sub("", first_line(exc, 1000)), 100)
        return (f"a shape or branch that depends on tensor values{at} ({guard}); "
                "torch.export needs shapes that do not depend on the data: export the model up "
                "to that code (a detector up to its head outputs) and run the rest on the host")
    return f"{first_line(exc)}{at}; see the torch.export documentation for what it traces"


def _failure_location(exc: BaseException) -> str | None:
    """``file:line in function`` (and the code line, when torch quotes it) of the model code
    that torch blames, the path shortened to its package (``torchvision/ops/boxes.py:103 in
    _batched_nms_coordinate_trick``); None if torch names no place outside torch itself."""
    text = str(exc)
    places = [(path, line, function, code) for path, line, function, code
              in reversed(_USER_FRAME.findall(text))]
    places += [(path, line, function, "") for path, line, function in _CAUSED_BY.findall(text)]
    places += [(frame.filename, str(frame.lineno), frame.name, frame.line or "")
               for frame in reversed(list(getattr(exc, "real_stack", None) or []))]
    for path, line, function, code in places:
        if not _is_torch_source(path):
            quoted = f" ({first_line(code, 60)})" if code.strip() else ""
            return f"{_short_path(path)}:{line} in {function}{quoted}"
    return None


def _is_torch_source(path: str) -> bool:
    """Whether ``path`` (absolute, or relative to torch as torch writes ``_export/...``) is a
    file of torch itself rather than of the model."""
    import torch

    root = Path(torch.__file__).parent
    candidate = Path(path)
    if candidate.is_absolute():
        return root in candidate.parents
    return (root / candidate).exists() or candidate.parts[:1] == ("torch",)


def _short_path(path: str) -> str:
    """A source path from its package on (``torchvision/ops/boxes.py``), else its last three
    parts."""
    marker = "site-packages/"
    if marker in path:
        return path.rsplit(marker, 1)[1]
    return "/".join(Path(path).parts[-3:])


@contextlib.contextmanager
def quiet_torch() -> Iterator[None]:
    """The exporter prints progress lines and warnings (and torch logs that Triton is hidden;
    onnxscript's constant folding, each node it cannot evaluate); a loader says nothing when
    it works."""
    logs = [logging.getLogger(name) for name in ("torch", "onnxscript")]
    levels = [log.level for log in logs]
    for log in logs:
        log.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        for log, level in zip(logs, levels, strict=True):
            log.setLevel(level)


__all__ = ["TORCH_ONNX_OPSET", "export_failure", "exported_program_to_onnx", "module_path",
           "module_to_onnx", "name_nodes_by_module", "quiet_torch", "require_torch", "tensor_args"]
