"""The ``cpu`` platform: the host alone, whose target runs every op (TVM's llvm backend)."""

from __future__ import annotations

from typing import Any

from ..core.platform import HOST, Platform, host_device
from ..errors import TargetSpecError
from .base import TargetSpec


def build(**options: Any) -> TargetSpec:
    """The host CPU as a target: every op is supported, with no anchors and no rules."""
    if options:
        raise TargetSpecError(f"cpu takes no options; got {', '.join(sorted(options))}")
    return TargetSpec(
        "cpu",
        description="the host CPU (TVM llvm): runs every op",
        version="",
        provenance="host",
        supports_all=True,
        supported_reason="runs on the host",
        factory=build,
    )


def platform(spec: TargetSpec) -> Platform:
    """The host alone."""
    return Platform(HOST, (host_device(target=spec),), description="the host CPU alone")
