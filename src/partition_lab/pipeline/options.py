"""The pipeline's argument checks, the same for every IR: name lists, float16 hazards placed on
their device and node. (``Compiler`` names and the float32 fallback are platform options:
:mod:`partition_lab.targets.devices`.)"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from ..core.graph import OpGraph
from ..core.hazards import NumericHazard
from ..core.platform import Platform
from ..errors import ArgumentError


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
