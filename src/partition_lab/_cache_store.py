"""The user cache on disk as one store: where each kind of entry lives, how big the cache is,
and its size bound with least-recently-used eviction.

Kinds (:data:`KINDS`) and what one entry of each is:

- ``converted``: one file, ``<cache>/converted/<2 hex>/<key>.tvm`` (the converted-model cache);
- ``prepared``: one file, ``<cache>/prepared/<2 hex>/<key>.tvm`` (prepared modules);
- ``zoo``: one folder, a built model with all its files (``<zoo>/<version key>/<model>/``:
  MXNet files, ONNX exports at each shape, their ``.sha256`` files);
- ``profile``: the profile cache file (``<cache>/profile_cache.json``). It holds measurements
  that need the devices to be made again, so it counts toward the size but is never evicted,
  and ``clear`` removes it only when asked for by kind.

``<cache>`` is ``$PARTITION_LAB_CACHE``, else the user cache folder (:func:`cache_home`); the
zoo's folders are in ``<cache>/zoo/`` by default and directly in ``$PARTITION_LAB_CACHE`` when
that is set (where the zoo kept them before the other kinds existed).

The bound: ``$PARTITION_LAB_CACHE_MAX_BYTES`` (:func:`max_bytes`: ``2GB``, ``500MB``, ``1.5GiB``,
a number of bytes; ``0`` or ``none`` for no bound), default :data:`DEFAULT_MAX_BYTES`. After an
entry is written, :func:`stored` removes whole entries, least recently used first, until the
cache fits: never the entry just written and never one that a live process holds
(:func:`hold`). An entry's last use is its modification time, set again on every hit
(:func:`used`): access times are often not kept (``noatime``, ``relatime``).

Holding: a process that uses an entry takes a shared ``flock`` on it (the entry's file, or its
folder) and keeps it until it exits (the most recent :data:`HELD_MAX` entries); eviction and
``clear`` take an exclusive one without waiting and skip the entry when that fails. The kernel
drops the locks of a process that dies, so nothing stays held. The profile cache's lock is the
one its writer takes (``.profile_cache.json.lock``).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import shutil
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ._io import _alive, cache_root, user_cache_dir
from .errors import PartitionLabError

MAX_BYTES_ENV = "PARTITION_LAB_CACHE_MAX_BYTES"
"""The environment variable bounding the cache's size (see :func:`max_bytes`)."""
DEFAULT_MAX_BYTES = 5 * 10**9
"""5 GB: room for the converted, prepared and zoo files of several full-size models, so that a
day's models stay warm while the cache cannot fill a disk."""
HELD_MAX = 64
"""The most entries one process holds at once; the oldest hold is let go past that."""
PROFILE_FILE = "profile_cache.json"
ZOO_VERSION_FOLDER = re.compile(r"v\d+-.+")
"""How the zoo's version folders are named (``v1-mxnet1.9.1-opset13``, ``v1-torch...``)."""

_SIZE = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([kmgt]i?b?|b)?\s*", re.IGNORECASE)
_SCALE = {"": 1, "b": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12,
          "ki": 2**10, "mi": 2**20, "gi": 2**30, "ti": 2**40}


class CacheError(PartitionLabError):
    """A cache setting that does not parse, or a kind of entry that does not exist."""


# ------------------------------------------------------------------------------------ where
def cache_home() -> Path:
    """``$PARTITION_LAB_CACHE`` or the user cache folder (``~/.cache/partition_lab``)."""
    return cache_root(user_cache_dir())


def zoo_root() -> Path:
    """The folder of the zoo's version folders: ``$PARTITION_LAB_CACHE`` itself when set, else
    ``zoo/`` in the user cache folder."""
    return cache_root(user_cache_dir() / "zoo")


def profile_path() -> Path:
    """The default profile cache file."""
    return cache_home() / PROFILE_FILE


# ------------------------------------------------------------------------------------ kinds
@dataclass(frozen=True)
class Entry:
    """One entry: its kind, its path (a file or a folder), its size in bytes and the time it
    was last used (its modification time)."""

    kind: str
    path: Path
    size: int
    used_at: float


@dataclass(frozen=True)
class Kind:
    """A kind of entry: where its entries are, which paths they are and whether eviction may
    remove them."""

    name: str
    root: Callable[[], Path]
    paths: Callable[[Path], Iterator[Path]]
    evictable: bool = True
    lock_of: Callable[[Path], Path] = lambda path: path


