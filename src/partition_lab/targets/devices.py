"""Devices from targets: the host, one BYOC accelerator + the host, and BYOC ``Compiler`` names.

The pieces every built-in platform module and platform file builds on. A target (a
:class:`~.base.TargetSpec`) is one device's op rules; a platform is devices, so these functions
turn targets into devices.
"""

from __future__ import annotations

from dataclasses import replace

from ..core.platform import AS_PREPARED, HOST, Device, Platform, compiler_name, host_device
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
