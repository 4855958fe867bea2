"""Cost models: predicted op, transfer and invocation times, explained.

* :class:`RooflineCostModel`: analytic, from hardware profiles kept as TOML data files
  (:func:`load_profile`, :func:`available_profiles`), each number with its source.
* :class:`ProfiledCostModel`: op, copy and region times from a profile cache
  (:func:`read_profile_cache`; measured where measured, fitted elsewhere), each with an
  uncertainty; ops are keyed by :func:`op_signature`.
* :func:`get_cost_model`: the default model of a platform.
* :func:`~.base.evaluate`: a plan's predicted time, per region and per cut.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..core.ops import op_class
from ..core.platform import Platform
from ..errors import PartitionLabError
from .base import CostBreakdown, CostModel, CutCost, RegionCost, evaluate, require_platform
from .crossval import CrossValidation
from .profile_cache import read_profile_cache, write_profile_cache
from .profiled import ProfiledCostModel
from .profiles import (
    Figure,
    HardwareProfile,
    LinkProfile,
    available_profiles,
    load_profile,
)
from .roofline import (
    DEFAULT_CPU_PROFILE,
    DeviceCost,
    OpEstimate,
    RooflineCostModel,
    platform_roofline,
)
from .shipped import SHIPPED, ShippedProfile, shipped_cost_model, shipped_profile
from .signatures import node_from_signature, op_signature

__all__ = [
    "CostBreakdown", "CostModel", "CutCost", "DeviceCost", "Figure", "HardwareProfile", "LinkProfile",
    "OpEstimate", "RegionCost", "RooflineCostModel", "DEFAULT_CPU_PROFILE", "available_profiles",
    "evaluate", "get_cost_model", "load_profile", "op_class", "op_signature", "CrossValidation",
    "ProfiledCostModel", "node_from_signature", "read_profile_cache", "write_profile_cache",
    "SHIPPED", "ShippedProfile", "prices_from_shipped_profile", "pricing_model", "shipped_cost_model", "shipped_profile",
]

def get_cost_model(
    platform: Platform,
    *,
    accel_profile: str | Path | HardwareProfile | None = None,
    cpu_profile: str | Path | HardwareProfile | None = None,
    profile: Any = None,
) -> CostModel:
    """The cost model for a platform: a roofline per device over its default profiles.

    Parameters
    ----------
    platform:
        A :class:`~partition_lab.core.platform.Platform` (anything else is a ``TypeError``:
        build the platform first). Each accelerator device is priced with ``accel_profile``,
        else its own ``profile``, else by family: ``tensorcore``/``cuda`` -> ``t4``,
        ``neuron*`` -> ``inferentia1``. The host uses ``cpu_profile``. Any other device raises
        :class:`ProfileError` unless ``accel_profile`` is given.
    cpu_profile:
        Host profile; default the platform host's ``profile``, else ``xeon_gold_6130`` (the
        field reports' CPU).
    profile:
        A profile cache (path, decoded JSON or ``ProfileCache``): returns a
        :class:`ProfiledCostModel` over it, with the model built from the other arguments as
        its fallback for devices the cache does not bind.

    >>> from partition_lab.targets import get_platform
    >>> get_cost_model(get_platform("neuron@2020")).name
    'roofline(neuron@2020=inferentia1 + cpu=xeon_gold_6130 over PCIe Gen3 x16 (assumed))'
    """
    require_platform(platform, "get_cost_model")
    model: CostModel = platform_roofline(platform, accel_profile=accel_profile,
                                         cpu_profile=cpu_profile)
    if profile is not None:
        model = ProfiledCostModel(profile, platform, fallback=model)
    return model


def prices_from_shipped_profile(platform: Platform, cost_model: CostModel | str | None = None,
                                profile_cache: Any = None, *, shipped: bool = True) -> bool:
    """Whether :func:`pricing_model` prices ``platform`` by its shipped profile: nothing else
    was asked for (no cost model or hardware profile name, no profile cache), ``shipped`` is
    on, and the platform has one (the command line asks before building the model, to pick the
    default strategy)."""
    return (cost_model is None and profile_cache is None and shipped
            and shipped_profile(platform) is not None)


def pricing_model(platform: Platform, cost_model: CostModel | str | None = None,
                  profile_cache: Any = None, *, shipped: bool = True) -> CostModel:
    """The cost model ``analyze`` prices a platform with, from what the user passed.

    ``cost_model`` (a CostModel) as it is; else a profile cache's measurements
    (``profile_cache``); else, on a built-in platform that ships one and unless ``shipped`` is
    False or ``cost_model`` names an accelerator hardware profile, the shipped profile
    (:mod:`~.shipped`); else the roofline (:func:`get_cost_model`).
    """
    if cost_model is not None and not isinstance(cost_model, str):
        if profile_cache is not None:
            raise PartitionLabError("pass either a cost_model object or profile_cache=, not both")
        return cost_model
    if prices_from_shipped_profile(platform, cost_model, profile_cache, shipped=shipped):
        return shipped_cost_model(platform)
    return get_cost_model(platform, accel_profile=cost_model, profile=profile_cache)
