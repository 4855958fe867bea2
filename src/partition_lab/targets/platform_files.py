"""Platforms from a user's words: a built-in name, a target or platform file, a TargetSpec.

:func:`get_platform` is what the edges (``partition_lab.api``, the command line) call once; every
function below them takes the :class:`~partition_lab.core.platform.Platform` it returns.

A platform file (TOML/JSON) lists ``[[devices]]``, each with a target and how it runs, and
``[[links]]`` between memory spaces (``examples/platforms/npu_dsp_cpu.toml``).
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..core.platform import AS_PREPARED, HOST_COLOUR, Device, Link, Platform, compiler_name
from ..errors import TargetSpecError
from .base import TargetSpec
from .devices import accelerator_platform, host
from .registry import builtin_platform, get_target

#: Colours of a platform file's devices that name none, in device order.
PALETTE = ("#76b900", "#4c9be8", "#e8a33d", "#b07cd8", "#d85c7c", "#3dbfb0")


def get_platform(target: str | os.PathLike[str] | TargetSpec | Platform,
                 **options: Any) -> Platform:
    """The platform a name, a file, a :class:`TargetSpec` or a :class:`Platform` stands for.

    ``tensorcore`` is three devices; ``neuron*``, target files and TargetSpecs are one
    accelerator + the host; ``cpu`` is the host alone; a platform file (``devices = [...]``) has
    any number of devices. ``options`` go to the accelerator's target (``precision="fp32"``).

    >>> get_platform("tensorcore").names
    ['tensorcore', 'cuda', 'cpu']
    >>> get_platform("neuron@2020").primary.compiler
    'neuron_2020'
    """
    if isinstance(target, Platform):
        if options:
            raise TargetSpecError("target options do not apply to a Platform object; "
                                  "build its devices with them")
        return target
    if isinstance(target, str):
        found = builtin_platform(target, **options)
        if found is not None:
            return found
    if isinstance(target, (str, os.PathLike)) and _is_platform_file(target):
        if options:
            raise TargetSpecError("target options do not apply to a platform file")
        return load_platform_file(target)
    spec = target if isinstance(target, TargetSpec) and not options else get_target(target, **options)
    return accelerator_platform(spec)


# ---------------------------------------------------------------------------- files
def _is_platform_file(path: str | os.PathLike[str]) -> bool:
    p = Path(path)
    if p.suffix.lower() not in (".toml", ".json") or not p.is_file():
        return False
    try:
        data = _read(p)
    except (OSError, ValueError, RecursionError):  # the target-file reader says what is wrong
        return False
    return isinstance(data, dict) and "devices" in data


def _read(path: Path) -> dict[str, Any]:
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() == ".json":
        return json.loads(text)
    return tomllib.loads(text)


def load_platform_file(path: str | os.PathLike[str]) -> Platform:
    """A platform from TOML/JSON: ``[[devices]]`` each with a target and how it runs.

    Each device table: ``name``, ``role`` (byoc | main | host), ``memory``, ``target`` (a built-in
    target name or a target file relative to this file; the host needs none), ``compiler``,
    ``precision``, ``preference``, ``colour``, ``profile`` (the host's too: its cost profile),
    ``matrix_engine``. ``[[links]]`` give
    a link profile per pair of memory spaces: ``memories = ["npu", "host"]``, ``profile``.
    """
    p = Path(path)
    where = os.fspath(path)
    try:
        data = _read(p)
    except (OSError, ValueError) as error:
        raise TargetSpecError(f"{where}: cannot read platform file: {error}") from None
    devices = []
    for i, entry in enumerate(_list(data, "devices", where)):
        if not isinstance(entry, Mapping) or "name" not in entry:
            raise TargetSpecError(f"{where}: devices[{i}] needs a name")
        name, role = str(entry["name"]), str(entry.get("role", "byoc"))
        if role not in ("byoc", "main", "host"):
            raise TargetSpecError(f"{where}: device {name!r}: role must be byoc, main or host")
        if role == "host":
            devices.append(replace(host(str(entry.get("precision", AS_PREPARED))),
                                   colour=str(entry.get("colour", HOST_COLOUR)),
                                   profile=entry.get("profile")))
            continue
        if "target" not in entry:
            raise TargetSpecError(f"{where}: device {name!r} needs a target (a name or a file)")
        ref = str(entry["target"])
        spec = get_target(p.parent / ref if (p.parent / ref).is_file() else ref)
        devices.append(Device(
            name, spec, role=role, memory=str(entry.get("memory", "accel")),
            compiler=(str(entry.get("compiler", compiler_name(name))) if role == "byoc" else None),
            precision=str(entry.get("precision", AS_PREPARED)),
            preference=int(entry.get("preference", 0)),
            colour=str(entry.get("colour", PALETTE[len(devices) % len(PALETTE)])),
            profile=entry.get("profile", spec.default_profile),
            matrix_engine=bool(entry.get("matrix_engine", True)),
            description=str(entry.get("description", spec.description))))
    links = tuple(Link(frozenset(map(str, lk["memories"])), lk.get("profile"))
                  for lk in _list(data, "links", where, required=False))
    return Platform(str(data.get("name", p.stem)), tuple(devices), links,
                    description=str(data.get("description", "")),
                    sources=tuple(map(str, data.get("sources", ()))))


def _list(data: Mapping[str, Any], key: str, where: str, required: bool = True) -> Sequence[Any]:
    value = data.get(key, [] if not required else None)
    if not isinstance(value, list) or (required and not value):
        raise TargetSpecError(f"{where}: {key} must be a non-empty list of tables")
    return value
