"""Measured final choice: the cost model proposes a few plans, the device decides.

The cost model ranks plans well but its error is as large as many of the gains it predicts
(``strategies/robust.py``), so the last step is taken by timing: :func:`propose` keeps greedy's
plan and the ``k`` best distinct other plans twice over, by predicted mean and by optimism
(mean - 2 sd, so that a plan the model is unsure of still gets tried); :func:`choose` times them
in two stages, each end to end in turns (one timed run of each per round, the order rotated
every round, so that a drift of the machine hits every plan alike, and each timed run right
after an untimed one of the same plan, so that what ran before it does not count):

1. *screen*: every candidate; the (up to) :data:`SHORTLIST` candidates with the lowest median
   per-round time ratio to greedy below 1 go on;
2. *confirm*: greedy and the shortlist again, with runners built anew (fresh executors, fresh
   memory), on rounds that did not select them; :func:`decide` takes the fastest shortlisted
   plan that beat greedy beyond those rounds' spread, in at least three of four of them (the
   75th percentile of its per-round ratio below 1); else greedy stays.

Why two stages: on the H200 (docs/evidence/results/gpu_choose.md) the one-stage rule (three of four
of the very rounds that chose a plan) both kept plans that ran 1-1.3% slower than greedy when
timed anew and left gains of 4-38% the choosing rounds had seen by median. Each set of
executors carries a lasting offset of a few percent; rounds that did not select the plan remove
the selection's winner's curse. ``tests/test_choice.py`` simulates such a machine, and
a replay of both rules on the H200 timings is in docs/evidence/results/gpu_choose.md.

The runner is the PyTorch plan executor
(:class:`~partition_lab.executors.torch_exec.PlanExecutor`: non-host devices on ``device``,
the host on the CPU, seeded synthetic weights): on a GPU machine it times what the executor
runs there; on a CPU the accelerators are stand-ins and the choice says so.

A decision is kept in the profile cache (:func:`remember`, under :func:`decision_key`: the
graph, what each op may run on, the platform and the runner's device) and reused without timing
(:func:`reuse`) when the same model is partitioned on the same platform and device again.

>>> result = choose(graph, support, cost_model, bindings, k=3, device="cuda")  # doctest: +SKIP
>>> result.chosen, result.plan.strategy                                         # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .comparison import compare_plans
from .core.graph import OpGraph
from .core.plan import PartitionPlan
from .core.support import Support
from .cost_models.base import CostModel
from .errors import PartitionLabError
from .strategies import available_strategies, get_strategy

#: Rounds a stage needs before its times decide anything ("three of four" needs four).
MIN_DECIDING_ROUNDS = 4
#: A stage's timing stops at this many times its share of the budget, whatever the rounds
#: (``--choose-seconds`` bounds the choice: plans too slow for it are not chosen).
HARD_FACTOR = 2.0
#: How many screened candidates go on to the confirming stage.
SHORTLIST = 2
#: The share of the timing budget (``max_seconds``) the screening stage gets; the confirming
#: stage, with fewer plans, gets the rest.
SCREEN_SHARE = 0.5
#: Untimed runs of a plan right before each timed one (``timed_in_turns(settle=)``): what
#: ran before it must not slow it (the plan after an all-host plan did, by a median 7-9%;
#: with one settling run, 3%: docs/evidence/results/gpu_choose.md).
SETTLE_RUNS = 1
#: ... and for at least this many seconds (``timed_in_turns(settle_s=)``).
SETTLE_SECONDS = 0.0
#: Optimism: a plan's predicted mean minus this many standard deviations.
OPTIMISM_Z = 2.0

TimeFn = Callable[[Mapping[str, PartitionPlan]], dict[str, list[float]]]
"""``timer({name: plan}) -> {name: [seconds per round]}``: the plans timed in turns."""


@dataclass
class Candidate:
    """One plan put to the device: who made it, what the model predicted, what was measured."""

    name: str
    plan: PartitionPlan
    predicted_s: float
    sigma_s: float
    measured_s: list[float] = field(default_factory=list)
    #: Seconds per round in the confirming stage (empty: not shortlisted, or not timed there).
    confirm_s: list[float] = field(default_factory=list)

    @property
    def optimistic_s(self) -> float:
        return self.predicted_s - OPTIMISM_Z * self.sigma_s

    def to_dict(self) -> dict[str, Any]:
        record = {"plan": self.name, "predicted_s": self.predicted_s, "sigma_s": self.sigma_s,
                  "measured_s": list(self.measured_s)}
        if self.confirm_s:
            record["confirm_s"] = list(self.confirm_s)
        return record


@dataclass
class Choice:
    """What :func:`choose` did: the candidates, the chosen one's name, the runner, and why."""

    candidates: list[Candidate]
    chosen: str
    runner: str
    reason: str
    elapsed_s: float = 0.0
    #: Whether enough rounds were timed to decide (False when timing failed, was not needed,
    #: or too few rounds fit the time allowed): only such a choice is worth keeping.
    conclusive: bool = False

    @property
    def shortlist(self) -> list[str]:
        """The candidates the confirming stage timed again (greedy not counted)."""
        return [c.name for c in self.candidates[1:] if c.confirm_s]

    @property
    def plan(self) -> PartitionPlan:
        """The chosen plan, carrying this choice (its plan JSON's ``"choice"``) and the reason
        as a note."""
        plan = next(c.plan for c in self.candidates if c.name == self.chosen)
        return dataclasses.replace(plan, choice=self.to_dict(),
                                   notes=[*plan.notes, f"measured choice: {self.reason}"])

    def to_dict(self) -> dict[str, Any]:
        """The plan JSON's ``"choice"`` record."""
        return {"candidates": [c.to_dict() for c in self.candidates], "chosen": self.chosen,
                "runner": self.runner, "reason": self.reason, "elapsed_s": self.elapsed_s}


