"""Cross-validation of the fitted op-time model: leave one profiled model out.

For each model M named by an entry's ``models`` fields, a fit on the signatures M does not have
predicts the signatures it has (an entry naming fewer than two models is split into 5 folds by
signature). The errors give each fitted price its uncertainty and are reported per op class,
per op name and per held-out model's summed op times. An entry is anything with ``key``,
``signatures``, ``samples``, ``times`` (an array) and ``models`` (signature -> model names).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ..core.graph import OpGraph
from ..core.ops import OP_CLASSES
from .fit import ClassFits
from .signatures import op_signature

#: Folds of a cross-validation at most (more models are grouped into this many folds).
MAX_FOLDS = 40


@dataclass(frozen=True)
class CVPrediction:
    """One held-out signature: its fitted prediction against its measured median."""

    device: str
    model: str
    signature: str
    op: str
    op_class: str
    predicted_s: float
    measured_s: float

    @property
    def log_error(self) -> float:
        return math.log(self.predicted_s / self.measured_s)


@dataclass(frozen=True)
class CVErrors:
    """Errors of a group of predictions, in natural-log units (0.1 is about 10%)."""

    device: str
    group: str
    n: int
    median_abs: float
    p90_abs: float
    rms: float
    bias: float
    worst: float

    @classmethod
    def of(cls, device: str, group: str, errors: Sequence[float]) -> CVErrors:
        a = np.abs(np.asarray(errors, dtype=float))
        return cls(device, group, len(a), float(np.median(a)), float(np.percentile(a, 90)),
                   float(np.sqrt(np.mean(np.square(errors)))), float(np.mean(errors)),
                   float(np.max(a)))


@dataclass(frozen=True)
class GraphTotal:
    """A held-out model's op times summed: fitted predictions against measured medians."""

    device: str
    model: str
    signatures: int
    nodes: int
    predicted_s: float
    measured_s: float

    @property
    def log_error(self) -> float:
        return math.log(self.predicted_s / self.measured_s)


@dataclass
class CrossValidation:
    """Leave-one-model-out errors of the fitted model, per device entry.

    ``by_class``: per (entry, op class) over held-out signatures; ``totals``: per (entry,
    model), the sum over the model's signatures (each node once when graphs were given, else
    each signature once) of predicted vs measured op times alone, no overheads;
    ``by_graph``: per entry, the errors of those totals; ``by_op``: per (entry, op name) with at
    least 5 held-out predictions. ``folds``: per entry, model ->
    (training signatures, held-out signatures).
    """

    protocol: str
    by_class: list[CVErrors]
    by_graph: list[CVErrors]
    totals: list[GraphTotal]
    predictions: list[CVPrediction] = field(repr=False)
    folds: dict[str, dict[str, tuple[int, int]]] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)
    by_op: list[CVErrors] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"protocol": self.protocol, "names": self.names,
                "by_class": [asdict(e) for e in self.by_class],
                "by_graph": [asdict(e) for e in self.by_graph],
                "by_op": [asdict(e) for e in self.by_op],
                "totals": [asdict(t) | {"log_error": t.log_error} for t in self.totals],
                "folds": {k: {m: list(v) for m, v in f.items()} for k, f in self.folds.items()}}

    def format(self) -> str:
        """The errors as text tables (docs/evidence/results/profile_cv_h200.md shows them)."""
        lines = [f"protocol: {self.protocol}",
                 "errors are |ln(predicted / measured)|: 0.10 ~ 10%, 0.69 = 2x", ""]
        head = (f"{'device':<10} {'group':<8} {'n':>5} {'median':>7} {'p90':>6} {'rms':>6} "
                f"{'bias':>6} {'worst':>6}  ratio at median")
        lines.append("per op signature (held out):")
        lines.append(head)
        for e in self.by_class + self.by_graph:
            if e.group == "graph" and e is self.by_graph[0]:
                lines += ["", "per whole graph (sum of its op times):", head]
            lines.append(f"{self.names.get(e.device, e.device):<10} {e.group:<8} {e.n:>5} "
                         f"{e.median_abs:>7.3f} {e.p90_abs:>6.3f} {e.rms:>6.3f} {e.bias:>+6.2f} "
                         f"{e.worst:>6.2f}  x{math.exp(e.median_abs):.2f}")
        if self.by_op:
            lines += ["", "per op name (held out, at least 5 predictions):", head]
            for e in self.by_op:
                lines.append(f"{self.names.get(e.device, e.device):<10} {e.group[:8]:<8} "
                             f"{e.n:>5} {e.median_abs:>7.3f} {e.p90_abs:>6.3f} {e.rms:>6.3f} "
                             f"{e.bias:>+6.2f} {e.worst:>6.2f}  x{math.exp(e.median_abs):.2f}")
        lines += ["", "per held-out model or group (predicted / measured sum of op times):"]
        lines.append(f"{'device':<10} {'model':<34} {'sigs':>5} {'nodes':>6} {'pred ms':>9} "
                     f"{'meas ms':>9} {'ratio':>6}")
        for t in self.totals:
            lines.append(f"{self.names.get(t.device, t.device):<10} {t.model[:34]:<34} "
                         f"{t.signatures:>5} {t.nodes:>6} {t.predicted_s * 1e3:>9.3f} "
                         f"{t.measured_s * 1e3:>9.3f} {t.predicted_s / t.measured_s:>6.2f}")
        return "\n".join(lines)


