"""A cost model from times measured on a real GPU machine (an H200 and its host CPU).

The profile is a JSON file written by ``bench/gpu/measure_profile.py`` on the GPU machine
(schema ``partition_lab.gpu_profile/1``)::

    {"schema": "partition_lab.gpu_profile/1",
     "meta": {"date", "gpu", "driver", "torch", "cuda", "cudnn", "host_cpu", "cpu_threads",
              "executor", "command", ...},
     "ops": {"accel": {op_signature: seconds}, "cpu": {op_signature: seconds}},
     "op_info": {op_signature: {"op", "class", "roofline_accel_s", "roofline_cpu_s"}},
     "transfers": {"h2d": [[nbytes, seconds], ...], "d2h": [...],
                   "h2d_raw": [...], "d2h_raw": [...], "h2d_pinned": [...], "d2h_pinned": [...]},
     "executor_transfers": "pageable",
     "region_overhead_s": {"accel": seconds, "cpu": seconds},
     "executor_op_overhead": {"accel": {"host_per_op_s", "overhead_per_op_s"}, "cpu": {...}}}

``h2d``/``d2h`` are the copies as the executor makes them (pageable memory, timed inside its
runs); ``*_raw`` are single copies alone and ``*_pinned`` copies from pinned memory, kept for
comparison. Op times are keyed by :func:`~partition_lab.cost_models.measured.op_signature` and were measured
with the executor's own kernels (:mod:`partition_lab.executors.torch_exec`): accelerator ops in the graph's
dtype on the GPU, CPU ops with PyTorch's CPU kernels on the host. An op whose signature was not
measured gets the roofline estimate of the ``h200`` profile (or the given fallback) scaled by the
median measured/estimated ratio of its op class on that device, so that unmeasured ops stay
consistent with measured ones.

Ops timed alone miss what the executor does around each op (looking up arguments, storing
results: ``executor_op_overhead``, measured with a chain of tiny ops). On the CPU an op runs as
it is issued, so every op pays that on top of its time; on the GPU launches are queued, so an
op takes at least the host time per op of such a chain and otherwise its measured time.
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from ..core.graph import OpGraph, OpNode
from ..core.ops import op_class
from ..errors import ProfileError
from .base import CostModel, kind_of
from .measured import op_signature, read_json_file
from .profiles import load_profile
from .roofline import RooflineCostModel

SCHEMA = "partition_lab.gpu_profile/1"
DEFAULT_PROFILE = "h200_measured.json"
_DIRECTIONS = {("cpu", "accel"): "h2d", ("accel", "cpu"): "d2h"}


@dataclass(frozen=True)
class TransferCurve:
    """Measured copy times by size; linear interpolation between points, the last segment's
    bandwidth beyond the largest, the smallest time below the smallest."""

    sizes: tuple[float, ...]
    times: tuple[float, ...]

    @classmethod
    def from_points(cls, points: Sequence[Sequence[float]], where: str) -> TransferCurve:
        pairs = sorted((float(n), float(t)) for n, t in points)
        if len(pairs) < 2 or any(t <= 0 or not math.isfinite(t) for _, t in pairs):
            raise ProfileError(f"{where}: needs at least two points with positive times")
        return cls(tuple(n for n, _ in pairs), tuple(t for _, t in pairs))

    def time(self, nbytes: float) -> float:
        sizes, times = self.sizes, self.times
        if nbytes <= sizes[0]:
            return times[0]
        i = min(bisect.bisect_left(sizes, nbytes), len(sizes) - 1)
        (n0, t0), (n1, t1) = (sizes[i - 1], times[i - 1]), (sizes[i], times[i])
        slope = (t1 - t0) / (n1 - n0)
        return max(t0 + slope * (nbytes - n0), times[0])

    def bandwidth(self) -> float:
        """Bytes per second of the largest measured copy."""
        return self.sizes[-1] / self.times[-1]


@dataclass
class GpuProfile:
    """A loaded measured profile (see the module docstring)."""

    ops: dict[str, dict[str, float]]
    transfers: dict[str, TransferCurve]
    region_overhead_s: dict[str, float]
    op_info: dict[str, dict[str, Any]] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    path: str = ""
    #: Per device kind: ``host_per_op_s`` and ``overhead_per_op_s`` (0 when not measured).
    executor_op_overhead: dict[str, dict[str, float]] = field(default_factory=dict)


def default_profile_path() -> Path:
    """The measured H200 profile shipped with the package."""
    return Path(str(resources.files(__package__) / "profiles" / DEFAULT_PROFILE))


def load_gpu_profile(path: str | Path | None = None) -> GpuProfile:
    """Read a profile written by ``bench/gpu/measure_profile.py`` (default: the shipped one).

    Raises
    ------
    ProfileError
        If the file is missing, not JSON, of another schema, or has malformed numbers.
    """
    path = Path(path) if path is not None else default_profile_path()
    return parse_gpu_profile(read_json_file(path, "measured GPU profile"), str(path))


def parse_gpu_profile(data: Mapping[str, Any], where: str = "profile") -> GpuProfile:
    """A :class:`GpuProfile` from the decoded JSON of a profile file."""
    if data.get("schema") != SCHEMA:
        raise ProfileError(f"{where}: 'schema' must be {SCHEMA!r}")
    ops: dict[str, dict[str, float]] = {}
    for kind in ("accel", "cpu"):
        table = data.get("ops", {}).get(kind, {})
        for key, value in table.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
                    math.isfinite(value) and value > 0):
                raise ProfileError(f"{where}: ops.{kind}[{key!r}] must be a positive number")
        ops[kind] = {k: float(v) for k, v in table.items()}
    kind_of_copy = data.get("executor_transfers", "pageable")
    suffix = "" if kind_of_copy == "pageable" else f"_{kind_of_copy}"
    transfers = {}
    for direction in ("h2d", "d2h"):
        points = data.get("transfers", {}).get(direction + suffix)
        if points is None:
            raise ProfileError(f"{where}: missing transfers.{direction + suffix}")
        transfers[direction] = TransferCurve.from_points(points, f"{where}: {direction}")
    overhead = data.get("region_overhead_s", {})
    if not all(isinstance(overhead.get(k), (int, float)) and overhead[k] >= 0
               for k in ("accel", "cpu")):
        raise ProfileError(f"{where}: region_overhead_s needs non-negative 'accel' and 'cpu'")
    per_op = {kind: {key: float(value) for key, value in dict(values).items()}
              for kind, values in dict(data.get("executor_op_overhead", {})).items()}
    if any(v < 0 or not math.isfinite(v) for values in per_op.values() for v in values.values()):
        raise ProfileError(f"{where}: executor_op_overhead values must be non-negative")
    return GpuProfile(ops, transfers, {k: float(overhead[k]) for k in ("accel", "cpu")},
                      dict(data.get("op_info", {})), dict(data.get("meta", {})), where, per_op)


class MeasuredGpuCostModel:
    """Op, copy and launch times measured on a GPU machine, with a scaled roofline fallback.

    Parameters
    ----------
    profile:
        A :class:`GpuProfile`, a path to a profile file, or None for the shipped H200 profile.
    fallback:
        The model for op signatures that were not measured; default the ``h200`` +
        ``xeon_gold_6130`` roofline. Its estimates are multiplied by the median
        measured/estimated ratio of the op's class on that device (from ``op_info``).

    >>> model = MeasuredGpuCostModel()                                   # doctest: +SKIP
    >>> model.transfer_time(1e6, "cpu", "accel") > 0                       # doctest: +SKIP
    True
    """

    def __init__(self, profile: GpuProfile | str | Path | None = None,
                 fallback: CostModel | None = None) -> None:
        self.profile = profile if isinstance(profile, GpuProfile) else load_gpu_profile(profile)
        self.fallback = fallback or RooflineCostModel(load_profile("h200"),
                                                      load_profile("xeon_gold_6130"))
        self.scale = self._fallback_scale()
        gpu = self.profile.meta.get("gpu", "GPU")
        counts = {k: len(v) for k, v in self.profile.ops.items()}
        self.name = (f"measured-gpu({gpu}, {counts.get('accel', 0)} GPU + "
                     f"{counts.get('cpu', 0)} CPU op signatures)")

    def _fallback_scale(self) -> dict[tuple[str, str], float]:
        """Median measured/roofline ratio per (device kind, op class)."""
        ratios: dict[tuple[str, str], list[float]] = {}
        for key, info in self.profile.op_info.items():
            for kind in ("accel", "cpu"):
                measured = self.profile.ops.get(kind, {}).get(key)
                estimate = info.get(f"roofline_{kind}_s")
                if measured and estimate:
                    ratios.setdefault((kind, info.get("class", "vector")), []).append(
                        measured / estimate)
        return {k: statistics.median(v) for k, v in ratios.items()}

    # ------------------------------------------------------------------ CostModel protocol
    def op_time(self, node: OpNode, device: str) -> float:
        kind = kind_of(device)
        alone = self.op_time_alone(node, kind)
        per_op = self.profile.executor_op_overhead.get(kind, {})
        if kind == "cpu":
            return alone + per_op.get("overhead_per_op_s", 0.0)
        return max(alone, per_op.get("host_per_op_s", 0.0))

    def op_time_alone(self, node: OpNode, kind: str) -> float:
        """The op timed alone (measured, or the scaled roofline), without executor overhead."""
        kind = kind_of(kind)
        measured = self.profile.ops.get(kind, {}).get(op_signature(node))
        if measured is not None:
            return measured
        return self.fallback.op_time(node, kind) * self.scale.get((kind, op_class(node)), 1.0)

    def transfer_time(self, nbytes: float, src: str, dst: str) -> float:
        src, dst = kind_of(src), kind_of(dst)
        if src == dst:
            return 0.0
        return self.profile.transfers[_DIRECTIONS[(src, dst)]].time(nbytes)

    def region_overhead(self, device: str) -> float:
        return self.profile.region_overhead_s[kind_of(device)]

    # ------------------------------------------------------------------ explanation
    def is_measured(self, node: OpNode, kind: str) -> bool:
        return op_signature(node) in self.profile.ops.get(kind_of(kind), {})

    def coverage(self, graph: OpGraph) -> dict[str, float]:
        """Fraction of the graph's nodes whose time on each device kind is a measurement."""
        n = max(len(graph), 1)
        return {kind: sum(self.is_measured(node, kind) for node in graph) / n
                for kind in ("accel", "cpu")}

    def explain(self, node: OpNode, kind: str) -> str:
        kind = kind_of(kind)
        seconds = self.op_time(node, kind)
        if self.is_measured(node, kind):
            return f"{node.op} on {kind}: {seconds * 1e3:.4g} ms, measured"
        scale = self.scale.get((kind, op_class(node)), 1.0)
        return (f"{node.op} on {kind}: {seconds * 1e3:.4g} ms, roofline x {scale:.3g} "
                f"(not measured)")