def _model_files(root: Path) -> Iterator[Path]:
    """``<root>/<2 hex>/<key>.tvm``: the converted and prepared entries."""
    for shard in _children(root):
        if shard.is_dir() and not shard.is_symlink():
            yield from (p for p in _children(shard) if p.suffix == ".tvm" and p.is_file())


def _zoo_folders(root: Path) -> Iterator[Path]:
    """``<root>/<version key>/<model>/``: one folder per built model."""
    for version in _children(root):
        if ZOO_VERSION_FOLDER.fullmatch(version.name) and version.is_dir() and \
                not version.is_symlink():
            yield from (p for p in _children(version) if not p.name.startswith(".") and
                        p.is_dir() and not p.is_symlink())


def _profile_file(root: Path) -> Iterator[Path]:
    path = root / PROFILE_FILE
    if path.is_file():
        yield path


KINDS: dict[str, Kind] = {kind.name: kind for kind in (
    Kind("converted", lambda: cache_home() / "converted", _model_files),
    Kind("prepared", lambda: cache_home() / "prepared", _model_files),
    Kind("zoo", zoo_root, _zoo_folders),
    Kind("profile", cache_home, _profile_file, evictable=False,
         lock_of=lambda path: path.with_name(f".{path.name}.lock")),
)}
"""Every kind of entry, by name."""


def kind(name: str) -> Kind:
    """The kind called ``name``; :class:`CacheError` naming the kinds for any other name."""
    try:
        return KINDS[name]
    except KeyError:
        raise CacheError(f"no cache kind {name!r}: the kinds are "
                         f"{', '.join(KINDS)}") from None


def entries(name: str) -> list[Entry]:
    """The entries of the kind ``name`` that are on disk now."""
    found = []
    for path in kind(name).paths(kind(name).root()):
        with contextlib.suppress(OSError):  # removed meanwhile by another process
            found.append(Entry(name, path, _size(path), path.stat().st_mtime))
    return found


def _children(folder: Path) -> list[Path]:
    try:
        return [Path(item.path) for item in os.scandir(folder)]
    except OSError:  # not there (nothing cached yet) or unreadable: nothing of ours
        return []


def _size(path: Path) -> int:
    """Bytes in the file, or in every file under the folder (links not followed)."""
    if not path.is_dir() or path.is_symlink():
        return path.lstat().st_size
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(folder, name)).st_size
    return total


# ------------------------------------------------------------------------------------ bound
def parse_size(text: str) -> int | None:
    """Bytes of a size such as ``2GB``, ``500 MB``, ``1.5GiB`` or ``123`` (decimal units, as
    the command line writes sizes; ``KiB``/``MiB``/``GiB``/``TiB`` binary); None for ``0``,
    ``none`` or ``unlimited`` (no bound); :class:`CacheError` for anything else."""
    if text.strip().lower() in ("none", "unlimited"):
        return None
    match = _SIZE.fullmatch(text)
    if match is None:
        raise CacheError(f"{text!r} is not a size: use a number of bytes or one with a unit "
                         "(500MB, 2GB, 1.5GiB), or 0 or none for no bound")
    unit = (match.group(2) or "").lower()
    unit = unit[:-1] if len(unit) > 1 and unit.endswith("b") else unit
    size = int(float(match.group(1)) * _SCALE[unit])
    return size or None


def max_bytes() -> int | None:
    """The cache's bound in bytes from ``$PARTITION_LAB_CACHE_MAX_BYTES`` (unset or blank:
    :data:`DEFAULT_MAX_BYTES`), or None for no bound."""
    value = os.environ.get(MAX_BYTES_ENV, "").strip()
    if not value:
        return DEFAULT_MAX_BYTES
    try:
        return parse_size(value)
    except CacheError as exc:
        raise CacheError(f"{MAX_BYTES_ENV}: {exc}") from None


# ------------------------------------------------------------------------------ use, holding
_held: OrderedDict[str, int] = OrderedDict()  # path -> the open descriptor holding it
_held_lock = threading.RLock()  # (loads may run in threads)


