"""Small helpers every layer shares: atomic file writes, reading input files safely, and the host
CPU's name.

Outputs are written through a temporary file in the same directory and a rename, so a reader
never sees half a file and a failed write leaves the old one; the file gets the usual
permissions (``mkstemp`` alone makes it 0600, which breaks caches shared between users).
A temporary name carries its writer's pid (``.plan.json.<pid>.<random>.tmp``): a writer that
was killed (SIGKILL, a crash) cannot remove its file, and the next write to the same path
removes it once that pid is gone (:func:`remove_stale_staging`).

Inputs are checked to be regular files before they are opened (:func:`check_regular_file`): a
named pipe blocks the reader forever and a device such as ``/dev/zero`` never ends.
Compressed inputs are inflated in chunks up to a limit (:func:`read_gzip_limited`), so a small
file that inflates to gigabytes is refused before it fills memory.
"""

from __future__ import annotations

import errno
import gzip
import json
import os
import platform
import re
import stat
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

STALE_STAGING_S = 3600.0
"""A staging file this old is abandoned even if a process with its pid runs (pids are reused;
a name from before pids were recorded has none)."""

#: What follows ``.<name>.`` in our staging names: an optional pid, mkstemp's 8 random
#: characters and ``.tmp``; or a backup of the old file (``<pid>.<hex>.old``, see _outputs).
_STAGING_TAIL = re.compile(r"(?:(\d+)\.)?[a-z0-9_]{8}\.tmp|(\d+)\.[0-9a-f]{8}\.old")


def write_atomic(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same directory and a rename."""
    path = Path(path)
    tmp = stage(path, data)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def stage(path: Path, data: bytes) -> Path:
    """``data`` written in full under a temporary name beside ``path`` (with this process's
    pid, the usual permissions); stale staging files of ``path`` are removed first.

    Raises
    ------
    OSError
        The write failed; no temporary file is left. A full disk or quota is an
        :class:`~partition_lab.errors.OutputSpaceError` naming ``path``.
    """
    remove_stale_staging(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{os.getpid()}.",
                               suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as handle:
            _write_all(handle, data)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise _no_space(path) from None
        raise
    return Path(tmp)


def _write_all(handle: Any, data: bytes) -> None:
    """Write and flush ``data`` (a test replaces this to simulate a full disk)."""
    handle.write(data)
    handle.flush()


def _no_space(path: Path) -> OSError:
    from .errors import OutputSpaceError

    return OutputSpaceError(
        f"cannot write {path}: no space left on its device (or quota exceeded); free some "
        f"space in {path.parent.resolve()} or write elsewhere (the old file is unchanged)")


def remove_stale_staging(path: Path) -> None:
    """Remove temporary files of our naming beside ``path`` that their writer abandoned.

    Only ``.<path name>.<pid>.<random>.tmp`` (and ``.old`` backups) whose pid is no longer
    running, and those older than :data:`STALE_STAGING_S`, go; a live writer's files stay.
    """
    prefix = f".{path.name}."
    try:
        names = [entry.name for entry in os.scandir(path.parent)
                 if entry.name.startswith(prefix)]
    except OSError:
        return  # an unreadable directory: the write that follows reports the problem
    for name in names:
        match = _STAGING_TAIL.fullmatch(name[len(prefix):])
        if match is None:
            continue
        pid = match.group(1) or match.group(2)
        candidate = path.parent / name
        try:
            old = time.time() - candidate.lstat().st_mtime > STALE_STAGING_S
            if old or (pid is not None and not _alive(int(pid))):
                candidate.unlink()
        except OSError:
            continue  # gone meanwhile (its writer finished), or not ours to remove


def _alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (ours or someone else's)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # someone else's live process; an absurd pid: leave the file to age
    return True


def write_json_atomic(path: str | os.PathLike[str], data: Any, indent: int = 1) -> Path:
    """``data`` as JSON (and a final newline), written atomically; creates the directory."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_atomic(path, (json.dumps(data, indent=indent) + "\n").encode("utf-8"))


CACHE_ENV = "PARTITION_LAB_CACHE"
"""The environment variable naming the cache folder (zoo builds, the profile cache)."""


def cache_root(default: Path) -> Path:
    """``$PARTITION_LAB_CACHE`` (``~`` expanded), or ``default`` when it is unset, empty or
    blank: ``PARTITION_LAB_CACHE=""`` is a way to unset it, never "the current folder"."""
    value = os.environ.get(CACHE_ENV, "").strip()
    return Path(value).expanduser() if value else default


def user_cache_dir() -> Path:
    """Where this OS keeps a user's caches, for partition_lab: ``~/.cache/partition_lab`` on
    Linux (``$XDG_CACHE_HOME`` honoured), ``~/Library/Caches/partition_lab`` on macOS
    (``platformdirs``); the default under :func:`cache_root`'s override. Not created here."""
    import platformdirs

    return platformdirs.user_cache_path("partition_lab", appauthor=False)


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
