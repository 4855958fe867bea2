"""Optional dependencies: one clear error where a path needs one that is missing.

MXNet 1.9.1 and gluoncv (the ``[mxnet]`` extra) read MXNet models and build the gluoncv zoo
models. They install on Python 3.11 only: MXNet 1.9.1 breaks on numpy >= 1.24, and numpy 1.23
has no wheel for later Pythons. Everything else (ONNX, Relay text, PyTorch input, targets,
strategies, drawings, the CLI) runs without them, so the MXNet paths call :func:`require_mxnet`
before their first MXNet import and the user reads what to install instead of a traceback.

>>> mx = require_mxnet("reading an MXNet -symbol.json")     # doctest: +SKIP
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType

from .errors import PartitionLabError

__all__ = ["MXNET_FIX", "MissingDependencyError", "RELAX_FIX", "RELAY_FIX", "TVM_FIX",
           "is_installed", "pip_install", "relax_only", "require_mxnet", "require_transformers",
           "require_tvm", "stack_extra", "torch_fix", "transformers_fix", "tvm_has_relay",
           "tvm_installed"]


def pip_install(extras: str) -> str:
    """The install command of the package with ``extras``, as it works from a clone of the
    repository (the package is not on a package index): ``pip install '.[relax]'``."""
    return f"pip install '.[{extras}]'"


#: Every install command a message names works in a clone of the repository (its root folder).
_FROM_A_CLONE = "in a clone of partition_lab"
#: MXNet reads its models through Relay's MXNet frontend: it goes with the Relay stack.
MXNET_FIX = f"{pip_install('relay,mxnet')} {_FROM_A_CLONE} (Python 3.11 only)"
#: apache-tvm >= 0.20 (the Relax adapter, partition_lab.relax) and the pinned TVM 0.19 wheel both
#: install the module ``tvm``: each stack lives in an environment of its own.
RELAX_FIX = (f"in a new venv, {pip_install('relax')} {_FROM_A_CLONE} (make test-relax builds "
             "one, .venv-relax)")
RELAY_FIX = f"in a new venv, {pip_install('relay')} {_FROM_A_CLONE}"
#: Neither stack installed (``pip install .`` alone): what to add.
TVM_FIX = (f"{pip_install('relax')} (current TVM, Relax) or {pip_install('relay')} (TVM 0.19, "
           f"Relay) {_FROM_A_CLONE}")
# The first Python without a numpy that MXNet 1.9.1 accepts (numpy 1.23 stops at 3.11).
_FIRST_PYTHON_WITHOUT_MXNET = (3, 12)


class MissingDependencyError(PartitionLabError, ImportError):
    """An optional dependency that this path needs is not installed, or does not import.

    It is an :class:`ImportError` too, so that ``except ImportError`` around an optional import
    keeps working.
    """


def require_mxnet(what: str, *, gluoncv: bool = False) -> ModuleType:
    """Import MXNet for ``what``, or raise :class:`MissingDependencyError` saying how to get it.

    Parameters
    ----------
    what
        The user's action, as the start of the message: "reading the MXNet model
        'resnet-symbol.json'", "the zoo model 'ssd_512_resnet50_v1_voc'".
    gluoncv
        Also require gluoncv (the zoo's gluoncv-built models). It is checked for, not imported:
        gluoncv's import has side effects that the zoo handles itself.

    Returns
    -------
    The ``mxnet`` module.

    Raises
    ------
    MissingDependencyError
        MXNet (or gluoncv) is not installed, or MXNet is installed but fails to import (for
        example beside numpy >= 1.24). The message is one line and names the fix.
    """
    try:
        module = importlib.import_module("mxnet")
    except ModuleNotFoundError as exc:
        if exc.name != "mxnet":  # MXNet is there but one of its own imports is not
            raise MissingDependencyError(_broken_message(what, exc), name="mxnet") from exc
        raise MissingDependencyError(_missing_message(what, "MXNet"), name="mxnet") from exc
    except Exception as exc:  # MXNet 1.9.1 beside numpy >= 1.24 raises AttributeError (np.bool)
        raise MissingDependencyError(_broken_message(what, exc), name="mxnet") from exc
    if gluoncv and not is_installed("gluoncv"):
        raise MissingDependencyError(_missing_message(what, "gluoncv"), name="gluoncv")
    return module


def require_transformers(what: str) -> ModuleType:
    """Import Hugging Face ``transformers`` for ``what``, or raise a one-line
    :class:`MissingDependencyError` naming the fix (the ``[hf]`` extra; not a dependency of the
    package).

    >>> transformers = require_transformers("the zoo model 'hf:bert_base'")  # doctest: +SKIP
    """
    try:
        return importlib.import_module("transformers")
    except ImportError as exc:
        if getattr(exc, "name", None) not in (None, "transformers"):  # its own import is broken
            first_line = (str(exc).splitlines() or [""])[0]
            raise MissingDependencyError(
                f"{what} needs transformers, which is installed but does not import "
                f"({first_line}); {transformers_fix()}", name="transformers") from exc
        raise MissingDependencyError(f"{what} needs transformers, which is not installed; "
                                     f"{transformers_fix()}", name="transformers") from exc


def _running_python() -> tuple[int, int]:
    return sys.version_info[:2]


def _missing_message(what: str, package: str) -> str:
    python = _running_python()
    if python >= _FIRST_PYTHON_WITHOUT_MXNET:
        running = ".".join(map(str, python))
        return (f"{what} needs {package}, which does not install on Python {running}: "
                f"{MXNET_FIX}; or convert the model to ONNX and load the .onnx file")
    return f"{what} needs {package}, which is not installed; {MXNET_FIX}"


def _broken_message(what: str, exc: BaseException) -> str:
    first_line = (str(exc).splitlines() or [""])[0]
    return (f"{what} needs MXNet, which is installed but does not import "
            f"({type(exc).__name__}: {first_line}); MXNet 1.9.1 needs numpy < 1.24: {MXNET_FIX}")


def is_installed(name: str) -> bool:
    """Whether the module ``name`` can be found, without importing it (an import of torch or
    transformers takes seconds); False for a module blocked by a None in ``sys.modules``."""
    # A None entry in sys.modules marks a module as blocked (find_spec raises on it).
    if name in sys.modules:
        return sys.modules[name] is not None
    return importlib.util.find_spec(name) is not None


def tvm_installed() -> bool:
    """Whether a module ``tvm`` is installed at all (either stack), found without importing it."""
    try:
        return importlib.util.find_spec("tvm") is not None
    except (ImportError, ValueError):  # a blocked tvm (None in sys.modules)
        return False


def require_tvm(what: str) -> None:
    """Raise a one-line :class:`MissingDependencyError` naming both stacks' extras when no TVM is
    installed (``pip install .`` alone: the package imports, and its TVM-free parts work)."""
    if not tvm_installed():
        raise MissingDependencyError(f"{what} needs TVM, which is not installed: {TVM_FIX}",
                                     name="tvm")


def stack_extra() -> str:
    """The extra of the TVM stack installed here: ``"relax"`` for apache-tvm >= 0.20, else
    ``"relay"`` (TVM 0.19, or no TVM yet: the stack with every input format)."""
    return "relax" if relax_only() else "relay"


def torch_fix() -> str:
    """How to add PyTorch (and torchvision) to the stack installed here."""
    return f"{pip_install(stack_extra() + ',torch')} {_FROM_A_CLONE} (torch and torchvision)"


def transformers_fix() -> str:
    """How to add transformers (and torch), which build the zoo's hf: models, to the stack
    installed here."""
    return f"{pip_install(stack_extra() + ',hf')} {_FROM_A_CLONE} (transformers and torch)"


def tvm_has_relay() -> bool:
    """Whether the installed TVM has Relay (TVM <= 0.19, the default stack); False for
    apache-tvm >= 0.20 (Relax only, :mod:`partition_lab.relax`) and without TVM."""
    try:
        return importlib.util.find_spec("tvm.relay") is not None
    except ImportError:  # no tvm at all
        return False


def relax_only() -> bool:
    """Whether the installed TVM is Relax only (apache-tvm >= 0.20): ``load_model`` and the
    command line then go through :mod:`partition_lab.relax`. The one place that decides which
    IR the package-level entry points use; a module passed in decides for itself
    (:func:`partition_lab.api.is_relax_module`)."""
    try:
        return importlib.util.find_spec("tvm") is not None and not tvm_has_relay()
    except (ImportError, ValueError):  # a broken or blocked tvm: neither stack
        return False
