"""Which TVM is installed: the Relax adapter needs apache-tvm >= 0.20 (no Relay, Relax only)."""

from __future__ import annotations

import importlib
import re
from types import ModuleType

from .._optional import RELAX_FIX, MissingDependencyError

#: The first TVM release without Relay (apache/tvm PRs #17656, #17660), whose Relax this adapter
#: is written against (checked with apache-tvm 0.27.0.post1).
FIRST_RELAX_ONLY = (0, 20)


def tvm_version(module: ModuleType) -> tuple[int, int]:
    """``(major, minor)`` of an imported ``tvm`` (``"0.27.0.post1"`` -> ``(0, 27)``)."""
    match = re.match(r"(\d+)\.(\d+)", str(getattr(module, "__version__", "")))
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


def require_relax(what: str = "partition_lab.relax") -> ModuleType:
    """Import ``tvm`` for ``what``, or raise a one-line :class:`MissingDependencyError` naming
    how to install apache-tvm >= 0.20 (it cannot share an environment with TVM 0.19)."""
    try:
        tvm = importlib.import_module("tvm")
    except ImportError as exc:
        raise MissingDependencyError(f"{what} needs apache-tvm >= 0.20 (Relax), which is not "
                                     f"installed; {RELAX_FIX}", name="tvm") from exc
    version = tvm_version(tvm)
    if version < FIRST_RELAX_ONLY:
        found = getattr(tvm, "__version__", "unknown")
        raise MissingDependencyError(
            f"{what} needs apache-tvm >= 0.20 (Relax), but the installed tvm is {found} (the "
            f"Relay stack partition_lab installs by default); {RELAX_FIX}", name="tvm")
    return tvm