def used(path: Path) -> None:
    """Record a hit on the entry at ``path`` (its modification time set to now) and hold it
    for the rest of this process (:func:`hold`)."""
    with contextlib.suppress(OSError):  # a cache shared read-only: its order stays as it is
        os.utime(path)
    hold(path)


def hold(path: Path) -> bool:
    """Take a shared lock on the entry at ``path`` (a file or a folder) and keep it until this
    process exits, so that no other process evicts or clears it meanwhile. Waits while an
    eviction removes it (an instant), then holds what is at ``path`` now. False when nothing
    is there or the filesystem has no locks."""
    with _held_lock:
        return _hold(path)


def _hold(path: Path) -> bool:
    key = os.fspath(path)
    if key in _held:
        with contextlib.suppress(OSError):
            if os.path.samestat(os.fstat(_held[key]), os.stat(path)):
                _held.move_to_end(key)
                return True
        release(path)  # what is held was replaced (rewritten atomically) or removed since
    for _ in range(3):  # the entry was removed or replaced while waiting: take the new one
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            if os.path.samestat(os.fstat(fd), os.stat(path)):
                _held[key] = fd
                while len(_held) > HELD_MAX:
                    os.close(_held.popitem(last=False)[1])
                return True
        except OSError:
            pass
        os.close(fd)
    return False


def release(path: Path) -> None:
    """Let go of this process's hold on ``path``, if any."""
    with _held_lock:
        fd = _held.pop(os.fspath(path), None)
    if fd is not None:
        os.close(fd)


# -------------------------------------------------------------------------------- eviction
def stored(path: Path) -> list[Entry]:
    """After an entry was written at ``path``: hold it, then evict least recently used entries
    of the other evictable kinds' and its own until the cache fits its bound; the entries
    removed. Never fails for a cache it cannot tidy: whatever it cannot remove stays."""
    hold(path)
    limit = max_bytes()
    if limit is None:
        return []
    return evict(limit, keep=path)


def evict(limit: int, keep: Path | None = None) -> list[Entry]:
    """Remove evictable entries, oldest use first, until all entries together take at most
    ``limit`` bytes; ``keep`` and entries held by a live process stay. The entries removed."""
    _sweep_evicted(zoo_root())
    every = [found for name in KINDS for found in entries(name)]
    total = sum(found.size for found in every)
    removed: list[Entry] = []
    for found in sorted((e for e in every if KINDS[e.kind].evictable), key=_age):
        if total <= limit:
            break
        if keep is not None and found.path == Path(keep):
            continue
        if remove(found):
            total -= found.size
            removed.append(found)
    return removed


def _age(found: Entry) -> tuple[float, str]:
    return found.used_at, os.fspath(found.path)


def remove(found: Entry) -> bool:
    """Remove the entry unless a process holds it (an exclusive lock, not waited for); whether
    it is gone. A folder is renamed aside under the lock, then deleted."""
    lock_path = KINDS[found.kind].lock_of(found.path)
    try:
        fd = os.open(lock_path, os.O_RDONLY | (os.O_CREAT if lock_path != found.path else 0))
    except OSError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return False  # held: in use by a live process (this one included)
        doomed = found.path
        if found.path.is_dir() and not found.path.is_symlink():
            doomed = found.path.with_name(f".evicted.{os.getpid()}.{found.path.name}")
            os.rename(found.path, doomed)
        else:
            found.path.unlink()
    except OSError:
        return False
    finally:
        os.close(fd)
    if doomed != found.path:
        shutil.rmtree(doomed, ignore_errors=True)
    return True


def _sweep_evicted(root: Path) -> None:
    """Delete the folders that an eviction renamed aside and did not finish deleting (it was
    killed): ``.evicted.<pid>.<name>`` whose process is gone."""
    for version in _children(root):
        for aside in _children(version) if ZOO_VERSION_FOLDER.fullmatch(version.name) else []:
            pid = aside.name.split(".")[2] if aside.name.startswith(".evicted.") else ""
            if pid.isdigit() and not _alive(int(pid)):
                shutil.rmtree(aside, ignore_errors=True)


def clear(names: list[str]) -> tuple[list[Entry], list[Entry]]:
    """Remove every entry of the kinds ``names``: ``(removed, kept because held)``."""
    removed: list[Entry] = []
    kept: list[Entry] = []
    for name in names:
        for found in entries(name):
            (removed if remove(found) else kept).append(found)
    return removed, kept
