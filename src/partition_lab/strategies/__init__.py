"""Partitioning strategies, one module each, one registry.

>>> from partition_lab.strategies import available_strategies, get_strategy
>>> available_strategies()
['greedy', 'min_size', 'no_mac', 'cost', 'optimal', 'all_cpu', 'all_accel']
>>> get_strategy("min_size", min_ops="5").min_ops
5

Options are the strategy's dataclass fields; :func:`option_fields` lists them for the command
line (``--option key=value``), where values arrive as strings and are converted here.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

from ..errors import PartitionLabError, UnknownStrategyError
from .all_accel import AllAccel, NotApplicableError
from .all_cpu import AllCpu
from .base import Strategy
from .cost import CostBased
from .greedy import Greedy
from .min_size import MinSize
from .no_mac import NoMac
from .optimal import Optimal

__all__ = [
    "AllAccel", "AllCpu", "CostBased", "Greedy", "MinSize", "NoMac", "NotApplicableError",
    "Optimal", "Strategy", "available_strategies", "default_strategy", "get_strategy",
    "option_fields",
]

_REGISTRY: dict[str, type[Strategy]] = {
    cls.name: cls for cls in (Greedy, MinSize, NoMac, CostBased, Optimal, AllCpu, AllAccel)
}


def default_strategy(*, profiled: bool) -> str:
    """The strategy used when none is named: ``"cost"`` when the costs come from a profile
    of the user's devices, ``"greedy"`` (TVM's rule: every supported op on its device) when
    they come from the roofline.

    Why: priced from measurements, ``cost`` left greedy's plan only for plans that measured
    faster (never slower on 30 model x platform rows, three H200 instances, and within 5% of
    the fastest strategy plan on 29 of them; docs/evidence/results/gpu_profiled.md). With the
    roofline's assumed figures its picks have measured slower than greedy's, so there the
    default stays TVM's rule.
    """
    return "cost" if profiled else "greedy"


def available_strategies() -> list[str]:
    """Names of the registered strategies, in a stable order."""
    return list(_REGISTRY)


def get_strategy(name: str, **options: Any) -> Strategy:
    """The strategy ``name`` configured with ``options`` (strings are converted to the field type).

    Raises
    ------
    UnknownStrategyError
        No strategy has that name; the message lists the known ones.
    PartitionLabError
        An option the strategy does not have, or a value of the wrong type or range; the message
        names the option.
    """
    cls = _REGISTRY.get(name)
    if cls is None:
        raise UnknownStrategyError(
            f"unknown strategy {name!r}; available: {', '.join(available_strategies())}")
    types = typing.get_type_hints(cls)
    known = {f.name for f in dataclasses.fields(cls)}
    values = {}
    for key, value in options.items():
        if key not in known:
            listed = ", ".join(sorted(known)) or "none"
            raise PartitionLabError(
                f"strategy {name!r} has no option {key!r}; its options: {listed}")
        values[key] = _convert(name, key, value, types[key])
    strategy = cls(**values)
    strategy.check_options()
    return strategy


def option_fields(name: str) -> list[tuple[str, type, Any, str]]:
    """``(option, type, default, help)`` for each option of strategy ``name``."""
    cls = _REGISTRY.get(name)
    if cls is None:
        raise UnknownStrategyError(
            f"unknown strategy {name!r}; available: {', '.join(available_strategies())}")
    types = typing.get_type_hints(cls)
    return [(f.name, types[f.name], f.default, str(f.metadata.get("help", "")))
            for f in dataclasses.fields(cls)]


def _convert(strategy: str, key: str, value: Any, kind: Any) -> Any:
    problem = f"strategy {strategy!r}: option {key}={value!r} must be"
    if kind is bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off"):
            return False
        raise PartitionLabError(f"{problem} true or false")
    if kind in (int, float):
        if isinstance(value, bool):
            raise PartitionLabError(f"{problem} a number")
        try:
            converted = kind(value)
        except (TypeError, ValueError):
            raise PartitionLabError(f"{problem} {'an integer' if kind is int else 'a number'}") \
                from None
        if kind is int and isinstance(value, float) and value != converted:
            raise PartitionLabError(f"{problem} an integer")
        return converted
    return value
