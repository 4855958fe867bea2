"""``.pt2`` files (``torch.export.save``) -> Relay, through the PyTorch frontend's ONNX route.

Two things a saved program needs beyond ``torch.export.load``:

- **Its output types.** A program's output spec names its classes by module path
  (``transformers.modeling_outputs.BaseModelOutput``), and torch can rebuild them only if they
  were registered as pytree nodes, which happens when their module is imported. When the load
  fails on such a type, :func:`load_program` imports the module the spec names and tries again
  -- only for modules of :data:`PYTREE_PACKAGES`, since importing runs a module's code and the
  name comes from the file.
- **Other input shapes.** A program holds the shapes it was exported at. With ``input_shapes``
  that differ, a program whose dimensions were declared dynamic (``dynamic_shapes=``) is
  exported again at those shapes (:func:`at_input_shapes`); a static one is refused in one
  line, since its graph may hold the old sizes in places no loader can find.

**No code runs from the file.** ``torch.export.load`` unpickles entries a file marks
``use_pickle`` (and falls back to unpickling when a plain load fails) with
``weights_only=False``, and loads AOTInductor shared libraries: a crafted ``.pt2`` runs any code
it likes. :func:`refuse_code` reads the archive's entry list and payload configs first and
refuses such files in one line; the load itself runs with torch's ``weights_only`` forced
(:func:`_weights_only`), so a pickle that slips past the configs can hold tensors only.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import logging
import os
import re
import threading
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import tvm

from ..._audience import shape_name, shapes_hint
from ..._optional import MissingDependencyError
from ...errors import InputShapeError, ModelFormatError, UnsafeModelError
from ._common import check_known_names, checked_shape, first_line
from ._onnx import load_onnx_model
from ._torch import exported_program_to_onnx, quiet_torch, require_torch

Params = dict[str, tvm.nd.NDArray]
Shape = tuple[int, ...]

#: Packages whose modules may be imported to register the output types a ``.pt2`` names.
#: Importing a module runs its code and the name is read from the file, so an arbitrary name
#: is never imported; these are well-known model libraries whose output classes are pytree
#: nodes registered on import (transformers' ``ModelOutput`` subclasses and the like).
PYTREE_PACKAGES = ("transformers", "diffusers", "timm", "torchvision")
#: torch names a type it cannot rebuild so (torch/utils/_pytree.py, ``_json_to_treespec``).
_UNREGISTERED = re.compile(r"Deserializing (\S+) in pytree is not registered")
_SEE_WARNINGS = re.compile(r"\s*Please check the warnings above[^.]*\.?")
#: At most this many modules are imported for one file (each import can register one more).
_MAX_IMPORTS = 8


def load_pt2_file(path: Path, input_shapes: Mapping[str, object] | None) -> tuple[tvm.IRModule,
                                                                                   Params]:
    """Convert an ``ExportedProgram`` saved with ``torch.export.save``, exported again at
    ``input_shapes`` when they differ from the saved ones and the program allows it."""
    torch = require_torch(f"reading the PyTorch program {path.name!r}")
    refuse_code(path)
    program = load_program(torch, path)
    program = at_input_shapes(torch, program, input_shapes, repr(path.name))
    model = exported_program_to_onnx(program, None, path.name)
    return load_onnx_model(model, path.name, input_shapes)


def load_program(torch: ModuleType, path: Path) -> Any:
    """``torch.export.load(path)``, importing the module that registers an output type the
    file names (a transformers model's outputs) when that is what the load lacks.

    Raises
    ------
    ModelFormatError
        The file is not a saved program, or it names a type of a package outside
        :data:`PYTREE_PACKAGES` that is not registered.
    MissingDependencyError
        The type's package (transformers...) is not installed.
    """
    imported: list[str] = []
    while True:
        causes: list[BaseException] = []
        try:
            with quiet_torch(), _logged_errors(causes), _weights_only():
                return torch.export.load(str(path))
        except Exception as exc:  # torch raises RuntimeError, BadZipFile, KeyError... on bad files
            failure = exc
        _refuse_pickle_failure(path, [*causes, failure])
        type_name = _unregistered_type([*causes, failure])
        if type_name is None or len(imported) >= _MAX_IMPORTS:
            # torch's own message sends the reader to warnings that were not shown
            cause = first_line(causes[-1] if causes else
                               _SEE_WARNINGS.sub("", str(failure)) or failure)
            raise ModelFormatError(
                f"{str(path)!r} is not a program saved with torch.export.save ({cause}); save it "
                "with torch.export.save(torch.export.export(model, args), path)") from failure
        module = _import_registering(type_name, path)
        if module in imported:  # imported, and the type is still unknown
            raise ModelFormatError(
                f"{str(path)!r} returns its outputs as {type_name}, which importing {module} "
                "did not register as a pytree node; export the model so that it returns tensors "
                "(a tuple), or register the type before loading") from failure
        imported.append(module)


# ------------------------------------------------------------------------ code in the file
#: Constants stored under these prefixes are unpickled by torch (``pickle.loads`` or
#: TorchScript's unpickler), never read as raw tensor bytes.
_PICKLED_CONSTANTS = ("custom_obj_", "opaque_obj_")
#: Entries holding compiled code that torch would load as a shared library.
_COMPILED_CODE = "data/aotinductor/"
_PAYLOAD_CONFIGS = re.compile(r"data/(weights|constants)/[^/]+_(weights|constants)_config\.json")
_REFUSED = ("partition_lab loads only programs whose weights are plain tensors, because "
            "unpickling can run any code; re-save it with torch.export.save from a model "
            "without tensor subclasses or custom objects")


def refuse_code(path: Path) -> None:
    """:class:`UnsafeModelError` when the ``.pt2`` archive at ``path`` holds entries that
    ``torch.export.load`` would unpickle or load as compiled code.

    Only the zip's directory and its small JSON payload configs are read. A file that is not a
    zip archive is left to ``torch.export.load`` to reject.
    """
    try:
        with zipfile.ZipFile(path) as archive:
            problem = _code_entry(archive)
    except (zipfile.BadZipFile, OSError, ValueError, KeyError, RecursionError):
        return  # not an archive (or an unreadable one): torch.export.load says what is wrong
    if problem is not None:
        raise UnsafeModelError(f"{str(path)!r} {problem}; {_REFUSED}")


def _code_entry(archive: zipfile.ZipFile) -> str | None:
    """What in the archive would run code when loaded, or None."""
    for info in archive.infolist():
        name = info.filename.split("/", 1)[-1]  # entries sit under the archive's root folder
        if name.startswith(_COMPILED_CODE):
            return f"holds compiled AOTInductor code ({info.filename}), which loading would run"
        if _PAYLOAD_CONFIGS.fullmatch(name):
            if info.file_size > 64 * 2**20:
                return f"has a payload config {info.filename} of {info.file_size} bytes"
            problem = _pickled_payload(json.loads(archive.read(info)), info.filename)
            if problem is not None:
                return problem
    return None


def _pickled_payload(config: Any, where: str) -> str | None:
    entries = config.get("config") if isinstance(config, dict) else None
    if not isinstance(entries, dict):
        return None  # not a config torch can read either; its load fails
    for name, meta in entries.items():
        meta = meta if isinstance(meta, dict) else {}
        if meta.get("use_pickle"):
            return f"marks {name!r} as pickled (use_pickle in {where}), which loading would unpickle"
        if str(meta.get("path_name", "")).startswith(_PICKLED_CONSTANTS):
            return f"stores {name!r} as a pickled object ({where}), which loading would unpickle"
    return None


@contextlib.contextmanager
def _weights_only() -> Iterator[None]:
    """Every ``torch.load`` inside loads with ``weights_only=True``, whatever its caller asked:
    torch falls back to a full unpickle when a weights-only load of sample inputs or a legacy
    state dict fails. The variable is read on each ``torch.load`` call; it is process-wide, so
    loads in several threads share one setting, restored when the last of them ends."""
    with _FORCED_LOCK:
        if _FORCED_BY["count"] == 0:
            _FORCED_BY["saved"] = {key: os.environ.pop(key, None) for key in _FORCE_KEYS}
            os.environ["TORCH_FORCE_WEIGHTS_ONLY_LOAD"] = "1"
        _FORCED_BY["count"] += 1
    try:
        yield
    finally:
        with _FORCED_LOCK:
            _FORCED_BY["count"] -= 1
            if _FORCED_BY["count"] == 0:
                for key, value in _FORCED_BY["saved"].items():
                    os.environ.pop(key, None)
                    if value is not None:
                        os.environ[key] = value


_FORCE_KEYS = ("TORCH_FORCE_WEIGHTS_ONLY_LOAD", "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD")
_FORCED_LOCK = threading.Lock()
_FORCED_BY: dict[str, Any] = {"count": 0, "saved": {}}


def _refuse_pickle_failure(path: Path, errors: list[BaseException]) -> None:
    """:class:`UnsafeModelError` when the load failed because a pickle needed more than the
    weights-only unpickler allows (an object that could be code)."""
    for error in errors:
        current: BaseException | None = error
        while current is not None:
            if "Weights only load failed" in str(current):
                raise UnsafeModelError(
                    f"{str(path)!r} holds a pickle that is not plain tensors (torch's "
                    f"weights-only unpickler refused it); {_REFUSED}") from error
            current = current.__cause__ or current.__context__


@contextlib.contextmanager
def _logged_errors(causes: list[BaseException]) -> Iterator[None]:
    """Collect the exceptions torch logs while loading (``torch.export.load`` logs the real
    cause as a warning and raises "check the warnings above"), without printing them."""

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.exc_info and record.exc_info[1] is not None:
                causes.append(record.exc_info[1])

    # torch gives this logger its own handler and level (torch._logging), so the handler is
    # swapped rather than added: the warning must not reach stderr when a retry succeeds.
    logger = logging.getLogger("torch.export")
    handlers, level, propagate = logger.handlers[:], logger.level, logger.propagate
    logger.handlers = [Collect()]
    logger.setLevel(logging.WARNING)
    logger.propagate = False
    try:
        yield
    finally:
        logger.handlers = handlers
        logger.setLevel(level)
        logger.propagate = propagate


def _unregistered_type(errors: list[BaseException]) -> str | None:
    """The serialized name of the pytree type torch could not rebuild, if that is the failure."""
    for error in errors:
        current: BaseException | None = error
        while current is not None:
            match = _UNREGISTERED.search(str(current))
            if match:
                return match.group(1).rstrip(".")
            current = current.__cause__ or current.__context__
    return None


def _import_registering(type_name: str, path: Path) -> str:
    """Import the module that defines ``type_name`` (registering it); the module's name.

    ``transformers.modeling_outputs.BaseModelOutput`` is class ``BaseModelOutput`` of module
    ``transformers.modeling_outputs``; a nested class drops more parts, so the longest prefix
    that imports is the module.
    """
    package = type_name.split(".")[0]
    if package not in PYTREE_PACKAGES:
        raise ModelFormatError(
            f"{str(path)!r} returns its outputs as {type_name}, a type registered only when its "
            f"module is imported, and partition_lab imports modules for that only from "
            f"{', '.join(PYTREE_PACKAGES)} (importing runs a module's code); in Python, import "
            f"{package} before load_model, or export the model so that it returns tensors")
    try:
        with quiet_torch():
            importlib.import_module(package)
    except ImportError as exc:
        raise MissingDependencyError(
            f"{str(path)!r} returns its outputs as {type_name}, a type that {package} defines, "
            f"and {package} is not installed; pip install {package}") from exc
    module = type_name.rpartition(".")[0]
    while module and module != package:
        try:
            with quiet_torch():
                importlib.import_module(module)
            return module
        except ModuleNotFoundError as exc:
            if exc.name != module:  # the module is there but needs something missing
                raise MissingDependencyError(
                    f"{str(path)!r} returns its outputs as {type_name}; importing {module} to "
                    f"register it needs {exc.name}, which is not installed") from exc
            module = module.rpartition(".")[0]  # a nested class: Outer.Inner
    if module == package:
        return package
    raise ModelFormatError(f"{str(path)!r} returns its outputs as {type_name}, which {package} "
                           "does not define (another version?)")


# --------------------------------------------------------------------------------- shapes
def at_input_shapes(torch: ModuleType, program: Any, input_shapes: Mapping[str, object] | None,
                    label: str) -> Any:
    """``program``, or the program exported again at ``input_shapes`` where they differ from
    the shapes it holds.

    A dimension declared dynamic at export (``dynamic_shapes=``) may take any size in its
    range; a static one only its own. A program with dynamic dimensions is always exported
    again (at the given shapes), so that the ONNX route sees static shapes.

    Raises
    ------
    InputShapeError
        A given shape changes a static dimension or leaves a dynamic dimension's range, names
        an input the program does not have, or has the wrong rank; or a dynamic dimension has
        no size.
    """
    inputs = _user_inputs(torch, program)
    given = dict(input_shapes or {})
    check_known_names(given, list(inputs))
    wanted: dict[str, Shape] = {}
    for name, value in inputs.items():
        dims = tuple(value.shape)
        shape = checked_shape(name, given[name]) if name in given else None
        if shape is not None and len(shape) != len(dims):
            raise InputShapeError(
                f"{shape_name(name)} = {shape} has rank {len(shape)} but {label}'s input "
                f"{name!r} has rank {len(dims)} ({_format(dims)})")
        wanted[name] = shape if shape is not None else _example_shape(name, dims, label)
        for index, (dim, size) in enumerate(zip(dims, wanted[name], strict=True)):
            _check_dim(program, label, name, index, dims, dim, size)
    if not any(_is_symbolic(dim) for value in inputs.values() for dim in value.shape):
        return program  # static, and every given shape is its own
    return _reexport(torch, program, inputs, wanted, label)


def _user_inputs(torch: ModuleType, program: Any) -> dict[str, Any]:
    """The program's tensor inputs, by name, as their (fake) example values."""
    names = set(program.graph_signature.user_inputs)
    inputs = {node.name: node.meta.get("val") for node in program.graph.nodes
              if node.op == "placeholder" and node.name in names}
    return {name: value for name, value in inputs.items() if isinstance(value, torch.Tensor)}


def _example_shape(name: str, dims: tuple[Any, ...], label: str) -> Shape:
    """The shape an input had when the program was exported (its static dims; a dynamic one's
    example size), for an input the caller gave no shape."""
    sizes = [_hint(dim) for dim in dims]
    known = [size for size in sizes if size is not None]
    if len(known) == len(sizes):
        return tuple(known)
    raise InputShapeError(f"{label}'s input {name!r} has dynamic dimensions ({_format(dims)}); "
                          f"pass {shapes_hint({name: tuple(s or 1 for s in sizes)})} with the "
                          "sizes you want")


def _check_dim(program: Any, label: str, name: str, index: int, dims: tuple[Any, ...],
               dim: Any, size: int) -> None:
    if not _is_symbolic(dim):
        if int(dim) != size:
            static = "static shapes" if not any(map(_is_symbolic, dims)) else \
                f"dimension {index} static"
            raise InputShapeError(
                f"{label} was exported with {static} (input {name!r}: {_format(dims)}), so its "
                f"dimension {index} cannot be {size}: export it again with dynamic_shapes= "
                "for that dimension (torch.export.export(model, args, dynamic_shapes=...)), or "
                "pass the nn.Module itself")
        return
    low, high = _dim_range(program, dim)
    if not low <= size <= high:
        raise InputShapeError(
            f"{label} allows input {name!r} dimension {index} ({dim}) sizes {low} to {high} "
            f"(its dynamic_shapes at export), not {size}")


def _reexport(torch: ModuleType, program: Any, inputs: Mapping[str, Any],
              wanted: Mapping[str, Shape], label: str) -> Any:
    """The program exported again, all shapes static, at ``wanted`` (zeros as the example
    inputs: only their shapes and dtypes are traced)."""
    from torch.utils import _pytree as pytree

    leaves = [torch.zeros(wanted[name], dtype=value.dtype) for name, value in inputs.items()]
    try:
        args, kwargs = pytree.tree_unflatten(leaves, program.call_spec.in_spec)
        with torch.no_grad(), quiet_torch():
            return torch.export.export(program.module(), tuple(args), kwargs)
    except Exception as exc:  # a guard of the program fails, or the spec has non-tensor inputs
        shapes = ", ".join(f"{name}={','.join(map(str, shape))}" for name, shape in
                           wanted.items())
        raise InputShapeError(f"{label} cannot be exported again at {shapes}: "
                              f"{first_line(exc)}") from exc


def _is_symbolic(dim: Any) -> bool:
    return not isinstance(dim, int)


def _hint(dim: Any) -> int | None:
    """A dimension's size, or the example size a dynamic one was traced with (None if the file
    does not record it)."""
    if not _is_symbolic(dim):
        return int(dim)
    hint = getattr(getattr(dim, "node", None), "hint", None)
    return int(hint) if hint is not None else None


def _dim_range(program: Any, dim: Any) -> tuple[int | float, int | float]:
    """The sizes a dynamic dimension allows (its ``Dim(min=, max=)``). An unbounded maximum is
    torch's ``int_oo``, which calls itself finite but is no sympy ``Integer``."""
    ranges = program.range_constraints.get(dim.node.expr)
    if ranges is None:
        return 0, float("inf")
    low, high = ranges.lower, ranges.upper
    return (int(low) if low.is_Integer else 0), (int(high) if high.is_Integer else float("inf"))


def _format(dims: tuple[Any, ...]) -> str:
    return "(" + ", ".join(str(d) for d in dims) + ")"


__all__ = ["PYTREE_PACKAGES", "at_input_shapes", "load_program", "load_pt2_file", "refuse_code"]