# ---------------------------------------------------------------------------- propose
def propose(graph: OpGraph, support: Support, cost_model: CostModel, k: int = 3
            ) -> list[Candidate]:
    """Greedy's plan and up to ``k`` other distinct plans by predicted mean plus up to ``k``
    by optimism (mean - 2 sd), from every registered strategy and, where they take it, the
    ``cost`` and ``optimal`` strategies without their robustness margin (``confidence_z=0``:
    the plan the model predicts fastest, which the robust rule may have refused)."""
    if k < 1:
        raise PartitionLabError(f"choose: k must be at least 1, got {k}")
    plain = compare_plans(graph, support, strategies=available_strategies(),
                          cost_model=cost_model)
    eager = compare_plans(graph, support, cost_model=cost_model, strategies=[
        get_strategy(name, confidence_z=0.0) for name in ("cost", "optimal")])
    seen: dict[tuple[str, ...], Candidate] = {}
    for comparison, suffix in ((plain, ""), (eager, "_z0")):
        for row in comparison.rows:
            if not row.applicable or row.total_s is None or not math.isfinite(row.total_s):
                continue
            plan = comparison.plans[row.strategy]
            key = tuple(d.device for d in plan.decisions)
            if key not in seen:
                seen[key] = Candidate(row.strategy + suffix, plan, row.total_s,
                                      row.total_sigma_s or 0.0)
    greedy = next((c for c in seen.values() if c.name == "greedy"), None)
    if greedy is None:
        raise PartitionLabError("choose: greedy's plan could not be priced, so there is "
                                "nothing to compare the candidates with")
    others = [c for c in seen.values() if c is not greedy]
    by_mean = sorted(others, key=lambda c: c.predicted_s)[:k]
    by_optimism = sorted(others, key=lambda c: c.optimistic_s)[:k]
    picked = [greedy]
    for candidate in by_mean + by_optimism:
        if all(candidate is not other for other in picked):
            picked.append(candidate)
    return picked


