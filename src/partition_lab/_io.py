"""Small helpers every layer shares: atomic file writes and the host CPU's name.

Outputs are written through a temporary file in the same directory and a rename, so a reader
never sees half a file and a failed write leaves the old one; the file gets the usual
permissions (``mkstemp`` alone makes it 0600, which breaks caches shared between users).
"""

from __future__ import annotations

import json
import os
import platform
import tempfile
from pathlib import Path
from typing import Any


def write_atomic(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same directory and a rename."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_json_atomic(path: str | os.PathLike[str], data: Any, indent: int = 1) -> Path:
    """``data`` as JSON (and a final newline), written atomically; creates the directory."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_atomic(path, (json.dumps(data, indent=indent) + "\n").encode("utf-8"))


def cpu_name() -> str:
    """The host CPU's model name (``/proc/cpuinfo``, else what ``platform`` says)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def _umask() -> int:
    mask = os.umask(0)  # reading the umask means setting it; put it straight back
    os.umask(mask)
    return mask
