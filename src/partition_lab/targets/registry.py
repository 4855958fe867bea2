"""Finding targets and platforms by name: built-ins, targets registered from Python, target files.

A built-in platform is one module with ``build(**options) -> TargetSpec`` (its target: the op
rules of its preferred device) and ``platform(spec) -> Platform`` (its devices, their default
profiles and colours), plus one line in :data:`BUILTIN`. A module that takes releases
(``neuron@2020``) accepts ``version=`` in ``build`` and lists the releases it names in
``LISTED_VERSIONS``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from types import ModuleType
from typing import Any

from ..core.platform import Platform
from ..errors import TargetSpecError, UnknownTargetError
from . import cpu, neuron, tensorcore
from .base import TargetSpec
from .bundled import example_specs
from .bundled import resolve as resolve_example
from .devices import accelerator_platform
from .user import looks_like_target_file, read_target_file

#: Built-in platforms by name: the module that builds each (see the module docstring).
BUILTIN: dict[str, ModuleType] = {
    "cpu": cpu,
    "neuron": neuron,
    "tensorcore": tensorcore,
}
_REGISTERED: dict[str, TargetSpec] = {}
#: Targets named ``<family>:<member>`` that a higher floor provides (``tvm:<backend>``, TVM's
#: own BYOC pattern tables, from :mod:`partition_lab.relax.byoc`): family -> (``target(member,
#: **options)``, ``platform(member, **options)``).
_FAMILIES: dict[str, tuple[Callable[..., TargetSpec], Callable[..., Platform]]] = {}
#: What a family needs where it is not registered (said in one line).
FAMILY_NEEDS = {"tvm": "tvm:<backend> targets read TVM's Relax pattern tables: they need "
                       "apache-tvm >= 0.20 (pip install '.[relax]') and a Relax module "
                       "(import partition_lab.relax)"}


def register_family(family: str, target: Callable[..., TargetSpec],
                    platform: Callable[..., Platform]) -> None:
    """Make ``<family>:<member>`` names resolve through ``target`` and ``platform``."""
    _FAMILIES[family] = (target, platform)


def _family(target: object) -> tuple[str, str] | None:
    """``(family, member)`` for a ``family:member`` name of a known family, else None."""
    if not isinstance(target, str):
        return None
    family, colon, member = target.partition(":")
    if not colon or (family not in _FAMILIES and family not in FAMILY_NEEDS):
        return None
    return family, member


def _family_builders(family: str) -> tuple[Callable[..., TargetSpec], Callable[..., Platform]]:
    if family not in _FAMILIES:
        raise UnknownTargetError(FAMILY_NEEDS[family])
    return _FAMILIES[family]


def available_targets() -> list[str]:
    """Names ``get_target`` accepts (``neuron@<release>`` also works for any neuron-cc release)."""
    listed = {f"{name}@{version}" for name, module in BUILTIN.items()
              for version in getattr(module, "LISTED_VERSIONS", ())}
    return sorted({*BUILTIN, *listed, *_REGISTERED})


def register_target(spec: TargetSpec, *, replace: bool = False) -> None:
    """Make ``spec`` available to ``get_target(spec.name)`` (and so to the CLI and ``partition``)
    as one accelerator + the host.

    Raises TargetSpecError if the name is taken and ``replace`` is False.
    """
    if not isinstance(spec, TargetSpec):
        raise TargetSpecError(f"register_target needs a TargetSpec, got {type(spec).__name__}")
    if not replace and (spec.name in available_targets()):
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
        (returned rebuilt with ``options``), a path to a ``.toml``/``.json`` target file, or a
        bundled example file, ``example:NAME`` (:mod:`partition_lab.targets.bundled`).
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
    target = resolve_example(target)  # example:NAME -> its bundled file
    if not isinstance(target, (str, os.PathLike)):
        raise TargetSpecError(f"a target is a name, a TargetSpec or a file path, not "
                              f"{type(target).__name__}")
    if isinstance(target, str) and target in _REGISTERED:
        return _REGISTERED[target].with_options(**options)
    family = _family(target)
    if family is not None:
        return _family_builders(family[0])[0](family[1], **options)
    module, version = _builtin(target)
    if module is not None:
        return module.build(**options) if version is None else \
            module.build(**{"version": version, **options})
    if looks_like_target_file(target):
        return load_target_file(target, **options)
    raise UnknownTargetError(
        f"unknown target {os.fspath(target)!r}; known targets: {', '.join(available_targets())} "
        "(also neuron@<neuron-cc release>, e.g. neuron@1.2.0.0, a .toml/.json target file, or a "
        f"bundled example: {', '.join(example_specs())})")


def builtin_platform(name: str, **options: Any) -> Platform | None:
    """The built-in or registered platform called ``name``, or None if there is none."""
    if name in _REGISTERED:
        return accelerator_platform(_REGISTERED[name].with_options(**options))
    family = _family(name)
    if family is not None:
        return _family_builders(family[0])[1](family[1], **options)
    module, _ = _builtin(name)
    return None if module is None else module.platform(get_target(name, **options))


def load_target_file(path: str | os.PathLike[str], **options: Any) -> TargetSpec:
    """A target from a TOML/JSON target file (:mod:`partition_lab.targets.user`); ``options``
    go to its ``base`` target."""
    return read_target_file(path, get_target, **options)


def _builtin(target: str | os.PathLike[str]) -> tuple[ModuleType | None, str | None]:
    """The built-in module a name stands for, and the release after ``@`` (None if none)."""
    if not isinstance(target, str):
        return None, None
    family, at, version = target.partition("@")
    module = BUILTIN.get(family)
    if module is None or (at and not hasattr(module, "LISTED_VERSIONS")):
        return None, None
    return module, (version if at else None)