# ---------------------------------------------------------------------------- decide
def ratios_to_greedy(times: Sequence[float], greedy: Sequence[float]) -> list[float]:
    """Per-round time ratios of a plan to greedy's (rounds paired: the same round of turns)."""
    return [t / g for t, g in zip(times, greedy, strict=False) if g > 0]


def shortlist(candidates: Sequence[Candidate], size: int = SHORTLIST) -> list[Candidate]:
    """The screened candidates (greedy first) worth confirming: the ``size`` with the lowest
    median ratio to greedy, among those below 1."""
    greedy = candidates[0]
    scored = []
    for candidate in candidates[1:]:
        ratios = ratios_to_greedy(candidate.measured_s, greedy.measured_s)
        if ratios and statistics.median(ratios) < 1.0:
            scored.append((statistics.median(ratios), candidate))
    scored.sort(key=lambda pair: pair[0])
    return [candidate for _, candidate in scored[:size]]


def decide(candidates: Sequence[Candidate]) -> tuple[str, str]:
    """``(chosen name, why)`` from screened and confirmed candidates (greedy first): the
    fastest by confirming median among the shortlisted plans that beat greedy beyond the
    confirming rounds' own spread, faster than greedy in at least three of four of them (the
    75th percentile of the per-round ratio below 1); else greedy."""
    greedy = candidates[0]
    if not greedy.confirm_s:
        return greedy.name, "nothing was timed again: greedy's plan kept"
    winners = []
    for candidate in candidates[1:]:
        ratios = ratios_to_greedy(candidate.confirm_s, greedy.confirm_s)
        if ratios and upper_quartile(ratios) < 1.0:
            winners.append((statistics.median(ratios), candidate))
    rounds = f"{len(greedy.measured_s)} + {len(greedy.confirm_s)} rounds"
    if not winners:
        return greedy.name, (f"no shortlisted candidate beat greedy in three of four rounds "
                             f"when timed again ({rounds}): greedy's plan kept")
    ratio, best = min(winners, key=lambda pair: pair[0])
    return best.name, (f"{best.name} beat greedy in at least three of four rounds when timed "
                       f"again ({rounds}), median {ratio:.3f}x greedy's time")


def upper_quartile(values: Sequence[float]) -> float:
    """The 75th percentile (linear interpolation between the closest ranks; a lone value is
    its own quartile): below 1 for per-round ratios means faster in three rounds of four."""
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=4, method="inclusive")[2]


# ---------------------------------------------------------------------------- choose
def choose(graph: OpGraph, support: Support, cost_model: CostModel,
           bindings: Sequence[Sequence[Any]] | None = None, *, k: int = 3,
           device: str = "cpu", rounds: int = 200, min_rounds: int = 6,
           max_seconds: float = 20.0, timer: TimeFn | None = None,
           confirm_timer: TimeFn | None = None, runner: str | None = None) -> Choice:
    """Propose (:func:`propose`), screen, confirm, decide (:func:`decide`).

    ``timer`` times the screening stage and ``confirm_timer`` (default: ``timer`` again) the
    confirming one. By default both are the PyTorch executor on ``device`` with ``bindings``,
    each up to ``rounds`` rounds but stopped once its share of ``max_seconds`` has passed
    (:data:`SCREEN_SHARE` for screening, the rest for confirming) after ``min_rounds``, and at
    :data:`HARD_FACTOR` times its share whatever the rounds (the executors' setup and warm-up
    runs come on top). A stage with fewer than :data:`MIN_DECIDING_ROUNDS` rounds decides
    nothing: greedy's plan is kept and the reason says to allow more seconds. If timing fails,
    greedy's plan is kept and the reason says why; nothing else changes.
    """
    start = time.perf_counter()
    candidates = propose(graph, support, cost_model, k)
    if timer is None:
        if bindings is None:
            raise PartitionLabError("choose: the plans cannot be run without the graph's "
                                    "argument bindings (a bundle's, or bindings_from_relay)")
        timer = torch_timer(graph, bindings, device=device, rounds=rounds,
                            min_rounds=min_rounds, max_seconds=max_seconds * SCREEN_SHARE)
        confirm_timer = confirm_timer or torch_timer(
            graph, bindings, device=device, rounds=rounds, min_rounds=min_rounds,
            max_seconds=max_seconds * (1 - SCREEN_SHARE))
        runner = runner or f"torch executor ({device})"
    return measure_and_decide(candidates, timer, runner or "custom timer", start,
                              confirm_timer=confirm_timer)


