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
from collections.abc import Iterator, Mapping, Sequence
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
#: The opset of the TorchScript exporter (``dynamo=False``), the fallback of
#: :func:`export_module`: at 17 the Reduce ops still take their axes as an attribute, the form
#: TVM 0.19's converters read (``F.normalize``'s ReduceL2 loads).
TORCHSCRIPT_OPSET = 17
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
    (what the zoo writes to its cache), by :func:`export_module`."""
    torch = require_torch("exporting a PyTorch module")
    args = tensor_args(torch, example_inputs)
    label = f"the PyTorch module {type(module).__name__}"
    return export_module(torch, module, args, input_names, label)


def export_module(torch: ModuleType, module: Any, args: tuple[Any, ...],
                  input_names: Sequence[str] | None, label: str) -> onnx.ModelProto:
    """``module`` as ONNX through ``torch.export`` and the dynamo exporter; when that fails,
    through the TorchScript exporter (:data:`TORCHSCRIPT_OPSET`), saying so in one line on
    stderr, with the construct and the place the dynamo export failed on.

    Not when ``torch.export`` stops at a shape or branch that depends on tensor values: tracing
    would record the example's branch without a word (the module's ``_DATA_DEPENDENT`` failures). When both
    exporters fail, one :class:`ModelFormatError` names the construct, the file and line, the
    fallback tried and, for a failure with a known fix (``use_cache=False``...), the fix.
    """
    try:
        return exported_program_to_onnx(_export(torch, module, args, label), input_names, label)
    except ModelFormatError as exc:
        if not may_fall_back(exc):
            raise
        failure = exc
    try:
        model = torchscript_onnx(torch, module, args, input_names)
    except Exception as exc:  # the TorchScript exporter raises RuntimeError, TypeError...
        raise ModelFormatError(both_failed(failure, exc, label)) from failure
    print(fallback_line(failure, label), file=sys.stderr)
    return model


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
        raise ModelFormatError(f"torch.onnx.export (dynamo) cannot export {label}: "
                               f"{dynamo_failure(exc)}") from exc
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
    fix = known_fix(exc)
    said = first_line(exc)
    if fix:  # torch's advice after the first sentence (register a pytree...) is the fix's
        said = said.split(". ", 1)[0].rstrip(".")
    return f"{said}{at}{fix or _SEE_DOCS}"


_SEE_DOCS = "; see the torch.export documentation for what it traces"


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


# ------------------------------------------------------------- the TorchScript fallback
#: ANSI colour codes (the dynamo exporter colours "This is step 2/3" and its component names).
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
#: The FX node the dynamo exporter was running when it failed:
#: ``While executing %view_10 : [...] = call_function[target=torch.ops.aten.view.default]``.
_EXECUTING = re.compile(r"While executing %\S+ : .*?target=(?:torch\.ops\.)?([\w.]+?)(?:\.default)?\]")
#: What the dynamo exporter's step says it was doing: "Failed to decompose the FX graph".
_STEP = re.compile(r"Failed to (\w+) the (?:FX graph|model)")
#: A type torch.export cannot return: ``Found <class 'transformers.cache_utils.DynamicCache'>
#: in output, which is not a known type``.
_UNKNOWN_TYPE = re.compile(r"Found <class '([\w.]+)'> in (output|input)")


def strip_ansi(text: str) -> str:
    """``text`` without ANSI colour codes."""
    return _ANSI.sub("", text)


def dynamo_failure(exc: BaseException) -> str:
    """What stopped ``torch.onnx.export(..., dynamo=True)``, in one line without colour codes:
    the step (decompose, translate), the construct (the ATen op it was running), the cause
    (torch's own summary) and the model's file and line.

    The exporter's message is two dozen lines of next steps around an "Exception summary"; the
    cause is its ``__cause__`` (``Cannot view a tensor with shape ... as a tensor with shape
    ...``), and the place the last frame of its "Original traceback".
    """
    text = strip_ansi(str(exc))
    cause = exc.__cause__ or exc
    cause_text = strip_ansi(str(cause))
    step = _STEP.search(text)
    node = _EXECUTING.search(cause_text) or _EXECUTING.search(text)
    what = f"cannot {step.group(1)} " if step else "fails on "
    what += f"{node.group(1)}" if node else "the model"
    where = _failure_location(cause) or _failure_location(exc)
    at = f" at {where}" if where else ""
    return f"{what} ({first_line(cause_text, 160).rstrip('!.')}){at}"


def known_fix(exc: BaseException) -> str:
    """The fix for an export failure partition_lab knows, as ``; <what to do>``, or "".

    - A Hugging Face model returning its key/value cache (``DynamicCache``, the default
      ``use_cache=True`` of a decoder): ``use_cache=False``.
    - Another type torch.export cannot flatten in the outputs (a plain dataclass): return the
      tensors (a tuple), or register the type.
    """
    text = strip_ansi(str(exc))
    current = exc.__cause__
    while current is not None:
        text += "\n" + str(current)
        current = current.__cause__
    found = _UNKNOWN_TYPE.search(text) or re.search(r"unsupported type: (\w*Cache)\b", text)
    if found is None:
        return ""
    type_name = found.group(1)
    if type_name.rsplit(".", 1)[-1].endswith("Cache"):
        return (f"; the outputs hold the model's key/value cache ({type_name.rsplit('.', 1)[-1]}, "
                "a decoder's default use_cache=True): build the model with use_cache=False "
                "(config.use_cache = False, or from_pretrained(..., use_cache=False))")
    return (f"; the {'outputs hold' if found.group(2) == 'output' else 'inputs hold'} a "
            f"{type_name}, which torch.export cannot flatten: return the tensors (a tuple of "
            "them, e.g. return_dict=False for a Hugging Face model), or register the type "
            "with torch.utils._pytree.register_dataclass")


def may_fall_back(exc: ModelFormatError) -> bool:
    """Whether the TorchScript exporter is tried after this dynamo failure: not for a shape or
    branch that depends on tensor values (tracing would keep the example's branch silently),
    nor for the module's own assertion about its input (ViT's "Wrong image height!"): tracing
    runs the same code and stops on the same line."""
    cause = exc.__cause__
    if isinstance(cause, AssertionError):
        return False
    return not (cause is not None and (type(cause).__name__ in _DATA_DEPENDENT
                                       or "data-dependent" in first_line(cause)))


def _why(failure: ModelFormatError) -> tuple[str, str]:
    """(what the dynamo export said, the known fix or "") of a failure, one line each."""
    why = str(failure).split(": ", 1)[-1].removesuffix(_SEE_DOCS)
    fix = known_fix(failure.__cause__ or failure)
    return why.removesuffix(fix), fix


def fallback_line(failure: ModelFormatError, label: str) -> str:
    """The one line :func:`export_module` prints when the TorchScript exporter stepped in."""
    why, _ = _why(failure)
    return (f"partition_lab: {label}: the dynamo export failed ({why}); exported with the "
            f"TorchScript exporter (torch.onnx.export(..., dynamo=False), opset "
            f"{TORCHSCRIPT_OPSET}) instead")


def both_failed(failure: ModelFormatError, exc: BaseException, label: str) -> str:
    """The one-line error when the dynamo export and the TorchScript fallback both failed."""
    why, fix = _why(failure)
    fix = fix or known_fix(exc)
    return (f"{label} cannot be exported to ONNX: the dynamo export failed ({why}); the "
            f"fallback tried, the TorchScript exporter (dynamo=False, opset {TORCHSCRIPT_OPSET}), "
            f"failed too ({first_line(strip_ansi(str(exc)), 160)}){fix}")


def torchscript_onnx(torch: ModuleType, module: Any, args: tuple[Any, ...],
                     input_names: Sequence[str] | None) -> onnx.ModelProto:
    """``module`` (eval mode) exported by the TorchScript exporter at :data:`TORCHSCRIPT_OPSET`,
    constants folded, inputs named as the dynamo export names them (``forward``'s arguments),
    nodes named by :func:`name_nodes_by_scope`, and the exporter written into the metadata."""
    names = list(input_names) if input_names else _forward_names(module, len(args))
    buffer = io.BytesIO()
    training = module.training
    module.eval()
    try:
        with torch.no_grad(), quiet_torch():
            torch.onnx.export(module, args, buffer, dynamo=False, opset_version=TORCHSCRIPT_OPSET,
                              input_names=names, do_constant_folding=True)
    finally:
        module.train(training)
    model = onnx.load_from_string(buffer.getvalue())
    name_nodes_by_scope(model, module)
    written = model.metadata_props.add()
    written.key = ONNX_METADATA_KEY
    written.value = torchscript_exporter(TORCHSCRIPT_OPSET, torch.__version__)
    return model


def torchscript_exporter(opset: int, torch_version: str) -> str:
    """How the fallback's export is described in plans: ``torch.onnx (TorchScript, opset 17,
    dynamo export failed; torch 2.14.1)``."""
    return f"torch.onnx (TorchScript, opset {opset}, dynamo export failed; torch {torch_version})"


def _forward_names(module: Any, count: int) -> list[str]:
    import inspect

    try:
        parameters = list(inspect.signature(module.forward).parameters.values())
    except (TypeError, ValueError):
        parameters = []
    names = [p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return names[:count] if len(names) >= count else [f"input{i}" for i in range(count)]


def _scope_path(scopes: list[str], modules: Mapping[str, Any]) -> str:
    """The module path of a TorchScript scope list. A scope is named relative to the nearest
    module that was called: ``['encoder', 'layers.0']`` is ``encoder.layers.0`` (a ModuleList is
    not called), ``['inner', 'inner.0']`` is ``inner.0`` (a Sequential is)."""
    path = ""
    for scope in scopes:
        base = path
        while True:
            candidate = f"{base}.{scope}" if base else scope
            if candidate in modules or not base:
                break
            base = base.rpartition(".")[0]
        path = candidate if candidate in modules else (f"{path}.{scope}" if path else scope)
    return path


def name_nodes_by_scope(model: onnx.ModelProto, module: Any) -> None:
    """Name each node of a TorchScript export (in place) as :func:`name_nodes_by_module` names a
    dynamo export's: the exporter writes the module scope into the name
    (``/encoder/layers.0/self_attn/q_proj/MatMul``); a node inside a leaf module gets its path
    (``encoder.layers.0.self_attn.q_proj``), one in a module with submodules the path and the ONNX
    op (``encoder.layers.0/Add``, ``/Reshape`` at the top); repeats get ``#2``, ``#3``...
    Nodes without a scope (``Constant_12``) keep their names."""
    modules = dict(module.named_modules())
    leaves = {path for path, sub in modules.items() if path and not any(True for _ in
                                                                        sub.children())}
    seen: Counter[str] = Counter(node.name for node in model.graph.node
                                 if not node.name.startswith("/"))
    for node in model.graph.node:
        if not node.name.startswith("/"):
            continue
        path = _scope_path(node.name.strip("/").split("/")[:-1], modules)
        name = path if path in leaves else f"{path}/{node.op_type}"
        seen[name] += 1
        node.name = name if seen[name] == 1 else f"{name}#{seen[name]}"


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


__all__ = ["TORCHSCRIPT_OPSET", "TORCH_ONNX_OPSET", "export_failure", "export_module", "exported_program_to_onnx", "module_path",
           "module_to_onnx", "name_nodes_by_module", "quiet_torch", "require_torch", "tensor_args"]
