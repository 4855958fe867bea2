"""Plans timed end to end in turns, without torch or TVM: any runner with ``run(inputs)``.

Used by the measured choice (:mod:`partition_lab.choice`) with the PyTorch executor and with
TVM-built plans (:mod:`partition_lab.relax.timing`), and by the GPU evidence scripts.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any


def timed_in_turns(executors: Mapping[str, Any], inputs: Mapping[str, Any], rounds: int,
                   max_seconds: float, min_rounds: int, hard_seconds: float | None = None,
                   settle: int = 0, settle_s: float = 0.0) -> dict[str, list[float]]:
    """End-to-end seconds of each (prepared, warm) executor (``run(inputs)``, and ``_clock()``
    that waits for its device first), one run of each per round in an
    order rotated every round (a drift of the machine hits every plan alike), until
    ``rounds`` or ``max_seconds`` after ``min_rounds``, and after ``hard_seconds`` (if given)
    whatever the rounds: plans too slow for the budget get fewer rounds, not a longer wait.

    ``settle``: untimed runs of a plan right before each of its timed runs. Rotation keeps the
    cyclic order, so one plan follows the same other plan in almost every round; on the H200 a
    plan run right after an all-host plan (the GPU idle meanwhile) measured a median 7-9% slower
    than after a GPU plan (docs/evidence/results/gpu_choose.md). With ``settle=1`` the
    timed run follows a run of the same plan, as it does when a model is served; on two later
    H200 instances that cut the penalty to a median 3%, not to zero.

    ``settle_s``: the untimed runs go on until they have also taken at least this many seconds
    (a plan of 1 ms then settles for as long as one of 50 ms): whatever a long host run left
    behind (an idle GPU's clocks, caches) has a time to recover in, not a number of runs."""
    names = list(executors)
    times: dict[str, list[float]] = {name: [] for name in names}
    start = time.perf_counter()
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            executor = executors[name]
            _settle(executor, inputs, settle, settle_s)
            t0 = executor._clock()
            executor.run(inputs)
            times[name].append(executor._clock() - t0)
        elapsed = time.perf_counter() - start
        if (r + 1 >= min_rounds and elapsed > max_seconds) or \
                (hard_seconds is not None and elapsed > hard_seconds):
            break
    return times


def _settle(executor: Any, inputs: Mapping[str, Any], runs: int, seconds: float) -> None:
    """Untimed runs of ``executor``: at least ``runs``, and until ``seconds`` have passed."""
    start = time.perf_counter()
    done = 0
    while done < runs or (seconds > 0 and time.perf_counter() - start < seconds):
        executor.run(inputs)
        done += 1
