"""Robust choices: leave greedy's plan only where the predicted gain exceeds the model's error.

A cost model may say how uncertain its predictions are (the uncertainty interface of
:mod:`partition_lab.cost_models`): ``op_sigma(node, device)``, ``transfer_sigma(nbytes, src,
dst)`` and ``overhead_sigma(device)``, each a relative standard deviation. A plan's total then
has a standard deviation, and so has the *difference* between two plans: only the ops that
changed device, the tensors whose copies changed and the regions that changed count towards it
(what both plans share cancels out). Op, copy and region errors are taken as independent; an
optional ``device_sigma(device)`` adds the error every op of a device shares (the machine's speed
when the plan runs vs when it was profiled, docs/evidence/results/gpu_ingraph.md), applied to the
change in that device's busy time, so a move of many ops is not judged as if their errors averaged out.
Systematic errors beyond that (a profile 20% slow on every host op) are what ``min_gain`` is
for. A cost model may calibrate what it states (``gain_sigma_scale``, ``total_sigma_scale``:
factors fitted on measured plans; the profiled model's are in ``cost_models/profiled.py``).

Two sigmas, one error model. :func:`plan_sigma` is the uncertainty of one plan's predicted
total: how long will this plan take. :func:`gain_sigma` is the uncertainty of the *difference*
between two plans' totals: is this plan faster than greedy's. The second is what a choice
between plans needs, and what :func:`decide` (and so ``cost``, ``optimal`` and ``compare``'s
"best") tests; it is not the two totals' sigmas combined, since what the plans share cancels.
Both read the same errors: independent per op, per copy; one launch-overhead figure per device
(``region_overhead(device)``), so its error is shared by every region on that device (12
regions of an overhead 50% uncertain are 12 x 50% off together, not sqrt(12) x); one drift per
device. So the gain's sigma never exceeds the sum of the two totals' sigmas (before the
calibration factors, which are fitted apart).

:func:`decide` keeps greedy's plan unless ``gain > max(z * sigma(gain), min_gain * greedy)``:
plans predicted a few percent faster have measured slower (CHANGELOG, H200 runs).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.graph import OpGraph
from ..core.plan import PartitionPlan
from ..core.support import Support
from ..cost_models.base import CostModel
from ..errors import PartitionLabError
from .base import ms
from .costing import CostTables


@dataclass(frozen=True)
class RobustChoice:
    """Whether to leave greedy's plan for the best other plan found, and the numbers that decided.

    ``sigma`` is the uncertainty of the *gain* (:func:`gain_sigma`: the difference between the
    two plans), not of either plan's total (:func:`plan_sigma`).
    """

    leave: bool
    gain: float  # greedy's predicted total minus the candidate's (s)
    sigma: float  # standard deviation of that gain (s)
    threshold: float  # the gain it had to exceed (s)
    greedy_total: float = math.nan  # greedy's predicted total (s)
    total: float = math.nan  # the candidate's predicted total (s)
    z: float = 2.0  # the threshold's sigmas (confidence_z)
    min_gain: float = 0.0  # the threshold's floor, a fraction of greedy's total

    @property
    def _floored(self) -> bool:
        """Whether the ``min_gain`` floor, not the sigmas, set the threshold."""
        return bool(self.min_gain) and self.threshold > self.z * self.sigma

    def threshold_text(self) -> str:
        """What the threshold is: "2 sigma = 6.02 ms" (or the ``min_gain`` floor's share)."""
        if self._floored:
            return f"min_gain {self.min_gain:.3g} x greedy's total = {ms(self.threshold)}"
        return f"{self.z:g} sigma = {ms(self.threshold)}"

    def note(self, strategy: str) -> str:
        """What was decided, the gain's subject first: "kept greedy's plan: the predicted gain
        of 5.39 ms (8.42 ms -> 3.03 ms) does not exceed the threshold of 6.02 ms (2 sigma; 1
        sigma = 3.01 ms, the uncertainty of the difference between the two plans)"."""
        move = (f" ({ms(self.greedy_total)} -> {ms(self.total)})"
                if math.isfinite(self.greedy_total) and math.isfinite(self.total) else "")
        gain = f"the predicted gain of {ms(self.gain)}{move}"
        why = (f"min_gain {self.min_gain:.3g} x greedy's total" if self._floored else
               f"{self.z:g} sigma")
        sigma = (f"({why}; 1 sigma = {ms(self.sigma)}, the uncertainty of the difference "
                 "between the two plans)")
        if self.leave:
            return (f"{strategy}: left greedy's plan: {gain} exceeds the threshold of "
                    f"{ms(self.threshold)} {sigma}")
        return (f"{strategy}: kept greedy's plan: {gain} does not exceed the threshold of "
                f"{ms(self.threshold)} {sigma}; a gain this small is within the model's error")

    def to_dict(self) -> dict[str, Any]:
        """The ``robust`` record of a ``compare --json`` row (seconds)."""
        return {"left_greedy": self.leave, "gain_s": self.gain, "gain_sigma_s": self.sigma,
                "threshold_s": self.threshold, "greedy_total_s": _finite(self.greedy_total),
                "candidate_total_s": _finite(self.total), "confidence_z": self.z,
                "min_gain": self.min_gain}


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


@dataclass(frozen=True)
class RobustOptions:
    """The options of the strategies that leave greedy's plan only for a gain beyond the
    model's error (``cost``, ``optimal``): a dataclass mixin before :class:`~.base.Strategy`."""

    confidence_z: float = field(default=2.0, metadata={
        "help": "leave greedy's plan only if the predicted gain exceeds this many standard "
                "deviations of the model's error"})
    min_gain: float = field(default=0.0, metadata={
        "help": "... and this fraction of greedy's predicted total"})

    def run_with_choice(self, graph: OpGraph, support: Support, *,
                        cost_model: CostModel | None = None
                        ) -> tuple[PartitionPlan, RobustChoice | None]:
        """``run()``, and the decision on leaving greedy's plan: None where the best plan the
        strategy found is greedy's own (``compare`` shows what a kept plan would have gained)."""
        self.check_support(support)  # type: ignore[attr-defined]
        return self.plan_with_choice(graph, support, cost_model)

    def plan_with_choice(self, graph: OpGraph, support: Support, cost_model: CostModel | None
                         ) -> tuple[PartitionPlan, RobustChoice | None]:
        raise NotImplementedError

    def check_robust_options(self, strategy: str) -> None:
        if not self.confidence_z >= 0:
            raise PartitionLabError(f"strategy {strategy!r}: option confidence_z must be >= 0, "
                                    f"got {self.confidence_z}")
        if not 0 <= self.min_gain < 1:
            raise PartitionLabError(f"strategy {strategy!r}: option min_gain must be in [0, 1), "
                                    f"got {self.min_gain}")


def plan_sigma(tables: CostTables, device: Sequence[int], regions: Sequence[Sequence[int]]) -> float:
    """Standard deviation of a plan's predicted total (seconds).

    A device's launch overhead is one figure, so its error counts once for all the device's
    regions (``regions x sigma x overhead``), as in :func:`gain_sigma`."""
    var = 0.0
    for n, d in enumerate(device):
        var += (tables.sigma[d][n] * tables.time[d][n]) ** 2
    for t in range(tables.tensor_count):
        var += (tables.cross_sigma * tables.tensor_cost(t, device)) ** 2
    counts: dict[int, int] = {}
    for members in regions:
        d = device[members[0]]
        counts[d] = counts.get(d, 0) + 1
    for d, count in counts.items():
        var += (count * tables.overhead_sigma[d] * tables.overhead[d]) ** 2
    busy = _busy(tables, device, range(len(device)), regions)
    var += sum((tables.drift_sigma[d] * t) ** 2 for d, t in busy.items())
    return tables.total_scale * math.sqrt(var)


def _busy(tables: CostTables, device: Sequence[int], nodes: Iterable[int],
          regions: Sequence[Sequence[int]]) -> dict[int, float]:
    """Seconds each device spends on ``nodes`` and on ``regions``' overheads."""
    busy: dict[int, float] = {}
    for n in nodes:
        busy[device[n]] = busy.get(device[n], 0.0) + tables.time[device[n]][n]
    for members in regions:
        d = device[members[0]]
        busy[d] = busy.get(d, 0.0) + tables.overhead[d]
    return busy


def gain_sigma(tables: CostTables, greedy: Sequence[int], greedy_regions: Sequence[Sequence[int]],
               other: Sequence[int], other_regions: Sequence[Sequence[int]]) -> float:
    """Standard deviation of ``total(greedy) - total(other)``: only what differs counts."""
    var = 0.0
    moved = [n for n in range(len(greedy)) if greedy[n] != other[n]]
    for n in moved:
        for d in (greedy[n], other[n]):
            var += (tables.sigma[d][n] * tables.time[d][n]) ** 2
    for t in tables.touched(moved):
        for device in (greedy, other):
            var += (tables.cross_sigma * tables.tensor_cost(t, device)) ** 2
    counts: dict[int, int] = {}
    for device, regions, sign in ((greedy, greedy_regions, 1), (other, other_regions, -1)):
        for members in regions:
            d = device[members[0]]
            counts[d] = counts.get(d, 0) + sign
    for d, change in counts.items():
        var += (abs(change) * tables.overhead_sigma[d] * tables.overhead[d]) ** 2
    # A device's speed on the day (drift) scales all its work alike: what counts is the change
    # in each device's busy time between the two plans, not the sum of the moved ops' errors.
    before = _busy(tables, greedy, moved, ())
    after = _busy(tables, other, moved, ())
    for d in set(before) | set(after):
        change = before.get(d, 0.0) - after.get(d, 0.0) + counts.get(d, 0) * tables.overhead[d]
        var += (tables.drift_sigma[d] * change) ** 2
    return tables.gain_scale * math.sqrt(var)


def decide(tables: CostTables, greedy: Sequence[int], greedy_regions: Sequence[Sequence[int]],
           greedy_total: float, other: Sequence[int], other_regions: Sequence[Sequence[int]],
           other_total: float, *, z: float, min_gain: float) -> RobustChoice:
    """Leave greedy's plan for ``other`` only if the gain clears ``z`` sigmas and ``min_gain``."""
    gain = greedy_total - other_total
    sigma = gain_sigma(tables, greedy, greedy_regions, other, other_regions)
    leave, threshold = clears(gain, sigma, greedy_total, z=z, min_gain=min_gain)
    return RobustChoice(leave, gain, sigma, threshold, greedy_total, other_total, z, min_gain)


def clears(gain: float, sigma: float, greedy_total: float, *, z: float,
           min_gain: float) -> tuple[bool, float]:
    """Whether a predicted ``gain`` over greedy's plan (its sigma ``sigma``) clears the
    threshold ``max(z * sigma, min_gain * greedy_total)``, and that threshold."""
    threshold = max(z * sigma, min_gain * greedy_total)
    eps = 1e-12 * max(1.0, greedy_total)
    return gain > threshold + eps or (threshold <= eps and gain > eps), threshold
