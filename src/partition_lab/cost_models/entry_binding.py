"""Which entry of a profile cache times each device of a platform (the profiled model's binding).

``{platform device name: cache device key}``: the one given, else the cache's recorded
``bindings[platform.name]`` (``partition-lab profile`` records them), else each host bound to the
only ``kind: "cpu"`` entry and each other device to the only other entry. A device left unbound
is priced by the model's fallback.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._audience import is_command_line
from ..core.platform import Platform
from ..errors import ProfileError


def bind_entries(platform: Platform, cache: Mapping[str, Any],
                 binding: Mapping[str, str] | None) -> dict[str, str]:
    """The binding of ``platform``'s devices to the entries of ``cache`` (a decoded profile
    cache); :class:`ProfileError` if it names entries or devices that do not exist, or if
    several entries could time one device and nothing says which."""
    devices = cache["devices"]
    if binding is None:
        binding = dict(cache.get("bindings", {}).get(platform.name, {}))
        if not binding:
            binding = _auto_bind(platform, devices)
    unknown = {d: k for d, k in binding.items() if k not in devices}
    if unknown:
        raise ProfileError(f"binding names cache entries that do not exist: {unknown}; "
                           f"the cache has {sorted(devices)}")
    names = set(platform.names)
    stray = sorted(set(binding) - names)
    if stray:
        raise ProfileError(f"binding names devices {stray} that platform "
                           f"{platform.name!r} does not have ({sorted(names)})")
    return dict(binding)


def _auto_bind(platform: Platform, devices: Mapping[str, Any]) -> dict[str, str]:
    cpus = [k for k, v in devices.items() if v.get("kind") == "cpu"]
    others = [k for k, v in devices.items() if v.get("kind") != "cpu"]
    out = {}
    for d in platform.devices:
        pool = cpus if d.is_host else others
        if len(pool) > 1:
            raise ProfileError(
                f"the cache has several {'cpu' if d.is_host else 'accelerator'} entries "
                f"({', '.join(pool)}); {_binding_hint(platform.name, d.name)}")
        if pool:
            out[d.name] = pool[0]
    return out


def _binding_hint(platform: str, device: str) -> str:
    """How to say which cache entry a device is timed by: ``binding=`` in Python; on the
    command line, by profiling the model for the platform, which records its bindings."""
    if is_command_line():
        return (f"run `partition-lab profile MODEL --platform {platform} --cache FILE` once on "
                f"the device that runs {device!r}: it records which entry each device uses")
    return f"pass binding={{device: key}} for {device!r}"
