"""The pipeline's argument checks and platform options, the same for every IR: name lists,
``Compiler`` names, float16 hazards placed on their device and node."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from ..core.graph import OpGraph
from ..core.hazards import NumericHazard
from ..core.platform import COMPILER_NAME, Platform
from ..errors import ArgumentError, PartitionLabError


def name_list(value: object, what: str, example: str) -> tuple[str, ...]:
    """``value`` as a tuple of names; :class:`ArgumentError` for a lone string (which would be
    read letter by letter) or for items that are not strings."""
    if isinstance(value, str | bytes):
        raise ArgumentError(f"{what} must be a list of names, not the string {value!r} (read "
                            f"as its letters); pass [{value!r}]")
    try:
        names = tuple(value)  # type: ignore[call-overload]
    except TypeError:
        raise ArgumentError(f"{what} must be a list of names such as {example}, not "
                            f"{type(value).__name__}") from None
    wrong = [name for name in names if not isinstance(name, str)]
    if wrong:
        raise ArgumentError(f"{what} must hold names (strings), not {wrong[0]!r}; e.g. {example}")
    return names


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


def placed_hazards(hazards: Iterable[NumericHazard], graph: OpGraph,
                   platform: Platform) -> tuple[NumericHazard, ...]:
    """``hazards`` with the device whose precision asked for their dtype (the most preferred
    one that converts to it) and their node in ``graph`` (matched by source name and op)."""
    nodes = {(n.source_name, n.op): n.id for n in reversed(list(graph))}
    placed = []
    for hazard in hazards:
        step = f"mixed_precision:{hazard.dtype}"
        device = next((d.name for d in platform.devices if step in d.target.prepare_steps()),
                      platform.primary.name)
        placed.append(dataclasses.replace(hazard, device=device,
                                          node=nodes.get((hazard.name or None, hazard.op))))
    return tuple(placed)
