"""Whether the installed TVM is apache-tvm >= 0.20 (Relax, no Relay), read without importing it."""

from __future__ import annotations

import importlib.util
import re
from importlib import metadata


def relax_tvm_installed() -> bool:
    """apache-tvm >= 0.20 is the installed ``tvm`` (read from its metadata: no import)."""
    if importlib.util.find_spec("tvm") is None:
        return False
    for dist in ("apache-tvm",):
        try:
            version = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
        match = re.match(r"(\d+)\.(\d+)", version)
        return bool(match) and (int(match.group(1)), int(match.group(2))) >= (0, 20)
    return False



RELAX = relax_tvm_installed()