def measure_and_decide(candidates: Sequence[Candidate], timer: TimeFn, runner: str,
                       start: float | None = None, *,
                       confirm_timer: TimeFn | None = None) -> Choice:
    """Screen proposed ``candidates`` (greedy first) with ``timer``, confirm the
    :func:`shortlist` with ``confirm_timer`` (default ``timer``: called again, it builds its
    runners anew) and :func:`decide` on the confirming rounds. A timer that raises, in either
    stage, leaves greedy's plan, and the reason says why. ``start``: the
    ``time.perf_counter()`` the choice's elapsed time counts from (default now)."""
    start = time.perf_counter() if start is None else start
    candidates = list(candidates)
    if len(candidates) == 1:
        return Choice(candidates, candidates[0].name, runner,
                      "no other distinct plan to try: greedy's plan kept",
                      time.perf_counter() - start)
    greedy = candidates[0]
    try:
        times = timer({c.name: c.plan for c in candidates})
        for candidate in candidates:
            candidate.measured_s = [float(t) for t in times.get(candidate.name, [])]
        if len(greedy.measured_s) < MIN_DECIDING_ROUNDS:
            return Choice(candidates, greedy.name, runner, _too_few(greedy.measured_s, "screening"),
                          time.perf_counter() - start)
        picked = shortlist(candidates)
        if picked:
            again = (confirm_timer or timer)({c.name: c.plan for c in [greedy, *picked]})
            for candidate in (greedy, *picked):
                candidate.confirm_s = [float(t) for t in again.get(candidate.name, [])]
    except Exception as err:  # noqa: BLE001 - a failed run must leave greedy's plan, not a crash
        for candidate in candidates:
            candidate.confirm_s = []
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        return Choice(candidates, greedy.name, runner,
                      f"timing failed ({type(err).__name__}: {first[:160]}): greedy's plan kept",
                      time.perf_counter() - start)
    if not picked:
        rounds = len(greedy.measured_s)
        return Choice(candidates, greedy.name, runner,
                      f"no candidate was faster than greedy by median ({rounds} screening "
                      "rounds): greedy's plan kept", time.perf_counter() - start,
                      conclusive=True)
    if len(greedy.confirm_s) < MIN_DECIDING_ROUNDS:
        return Choice(candidates, greedy.name, runner, _too_few(greedy.confirm_s, "confirming"),
                      time.perf_counter() - start)
    chosen, reason = decide(candidates)
    return Choice(candidates, chosen, runner, reason, time.perf_counter() - start,
                  conclusive=True)


def _too_few(times: Sequence[float], stage: str) -> str:
    each = f", {statistics.median(times):.3g} s a run" if times else ""
    return (f"only {len(times)} {stage} rounds fit the time allowed{each} ({MIN_DECIDING_ROUNDS} "
            "needed): greedy's plan kept; allow more seconds to choose")


