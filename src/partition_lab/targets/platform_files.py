"""Platforms from a user's words: a built-in name, a target or platform file, a TargetSpec.

:func:`get_platform` is what the edges (``partition_lab.api``, the command line) call once; every
function below them takes the :class:`~partition_lab.core.platform.Platform` it returns.

A platform file (TOML/JSON) lists ``[[devices]]``, each with a target and how it runs, and
``[[links]]`` between memory spaces (the bundled ``example:npu_dsp_cpu``,
:mod:`partition_lab.targets.bundled`).
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..core.platform import (
    AS_PREPARED,
    COMPILER_NAME,
    HOST,
    HOST_COLOUR,
    PRECISIONS,
    Device,
    Link,
    Platform,
    compiler_name,
)
from ..errors import PartitionLabError, TargetSpecError
from .base import TargetSpec
from .bundled import resolve as resolve_example
from .devices import accelerator_platform, host
from .op_names import check_device_name
from .registry import builtin_platform, get_target
from .schema import Fields

#: Colours of a platform file's devices that name none, in device order.
PALETTE = ("#76b900", "#4c9be8", "#e8a33d", "#b07cd8", "#d85c7c", "#3dbfb0")


def get_platform(target: str | os.PathLike[str] | TargetSpec | Platform,
                 **options: Any) -> Platform:
    """The platform a name, a file, a :class:`TargetSpec` or a :class:`Platform` stands for.

    ``tensorcore`` is three devices; ``neuron*``, target files and TargetSpecs are one
    accelerator + the host; ``cpu`` is the host alone; a platform file (``devices = [...]``) has
    any number of devices; ``example:NAME`` is a bundled example file (a platform or a target).
    ``options`` go to the accelerator's target (``precision="fp32"``).

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
    target = resolve_example(target)  # example:NAME -> its bundled file
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
    except RecursionError:
        return True  # load_platform_file says why it cannot be read, in one line
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and "devices" in data


def _read(path: Path) -> dict[str, Any]:
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() == ".json":
        return json.loads(text)
    return tomllib.loads(text)


PLATFORM_KEYS = ("name", "description", "sources", "devices", "links")
DEVICE_KEYS = ("name", "role", "memory", "target", "compiler", "precision", "preference",
               "colour", "profile", "matrix_engine", "description")
#: What a host table may say: the host runs every op in host memory, whatever else it is told.
HOST_KEYS = ("name", "role", "precision", "colour", "profile")
LINK_KEYS = ("memories", "profile")
ROLES = ("byoc", "main", "host")
#: Preferences order devices; beyond this they are a typo (and the host sits at -1000).
PREFERENCE_LIMIT = 999
_COLOUR = re.compile(r"^(#[0-9A-Fa-f]{6}|[A-Za-z]+)$")


def load_platform_file(path: str | os.PathLike[str]) -> Platform:
    """A platform from TOML/JSON: ``[[devices]]`` each with a target and how it runs.

    Each device table: ``name``, ``role`` (byoc | main | host), ``memory``, ``target`` (a built-in
    target name or a target file relative to this file; the host needs none), ``compiler``
    (byoc only; an identifier), ``precision`` (``as-prepared`` or ``float32``), ``preference``
    (an integer), ``colour`` (``#rrggbb`` or a colour name), ``profile`` (a hardware profile
    name or file; the host's too: its cost profile), ``matrix_engine`` (true or false). The host
    is named ``cpu`` and takes only ``name``, ``role``, ``precision``, ``colour`` and
    ``profile``. ``[[links]]`` give a link profile per pair of memory spaces: ``memories =
    ["npu", "host"]``, ``profile`` (one with a ``[host_link]``).

    Raises
    ------
    TargetSpecError
        For anything malformed: one line naming the file, the field and what it must be.
    """
    p = Path(path)
    where = os.fspath(path)
    try:
        data = _read(p)
    except (OSError, ValueError) as error:
        raise TargetSpecError(f"{where}: cannot read platform file: {error}") from None
    except RecursionError:  # the parsers recurse once per nested array or table
        raise TargetSpecError(f"{where}: cannot read: arrays or tables nest too deeply (a target "
                              "or platform file needs a few levels)") from None
    top = Fields(data, where, PLATFORM_KEYS)
    devices: list[Device] = []
    for i, entry in enumerate(_list(data, "devices", where)):
        devices.append(_device(Fields(entry, f"{where}: devices[{i}]", DEVICE_KEYS), p,
                               len(devices)))
    memories = {d.memory for d in devices}
    links = tuple(_link(Fields(entry, f"{where}: links[{i}]", LINK_KEYS), memories)
                  for i, entry in enumerate(_list(data, "links", where, required=False)))
    name = top.string("name", p.stem)
    if not name.strip():
        raise TargetSpecError(f"{top.place('name')}: a platform needs a non-empty name")
    try:
        return Platform(name, tuple(devices), links, description=top.string("description", ""),
                        sources=top.strings("sources", ()))
    except TargetSpecError as error:  # the device set as a whole (one host, names repeat, ...)
        raise TargetSpecError(f"{where}: {error}") from None


