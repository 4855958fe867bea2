"""Devices from targets: the host, one BYOC accelerator + the host, and BYOC ``Compiler`` names.

The pieces every built-in platform module and platform file builds on. A target (a
:class:`~.base.TargetSpec`) is one device's op rules; a platform is devices, so these functions
turn targets into devices.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import replace

from ..core.platform import (
    AS_PREPARED,
    COMPILER_NAME,
    HOST,
    Device,
    Platform,
    compiler_name,
    host_device,
)
from ..errors import PartitionLabError
from .base import TargetSpec
from .cpu import build as build_cpu


def host(precision: str = AS_PREPARED) -> Device:
    """The host CPU device, with the ``cpu`` target's rules (it runs every op)."""
    return host_device(precision, build_cpu())


def accelerator_platform(spec: TargetSpec, *, compiler: str | None = None) -> Platform:
    """One BYOC accelerator (its target ``spec``) plus the host: neuron, target files.

    ``spec`` named ``cpu`` gives the host alone.
    """
    if spec.name == HOST:
        return Platform(HOST, (host(),), description="the host CPU alone")
    accelerator = Device(spec.name, spec, role="byoc", memory="accel",
                         compiler=compiler or compiler_name(spec.name), preference=10,
                         colour="", profile=spec.default_profile,  # drawings hash the name
                         description=spec.description)
    return Platform(spec.name, (accelerator, host()),
                    description=f"{spec.name} + the host CPU", options=dict(spec.options))


def without_patterns(platform: Platform) -> Platform:
    """``platform`` with every device judging op by op (no pattern units): what support was
    before patterns, to compare plans with and without them."""
    devices = []
    for device in platform.devices:
        target = device.target
        if isinstance(target, TargetSpec) and target.patterns:
            target = target.extend(target.name, patterns=())
        devices.append(replace(device, target=target))
    return Platform(platform.name, tuple(devices), platform.links, platform.description,
                    platform.sources, platform.options)


def with_compiler(platform: Platform, compiler: str | Mapping[str, str] | None) -> Platform:
    """``platform`` with the ``Compiler`` name of its BYOC devices set.

    ``compiler`` is one name (for a platform with one BYOC device) or ``{device: name}``; None
    keeps the names derived from the devices (``neuron@2020`` -> ``neuron_2020``). A name must be
    an identifier: a codegen registers as ``relay.ext.<name>`` (``relax.ext.<name>``).

    Raises PartitionLabError for a bad name, an unknown or non-BYOC device, or one name for a
    platform with several BYOC devices.
    """
    if compiler is None:
        return platform
    byoc = [d.name for d in platform.devices if d.outlined]
    if isinstance(compiler, str):
        if not byoc:
            raise PartitionLabError(f"compiler {compiler!r}: platform {platform.name} has no "
                                    "BYOC device to name")
        if len(byoc) > 1:
            raise PartitionLabError(f"compiler {compiler!r}: platform {platform.name} has "
                                    f"{len(byoc)} BYOC devices ({', '.join(byoc)}); name each "
                                    "one (DEVICE=NAME on the command line, {device: name} in Python)")
        compiler = {byoc[0]: compiler}
    if not isinstance(compiler, Mapping):
        raise PartitionLabError(f"compiler must be a name or {{device: name}}, not "
                                f"{type(compiler).__name__}")
    for device, name in compiler.items():
        if device not in byoc:
            raise PartitionLabError(f"compiler for {device!r}: not a BYOC device of "
                                    f"{platform.name} ({', '.join(byoc) or 'none'})")
        if not isinstance(name, str) or not COMPILER_NAME.match(name):
            raise PartitionLabError(f"compiler name {name!r} is not an identifier (letters, "
                                    "digits and _; it becomes relay.ext.<name> or "
                                    "relax.ext.<name>)")
    devices = tuple(dataclasses.replace(d, compiler=compiler.get(d.name, d.compiler))
                    for d in platform.devices)
    return dataclasses.replace(platform, devices=devices)


def keep_fp32_on_overflow(platform: Platform) -> bool:
    """Whether a device of ``platform`` asks for ops whose constants overflow float16 to be kept
    in float32 (the target option ``keep_fp32_on_overflow``, tensorcore's)."""
    return any(bool(getattr(d.target, "options", {}).get("keep_fp32_on_overflow"))
               for d in platform.devices)
