"""The model caches' checks (:mod:`._cache`): an entry reads back exactly as it was computed,
or it is not used. Weights keep their own shape and dtype (a 0-d scalar stays 0-d), a read
entry's weights agree with its module's types, and, where :data:`VERIFY_ENV` is set, a written
entry is compared with what was computed (structure, constants, spans, names); and what an
entry is keyed and trusted by (file digests, versions, read files that stay plain files)."""

from __future__ import annotations

import hashlib
import os
import warnings
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import tvm
from tvm import relay

from ... import _version
from ..._io import special_file_kind

_CHUNK = 1 << 22
VERIFY_ENV = "PARTITION_LAB_VERIFY_CACHE"
"""Set to ``1`` (the test suite does): every entry written is read back at once and compared
with what was computed, and any entry that reads back other than it was computed raises
:class:`CacheMismatchError` instead of being dropped with a :class:`CacheMismatchWarning`."""


class _Stale(ValueError):
    """An entry that is cut short, garbled, of another format, or whose read files changed."""


class CacheMismatchError(RuntimeError):
    """An entry reads back other than what was computed (a weight's shape or dtype, a module
    that differs): a bug of this module, which would make a warm run's plan differ from a cold
    one's. Raised where :data:`VERIFY_ENV` is set; otherwise a :class:`CacheMismatchWarning`."""


class CacheMismatchWarning(RuntimeWarning):
    """:class:`CacheMismatchError`'s finding where :data:`VERIFY_ENV` is not set: the entry is
    not used (the model is converted or prepared again) and the user is told."""


def _verifying() -> bool:
    return os.environ.get(VERIFY_ENV, "").strip() not in ("", "0")


def _mismatch(entry: Path, what: str) -> None:
    """Report an entry that does not read back as it was computed: raise
    :class:`CacheMismatchError` where :data:`VERIFY_ENV` is set, else warn (the caller then
    drops the entry and computes again)."""
    message = (f"partition_lab's model cache entry {entry.name} {what}; it is not used (please "
               "report this bug; --no-model-cache or cache=False avoids the cache)")
    if _verifying():
        raise CacheMismatchError(message)
    warnings.warn(message, CacheMismatchWarning, stacklevel=3)


class _Mismatch(_Stale):
    """An entry whose weights disagree with its module's types (see :func:`_mismatch`)."""


def _raw(array: Any) -> np.ndarray:
    """A weight's values as a C-contiguous numpy array of its own shape and dtype.

    Not ``np.ascontiguousarray``: it returns at least one dimension, so a 0-d scalar would be
    stored as shape ``[1]`` and a warm run would price other ops than a cold one."""
    data = array.numpy() if isinstance(array, tvm.nd.NDArray) else np.asarray(array)
    if not data.flags.c_contiguous:
        data = data.copy(order="C")
    if tuple(data.shape) != tuple(int(d) for d in array.shape) or \
            str(data.dtype) != str(array.dtype):
        raise _Mismatch(f"would store a weight of shape {list(array.shape)} {array.dtype} as "
                        f"{list(data.shape)} {data.dtype}")
    return data


def _check_types(params: Sequence[relay.Var], arrays: Mapping[str, Any]) -> None:
    """Raise :class:`_Mismatch` where a weight's shape or dtype is not its parameter's type
    (the parameters of that name with a tensor type; a weight no parameter names is left to
    ``bind_params``, which says what is wrong with it)."""
    types = {p.name_hint: p.type_annotation for p in params}
    for name, array in arrays.items():
        ty = types.get(name)
        if not isinstance(ty, relay.TensorType):
            continue
        want = [int(d) for d in ty.shape] if all(
            isinstance(d, tvm.tir.IntImm) for d in ty.shape) else None
        if (want is not None and want != [int(d) for d in array.shape]) or \
                str(ty.dtype) != str(array.dtype):
            raise _Mismatch(f"holds {name} as {list(array.shape)} {array.dtype}, but the module "
                            f"takes {want} {ty.dtype}")


def _same_weights(got: Mapping[str, Any], want: Mapping[str, Any]) -> str | None:
    """What differs between two weight dicts (names and order, shapes, dtypes, values), or
    None."""
    if list(got) != list(want):
        return "holds other weights' names"
    for name, array in want.items():
        a, b = got[name].numpy(), array.numpy() if isinstance(array, tvm.nd.NDArray) \
            else np.asarray(array)
        if a.shape != b.shape or a.dtype != b.dtype:
            return f"gives {name} as {list(a.shape)} {a.dtype}, not {list(b.shape)} {b.dtype}"
        if a.tobytes() != b.tobytes():
            return f"gives other values of {name}"
    return None


def _same_module(got: tvm.IRModule, want: tvm.IRModule) -> str | None:
    """What differs between two modules, or None: structural equality (types, attributes,
    constants by shape, dtype and value; the module's attributes), then the names that
    structural equality leaves out (spans, variables' names)."""
    if not tvm.ir.structural_equal(got, want, map_free_vars=True):
        return "reads back another module"
    if _names(got) != _names(want):
        return "reads back other names (spans or variables)"
    return None


def _names(mod: tvm.IRModule) -> list[tuple[str, str, str]]:
    """Each node of each function (calls, constants, variables...) by kind, span name and (for
    a variable) name, in TVM's post order: what a plan's nodes and inputs, the weights and the
    exported Relay text are named by."""
    names: list[tuple[str, str, str]] = []

    def visit(node: object) -> None:
        span = getattr(node, "span", None)
        names.append((type(node).__name__, str(span.source_name.name) if span is not None
                      else "", str(node.name_hint) if isinstance(node, relay.Var) else ""))

    for var in sorted(mod.get_global_vars(), key=lambda v: v.name_hint):
        names.append(("GlobalVar", "", var.name_hint))
        if isinstance(mod[var], relay.Function):
            relay.analysis.post_order_visit(mod[var], visit)
    return names


def _dims(shape: object) -> list[int] | str:
    """A shape as a list of ints; anything else by its repr (the loader then says what is
    wrong with it, and no entry is written for a failed load)."""
    try:
        return [int(d) for d in shape]  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        return repr(shape)


def versions() -> dict[str, str]:
    """The versions whose change invalidates every entry."""
    found = {"partition_lab": _version.__version__, "tvm": str(tvm.__version__)}
    for package in ("onnx", "torch"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = "none"
    return found


def _plain_file_inside(folder: Path, path: Path) -> bool:
    """Whether ``path`` is a regular file whose real location is inside ``folder``: a read file
    that became a pipe (hashing it would block) or a link leading out is not trusted."""
    if special_file_kind(path) is not None or not path.is_file():
        return False
    try:
        Path(os.path.realpath(path)).relative_to(os.path.realpath(folder))
    except ValueError:
        return False
    return True


def file_digest(path: Path) -> str:
    """The SHA-256 of the file's content, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()
