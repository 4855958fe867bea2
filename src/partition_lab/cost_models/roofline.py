"""The analytic roofline cost model.

One op on a device takes ``max(flops / (peak * eff), bytes / (bandwidth * eff)) + op_overhead``,
where ``peak`` is the matrix engine for matrix-like ops and the vector units otherwise, and the
efficiency ``eff`` depends on the op class (:func:`op_class`). A region costs its device's
``region_overhead`` once per invocation (0 for CPU islands); a tensor that crosses between host
and accelerator costs ``latency + bytes / bandwidth`` of the accelerator's host link, once per
direction. :meth:`RooflineCostModel.explain` says which bound won for an op.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.graph import DTYPE_BYTES, OpNode
from ..core.ops import op_class
from ..core.platform import AS_PREPARED, HOST_MEMORY, Platform
from ..errors import ProfileError
from .profiles import NO_LINK, HardwareProfile, LinkProfile, available_profiles, load_profile


@dataclass(frozen=True)
class OpEstimate:
    """How the roofline arrived at one op's time on one device."""

    op: str
    kind: str
    op_class: str
    flops: float
    nbytes: float
    compute_s: float
    memory_s: float
    overhead_s: float
    efficiency: float

    @property
    def bound(self) -> str:
        return "compute" if self.compute_s >= self.memory_s else "memory"

    @property
    def total_s(self) -> float:
        return max(self.compute_s, self.memory_s) + self.overhead_s

    def __str__(self) -> str:
        return (f"{self.op} on {self.kind}: {self.total_s * 1e3:.4g} ms, {self.bound}-bound "
                f"({self.flops / 1e9:.3g} GFLOP -> {self.compute_s * 1e3:.4g} ms, "
                f"{self.nbytes / 1e6:.3g} MB -> {self.memory_s * 1e3:.4g} ms, "
                f"{self.op_class} efficiency {self.efficiency:g}, "
                f"+{self.overhead_s * 1e6:.3g} us per op)")


@dataclass(frozen=True)
class DeviceCost:
    """How the roofline prices one device: its profile, memory space and precision.

    ``matrix_engine`` False: matrix ops run on the vector units (a GPU's CUDA cores rather than
    its Tensor Cores). ``precision`` ``"float32"``: the device computes float16 tensors in float32
    (a host island of an fp16 GPU program), so they move twice the bytes and cost a cast at its
    boundary. ``region_overhead`` replaces the profile's (inline main-target code: 0).
    """

    profile: HardwareProfile
    memory: str = "accel"
    precision: str = AS_PREPARED
    matrix_engine: bool = True
    region_overhead: float | None = None


