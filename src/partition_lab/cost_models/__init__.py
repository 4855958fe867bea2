"""Cost models: predicted op, transfer and invocation times, explained.

* :class:`RooflineCostModel`: analytic, from hardware profiles kept as TOML data files
  (:func:`load_profile`, :func:`available_profiles`), each number with its source.
* :class:`MeasuredCpuCostModel`: CPU op times measured on this machine (cached as JSON by
  :func:`save_measurements` / :func:`load_measurements`, keyed by :func:`op_signature`).
* :func:`get_cost_model`: the default model of a target.
* :func:`~.base.evaluate`: a plan's predicted time, per region and per cut.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import ProfileError
from .base import CostBreakdown, CostModel, CutCost, RegionCost, evaluate, kind_of
from .measured import (
    MeasuredCpuCostModel,
    Measurements,
    load_measurements,
    op_signature,
    save_measurements,
)
from .profiles import (
    NO_LINK,
    Figure,
    HardwareProfile,
    LinkProfile,
    available_profiles,
    load_profile,
)
from .roofline import OpEstimate, RooflineCostModel, op_class

__all__ = [
    "CostBreakdown", "CostModel", "CutCost", "Figure", "HardwareProfile", "LinkProfile",
    "MeasuredCpuCostModel", "Measurements", "OpEstimate", "RegionCost", "RooflineCostModel",
    "DEFAULT_CPU_PROFILE", "available_profiles", "evaluate", "get_cost_model", "kind_of",
    "load_measurements", "load_profile", "op_class", "op_signature", "save_measurements",
]

#: The host CPU of the field reports; the default pairing for every accelerator.
DEFAULT_CPU_PROFILE = "xeon_gold_6130"

#: Accelerator profile per target family, for targets that do not name one themselves.
#: Inf1's host link generation is not published; ``inferentia1.toml`` assumes PCIe Gen3 x16.
_FAMILY_PROFILES = {"tensorcore": "t4", "neuron": "inferentia1"}


def get_cost_model(
    spec: Any = None,
    *,
    accel_profile: str | Path | HardwareProfile | None = None,
    cpu_profile: str | Path | HardwareProfile | None = None,
    measured_cpu: str | Path | Mapping[str, float] | Measurements | None = None,
) -> CostModel:
    """The cost model for a target: a roofline over its default profiles.

    Parameters
    ----------
    spec:
        A :class:`~partition_lab.targets.TargetSpec`, a target name, or None (tensorcore's
        pairing). The accelerator profile is ``accel_profile``, else the target's
        ``default_profile``, else by name: ``tensorcore*`` -> ``t4``, ``neuron*`` ->
        ``inferentia1``; the ``cpu`` target uses the CPU profile on both sides (no copies).
        Any other target raises :class:`ProfileError` unless ``accel_profile`` is given.
    cpu_profile:
        Host profile; default ``xeon_gold_6130`` (the field reports' CPU).
    measured_cpu:
        A measurement table (or a cache file) to replace the CPU estimates of measured ops.

    >>> get_cost_model("neuron@2020").name
    'roofline(inferentia1 + xeon_gold_6130 over PCIe Gen3 x16 (assumed))'
    """
    name = _target_name(spec)
    cpu = _profile(cpu_profile or DEFAULT_CPU_PROFILE)
    if accel_profile is None and name == "cpu":
        model: CostModel = RooflineCostModel(cpu, cpu, NO_LINK)
    else:
        accel = _profile(accel_profile or _default_accel_profile(spec, name))
        model = RooflineCostModel(accel, cpu)
    if measured_cpu is not None:
        table = (load_measurements(measured_cpu) if isinstance(measured_cpu, (str, Path))
                 else measured_cpu)
        model = MeasuredCpuCostModel(model, table)
    return model


def _target_name(spec: Any) -> str:
    if spec is None:
        return "tensorcore"
    return str(getattr(spec, "name", spec))


def _default_accel_profile(spec: Any, name: str) -> str:
    declared = getattr(spec, "default_profile", None)
    if declared:
        return str(declared)
    family = name.split("@", 1)[0]
    if family in _FAMILY_PROFILES:
        return _FAMILY_PROFILES[family]
    raise ProfileError(
        f"target {name!r} names no hardware profile; pass accel_profile= one of "
        f"{', '.join(available_profiles())} (or a .toml path)")


def _profile(value: str | Path | HardwareProfile) -> HardwareProfile:
    return value if isinstance(value, HardwareProfile) else load_profile(value)
