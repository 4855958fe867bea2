"""A command's output files: checked before any slow step, written together as one unit.

Two promises to a user who runs ``partition-lab partition net.relay -o plan.json``:

* an output never replaces one of the command's inputs (the model, its params, the target
  file, the profile cache), and an output that cannot be written (missing or read-only
  directory, a directory in the way) is reported before the model loads, not after the run;
* the files of one command are written as a unit: each is first written in full under a
  temporary name beside its final name, then all are renamed into place with Ctrl-C held
  back (and SIGTERM); if a rename fails, the files already replaced get their old contents
  back. A failure therefore leaves either every old file or every new one, and no temporary
  file. An interrupt that arrives once the renames have begun is reported after them, with the
  outputs they replaced (:func:`partition_lab._signals.committed`).

Temporary names carry the writer's pid; a run killed by SIGKILL leaves them, and the next write
of the same output removes those whose process is gone (:func:`partition_lab._io.stage`). A full
disk is one :class:`~partition_lab.errors.OutputSpaceError` naming the output.
"""

from __future__ import annotations

import glob
import os
import secrets
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from . import _signals
from ._io import stage
from .errors import PartitionLabError


class OutputError(PartitionLabError):
    """An output file cannot be written, or would replace one of the command's inputs."""


def check_outputs(outputs: Sequence[str | os.PathLike[str]],
                  inputs: Iterable[str | os.PathLike[str] | None] = ()) -> list[Path]:
    """Check that every output can be written and replaces no input; return them as Paths.

    Raises
    ------
    OutputError
        The directory is missing or not writable, the path is a directory, two outputs are
        the same file, or an output is (or links to) one of ``inputs``.
    """
    paths = [Path(output) for output in outputs]
    sources = [Path(source) for source in inputs if source]
    seen: dict[str, Path] = {}
    for path in paths:
        _check_writable(path)
        for source in sources:
            if _same_file(path, source):
                raise OutputError(f"cannot write {path}: it is the input {source}; the command "
                                  "would overwrite it. Choose another output name")
        key = os.path.realpath(path)
        if key in seen:
            raise OutputError(f"cannot write {path}: it is also the output {seen[key]}")
        seen[key] = path
    return paths


def write_together(files: Mapping[Path, bytes]) -> None:
    """Write every ``path -> data`` of ``files`` as one unit (see the module docstring)."""
    staged: dict[Path, Path] = {}
    try:
        for path, data in files.items():
            staged[path] = stage(path, data)
        with _signals.deferred():
            _commit(staged)
            _signals.record_committed([str(path) for path in staged])
    finally:
        for temporary in staged.values():
            temporary.unlink(missing_ok=True)


def _commit(staged: Mapping[Path, Path]) -> None:
    """Rename each staged file into place; on a failure, restore what was replaced."""
    done: list[tuple[Path, Path | None]] = []  # (final path, backup of its old contents)
    try:
        for path, temporary in staged.items():
            backup = _backup(path)
            try:
                os.replace(temporary, path)
            except BaseException:
                _discard(backup)  # this file was not replaced: its old contents are in place
                raise
            done.append((path, backup))
    except BaseException:
        for path, backup in reversed(done):
            _restore(path, backup)
        raise
    for _, backup in done:
        _discard(backup)


def _restore(path: Path, backup: Path | None) -> None:
    """Put ``path`` back as it was: its old contents, or no file if there was none."""
    try:
        if backup is None:
            path.unlink(missing_ok=True)
        else:
            os.replace(backup, path)
    except OSError:
        _discard(backup)  # the new file stays; at least no stray backup does


def _discard(backup: Path | None) -> None:
    if backup is not None:
        backup.unlink(missing_ok=True)


def _backup(path: Path) -> Path | None:
    """A hard link to the current file (None if there is none), to put it back on failure."""
    if not path.exists():
        return None
    backup = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.old")
    os.link(path, backup)
    return backup


def _check_writable(path: Path) -> None:
    parent = path.parent
    if path.is_dir():
        raise OutputError(f"cannot write {path}: it is a directory")
    if not parent.is_dir():
        raise OutputError(f"cannot write {path}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"cannot write {path}: directory {parent} is not writable")
    if path.exists() and not os.access(path, os.W_OK):
        raise OutputError(f"cannot write {path}: the file is read-only")


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist: compare what they would resolve to
        return os.path.realpath(a) == os.path.realpath(b)


def input_files(model_file: str | None, target: str | None = None,
                profile_cache: str | None = None) -> list[Path]:
    """The files a model command reads: the model file (and MXNet ``.params`` beside a symbol
    file), a target file and a profile cache; ``model_file`` None (a zoo model) and built-in
    targets have none."""
    files = []
    if model_file:
        path = Path(model_file)
        files.append(path)
        if path.name.endswith("-symbol.json") and path.parent.is_dir():
            stem = path.name.removesuffix("-symbol.json")
            files += sorted(path.parent.glob(f"{glob.escape(stem)}*.params"))
    if target and target.endswith((".toml", ".json")):
        files.append(Path(target))
    if profile_cache:
        files.append(Path(profile_cache))
    return files