class RooflineCostModel:
    """Roofline op times per device, plus copies and casts between device domains.

    Parameters
    ----------
    accel, cpu:
        Profiles of the accelerator and of the host CPU: the pricing of every device not in
        ``devices`` (the host is ``"cpu"``; any other name is the accelerator, memory
        ``"accel"``). ``kind`` "accel"/"cpu" of the files is not enforced.
    link:
        The host copy path; defaults to ``accel.host_link`` (no cost if the profile has none).
    devices:
        Per device name, a :class:`DeviceCost` (built by :meth:`for_platform`).
    links:
        Per pair of memory spaces, a link other than ``link``.

    >>> from partition_lab.cost_models import load_profile
    >>> m = RooflineCostModel(load_profile("t4"), load_profile("xeon_gold_6130"))
    >>> m.transfer_time(12e6, "cpu", "accel") > 1e-3
    True
    """

    def __init__(self, accel: HardwareProfile, cpu: HardwareProfile,
                 link: LinkProfile | None = None, *,
                 devices: Mapping[str, DeviceCost] | None = None,
                 links: Mapping[frozenset[str], LinkProfile] | None = None) -> None:
        self.accel = accel
        self.cpu = cpu
        self.link = link or accel.host_link or NO_LINK
        self.devices = dict(devices or {})
        self.links = dict(links or {})
        self._default = {"cpu": DeviceCost(cpu, HOST_MEMORY), "accel": DeviceCost(accel)}
        self._rate_cache: dict[tuple[str, str], tuple[float, float]] = {}
        if self.devices:
            parts = " + ".join(f"{name}={cost.profile.name}" for name, cost in self.devices.items())
            self.name = f"roofline({parts} over {self.link.name})"
        else:
            self.name = f"roofline({accel.name} + {cpu.name} over {self.link.name})"

    @classmethod
    def for_platform(cls, platform: Any, profiles: Mapping[str, HardwareProfile],
                     cpu: HardwareProfile, links: Mapping[frozenset[str], LinkProfile] | None = None
                     ) -> RooflineCostModel:
        """One :class:`DeviceCost` per device of ``platform``; ``profiles`` per accelerator."""
        devices = {}
        for d in platform.devices:
            profile = cpu if d.is_host else profiles[d.name]
            devices[d.name] = DeviceCost(profile, d.memory, d.precision, d.matrix_engine,
                                         0.0 if d.role == "main" else None)
        accelerators = [profiles[d.name] for d in platform.accelerators]
        accel = accelerators[0] if accelerators else cpu
        link = next((p.host_link for p in accelerators if p.host_link), None)
        return cls(accel, cpu, link, devices=devices, links=links)

    def __repr__(self) -> str:
        return f"RooflineCostModel({self.accel.name!r}, {self.cpu.name!r}, {self.link.name!r})"

    def device_cost(self, device: str) -> DeviceCost:
        found = self.devices.get(device)
        if found is not None:
            return found
        return self._default["cpu" if device == "cpu" else "accel"]

    # ------------------------------------------------------------------ CostModel protocol
    def op_time(self, node: OpNode, device: str) -> float:
        """``explain(node, device).total_s``, without building the explanation."""
        info = self.device_cost(device)
        return self._time(node, device, info, op_class(node),
                          _byte_split(node, info.precision == "float32"))

    def op_times(self, nodes: Sequence[OpNode], device: str) -> list[float]:
        """``[op_time(n, device) for n in nodes]``, sharing the per-device work."""
        info = self.device_cost(device)
        widen = info.precision == "float32"
        return [self._time(n, device, info, op_class(n), _byte_split(n, widen)) for n in nodes]

    def _rates_of(self, device: str, info: DeviceCost, cls: str) -> tuple[float, float]:
        key = (device, cls)
        rates = self._rate_cache.get(key)
        if rates is None:
            engine = cls if cls != "matrix" or info.matrix_engine else "vector"
            rates = _rates(info.profile, engine)
            self._rate_cache[key] = rates
        return rates

    def _time(self, node: OpNode, device: str, info: DeviceCost, cls: str,
              split: tuple[float, float]) -> float:
        profile = info.profile
        flop_rate, byte_rate = self._rates_of(device, info, cls)
        if cls == "matrix" and info.matrix_engine and profile.achieved_matrix_flops:
            dtype = "float32" if info.precision == "float32" else _dtype_of(node)
            achieved = profile.achieved_matrix_flops.get(dtype)
            if achieved is not None:
                flop_rate = achieved.value
        nbytes = _bytes_from_split(split, profile.float_bytes)
        return max(node.flops / flop_rate, nbytes / byte_rate) + profile.op_overhead

    def transfer_time(self, nbytes: float, src: str, dst: str) -> float:
        """A copy between memory spaces and/or a cast between precisions; 0 within a domain."""
        a, b = self.device_cost(src), self.device_cost(dst)
        time = 0.0
        if a.memory != b.memory:
            time += self.links.get(frozenset((a.memory, b.memory)), self.link).transfer_time(nbytes)
        if a.precision != b.precision:
            # float16 <-> float32 on the device that computes in float32: read 2 B, write 4 B
            # per element (or the reverse), i.e. 3x the tensor's bytes as stored in float16.
            caster = a if a.precision == "float32" else b
            time += 3 * nbytes / (caster.profile.memory_bandwidth * caster.profile.efficiency("data"))
        return time

    def region_overhead(self, device: str) -> float:
        info = self.device_cost(device)
        return info.profile.region_overhead if info.region_overhead is None else info.region_overhead

    # ------------------------------------------------------------------ uncertainty
    #: Relative error (log-space standard deviation) of an unmeasured roofline figure. An
    #: assumption, not a fit: a factor of 2 per op (log 2 = 0.69), the narrowest spread the
    #: measured GPU runs allow (the roofline misses fusion and unvectorised host kernels);
    #: copies follow a datasheet link (30%), launch overheads are stated assumptions in the
    #: profiles (50%).
    SIGMA_OP = 0.69
    SIGMA_TRANSFER = 0.3
    SIGMA_OVERHEAD = 0.5

    def op_sigma(self, node: OpNode, device: str) -> float:
        return self.SIGMA_OP

    def transfer_sigma(self, nbytes: float, src: str, dst: str) -> float:
        return self.SIGMA_TRANSFER

    def overhead_sigma(self, device: str) -> float:
        return self.SIGMA_OVERHEAD

    def is_measured(self, node: OpNode, device: str) -> bool:
        return False

    # ------------------------------------------------------------------ explanation
    def explain(self, node: OpNode, device: str) -> OpEstimate:
        """The op's roofline terms on ``device``: FLOPs, bytes, both times and which bound won."""
        info = self.device_cost(device)
        profile = info.profile
        cls = op_class(node)
        efficiency = profile.efficiency(cls if info.matrix_engine else
                                        ("vector" if cls == "matrix" else cls))
        dtype = "float32" if info.precision == "float32" else _dtype_of(node)
        if cls == "matrix" and info.matrix_engine and dtype in profile.achieved_matrix_flops:
            rate = profile.achieved_matrix_flops[dtype].value
        else:
            rate = self._rates_of(device, info, cls)[0]
        nbytes = _bytes_from_split(_byte_split(node, info.precision == "float32"),
                                   profile.float_bytes)
        return OpEstimate(
            op=node.op, kind=device, op_class=cls, flops=node.flops, nbytes=nbytes,
            compute_s=node.flops / rate,
            memory_s=nbytes / (profile.memory_bandwidth * efficiency),
            overhead_s=profile.op_overhead, efficiency=efficiency,
        )


