"""Finding targets by name: built-ins, targets registered from Python, and target files."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from ..errors import TargetSpecError, UnknownTargetError
from . import cpu, neuron, tensorcore
from .base import TargetSpec
from .user import load_target_file, looks_like_target_file

_BUILTIN: dict[str, Callable[..., TargetSpec]] = {
    "cpu": cpu.build,
    "neuron": neuron.build,
    "neuron@2020": lambda **options: neuron.build(**{"version": "2020", **options}),
    "tensorcore": tensorcore.build,
}
_REGISTERED: dict[str, TargetSpec] = {}


def available_targets() -> list[str]:
    """Names ``get_target`` accepts (``neuron@<release>`` also works for any neuron-cc release)."""
    return sorted({*_BUILTIN, *_REGISTERED})


def register_target(spec: TargetSpec, *, replace: bool = False) -> None:
    """Make ``spec`` available to ``get_target(spec.name)`` (and so to the CLI and ``partition``).

    Raises TargetSpecError if the name is taken and ``replace`` is False.
    """
    if not isinstance(spec, TargetSpec):
        raise TargetSpecError(f"register_target needs a TargetSpec, got {type(spec).__name__}")
    if not replace and (spec.name in _BUILTIN or spec.name in _REGISTERED):
        raise TargetSpecError(f"a target named {spec.name!r} exists; pass replace=True to replace it")
    _REGISTERED[spec.name] = spec


def unregister_target(name: str) -> None:
    """Forget a target added with :func:`register_target` (built-ins stay)."""
    _REGISTERED.pop(name, None)


def get_target(target: str | os.PathLike[str] | TargetSpec, **options: Any) -> TargetSpec:
    """The target for a name, a TargetSpec or a target file, built with ``options``.

    Parameters
    ----------
    target
        A name from :func:`available_targets`, ``neuron@<neuron-cc release>``, a TargetSpec
        (returned rebuilt with ``options``), or a path to a ``.toml``/``.json`` target file.
    options
        Target options, e.g. ``precision="fp32"`` for ``tensorcore``.

    Raises
    ------
    UnknownTargetError
        No target of that name; the message lists the known ones.
    TargetSpecError
        A malformed target file, or an option the target does not take.

    Examples
    --------
    >>> get_target("tensorcore", precision="fp32").prepare_steps()
    ('convert_layout:NHWC',)
    """
    if isinstance(target, TargetSpec):
        return target.with_options(**options)
    if not isinstance(target, (str, os.PathLike)):
        raise TargetSpecError(f"a target is a name, a TargetSpec or a file path, not "
                              f"{type(target).__name__}")
    if isinstance(target, str) and target in _REGISTERED:
        return _REGISTERED[target].with_options(**options)
    if isinstance(target, str) and target in _BUILTIN:
        return _BUILTIN[target](**options)
    if isinstance(target, str) and target.startswith("neuron@"):
        return neuron.build(**{"version": target.removeprefix("neuron@"), **options})
    if looks_like_target_file(target):
        return load_target_file(target, **options)
    raise UnknownTargetError(
        f"unknown target {os.fspath(target)!r}; known targets: {', '.join(available_targets())} "
        "(also neuron@<neuron-cc release>, e.g. neuron@1.2.0.0, or a .toml/.json target file)")
