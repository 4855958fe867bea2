"""Profiles that ship with the package: measurements of built-in platforms' real devices.

With no profile of their own, users of a built-in platform that has one here get its
measurements instead of the roofline's assumed figures, labelled with the machine and the
date they came from (in the cost model's name, so in every summary and plan JSON; the full
line is :attr:`ShippedProfile.label`), and the ``cost``
strategy as the default (``partition_lab.strategies.default_strategy``). Measurements of
another machine are not the user's machine: they rank plans (plans built from this profile
measured within a few percent of the best on the H200 it came from, docs/evidence/gpu.md) but
their absolute times are the H200's. ``partition-lab profile`` measures the user's own, and
``--profile-cache`` (``profile_cache=``) uses it instead; ``--profile NAME`` (``cost_model=``)
or ``--no-shipped-profile`` (``shipped_profile=False``) prices with the roofline.

The data file is written by the benchmark suite's ``ship_profile.py`` from the project's H200
profile caches
(the source files are named in :attr:`ShippedProfile.sources`).
"""

from __future__ import annotations

import functools
import gzip
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ProfileError
from .profile_cache import ValidatedCache, read_profile_cache

HERE = Path(__file__).resolve().parent / "shipped"


@dataclass(frozen=True)
class ShippedProfile:
    """A profile cache of a built-in platform's devices, measured by the project."""

    platform: str  # the built-in platform it is bound to
    file: str  # a gzipped profile cache under cost_models/shipped/
    machine: str  # what was measured
    measured: str  # the date (UTC) of the runs
    runner: str  # what timed the ops
    sources: tuple[str, ...]  # the project's files it was merged from
    devices: tuple[str, ...]  # the platform's device names, all bound to measured entries

    @property
    def path(self) -> Path:
        return HERE / self.file

    @property
    def sigma_path(self) -> Path:
        """The profile's cross-validated sigmas per entry and op class (see
        :meth:`~.profiled.ProfiledCostModel.fitted_sigma`), computed when it was written:
        they take leave-one-model-out fits over every profiled model, seconds per process."""
        return self.path.with_name(self.path.name.removesuffix(".json.gz") + ".sigma.json")

    @property
    def label(self) -> str:
        """One line for summaries: whose measurements price the plan."""
        return (f"shipped profile: {self.machine}, measured {self.measured} with the "
                f"{self.runner} (not your machine: partition-lab profile measures yours)")

    def cache(self) -> dict[str, Any]:
        """The decoded, validated cache (read once per process)."""
        return _read(self.path)


SHIPPED: dict[str, ShippedProfile] = {
    "tensorcore": ShippedProfile(
        platform="tensorcore",
        file="tensorcore_h200.json.gz",
        machine="NVIDIA H200 (CUDA 13.0, cuDNN 9.19) with a 16-thread Intel Xeon host",
        measured="2026-12-01",
        runner="PyTorch executor (torch 2.11.0+cu130)",
        sources=("experiments/data/gpu_ingraph_cache.json.xz",
                 "experiments/data/gpu_suite_cache.json.xz"),
        devices=("tensorcore", "cuda", "cpu"),
    ),
}


def shipped_profile(platform: Any) -> ShippedProfile | None:
    """The shipped profile of ``platform`` (a :class:`~partition_lab.core.platform.Platform`),
    or None.

    It applies to a built-in platform, told by its name and its devices' names: a platform
    file that reuses the name with other devices describes other hardware and is priced as it
    says. Target options (``precision="fp32"``) keep it: ops the profile did not time in that
    precision are fitted from the ones it did, as for any profile."""
    shipped = SHIPPED.get(getattr(platform, "name", ""))
    if shipped is None or set(getattr(platform, "names", ())) != set(shipped.devices):
        return None
    return shipped


@functools.cache
def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(gzip.decompress(path.read_bytes()).decode("utf-8"))
    except (OSError, EOFError, ValueError) as err:  # a damaged install
        raise ProfileError(f"the shipped profile {path} cannot be read ({err}); reinstall "
                           "partition-lab, or pass --no-shipped-profile") from None
    return ValidatedCache(read_profile_cache(data))  # the same checks as a user's cache


#: Profiled models over shipped profiles, by platform fingerprint: building one reads and fits
#: thousands of measured signatures (about 0.3 s), and a session partitions many models.
_MODELS: dict[tuple[Any, ...], Any] = {}
_MODELS_KEPT = 8


def shipped_cost_model(platform: Any) -> Any:
    """A :class:`~.profiled.ProfiledCostModel` over the shipped profile of ``platform`` (its
    name says whose measurements they are), or None where no shipped profile applies."""
    shipped = shipped_profile(platform)
    if shipped is None:
        return None
    key = _fingerprint(platform)
    model = _MODELS.get(key)
    if model is None:
        from .profiled import ProfiledCostModel

        model = ProfiledCostModel(shipped.cache(), platform)
        for key, sigmas in _read_sigmas(shipped.sigma_path).items():
            model.adopt_fitted_sigma(key, sigmas)
        model.name = (f"{model.name}, shipped profile measured {shipped.measured} "
                      f"(not your machine)")
        model.shipped = shipped
        if len(_MODELS) >= _MODELS_KEPT:
            _MODELS.pop(next(iter(_MODELS)))
        _MODELS[key] = model
    return model


@functools.cache
def _read_sigmas(path: Path) -> dict[str, dict[str, float]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # recomputed when needed (slower, same numbers)
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(key): {str(c): float(v) for c, v in sigmas.items()
                       if isinstance(v, (int, float)) and math.isfinite(v) and v >= 0}
            for key, sigmas in data.items() if isinstance(sigmas, dict)}


def _fingerprint(platform: Any) -> tuple[Any, ...]:
    """What a profiled model of ``platform`` depends on: its devices (roles, memories,
    precisions, preferences, default profiles) and every target's options."""
    return (platform.name, platform.describe(),
            tuple((d.name, d.profile, repr(sorted(getattr(d.target, "options", {}).items())))
                  for d in platform.devices),
            repr(sorted(dict(platform.options).items())),
            tuple(repr(link) for link in platform.links))