def _rates(profile: HardwareProfile, cls: str) -> tuple[float, float]:
    efficiency = profile.efficiency(cls)
    peak = profile.matrix_flops if cls == "matrix" else profile.vector_flops
    return peak * efficiency, profile.memory_bandwidth * efficiency


def _dtype_of(node: OpNode) -> str:
    for spec in (*node.args, *node.outputs):
        return spec.dtype
    return "float32"


def _byte_split(node: OpNode, widen_half: bool = False) -> tuple[float, float]:
    """(float32 elements, bytes of everything else) that the op reads and writes.

    ``widen_half``: float16 tensors count as float32 (a device that computes in float32).
    """
    f32 = other = 0.0
    wide = ("float32", "float16") if widen_half else ("float32",)
    for spec in (*node.inputs, *node.weights, *node.outputs):
        if spec.dtype in wide:
            f32 += math.prod(spec.shape)
        else:
            other += math.prod(spec.shape) * DTYPE_BYTES.get(spec.dtype, 4)
    return f32, other


def _bytes_from_split(split: tuple[float, float], float_bytes: float | None) -> float:
    """Bytes moved on a device that may store float32 in a narrower type (``float_bytes``)."""
    f32, other = split
    return f32 * (4 if float_bytes is None else min(4, float_bytes)) + other


#: The host CPU of the field reports; the default pairing for every accelerator.
DEFAULT_CPU_PROFILE = "xeon_gold_6130"

#: Accelerator profile per target family, for targets that do not name one themselves.
#: Inf1's host link generation is not published; ``inferentia1.toml`` assumes PCIe Gen3 x16.
_FAMILY_PROFILES = {"tensorcore": "t4", "cuda": "t4", "neuron": "inferentia1"}


def platform_roofline(platform: Platform, *,
                      accel_profile: str | Path | HardwareProfile | None = None,
                      cpu_profile: str | Path | HardwareProfile | None = None) -> RooflineCostModel:
    """The roofline of ``platform``: each accelerator priced with ``accel_profile``, else its
    own ``profile``, else by family (``tensorcore``/``cuda`` -> ``t4``, ``neuron*`` ->
    ``inferentia1``); the host with ``cpu_profile``, else its own, else the field reports' CPU.
    """
    cpu = _profile(cpu_profile or platform.host.profile or DEFAULT_CPU_PROFILE)
    profiles = {d.name: _profile(accel_profile or _default_accel_profile(d, platform.name))
                for d in platform.accelerators}
    links = {lk.memories: _profile(lk.profile).host_link for lk in platform.links
             if lk.profile and _profile(lk.profile).host_link}
    return RooflineCostModel.for_platform(platform, profiles, cpu, links or None)


def _default_accel_profile(device: Any, platform: str) -> str:
    if device.profile:
        return str(device.profile)
    for name in (device.name, platform):
        family = name.split("@", 1)[0]
        if family in _FAMILY_PROFILES:
            return _FAMILY_PROFILES[family]
    raise ProfileError(
        f"device {device.name!r} of {platform!r} names no hardware profile; pass "
        f"accel_profile= one of {', '.join(available_profiles())} (or a .toml path)")


def _profile(value: str | Path | HardwareProfile) -> HardwareProfile:
    return value if isinstance(value, HardwareProfile) else load_profile(value)
