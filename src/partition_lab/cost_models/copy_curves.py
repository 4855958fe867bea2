"""Copy curves: measured copy times by size, and the names a profile cache stores them under."""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ProfileError


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


def link_curves(src: Any, dst: Any) -> tuple[str, str]:
    """The names of the curves a copy from device ``src`` to ``dst`` is read from: the domain
    curve (copy and cast as the executor makes them), else the plain memory-to-memory copy."""
    return (f"{src.memory}:{src.precision}->{dst.memory}:{dst.precision}",
            f"{src.memory}->{dst.memory}")