# ---------------------------------------------------------------------------- keeping decisions
def decision_key(graph: OpGraph, support: Support, runner_key: str) -> str:
    """What a decision depends on, as a hex digest: every op's signature and the devices that
    may run it, the edges and graph inputs, the platform's devices, and the runner's device key
    (hardware and software). Any change makes another key, so a stale decision is never reused.
    """
    from .cost_models.signatures import op_signature

    digest = hashlib.sha256()
    for part in (support.platform.name, *support.platform.names, runner_key):
        digest.update(part.encode() + b"\0")
    for node in graph.nodes:
        digest.update(f"{op_signature(node)}|{support.allowed(node.id)}\0".encode())
    edges = sorted((u, v, tuple(d.get("indices", ()))) for u, v, d in graph.nx.edges(data=True))
    digest.update(repr(edges).encode())
    digest.update(repr(sorted((n, str(t.spec)) for n, t in graph.graph_inputs.items())).encode())
    return digest.hexdigest()


def remember(cache: Any, key: str, choice: Choice, model: str = "") -> None:
    """Keep ``choice`` in ``cache`` (a :class:`~partition_lab.cost_models.cache_records.ProfileCache`)
    under ``key``: the chosen plan's strategy and devices and the choice record."""
    from .cost_models.cache_records import now_iso

    plan = choice.plan
    cache.choices[key] = {"strategy": plan.strategy, "model": model,
                          "devices": [d.device for d in plan.decisions],
                          "choice": choice.to_dict(), "measured_at": now_iso()}


def reuse(cache: Any, key: str, graph: OpGraph, support: Support) -> PartitionPlan | None:
    """The plan kept in ``cache`` under ``key``, rebuilt on ``graph`` and validated, its
    ``choice`` marked ``"reused": true``; None where there is none or it no longer fits."""
    from .errors import PlanError

    record = getattr(cache, "choices", {}).get(key)
    if record is None or len(record["devices"]) != len(graph) \
            or not set(record["devices"]) <= set(support.platform.names):
        return None
    reason = record["choice"].get("reason", "")
    try:
        plan = PartitionPlan.from_devices(
            graph, support, record["strategy"], record["devices"],
            notes=[f"measured choice (kept in the profile cache since {record['measured_at']}, "
                   f"not timed again): {reason}"])
        plan.validate()
    except (PlanError, KeyError, ValueError):
        return None
    return dataclasses.replace(plan, choice={**record["choice"], "reused": True})


def torch_timer(graph: OpGraph, bindings: Sequence[Sequence[Any]], *, device: str = "cpu",
                rounds: int = 30, min_rounds: int = 6, max_seconds: float = 20.0,
                seed: int = 0, settle: int = SETTLE_RUNS,
                settle_s: float = SETTLE_SECONDS) -> TimeFn:
    """A :data:`TimeFn` running plans with the PyTorch executor: seeded synthetic weights,
    batch norms calibrated on the input, two warm-up runs each, then rounds in turns, each
    timed run after ``settle`` untimed ones of the same plan, lasting ``settle_s`` at least
    (:data:`SETTLE_RUNS`, :data:`SETTLE_SECONDS`). Every call builds its
    executors anew (what the confirming stage relies on)."""
    def timer(plans: Mapping[str, PartitionPlan]) -> dict[str, list[float]]:
        from .executors.torch_exec import PlanExecutor, calibrate_batch_norm
        from .executors.turns import timed_in_turns
        from .executors.weights import sample_inputs, synthetic_weights

        weights = synthetic_weights(graph, bindings, seed=seed)
        inputs = sample_inputs(graph, seed=seed)
        calibrate_batch_norm(graph, bindings, weights, inputs, device=device)
        executors = {name: PlanExecutor(graph, plan, bindings, weights, device=device)
                     for name, plan in plans.items()}
        for executor in executors.values():
            executor.prepare()
            for _ in range(2):
                executor.run(inputs)
        return timed_in_turns(executors, inputs, rounds, max_seconds, min_rounds,
                              hard_seconds=HARD_FACTOR * max_seconds, settle=settle,
                              settle_s=settle_s)

    return timer


__all__ = ["Candidate", "Choice", "choose", "decide", "decision_key", "measure_and_decide",
           "propose", "ratios_to_greedy", "remember", "reuse", "shortlist", "torch_timer",
           "upper_quartile"]
