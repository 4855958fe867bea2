"""Planning from measurements: :class:`ProfiledCostModel`, a cost model over a profile cache.

It prices ops, copies and regions of a platform from a profile cache (:mod:`.profile_cache`):
measured where measured, fitted elsewhere (:mod:`.fit`), with an uncertainty on every price
(cross-validated, :mod:`.crossval`). Each device is timed by one entry of the cache
(:mod:`.entry_binding`); what one entry measured and its fits are a
:class:`~.profile_entry.ProfileEntry`.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ..core.graph import OpGraph, OpNode
from ..core.ops import op_class
from ..core.platform import Platform
from ..errors import ProfileError
from .base import CostModel, require_platform
from .copy_curves import TransferCurve, link_curves
from .crossval import (
    CrossValidation,
    CVPrediction,
    Folds,
    cross_validate,
    cv_predictions,
    entry_folds,
)
from .entry_binding import bind_entries
from .profile_cache import read_profile_cache
from .profile_entry import MIN_RATIO as MIN_RATIO
from .profile_entry import ProfileEntry
from .roofline import RooflineCostModel, platform_roofline
from .signatures import op_signature

#: Sigma of a price that no measurement backs (fallback model, roofline cast).
FALLBACK_SIGMA = 1.0
#: Sigma of a cast priced by the roofline next to a measured copy.
CAST_SIGMA = 0.5
#: Sigma of a copy read off a measured curve within its sizes (grows beyond the largest).
COPY_SIGMA = 0.1
#: Sigma of a measured region overhead (host wake-ups come and go).
OVERHEAD_SIGMA = 0.25
#: Sigma of an op timed alone as a part of a graph, per entry kind (see ProfiledCostModel):
#: assumed, used only where the entry holds too few whole-graph measurements to measure it.
IN_GRAPH_SIGMA = {"cpu": 0.25, "default": 0.05}
#: Sigma of an op time measured inside a whole-graph run (its slot, see
#: :class:`~partition_lab.profiling.runners.GraphTiming`) when it runs in another plan.
IN_GRAPH_MEASURED_SIGMA = 0.1
#: Sigma shared by every op of a profiled device: its speed when a plan runs vs when it was
#: profiled, measured on whole plans timed twice (docs/evidence/results/gpu_ingraph.md), not
#: fitted to the cost model's errors.
DRIFT_SIGMA = 0.2
#: Calibration of the stated sigmas, fitted on plans timed on one H200 instance (the suite's
#: run 1) and checked on another (run 2) and leave-one-model-out
#: (docs/evidence/results/sigma_calibration.json, docs/guide/profiling.md): the factor that makes +-2 sd cover 95% of the
#: measured gains over greedy (the robust rule's test), and of the plans' totals.
GAIN_SIGMA_SCALE = 4.31
TOTAL_SIGMA_SCALE = 2.24

def _scale(value: float | None, default: float, name: str) -> float:
    scale = default if value is None else float(value)
    if not (math.isfinite(scale) and scale > 0):
        raise ProfileError(f"{name} must be a positive number, got {value!r}")
    return scale


class ProfiledCostModel:
    """Op, copy and region times of a platform from a profile cache, with uncertainties.

    An op on a device bound to a cache entry is priced

    1. **measured**: the entry has the op's :func:`~.signatures.op_signature`: its median;
    2. **fitted**: otherwise by :class:`~.fit.ClassFits` over every measured signature of
       that entry;
    3. **fallback**: devices bound to no entry, or entries with too few signatures to fit, use
       ``fallback``.

    Then the executor's in-graph costs measured in the entry's ``overheads``: on a ``cpu`` entry
    every op pays ``per_op_s`` on top (ops run as they are issued); on another entry with an
    ``op_floor_s`` (queued GPU launches) no op takes less than that host time per op, which
    holds ``per_op_s`` already (without ``op_floor_s``: ``per_op_s`` on top). A region pays
    ``region_s``; a host region on a platform with accelerators also pays ``island_wakeup_s``
    (the host's thread pool woke up after waiting on a device).

    Copies come from the measured curves (linear interpolation, linear extrapolation by the last
    segment); a cast between precisions (the float32 host of ``tensorcore``) is priced as
    :class:`~.roofline.RooflineCostModel` prices it unless a domain curve measured it.

    Every price has an uncertainty (:meth:`op_sigma` ...): the relative standard deviation in
    log space. Measured ops: their run spread ((ln p90 - ln p10) / 2.563) combined with the
    in-graph sigma. Fitted ops: the root mean square of the cross-validated residuals of their
    (entry, op class) (:meth:`cross_validate`), combined with the same.

    Parameters
    ----------
    cache:
        The cache: a path, its decoded JSON, or an object with ``to_dict()``.
    platform:
        A :class:`~partition_lab.core.platform.Platform` (anything else is a ``TypeError``).
    binding:
        ``{platform device name: cache device key}``; default the cache's
        ``bindings[platform.name]``, else each host bound to the only ``kind: "cpu"`` entry and
        each other device to the only other entry (a device left unbound uses ``fallback``).
    fallback:
        The model of unbound devices and of entries with too few signatures to fit; default
        the platform's roofline (:func:`~partition_lab.cost_models.get_cost_model`).
    in_graph_sigma:
        The error of an op timed alone when it runs inside a graph (added to every op sigma),
        per entry ``kind``: default :data:`IN_GRAPH_SIGMA` (host CPU 0.25, GPU 0.05). A number
        applies to every kind. Used only where the entry has too few whole-graph measurements
        (below).
    drift_sigma:
        The error every op of a profiled device shares (:meth:`device_sigma`); default
        :data:`DRIFT_SIGMA`.

    In-graph times: where the profile ran whole graphs (``profile(..., graphs=True)``), an op
    whose signature was timed inside a graph is priced at that time (the median over the
    graphs that hold it), which includes what running amid other ops costs; other ops are
    priced alone (measured or fitted, plus the per-op overheads) times the median ratio
    in-graph / alone of their op class on that entry (at least :data:`MIN_RATIO` signatures
    with both, else of the entry), and the spread of those ratios is the in-graph part of
    their sigma, measured instead of assumed. The copies whole-graph runs made join the copy
    curves (:meth:`_add_in_graph_copies`).
    """

    def __init__(self, cache: Any, platform: Platform, *, binding: Mapping[str, str] | None = None,
                 fallback: CostModel | None = None,
                 in_graph_sigma: float | Mapping[str, float] | None = None,
                 drift_sigma: float | None = None, gain_sigma_scale: float | None = None,
                 total_sigma_scale: float | None = None) -> None:
        self.platform = require_platform(platform, "ProfiledCostModel")
        self.drift_sigma = DRIFT_SIGMA if drift_sigma is None else float(drift_sigma)
        #: Calibration of the stated sigmas where decisions and totals use them
        #: (strategies/robust.py: ``gain_sigma``, ``plan_sigma``).
        self.gain_sigma_scale = _scale(gain_sigma_scale, GAIN_SIGMA_SCALE, "gain_sigma_scale")
        self.total_sigma_scale = _scale(total_sigma_scale, TOTAL_SIGMA_SCALE,
                                        "total_sigma_scale")
        self.cache = read_profile_cache(cache)
        if in_graph_sigma is None:
            in_graph_sigma = IN_GRAPH_SIGMA
        self.in_graph_sigma: dict[str, float] = (
            dict(in_graph_sigma) if isinstance(in_graph_sigma, Mapping) else
            {"default": float(in_graph_sigma)})
        devices = self.cache["devices"]
        self.binding = bind_entries(self.platform, self.cache, binding)
        self._entries = {key: ProfileEntry.build(key, devices[key])
                         for key in dict.fromkeys(self.binding.values())}
        if fallback is None:
            fallback = platform_roofline(self.platform)
        self.fallback = fallback
        self._roofline = _find_roofline(fallback, self.platform)
        self._add_in_graph_copies()
        parts = [f"{'+'.join(d for d, k in self.binding.items() if k == key)}="
                 f"{devices[key].get('name') or key} ({len(e.signatures)} ops)"
                 for key, e in self._entries.items()]
        self.name = f"profiled({self.platform.name}: {'; '.join(parts) or 'nothing bound'})"

    # ------------------------------------------------------------------ lookups
    def entry_of(self, device: str) -> ProfileEntry | None:
        key = self.binding.get(device)
        return None if key is None else self._entries[key]

    def is_measured(self, node: OpNode, device: str) -> bool:
        entry = self.entry_of(device)
        return entry is not None and entry.measured(op_signature(node)) is not None

    # ------------------------------------------------------------------ CostModel protocol
    def op_time(self, node: OpNode, device: str) -> float:
        entry = self.entry_of(device)
        if entry is None:
            return self.fallback.op_time(node, device)
        sig = op_signature(node)
        alone = entry.alone(node, sig)
        if alone is None:
            return self.fallback.op_time(node, device)
        return entry.in_graph_time(node, sig, alone)

    def op_times(self, nodes: Sequence[OpNode], device: str) -> list[float]:
        """``[op_time(n, device) for n in nodes]``, fitting the unmeasured ones in one batch."""
        entry = self.entry_of(device)
        if entry is None or not (entry.fits.usable or all(
                self.is_measured(n, device) for n in nodes)):
            return [self.op_time(n, device) for n in nodes]
        sigs = [op_signature(n) for n in nodes]
        alone = entry.alone_many(nodes, sigs)
        return [entry.in_graph_time(n, s, a) for n, s, a in zip(nodes, sigs, alone, strict=True)]

    def transfer_time(self, nbytes: float, src: str, dst: str) -> float:
        return sum(t for t, _ in self._transfer_parts(nbytes, src, dst))

    def region_overhead(self, device: str) -> float:
        entry = self.entry_of(device)
        if entry is None or "region_s" not in entry.overheads:
            return self.fallback.region_overhead(device)
        total = entry.overheads["region_s"]
        if self.platform.device(device).is_host and self.platform.accelerators:
            total += entry.overheads.get("island_wakeup_s", 0.0)
        return total

    # ------------------------------------------------------------------ copies
    def _curve(self, name: str, src: str, dst: str) -> TransferCurve | None:
        order = [self.binding.get(src), self.binding.get(dst), *self._entries]
        for key in dict.fromkeys(k for k in order if k is not None):
            curve = self._entries[key].curves.get(name)
            if curve is not None:
                return curve
        return None

    def _transfer_parts(self, nbytes: float, src: str, dst: str) -> list[tuple[float, float]]:
        """(seconds, sigma) of each part of a crossing: one domain curve, or copy + cast."""
        a, b = self.platform.device(src), self.platform.device(dst)
        if a.domain == b.domain:
            return []
        domain_name, copy_name = link_curves(a, b)
        domain = self._curve(domain_name, src, dst)
        if domain is not None:
            return [(domain.time(nbytes), _curve_sigma(domain, nbytes))]
        parts = []
        cast = self._cast_time(nbytes, src, dst) if a.precision != b.precision else 0.0
        if a.memory != b.memory:
            curve = self._curve(copy_name, src, dst)
            if curve is not None:
                parts.append((curve.time(nbytes), _curve_sigma(curve, nbytes)))
            else:
                copy = self.fallback.transfer_time(nbytes, src, dst) - cast
                parts.append((max(copy, 0.0), FALLBACK_SIGMA))
        if cast:
            parts.append((cast, CAST_SIGMA))
        return parts

    def _add_in_graph_copies(self) -> None:
        """Add the copies that whole-graph runs made to the copy curves they belong to.

        A run on this platform whose copies are one direction's (the outputs carry at least
        4x the inputs' bytes, or the reverse) and of similar sizes gives one point per tensor:
        the run's time outside its ops (``outside_s``), less the entry's fixed part per run
        (the median of that time on runs whose copies the curve prices under 0.5 ms) and the
        other direction's price, split over the tensors. A point replaces the probe's points
        within a factor of 2 of its size: the probe times copies in a two-op graph, which can
        price a large copy far above what whole graphs pay for it.
        """
        host = self.platform.host
        for entry in self._entries.values():
            runs = [r for r in entry.raw.get("graphs", {}).values()
                    if "outside_s" in r and r.get("platform") == self.platform.name
                    and r.get("device") in self.platform.names
                    and not self.platform.device(r["device"]).is_host]
            if not runs:
                continue
            priced = [(r, self._io_price(r)) for r in runs]
            small = [max(r["outside_s"] - sum(p), 0.0) for r, p in priced if sum(p) < 5e-4]
            fixed = statistics.median(small) if small else 0.0
            points: dict[str, list[tuple[float, float]]] = {}
            for run, (price_in, price_out) in priced:
                device = self.platform.device(run["device"])
                ins, outs = run.get("inputs_bytes", []), run.get("outputs_bytes", [])
                for sizes, rest, own, other, out in ((outs, ins, price_out, price_in, True),
                                                     (ins, outs, price_in, price_out, False)):
                    if not sizes or sum(sizes) < 4 * sum(rest) or max(sizes) > 2 * min(sizes) \
                            or own < 1e-3:
                        continue
                    seconds = (run["outside_s"] - fixed - other) / len(sizes)
                    if seconds > 0:
                        name = self._curve_name(device, host, out, entry)
                        points.setdefault(name, []).append((sum(sizes) / len(sizes), seconds))
            for name, extra in points.items():
                old = entry.curves[name]
                kept = [(n, t) for n, t in zip(old.sizes, old.times, strict=True)
                        if not any(0.5 * m <= n <= 2 * m for m, _ in extra)]
                entry.curves[name] = TransferCurve.from_points(kept + extra, name)

    def _io_price(self, run: Mapping[str, Any]) -> tuple[float, float]:
        """What the curves price a whole-graph run's input and output copies at."""
        return (self._io_part(run.get("inputs_bytes", []), run["device"], False),
                self._io_part(run.get("outputs_bytes", []), run["device"], True))

    def _io_part(self, sizes: Sequence[float], device: str, out: bool) -> float:
        host = self.platform.host.name
        src, dst = (device, host) if out else (host, device)
        return sum(self.transfer_time(n, src, dst) for n in sizes)

    @staticmethod
    def _curve_name(device: Any, host: Any, out: bool, entry: ProfileEntry) -> str:
        """The curve a copy between ``device`` and the host is priced by (see _transfer_parts)."""
        domain, copy = link_curves(*((device, host) if out else (host, device)))
        return domain if domain in entry.curves else copy

    def _cast_time(self, nbytes: float, src: str, dst: str) -> float:
        """The roofline's cast at the float32 side: 3 bytes moved per stored float16 byte."""
        if self._roofline is None:
            return 0.0
        caster = src if self.platform.device(src).precision == "float32" else dst
        profile = self._roofline.device_cost(caster).profile
        return 3 * nbytes / (profile.memory_bandwidth * profile.efficiency("data"))

    # ------------------------------------------------------------------ uncertainty
    def op_sigma(self, node: OpNode, device: str) -> float:
        """Relative sigma (log space) of :meth:`op_time`."""
        entry = self.entry_of(device)
        if entry is None:
            return FALLBACK_SIGMA
        sig = op_signature(node)
        if sig in entry.in_graph:
            return math.hypot(entry.spread.get(sig, 0.0), IN_GRAPH_MEASURED_SIGMA)
        in_graph = self._in_graph_sigma(entry, op_class(node))
        if entry.measured(sig) is not None:
            return math.hypot(entry.spread.get(sig, 0.0), in_graph)
        if not entry.fits.usable:
            return FALLBACK_SIGMA
        cv = self.fitted_sigma(entry.key).get(op_class(node))
        if cv is None:
            cv = max(self.fitted_sigma(entry.key).values(), default=FALLBACK_SIGMA)
        return math.sqrt(cv ** 2 + in_graph ** 2 + entry.typical_spread() ** 2)

    def _in_graph_sigma(self, entry: ProfileEntry, cls: str) -> float:
        """The in-graph part of an op's sigma: the measured spread of its class's in-graph
        ratios where the entry has them, else the assumed :data:`IN_GRAPH_SIGMA`."""
        _, spread = entry.ratio(cls)
        if spread is not None:
            return spread
        return self.in_graph_sigma.get(entry.kind, self.in_graph_sigma.get("default", 0.05))

    def transfer_sigma(self, nbytes: float, src: str, dst: str) -> float:
        parts = self._transfer_parts(nbytes, src, dst)
        total = sum(t for t, _ in parts)
        if total <= 0:
            return 0.0
        return math.sqrt(sum((t * s) ** 2 for t, s in parts)) / total

    def overhead_sigma(self, device: str) -> float:
        entry = self.entry_of(device)
        if entry is None or "region_s" not in entry.overheads:
            return FALLBACK_SIGMA
        return OVERHEAD_SIGMA

    def device_sigma(self, device: str) -> float:
        """Relative sigma shared by everything on ``device`` (:data:`DRIFT_SIGMA` where a
        profile entry backs it; an unbound device's fallback sigma already covers it)."""
        return self.drift_sigma if self.entry_of(device) is not None else 0.0

    def fitted_sigma(self, key: str) -> dict[str, float]:
        """Per op class of entry ``key``: the RMS of its cross-validated log residuals."""
        entry = self._entries[key]
        if entry.sigma_by_class is None:
            errors: dict[str, list[float]] = {}
            for p in self._cv_predictions(entry):
                errors.setdefault(p.op_class, []).append(p.log_error)
            entry.sigma_by_class = {c: float(np.sqrt(np.mean(np.square(v))))
                                    for c, v in errors.items()}
        return entry.sigma_by_class

    def adopt_fitted_sigma(self, key: str, sigmas: Mapping[str, float]) -> None:
        """Take :meth:`fitted_sigma` of entry ``key`` as computed earlier from the same data
        (the shipped profile stores them: computing them fits every fold again). Entries
        this model does not bind are ignored."""
        entry = self._entries.get(key)
        if entry is not None:
            entry.sigma_by_class = dict(sigmas)

    # ------------------------------------------------------------------ explanation
    def explain(self, node: OpNode, device: str) -> str:
        """How :meth:`op_time` priced the op: measured, fitted or the fallback, with its sigma."""
        seconds = self.op_time(node, device)
        sigma = self.op_sigma(node, device)
        head = f"{node.op} on {device}: {seconds * 1e3:.4g} ms (sigma {sigma:.2f})"
        entry = self.entry_of(device)
        if entry is None:
            return f"{head}, estimated by {self.fallback.name}: no profile entry bound"
        sig = op_signature(node)
        if sig in entry.in_graph:
            graphs = sorted(entry.raw["ops"][sig].get("in_graph_s", {}))
            return (f"{head}, measured inside whole-graph runs of {', '.join(graphs)} on "
                    f"{entry.key} (alone: {entry.measured(sig) * 1e3:.4g} ms)")
        floor = entry.overheads.get("op_floor_s")
        if floor is not None and entry.kind != "cpu":
            extra = f"; in a graph at least {floor * 1e6:.3g} us (queued launches)"
        else:
            extra = f"; in a graph +{entry.overheads.get('per_op_s', 0.0) * 1e6:.3g} us per op"
        ratio, spread = entry.ratio(op_class(node))
        if spread is not None:
            extra += (f", times {ratio:.3g} (the median in-graph / alone ratio of measured "
                      f"{op_class(node)} ops)")
        rec = entry.raw.get("ops", {}).get(sig)
        if rec is not None:
            runs = f", {rec['runs']} runs" if rec.get("runs") else ""
            return (f"{head}, measured: median {rec['median_s'] * 1e3:.4g} ms{runs} on "
                    f"{entry.key}{extra}")
        if not entry.fits.usable:
            return (f"{head}, estimated by {self.fallback.name}: {entry.key} has too few "
                    f"measured signatures to fit")
        fit = entry.fits.fit_for(op_class(node))
        how = fit.describe() if fit is not None else "pooled fit"
        return (f"{head}, estimated (not measured): fitted on the {op_class(node)} ops of "
                f"{entry.key}: {how}; sigma from leave-one-model-out residuals{extra}")

    def coverage(self, graph: OpGraph) -> dict[str, float]:
        """Per device, the fraction of the graph's nodes whose time is a measurement."""
        n = max(len(graph), 1)
        return {d: sum(self.is_measured(node, d) for node in graph) / n
                for d in self.platform.names}

    # ------------------------------------------------------------------ cross-validation
    def folds(self, key: str) -> Folds:
        """Per held-out model of entry ``key``: its signatures, and the training signatures
        (every signature that no held-out model has)."""
        return entry_folds(self._entries[key])

    def _cv_predictions(self, entry: ProfileEntry) -> list[CVPrediction]:
        return cv_predictions(entry)

    def cross_validate(self, graphs: Mapping[str, OpGraph] | Iterable[OpGraph] | None = None
                       ) -> CrossValidation:
        """Leave-one-model-out errors of the fitted model on every bound entry
        (:func:`~.crossval.cross_validate`).

        ``graphs``: the profiled models' graphs (by name); when given, a model's total counts
        each node of its graph, not each signature once.
        """
        return cross_validate(self._entries, self.binding, graphs)


def _curve_sigma(curve: TransferCurve, nbytes: float) -> float:
    if nbytes <= curve.sizes[-1]:
        return COPY_SIGMA
    return COPY_SIGMA + 0.05 * math.log2(nbytes / curve.sizes[-1])


def _find_roofline(model: Any, platform: Platform) -> RooflineCostModel:
    seen = 0
    while model is not None and seen < 5:
        if isinstance(model, RooflineCostModel):
            return model
        model = getattr(model, "base", None) or getattr(model, "fallback", None)
        seen += 1
    return platform_roofline(platform)
