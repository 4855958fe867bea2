"""One device entry of a profile cache, as :class:`~.profiled.ProfiledCostModel` prices from it.

A :class:`ProfileEntry` holds what one entry measured (op medians and their run spread, copy
curves, the executor's overheads, op times inside whole-graph runs) and what is derived from
that alone, when first needed: the per-class fits (:mod:`.fit`) that price unmeasured ops, and
the in-graph / alone ratios that carry an op timed alone into a graph. How a platform's devices
map to entries, copies between devices and every uncertainty stay with the model.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.graph import OpNode
from ..core.ops import op_class
from ..core.patterns import COMPOSITE_OP_PREFIX
from .copy_curves import TransferCurve
from .crossval import kfold_models
from .fit import ClassFits, Sample

#: Signatures with both times an op class needs before its in-graph / alone ratio is its own.
MIN_RATIO = 5
#: (ln p90 - ln p10) of a normal distribution, in standard deviations.
_P10_P90 = 2.5631


@dataclass
class ProfileEntry:
    """One device entry of the cache, with its fits (built when first needed).

    ``sigma_by_class``: the cross-validated sigma per op class, set by the model (computed or
    adopted, :meth:`~.profiled.ProfiledCostModel.fitted_sigma`).
    """

    key: str
    raw: Mapping[str, Any]
    signatures: list[str]
    samples: list[Sample]
    times: np.ndarray
    spread: dict[str, float]
    models: dict[str, list[str]]
    curves: dict[str, TransferCurve]
    overheads: dict[str, float]
    in_graph: dict[str, float] = field(default_factory=dict)  # signature -> seconds in graphs
    sigma_by_class: dict[str, float] | None = None
    _fits: ClassFits | None = None
    _fitted: dict[str, float] = field(default_factory=dict)  # signature -> fitted seconds
    _ratios: dict[str, tuple[float, float | None]] = field(default_factory=dict)

    @classmethod
    def build(cls, key: str, raw: Mapping[str, Any]) -> ProfileEntry:
        ops = dict(raw.get("ops", {}))
        # A pattern's unit timed whole is priced only as measured: its several launches are not
        # one op's, so it stays out of the fits that predict single ops.
        sigs = sorted(s for s in ops if not s.startswith(COMPOSITE_OP_PREFIX))
        samples = [Sample.of_record(s, ops[s]) for s in sigs]
        times = np.array([float(ops[s]["median_s"]) for s in sigs])
        spread = {}
        for s in sorted(ops):
            p10, p90 = ops[s].get("p10_s"), ops[s].get("p90_s")
            spread[s] = (math.log(p90 / p10) / _P10_P90
                         if isinstance(p10, (int, float)) and isinstance(p90, (int, float))
                         and 0 < p10 <= p90 else 0.0)
        models = {s: [str(m) for m in ops[s].get("models") or []] for s in sigs}
        if len({m for ms in models.values() for m in ms}) < 2:
            models = kfold_models(sigs)
        curves = {}
        for name, points in dict(raw.get("copies", {})).items():
            curves[name] = TransferCurve.from_points(points, f"copies {name!r} of {key!r}")
        overheads = {k: float(v) for k, v in dict(raw.get("overheads", {})).items()
                     if isinstance(v, (int, float)) and not isinstance(v, bool)}
        in_graph = {s: float(statistics.median(ops[s]["in_graph_s"].values())) for s in sigs
                    if ops[s].get("in_graph_s")}
        return cls(key, raw, sigs, samples, times, spread, models, curves, overheads, in_graph)

    @property
    def fits(self) -> ClassFits:
        if self._fits is None:
            self._fits = ClassFits(self.samples, list(self.times))
        return self._fits

    @property
    def kind(self) -> str:
        return str(self.raw.get("kind", "cpu"))

    def measured(self, signature: str) -> float | None:
        rec = self.raw.get("ops", {}).get(signature)
        return None if rec is None else float(rec["median_s"])

    def typical_spread(self) -> float:
        return statistics.median(self.spread.values()) if self.spread else 0.0

    # ------------------------------------------------------------------ op times
    def alone(self, node: OpNode, sig: str) -> float | None:
        """The op timed alone: measured, else fitted; None if the entry cannot fit."""
        measured = self.measured(sig)
        if measured is not None:
            return measured
        fitted = self._fitted.get(sig)
        if fitted is None:
            if not self.fits.usable:
                return None
            fitted = float(self.fits.predict([Sample.of_node(node, sig)])[0])
            self._fitted[sig] = fitted
        return fitted

    def alone_many(self, nodes: Sequence[OpNode], sigs: Sequence[str]) -> list[float]:
        """:meth:`alone` of each node (signatures ``sigs``), the unmeasured ones fitted in one
        batch; only where the fits are usable or every node is measured."""
        todo = {}
        for n, s in zip(nodes, sigs, strict=True):
            if self.measured(s) is None and s not in self._fitted and s not in todo:
                todo[s] = Sample.of_node(n, s)
        if todo:
            for s, t in zip(todo, self.fits.predict(list(todo.values())), strict=True):
                self._fitted[s] = float(t)
        return [m if (m := self.measured(s)) is not None else self._fitted[s] for s in sigs]

    def with_overheads(self, alone: float) -> float:
        """The op as the executor runs it in a graph: on a device whose launches are queued
        (an entry of kind other than ``cpu`` that measured ``op_floor_s``) no op takes less
        than the host's time per op, which already holds ``per_op_s``; elsewhere ops run as
        they are issued and each pays ``per_op_s`` on top."""
        floor = self.overheads.get("op_floor_s")
        if floor is not None and self.kind != "cpu":
            return max(alone, floor)
        return alone + self.overheads.get("per_op_s", 0.0)

    def in_graph_time(self, node: OpNode, sig: str, alone: float) -> float:
        """The op inside a graph: measured there, else alone (with overheads) times its class's
        in-graph ratio."""
        measured = self.in_graph.get(sig)
        if measured is not None:
            return measured
        ratio, _ = self.ratio(op_class(node))
        return self.with_overheads(alone) * ratio

    def ratio(self, cls: str) -> tuple[float, float | None]:
        """(median, log sd) of in-graph / alone over the entry's signatures of class ``cls``
        that have both (of every class if ``cls`` has too few); (1, None) without any."""
        key = f"ratio:{cls}"
        if key not in self._ratios:
            logs: dict[str, list[float]] = {}
            for sig, seconds in self.in_graph.items():
                alone = self.measured(sig)
                if alone:
                    rec_cls = self.raw["ops"][sig].get("class", "vector")
                    ratio = math.log(seconds / self.with_overheads(alone))
                    logs.setdefault(rec_cls, []).append(ratio)
                    logs.setdefault("*", []).append(ratio)
            chosen = logs.get(cls) if len(logs.get(cls, ())) >= MIN_RATIO else logs.get("*")
            if not chosen or len(chosen) < 2:
                self._ratios[key] = (1.0, None)
            else:
                self._ratios[key] = (math.exp(statistics.median(chosen)),
                                     statistics.pstdev(chosen))
        return self._ratios[key]
