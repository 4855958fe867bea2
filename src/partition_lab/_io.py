"""Small helpers every layer shares: atomic file writes and the host CPU's name.

Outputs are written through a temporary file in the same directory and a rename, so a reader
never sees half a file and a failed write leaves the old one; the file gets the usual
permissions (``mkstemp`` alone makes it 0600, which breaks caches shared between users).
A temporary name carries its writer's pid (``.plan.json.<pid>.<random>.tmp``): a writer that
was killed (SIGKILL, a crash) cannot remove its file, and the next write to the same path
removes it once that pid is gone (:func:`remove_stale_staging`).
"""

from __future__ import annotations

import errno
import json
import os
import platform
import re
import tempfile
import time
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
