"""Platforms: the devices a plan can put an op on, their memory spaces and the links between them.

A :class:`Platform` is data. Each :class:`Device` has its own op rules (a
:class:`~partition_lab.core.verdicts.Target`), a memory space, a way its regions are compiled (a
BYOC ``Compiler`` name, or inline in the module's main target), a precision policy, a colour for
drawings, a hardware profile for the cost model and an explicit ``preference`` (which device an op
goes to when several support it; not list order). The host device is always named ``"cpu"``
(:data:`HOST`) and runs every op. Platforms are built from names and files by
:func:`partition_lab.targets.get_platform`.

Tensors move between *domains*: a domain is (memory space, precision). Two devices of one domain
share tensors for free; a tensor that leaves its domain is copied (different memory) and/or cast
(different precision) once per destination domain.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import TargetSpecError
from .pattern_library import PATTERNS
from .patterns import Pattern
from .verdicts import AcceptsAll, Target

HOST = "cpu"  #: the reserved name of the host device (it runs every op)
HOST_MEMORY = "host"
HOST_COLOUR = "#d9d9d9"
AS_PREPARED = "as-prepared"  #: precision policy: compute in the module's own dtypes
#: The precision policies a device may have: the executors and profilers know these two.
PRECISIONS = (AS_PREPARED, "float32")
#: What a BYOC ``Compiler`` name must look like: it becomes the registry key
#: ``relay.ext.<name>`` and part of C symbols, and is written unquoted into exports.
COMPILER_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

Role = Literal["byoc", "main", "host"]

#: IR preparation steps a device may ask for (its target's ``prepare_steps()``), run by the IR
#: adapter before support is judged; each adapter implements every one of them.
PREPARE_STEPS: Mapping[str, str] = {
    "convert_layout:NHWC": "ConvertLayout of nn.conv2d to NHWC data / HWIO kernel",
    "mixed_precision:float16": "ToMixedPrecision to float16",
}


@dataclass(frozen=True)
class Device:
    """One device of a platform.

    ``target``: the device's op rules. ``role``: ``"byoc"`` regions are outlined as functions with ``Compiler=compiler``; ``"main"``
    regions stay inline in the module's main target (a GPU's CUDA cores); ``"host"`` is the CPU.
    ``precision``: :data:`AS_PREPARED` (the prepared module's dtypes) or ``"float32"`` (the device
    computes in float32; casts at its boundary are priced and run by the executors).
    ``profile``: the hardware profile name the roofline cost model uses; ``matrix_engine`` False
    means matrix ops run on the vector units (CUDA cores, not Tensor Cores).
    """

    name: str
    target: Target
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
            for step in d.target.prepare_steps():
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


def host_device(precision: str = AS_PREPARED, target: Target | None = None) -> Device:
    """The host CPU device (``target``: its rules, by default one that takes every op)."""
    return Device(HOST, target or AcceptsAll(HOST, "the host CPU (TVM llvm): runs every op",
                                             "runs on the host"),
                  role="host", memory=HOST_MEMORY, precision=precision, preference=-1000,
                  colour=HOST_COLOUR, profile=None, description="the host CPU (TVM llvm)")


def platform_from_records(name: str, records: Sequence[Mapping[str, Any]]) -> Platform:
    """A platform rebuilt from the device records a plan file or module attribute stores.

    Its devices carry no rules (every op allowed): their verdicts come from the same record.
    """
    devices = []
    for entry in records:
        if entry["role"] == "host":
            devices.append(host_device(entry.get("precision", AS_PREPARED)))
            continue
        target = AcceptsAll(entry["name"], patterns=frozenset(entry.get("patterns", ())))
        devices.append(Device(entry["name"], target, role=entry["role"],
                              memory=entry["memory"], compiler=entry.get("compiler"),
                              precision=entry["precision"], preference=entry["preference"],
                              colour=entry.get("colour", ""), profile=entry.get("profile"),
                              matrix_engine=entry.get("matrix_engine", True)))
    return Platform(name, tuple(devices))


def device_patterns(device: Device) -> dict[str, list[str]]:
    """``{"patterns": [...]}`` for a device record whose target judges patterns whole (so that a
    plan read back prices their units as the plan's maker did); ``{}`` otherwise."""
    patterns = sorted(getattr(device.target, "patterns", ()))
    return {"patterns": patterns} if patterns else {}


def pattern_library(platform: Platform) -> tuple[Pattern, ...]:
    """What to look for in a graph partitioned on ``platform``: the built-in patterns and those
    its targets define (a target file's ``custom_patterns``), each once."""
    custom = [p for d in platform.devices for p in getattr(d.target, "custom_patterns", ())]
    return (*PATTERNS, *dict.fromkeys(custom))


def compiler_name(device_name: str) -> str:
    """A BYOC ``Compiler`` name from a device name (``neuron@2020`` -> ``neuron_2020``)."""
    return "".join(c if c.isalnum() or c == "_" else "_" for c in device_name)


def one_accelerator_platform(name: str) -> Platform:
    """An accelerator ``name`` that takes every op + the host (``cpu``: the host alone): the
    platform of the older one-accelerator records (plan schema ``plan/1``, a verdict list),
    whose verdicts come from the record, and of synthetic tests."""
    if name == HOST:
        return Platform(HOST, (host_device(),))
    return Platform(name, (Device(name, AcceptsAll(name), role="byoc", memory="accel",
                                  preference=10, compiler=compiler_name(name)), host_device()))