def _folds(models: Mapping[str, Sequence[str]]) -> list[tuple[str, set[str]]]:
    """(fold name, held-out model names); at most :data:`MAX_FOLDS` folds."""
    names = sorted({m for ms in models.values() for m in ms})
    if len(names) <= MAX_FOLDS:
        return [(m, {m}) for m in names]
    groups: list[tuple[str, set[str]]] = [(f"fold{i}", set()) for i in range(MAX_FOLDS)]
    for i, m in enumerate(names):
        groups[i % MAX_FOLDS][1].add(m)
    return groups


def kfold_models(signatures: Sequence[str], k: int = 5) -> dict[str, list[str]]:
    """Pseudo-models for an entry that names fewer than two: k folds by a stable hash."""
    import zlib

    return {s: [f"fold{zlib.crc32(s.encode()) % k}"] for s in signatures}


@dataclass(frozen=True)
class Folds:
    held_out: dict[str, list[str]]   # fold -> held-out signatures
    training: dict[str, list[str]]   # fold -> training signatures


def entry_folds(entry: Any) -> Folds:
    """Per held-out model of ``entry``: its signatures, and the training signatures (every
    signature that no held-out model has)."""
    held: dict[str, list[str]] = {}
    train: dict[str, list[str]] = {}
    for fold, names in _folds(entry.models):
        held[fold] = [s for s in entry.signatures if names & set(entry.models[s])]
        train[fold] = [s for s in entry.signatures if not names & set(entry.models[s])]
    return Folds(held, train)


def cv_predictions(entry: Any) -> list[CVPrediction]:
    """Every held-out signature of ``entry`` predicted by a fit on its fold's training set."""
    index = {s: i for i, s in enumerate(entry.signatures)}
    folds = entry_folds(entry)
    out = []
    for fold, held in folds.held_out.items():
        rows = [index[s] for s in folds.training[fold]]
        fits = ClassFits([entry.samples[i] for i in rows], list(entry.times[rows]))
        if not fits.usable or not held:
            continue
        samples = [entry.samples[index[s]] for s in held]
        classes = {s.cls for s in samples}
        if any(fits.fit_for(c) is None for c in classes):
            continue
        predicted = fits.predict(samples)
        for s, p, sample in zip(held, predicted, samples, strict=True):
            out.append(CVPrediction(entry.key, fold, s, sample.op, sample.cls, float(p),
                                    float(entry.times[index[s]])))
    return out


def cross_validate(entries: Mapping[str, Any], binding: Mapping[str, str],
                   graphs: Mapping[str, OpGraph] | Iterable[OpGraph] | None = None
                   ) -> CrossValidation:
    """Leave-one-model-out errors of the fitted model on every entry of ``entries`` (by key;
    ``binding``, platform device -> key, names them).

    ``graphs``: the profiled models' graphs (by name); when given, a model's total counts
    each node of its graph, not each signature once.
    """
    if graphs is not None and not isinstance(graphs, Mapping):
        graphs = {g.name: g for g in graphs}
    counts: dict[str, Counter[str]] = {
        name: Counter(op_signature(n) for n in g) for name, g in (graphs or {}).items()}
    predictions, by_class, by_graph, totals, by_op = [], [], [], [], []
    folds: dict[str, dict[str, tuple[int, int]]] = {}
    protocols = set()
    for key, entry in entries.items():
        preds = cv_predictions(entry)
        predictions += preds
        errors: dict[str, list[float]] = {}
        for p in preds:
            errors.setdefault(p.op_class, []).append(p.log_error)
        for cls in [*OP_CLASSES, *sorted(set(errors) - set(OP_CLASSES))]:
            if errors.get(cls):
                by_class.append(CVErrors.of(key, cls, errors[cls]))
        if preds:
            by_class.append(CVErrors.of(key, "all", [p.log_error for p in preds]))
        per_op: dict[str, list[float]] = {}
        for p in preds:
            per_op.setdefault(p.op, []).append(p.log_error)
        by_op += sorted((CVErrors.of(key, op, v) for op, v in per_op.items() if len(v) >= 5),
                        key=lambda e: -e.n)
        f = entry_folds(entry)
        folds[key] = {m: (len(f.training[m]), len(f.held_out[m])) for m in f.held_out}
        names = {m for ms in entry.models.values() for m in ms}
        if all(m.startswith("fold") for m in names):
            protocols.add("5-fold by signature (the entry names fewer than 2 models)")
        elif all(m.startswith("op:") for m in names):
            protocols.add("leave-one-op-out (the cache groups signatures by op name, not "
                          "by model)")
        else:
            protocols.add("leave-one-model-out (models named by the cache)")
        entry_totals = []
        for model in sorted({p.model for p in preds}):
            mine = [p for p in preds if p.model == model]
            weight = counts.get(model)
            w = [weight[p.signature] if weight else 1 for p in mine]
            if weight and not any(w):
                w = [1] * len(mine)
            entry_totals.append(GraphTotal(
                key, model, len(mine), sum(w),
                sum(x * p.predicted_s for x, p in zip(w, mine, strict=True)),
                sum(x * p.measured_s for x, p in zip(w, mine, strict=True))))
        totals += entry_totals
        if entry_totals:
            by_graph.append(CVErrors.of(key, "graph", [t.log_error for t in entry_totals]))
    names = {key: "+".join(d for d, k in binding.items() if k == key) for key in entries}
    return CrossValidation("; ".join(sorted(protocols)), by_class, by_graph, totals,
                           predictions, folds, names, by_op)