def _device(f: Fields, path: Path, index: int) -> Device:
    """One ``[[devices]]`` table, every field typed and checked."""
    name, role = f.string("name"), f.string("role", "byoc")
    if role not in ROLES:
        raise TargetSpecError(f"{f.place('role')}: must be byoc, main or host, got {role!r}")
    precision = f.string("precision", AS_PREPARED)
    if precision not in PRECISIONS:
        raise TargetSpecError(f"{f.place('precision')}: must be one of {', '.join(PRECISIONS)}, "
                              f"got {precision!r}")
    colour = f.string("colour", HOST_COLOUR if role == "host" else PALETTE[index % len(PALETTE)])
    if not _COLOUR.match(colour):
        raise TargetSpecError(f"{f.place('colour')}: must be #rrggbb or a colour name, got "
                              f"{colour!r}")
    profile = _profile(f, "profile")
    if role == "host":
        return _host(f, name, precision, colour, profile)
    if not name.strip():
        raise TargetSpecError(f"{f.place('name')}: a device needs a non-empty name")
    check_device_name(name, f.place("name"))
    spec = _target(f, path)
    return Device(name, spec, role=role, memory=_memory(f), compiler=_compiler(f, name, role),
                  precision=precision, preference=_preference(f), colour=colour,
                  profile=profile if profile is not None else spec.default_profile,
                  matrix_engine=_boolean(f, "matrix_engine", True),
                  description=f.string("description", spec.description))


def _host(f: Fields, name: str, precision: str, colour: str, profile: str | None) -> Device:
    if name != HOST:
        raise TargetSpecError(f"{f.place('name')}: the host device is always named {HOST!r}, "
                              f"got {name!r}; rename it")
    ignored = sorted(set(f.data) - set(HOST_KEYS))
    if ignored:
        raise TargetSpecError(f"{f.place(ignored[0])}: the host takes only "
                              f"{', '.join(HOST_KEYS)} (it runs every op in host memory); "
                              "remove the key")
    return replace(host(precision), colour=colour, profile=profile)


def _target(f: Fields, path: Path) -> TargetSpec:
    if not f.has("target"):
        raise TargetSpecError(f"{f.where}: device {f.data['name']!r} needs a target (a built-in "
                              "target name or a target file)")
    ref = f.string("target")
    try:
        return get_target(path.parent / ref if (path.parent / ref).is_file() else ref)
    except PartitionLabError as error:
        raise TargetSpecError(f"{f.place('target')}: {error}") from None


def _memory(f: Fields) -> str:
    memory = f.string("memory", "accel")
    if not memory.strip():
        raise TargetSpecError(f"{f.place('memory')}: must be a non-empty memory space name")
    return memory


def _compiler(f: Fields, name: str, role: str) -> str | None:
    """The BYOC ``Compiler`` name: the same rule as ``--compiler`` (an identifier)."""
    if role != "byoc":
        if f.has("compiler"):
            raise TargetSpecError(f"{f.place('compiler')}: only a byoc device has a compiler "
                                  f"(this one is {role}); remove the key")
        return None
    compiler = f.string("compiler", compiler_name(name))
    if not COMPILER_NAME.match(compiler):
        derived = "" if f.has("compiler") else " (made from the device name; set compiler)"
        raise TargetSpecError(f"{f.place('compiler')}: {compiler!r}{derived} is not an "
                              "identifier (letters, digits and _, not starting with a digit; "
                              "it becomes relay.ext.<name>)")
    return compiler


def _preference(f: Fields) -> int:
    value = f.data.get("preference", 0)
    if isinstance(value, bool) or not isinstance(value, int) or abs(value) > PREFERENCE_LIMIT:
        raise TargetSpecError(f"{f.place('preference')}: must be an integer from "
                              f"-{PREFERENCE_LIMIT} to {PREFERENCE_LIMIT}, got {value!r}")
    return value


def _boolean(f: Fields, key: str, default: bool) -> bool:
    value = f.data.get(key, default)
    if not isinstance(value, bool):  # "false" is a string, and true in Python
        raise TargetSpecError(f"{f.place(key)}: must be true or false (unquoted), got {value!r}")
    return value


def _profile(f: Fields, key: str) -> str | None:
    """A hardware profile name or file, checked now: a bad one would fail after the model load."""
    name = f.string(key, None)
    if name is None:
        return None
    from ..cost_models.profiles import load_profile  # the cost models build on targets

    try:
        load_profile(name)
    except PartitionLabError as error:
        raise TargetSpecError(f"{f.place(key)}: {error}") from None
    return name


def _link(f: Fields, memories: set[str]) -> Link:
    """One ``[[links]]`` table: two memory spaces of the platform's devices and a profile."""
    pair = f.data.get("memories")
    if (not isinstance(pair, list) or len(pair) != 2 or len(set(map(str, pair))) != 2
            or not all(isinstance(m, str) and m in memories for m in pair)):
        raise TargetSpecError(f"{f.place('memories')}: must be a list of two different memory "
                              f"spaces of the devices ({', '.join(sorted(memories))}), got "
                              f"{pair!r}")
    profile = _profile(f, "profile")
    if profile is not None:
        from ..cost_models.profiles import load_profile

        if load_profile(profile).host_link is None:
            raise TargetSpecError(f"{f.place('profile')}: profile {profile!r} has no "
                                  "[host_link] to price this link; name an accelerator profile")
    return Link(frozenset(pair), profile)


def _list(data: Mapping[str, Any], key: str, where: str, required: bool = True) -> Sequence[Any]:
    value = data.get(key, [] if not required else None)
    if not isinstance(value, list) or (required and not value):
        raise TargetSpecError(f"{where}: {key} must be a non-empty list of tables")
    return value
