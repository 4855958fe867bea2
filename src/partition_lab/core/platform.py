"""Platforms: the devices a plan can put an op on, their memory spaces and the links between them.

A :class:`Platform` is data. Each :class:`Device` has its own support rules (a
:class:`~partition_lab.targets.TargetSpec`), a memory space, a way its regions are compiled (a BYOC
``Compiler`` name, or inline in the module's main target), a precision policy, a colour for
drawings, a hardware profile for the cost model and an explicit ``preference`` (which device an op
goes to when several support it; not list order). The host device is always named ``"cpu"`` and
runs every op.

Built-in platforms (a target name names a platform, so every existing call keeps working):

* ``tensorcore``: Tensor Core regions (BYOC ``tensorcore``) + the GPU's CUDA cores (TVM's ``cuda``
  main target, same memory) + the host CPU. An op that misses the Tensor Core rules still runs on
  the GPU; only what the GPU cannot run goes to the host. Host islands compute in float32.
* ``neuron``, ``neuron@<release>``: one NeuronCore (BYOC) + the host CPU.
* ``cpu``: the host alone.
* a TOML/JSON platform file with any number of devices (``examples/platforms/npu_dsp_cpu.toml``),
  or a target file / :class:`TargetSpec` (one accelerator + the host).

Tensors move between *domains*: a domain is (memory space, precision). Two devices of one domain
share tensors for free; a tensor that leaves its domain is copied (different memory) and/or cast
(different precision) once per destination domain.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from ..errors import TargetSpecError

HOST = "cpu"  #: the reserved name of the host device (it runs every op)
HOST_MEMORY = "host"
AS_PREPARED = "as-prepared"  #: precision policy: compute in the module's own dtypes
PLATFORM_SCHEMA = "partition_lab.platform/1"

Role = Literal["byoc", "main", "host"]

#: Colours for drawings, by role, then a palette for further devices of a role.
_PALETTE = ("#76b900", "#4c9be8", "#e8a33d", "#b07cd8", "#d85c7c", "#3dbfb0")
_ROLE_COLOURS = {"byoc": "#76b900", "main": "#4c9be8", "host": "#d9d9d9"}


@dataclass(frozen=True)
class Device:
    """One device of a platform.

    ``role``: ``"byoc"`` regions are outlined as functions with ``Compiler=compiler``; ``"main"``
    regions stay inline in the module's main target (a GPU's CUDA cores); ``"host"`` is the CPU.
    ``precision``: :data:`AS_PREPARED` (the prepared module's dtypes) or ``"float32"`` (the device
    computes in float32; casts at its boundary are priced and run by the executors).
    ``profile``: the hardware profile name the roofline cost model uses; ``matrix_engine`` False
    means matrix ops run on the vector units (CUDA cores, not Tensor Cores).
    """

    name: str
    spec: Any  # TargetSpec; Any here to keep this module free of the targets package
    role: Role = "byoc"
    memory: str = "accel"
    compiler: str | None = None
    precision: str = AS_PREPARED
    preference: int = 0
    colour: str = ""
    profile: str | None = None
    matrix_engine: bool = True
    description: str = ""

    @property
    def domain(self) -> tuple[str, str]:
        """Where this device's tensors live: (memory space, precision)."""
        return self.memory, self.precision

    @property
    def is_host(self) -> bool:
        return self.role == "host"

    @property
    def outlined(self) -> bool:
        """Whether its regions become ``Compiler`` functions (BYOC)."""
        return self.role == "byoc"


@dataclass(frozen=True)
class Link:
    """A copy path between two memory spaces (``profile`` is a cost-model link profile name)."""

    memories: frozenset[str]
    profile: str | None = None  # None: the accelerator profile's own host link


