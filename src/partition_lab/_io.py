"""Small helpers every layer shares: atomic file writes, reading input files safely, and the host
CPU's name.

Outputs are written through a temporary file in the same directory and a rename, so a reader
never sees half a file and a failed write leaves the old one; the file gets the usual
permissions (``mkstemp`` alone makes it 0600, which breaks caches shared between users).

Inputs are checked to be regular files before they are opened (:func:`check_regular_file`): a
named pipe blocks the reader forever and a device such as ``/dev/zero`` never ends.
Compressed inputs are inflated in chunks up to a limit (:func:`read_gzip_limited`), so a small
file that inflates to gigabytes is refused before it fills memory.
"""

from __future__ import annotations

import gzip
import json
import os
import platform
import stat
import tempfile
import zlib
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


_SPECIAL_FILES = (
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def special_file_kind(path: str | os.PathLike[str]) -> str | None:
    """What ``path`` is when it is a FIFO, device or socket (links followed); None for a
    regular file, a directory or a path that does not exist (the caller's own checks say so)."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    return next((kind for test, kind in _SPECIAL_FILES if test(mode)), None)


def check_regular_file(path: str | os.PathLike[str], what: str,
                       error: type[Exception] = ValueError) -> None:
    """Raise ``error`` when ``path`` is a FIFO, device or socket: reading a pipe blocks until a
    writer comes (forever, for a stray one) and a device may never end. ``what`` names the
    file in the message ("target file")."""
    kind = special_file_kind(path)
    if kind is not None:
        raise error(f"{what} {str(path)!r} is {kind}, not a regular file, and reading it could "
                    "block or never end; pass a regular file")


def read_gzip_limited(path: str | os.PathLike[str], limit: int) -> bytes:
    """The inflated bytes of the gzip file at ``path``, read in chunks; :class:`ValueError`
    (saying so) once they pass ``limit`` bytes, before more memory is spent. Raises
    ``OSError``/``EOFError``/``zlib.error`` for a file that is not gzip."""
    chunks: list[bytes] = []
    size = 0
    with gzip.open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            size += len(chunk)
            if size > limit:
                raise ValueError(f"it inflates to more than {limit // 2**20} MiB")
            chunks.append(chunk)
    return b"".join(chunks)


#: What :func:`read_gzip_limited` raises for bytes that are not gzip (or are cut short).
GZIP_ERRORS = (OSError, EOFError, zlib.error)


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
