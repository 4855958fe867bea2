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
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import ProfileError
from ..graph import DTYPE_BYTES, OpNode
from .base import DeviceKind
from .profiles import NO_LINK, HardwareProfile, LinkProfile

#: Ops that run on a matrix engine (Tensor Cores, a systolic array, AVX-512 FMA in GEMM form).
MATRIX_OPS = frozenset({
    "nn.conv1d", "nn.conv2d", "nn.conv3d", "nn.conv1d_transpose", "nn.conv2d_transpose",
    "nn.conv3d_transpose", "nn.dense", "nn.matmul", "nn.batch_matmul",
    "nn.contrib_conv2d_winograd_without_weight_transform", "nn.contrib_dense_pack",
})

#: Ops that only move or reinterpret data (their time is memory traffic).
DATA_OPS = frozenset({
    "reshape", "reverse_reshape", "transpose", "layout_transform", "concatenate", "split",
    "strided_slice", "squeeze", "expand_dims", "nn.batch_flatten", "copy", "stack", "take",
    "gather", "gather_nd", "nn.pad", "slice_like", "reverse", "tile", "repeat", "broadcast_to",
    "broadcast_to_like", "cast", "nn.space_to_depth", "nn.depth_to_space", "nn.dropout",
    "zeros", "ones", "zeros_like", "ones_like", "full", "full_like", "arange",
})


def op_class(node: OpNode) -> str:
    """``"matrix"``, ``"vector"`` or ``"data"``: which engine and efficiency an op gets.

    Grouped and depthwise convolutions count as vector work: a systolic array or Tensor Core
    GEMM cannot fill its tiles with them.
    """
    if node.op in MATRIX_OPS:
        groups = node.attrs.get("groups", 1)
        return "vector" if isinstance(groups, int) and groups > 1 else "matrix"
    if node.op in DATA_OPS:
        return "data"
    return "vector"


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


class RooflineCostModel:
    """Roofline op times from two hardware profiles, plus the accelerator's host link.

    Parameters
    ----------
    accel, cpu:
        Profiles of the accelerator and of the host CPU (``kind`` "accel"/"cpu" of the files is
        not enforced, so a CPU profile may stand in as the "accelerator" of the ``cpu`` target).
    link:
        The copy path; defaults to ``accel.host_link`` (no cost if the profile has none).

    >>> from partition_lab.cost_models import load_profile
    >>> m = RooflineCostModel(load_profile("t4"), load_profile("xeon_gold_6130"))
    >>> m.transfer_time(12e6, "cpu", "accel") > 1e-3
    True
    """

    def __init__(self, accel: HardwareProfile, cpu: HardwareProfile,
                 link: LinkProfile | None = None) -> None:
        self.accel = accel
        self.cpu = cpu
        self.link = link or accel.host_link or NO_LINK
        self.name = f"roofline({accel.name} + {cpu.name} over {self.link.name})"
        # Per device kind and op class: (compute rate, memory rate); op_time runs per node.
        self._rates = {kind: {cls: _rates(profile, cls) for cls in ("matrix", "vector", "data")}
                       for kind, profile in (("cpu", cpu), ("accel", accel))}

    def __repr__(self) -> str:
        return f"RooflineCostModel({self.accel.name!r}, {self.cpu.name!r}, {self.link.name!r})"

    # ------------------------------------------------------------------ CostModel protocol
    def op_time(self, node: OpNode, kind: DeviceKind) -> float:
        """``explain(node, kind).total_s``, without building the explanation."""
        return self._time(node, kind, op_class(node), _byte_split(node))

    def op_times_both(self, nodes: Sequence[OpNode]) -> tuple[list[float], list[float]]:
        """``([op_time(n, "cpu")...], [op_time(n, "accel")...])``: the same numbers, for a
        whole graph at once (strategies tabulate them; this shares the per-node work)."""
        cpu: list[float] = []
        accel: list[float] = []
        for node in nodes:
            cls, split = op_class(node), _byte_split(node)
            cpu.append(self._time(node, "cpu", cls, split))
            accel.append(self._time(node, "accel", cls, split))
        return cpu, accel

    def _time(self, node: OpNode, kind: DeviceKind, cls: str, split: tuple[float, float]) -> float:
        profile = self._profile(kind)
        flop_rate, byte_rate = self._rates[kind][cls]
        if cls == "matrix" and profile.achieved_matrix_flops:
            achieved = profile.achieved_matrix_flops.get(_dtype_of(node))
            if achieved is not None:
                flop_rate = achieved.value
        nbytes = _bytes_from_split(split, profile.float_bytes)
        return max(node.flops / flop_rate, nbytes / byte_rate) + profile.op_overhead

    def transfer_time(self, nbytes: float, src: DeviceKind, dst: DeviceKind) -> float:
        if src == dst:
            return 0.0
        return self.link.transfer_time(nbytes)

    def region_overhead(self, kind: DeviceKind) -> float:
        return self._profile(kind).region_overhead

    # ------------------------------------------------------------------ explanation
    def explain(self, node: OpNode, kind: DeviceKind) -> OpEstimate:
        """The op's roofline terms on ``kind``: FLOPs, bytes, both times and which bound won."""
        profile = self._profile(kind)
        cls = op_class(node)
        efficiency = profile.efficiency(cls)
        dtype = _dtype_of(node)
        if cls == "matrix" and dtype in profile.achieved_matrix_flops:
            rate = profile.achieved_matrix_flops[dtype].value
        else:
            peak = profile.matrix_flops if cls == "matrix" else profile.vector_flops
            rate = peak * efficiency
        nbytes = _bytes_from_split(_byte_split(node), profile.float_bytes)
        return OpEstimate(
            op=node.op, kind=kind, op_class=cls, flops=node.flops, nbytes=nbytes,
            compute_s=node.flops / rate,
            memory_s=nbytes / (profile.memory_bandwidth * efficiency),
            overhead_s=profile.op_overhead, efficiency=efficiency,
        )

    def _profile(self, kind: DeviceKind) -> HardwareProfile:
        if kind == "cpu":
            return self.cpu
        if kind == "accel":
            return self.accel
        raise ProfileError(f"unknown device kind {kind!r}; expected 'cpu' or 'accel'")


def _rates(profile: HardwareProfile, cls: str) -> tuple[float, float]:
    efficiency = profile.efficiency(cls)
    peak = profile.matrix_flops if cls == "matrix" else profile.vector_flops
    return peak * efficiency, profile.memory_bandwidth * efficiency


def _dtype_of(node: OpNode) -> str:
    for spec in (*node.args, *node.outputs):
        return spec.dtype
    return "float32"


def _byte_split(node: OpNode) -> tuple[float, float]:
    """(float32 elements, bytes of everything else) that the op reads and writes."""
    f32 = other = 0.0
    for spec in (*node.inputs, *node.weights, *node.outputs):
        if spec.dtype == "float32":
            f32 += math.prod(spec.shape)
        else:
            other += math.prod(spec.shape) * DTYPE_BYTES.get(spec.dtype, 4)
    return f32, other


def _bytes_from_split(split: tuple[float, float], float_bytes: float | None) -> float:
    """Bytes moved on a device that may store float32 in a narrower type (``float_bytes``)."""
    f32, other = split
    return f32 * (4 if float_bytes is None else min(4, float_bytes)) + other