@dataclass(frozen=True)
class Platform:
    """Devices (most preferred first), links between memory spaces, and the host."""

    name: str
    devices: tuple[Device, ...]
    links: tuple[Link, ...] = ()
    description: str = ""
    sources: tuple[str, ...] = ()
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        names = [d.name for d in self.devices]
        if len(set(names)) != len(names):
            raise TargetSpecError(f"platform {self.name!r}: device names repeat: {names}")
        hosts = [d for d in self.devices if d.is_host]
        if len(hosts) != 1 or hosts[0].name != HOST:
            raise TargetSpecError(
                f"platform {self.name!r} needs exactly one host device named {HOST!r}")
        for d in self.devices:
            if d.name == HOST and not d.is_host:
                raise TargetSpecError(f"platform {self.name!r}: the name {HOST!r} is reserved "
                                      "for the host device")
        mains = [d for d in self.devices if d.role == "main"]
        if len(mains) > 1:
            raise TargetSpecError(f"platform {self.name!r}: at most one device may be the "
                                  f"main target, got {[d.name for d in mains]}")
        ordered = tuple(sorted(self.devices, key=lambda d: (-d.preference, d.is_host)))
        object.__setattr__(self, "devices", ordered)
        object.__setattr__(self, "_index", {d.name: i for i, d in enumerate(ordered)})

    # ------------------------------------------------------------------ lookups
    @property
    def host(self) -> Device:
        return self.devices[self.index(HOST)]

    @property
    def host_index(self) -> int:
        return self.index(HOST)

    @property
    def main(self) -> Device:
        """The device that runs inline code: the main target if any, else the host."""
        return next((d for d in self.devices if d.role == "main"), self.host)

    @property
    def accelerators(self) -> tuple[Device, ...]:
        return tuple(d for d in self.devices if not d.is_host)

    @property
    def primary(self) -> Device:
        """The most preferred non-host device (the host on the ``cpu`` platform)."""
        return self.accelerators[0] if self.accelerators else self.host

    @property
    def names(self) -> list[str]:
        return [d.name for d in self.devices]

    def index(self, name: str) -> int:
        try:
            return self._index[name]  # type: ignore[attr-defined]
        except KeyError:
            raise TargetSpecError(f"platform {self.name!r} has no device {name!r}; its devices: "
                                  f"{', '.join(self.names)}") from None

    def device(self, name: str) -> Device:
        return self.devices[self.index(name)]

    def domains(self) -> list[tuple[str, str]]:
        """Distinct (memory, precision) domains, in device order."""
        return list(dict.fromkeys(d.domain for d in self.devices))

    def prepare_steps(self) -> tuple[str, ...]:
        """The Relay preparation steps every device asks for, in order, once each."""
        steps: list[str] = []
        for d in self.devices:
            for step in d.spec.prepare_steps():
                if step not in steps:
                    steps.append(step)
        return tuple(steps)

    def describe(self) -> str:
        lines = [f"platform {self.name}: {self.description}".rstrip(": ")]
        for d in self.devices:
            how = (f"Compiler={d.compiler!r}" if d.outlined else
                   "main target (inline)" if d.role == "main" else "host")
            lines.append(f"  {d.name:<14} {d.role:<5} memory={d.memory:<6} precision="
                         f"{d.precision:<11} preference={d.preference:<3} {how}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"Platform({self.name!r}, devices={self.names})"


# ---------------------------------------------------------------------------- building
def compiler_name(target_name: str) -> str:
    """A BYOC ``Compiler`` name from a target name (``neuron@2020`` -> ``neuron_2020``)."""
    return "".join(c if c.isalnum() or c == "_" else "_" for c in target_name)


def host_device(precision: str = AS_PREPARED) -> Device:
    from ..targets import get_target

    return Device(HOST, get_target("cpu"), role="host", memory=HOST_MEMORY, precision=precision,
                  preference=-1000, colour=_ROLE_COLOURS["host"], profile=None,
                  description="the host CPU (TVM llvm)")


def accelerator_platform(spec: Any, *, compiler: str | None = None) -> Platform:
    """One BYOC accelerator (a TargetSpec) plus the host: neuron, user target files."""
    if spec.name == HOST:
        return Platform(HOST, (host_device(),), description="the host CPU alone")
    accel = Device(spec.name, spec, role="byoc", memory="accel",
                   compiler=compiler or compiler_name(spec.name), preference=10,
                   colour="", profile=spec.default_profile,  # drawings hash the name
                   description=spec.description)
    return Platform(spec.name, (accel, host_device()),
                    description=f"{spec.name} + the host CPU", options=dict(spec.options))


def tensorcore_platform(**options: Any) -> Platform:
    """Tensor Core regions + CUDA cores (main target, same GPU memory) + the host in float32."""
    from ..targets import get_target

    spec = get_target("tensorcore", **options)
    cuda_spec = _cuda_cores_spec(spec)
    tensorcore = Device("tensorcore", spec, role="byoc", memory="gpu", compiler="tensorcore",
                        preference=20, colour=_ROLE_COLOURS["byoc"], profile=spec.default_profile,
                        description="TVM's CUDA Tensor Core schedules (BYOC regions)")
    cuda = Device("cuda", cuda_spec, role="main", memory="gpu", preference=10,
                  colour=_ROLE_COLOURS["main"], profile=spec.default_profile, matrix_engine=False,
                  description="the GPU's CUDA cores (TVM's cuda main target)")
    return Platform("tensorcore", (tensorcore, cuda, host_device("float32")),
                    description="NVIDIA GPU: Tensor Core regions, CUDA cores, host CPU",
                    options=dict(spec.options))


def _cuda_cores_spec(tensorcore_spec: Any) -> Any:
    from ..targets.base import TargetSpec

    return TargetSpec(
        "cuda", description="the GPU's CUDA cores: TVM's cuda target runs every Relay op",
        provenance="TVM cuda target (topi CUDA schedules)", supports_all=True,
        supported_reason="runs on the GPU's CUDA cores (TVM cuda target)",
        prepare_steps=tensorcore_spec.prepare_steps(),
        default_profile=tensorcore_spec.default_profile)


def get_platform(target: Any, **options: Any) -> Platform:
    """The platform a name, a file, a :class:`TargetSpec` or a :class:`Platform` stands for.

    ``tensorcore`` is three devices; ``neuron*``, target files and TargetSpecs are one
    accelerator + the host; ``cpu`` is the host alone; a platform file (``devices = [...]``) has
    any number of devices. ``options`` go to the accelerator's target (``precision="fp32"``).

    >>> get_platform("tensorcore").names
    ['tensorcore', 'cuda', 'cpu']
    >>> get_platform("neuron@2020").primary.compiler
    'neuron_2020'
    """
    from ..targets import get_target
    from ..targets.base import TargetSpec

    if isinstance(target, Platform):
        if options:
            raise TargetSpecError("target options do not apply to a Platform object; "
                                  "build its devices with them")
        return target
    if isinstance(target, str) and (target == "tensorcore" or target.startswith("tensorcore?")):
        return tensorcore_platform(**options)
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
    except (OSError, ValueError):
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
    from ..targets import get_target

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
            devices.append(replace(host_device(str(entry.get("precision", AS_PREPARED))),
                                   colour=str(entry.get("colour", _ROLE_COLOURS["host"])),
                                   profile=entry.get("profile")))
            continue
        if "target" not in entry:
            raise TargetSpecError(f"{where}: device {name!r} needs a target (a name or a file)")
        ref = str(entry["target"])
        spec = get_target(p.parent / ref if (p.parent / ref).is_file() else ref)
        if spec.name != name:
            spec = spec.renamed(name) if hasattr(spec, "renamed") else spec
        devices.append(Device(
            name, spec, role=role, memory=str(entry.get("memory", "accel")),
            compiler=(str(entry.get("compiler", compiler_name(name))) if role == "byoc" else None),
            precision=str(entry.get("precision", AS_PREPARED)),
            preference=int(entry.get("preference", 0)),
            colour=str(entry.get("colour", _PALETTE[len(devices) % len(_PALETTE)])),
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
