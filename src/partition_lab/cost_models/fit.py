"""The fitted op-time model: a robust log-space fit over the measured signatures of one device.

Per op class (matrix / vector / data; classes with fewer than :data:`MIN_CLASS` signatures share
one fit with the class as a feature), in log space::

    t = exp(c0 + floor[op]) + exp(cb + (1+eb) ln bytes + mods.b) + exp(cf + (1+ef) ln flops + mods.f)

a per-op floor (launch / call cost) plus a memory term and a compute term, roofline-like but
summed, with exponents shrunk towards 1 (so it extrapolates like a roofline) and ridge-shrunk
modifiers for dtype, NHWC layout and op name (ops with at least :data:`MIN_OP` signatures).
Fitted by robust least squares (soft L1) on ln(time), with an analytic Jacobian.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.graph import OpNode
from ..core.ops import OP_CLASSES, op_class
from ..errors import ProfileError
from .signatures import node_from_signature, op_signature

#: Signatures an op name needs in a training set before it gets its own modifiers.
MIN_OP = 3
#: Signatures an op class needs in an entry before it gets a fit of its own.
MIN_CLASS = 8
#: Signatures an entry needs before anything is fitted on it (below: the fallback model).
MIN_FIT = 3

_LAYOUT = re.compile(r"(?:^|[{,])(?:data_)?layout=([A-Za-z0-9]*)")


@dataclass(frozen=True)
class Sample:
    """What the fitted model sees of one op signature."""

    op: str
    cls: str
    flops: float
    nbytes: float
    dtype: str
    layout: str

    @classmethod
    def of_node(cls, node: OpNode, signature: str | None = None) -> Sample:
        sig = signature or op_signature(node)
        found = _LAYOUT.search(sig[sig.find("{"):]) if "{" in sig else None
        args = node.args or node.inputs + node.weights
        return cls(node.op, op_class(node), float(node.flops), float(node.bytes_moved),
                   args[0].dtype if args else "float32", found.group(1) if found else "")

    @classmethod
    def of_record(cls, signature: str, rec: Mapping[str, Any]) -> Sample:
        if all(k in rec for k in ("op", "flops", "bytes")):
            found = _LAYOUT.search(signature[signature.find("{"):]) if "{" in signature else None
            return cls(str(rec["op"]), str(rec.get("class") or "vector"), float(rec["flops"]),
                       float(rec["bytes"]), str(rec.get("dtype") or "float32"),
                       found.group(1) if found else "")
        sample = cls.of_node(node_from_signature(signature), signature)
        if rec.get("class"):
            sample = Sample(sample.op, str(rec["class"]), sample.flops, sample.nbytes,
                            sample.dtype, sample.layout)
        return sample


class LogRooflineFit:
    """``t = floor(op) + memory term + compute term``, fitted in log space (module docstring).

    >>> rows = [Sample("add", "vector", n, 6 * n, "float32", "") for n in (1e3, 1e4, 1e5, 1e6)]
    >>> fit = LogRooflineFit.fit(rows, [2e-6 + 6 * n / 1e11 for n in (1e3, 1e4, 1e5, 1e6)])
    >>> round(float(fit.predict([Sample("add", "vector", 1e7, 6e7, "float32", "")])[0]) * 1e4, 2)
    6.02
    """

    lam = 1.0       #: ridge weight of the dtype / layout / op / class modifiers
    lam_floor = 1.0  #: ridge weight of the per-op floors
    lam_exp = 1.0    #: pull of the exponents towards 1, per sample
    reg_class = 0.1  #: ridge (square root) of the op-class terms of a pooled fit

    def __init__(self, params: np.ndarray, ops: tuple[str, ...], classes: tuple[str, ...],
                 n: int) -> None:
        self.params = params
        self.ops = ops
        self.classes = classes
        self.n = n

    # -------------------------------------------------------------- design
    @staticmethod
    def _arrays(samples: Sequence[Sample], ops: Sequence[str], classes: Sequence[str]
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        lb = np.log(np.maximum([s.nbytes for s in samples], 1.0)) - 12.0
        lf = np.log(np.maximum([s.flops for s in samples], 1.0)) - 14.0
        hasf = np.array([s.flops > 0 for s in samples], dtype=bool)
        mods = np.array([[s.dtype == "float32", s.dtype not in ("float16", "float32"),
                          s.layout.startswith("NHWC")]
                         + [s.cls == c for c in classes] + [s.op == o for o in ops]
                         for s in samples], dtype=float).reshape(len(samples), 3 + len(ops)
                                                                 + len(classes))
        floors = np.array([[s.cls == c for c in classes] + [s.op == o for o in ops]
                           for s in samples], dtype=float).reshape(len(samples),
                                                                   len(classes) + len(ops))
        return lb, lf, hasf, mods, floors

    @staticmethod
    def _split(p: np.ndarray, k: int) -> tuple[Any, ...]:
        return p[0], p[1], p[2], p[3], p[4], p[5:5 + k], p[5 + k:5 + 2 * k], p[5 + 2 * k:]

    @classmethod
    def _terms(cls, p: np.ndarray, arrays: tuple[np.ndarray, ...]) -> np.ndarray:
        lb, lf, hasf, mods, floors = arrays
        c0, cb, cf, eb, ef, mb, mf, m0 = cls._split(p, mods.shape[1])
        floor = c0 + floors @ m0
        memory = cb + (1 + eb) * lb + mods @ mb
        compute = np.where(hasf, cf + (1 + ef) * lf + mods @ mf, -np.inf)
        return np.stack([floor, memory, compute], axis=1)

    @classmethod
    def fit(cls, samples: Sequence[Sample], times: Sequence[float], *,
            pooled: bool = False) -> LogRooflineFit:
        """Fit on ``samples`` measured at ``times`` (seconds); ``pooled``: the op class is a
        feature (one fit over several classes).

        Two stages: a fit without op names gives the class's shared curve; op terms are then
        fitted around it while the shared parameters stay anchored to it, so that an op name
        the fit never saw gets the class's average curve, not that of whichever ops left the
        shared terms unconstrained (ops at their floor say nothing about a bytes term).
        """
        counts = Counter(s.op for s in samples)
        ops = tuple(sorted(o for o, c in counts.items() if c >= MIN_OP))
        classes = tuple(sorted({s.cls for s in samples})) if pooled else ()
        y = np.log(np.asarray(times, dtype=float))
        shared = cls._fit(samples, y, (), classes, None)
        if not ops:
            return shared
        return cls._fit(samples, y, ops, classes, shared)

    @classmethod
    def _fit(cls, samples: Sequence[Sample], y: np.ndarray, ops: tuple[str, ...],
             classes: tuple[str, ...], base: LogRooflineFit | None) -> LogRooflineFit:
        arrays = cls._arrays(samples, ops, classes)
        lb, lf, hasf, mods, floors = arrays
        k, ko, n = mods.shape[1], floors.shape[1], len(samples)
        size = 5 + 2 * k + ko
        own = np.zeros(size, dtype=bool)  # parameters of op names
        for start in (5, 5 + k):
            own[start + 3 + len(classes):start + k] = True
        own[5 + 2 * k + len(classes):] = True
        reg = np.concatenate([np.full(3, 1e-2), np.full(2, math.sqrt(cls.lam_exp * n)),
                              np.full(2 * k, math.sqrt(cls.lam)),
                              np.full(ko, math.sqrt(cls.lam_floor))])
        for start in (5 + 3, 5 + k + 3, 5 + 2 * k):  # op classes of a pooled fit: structural
            reg[start:start + len(classes)] = cls.reg_class
        target = np.zeros(size)
        if base is None:
            p0 = np.zeros(size)
            p0[0] = np.log(np.percentile(np.exp(y), 5))
            p0[1] = float(np.median(y - lb)) - 1.0
            p0[2] = float(np.median((y - lf)[hasf])) - 1.0 if hasf.any() else -60.0
            target[:3] = p0[:3]
        else:
            p0 = np.zeros(size)
            p0[~own] = base.params
            target[~own] = base.params
            reg[~own] = math.sqrt(n)

        def residuals(p: np.ndarray) -> np.ndarray:
            pred = _logsumexp(cls._terms(p, arrays))
            return np.concatenate([pred - y, reg * (p - target)])

        def jacobian(p: np.ndarray) -> np.ndarray:
            terms = cls._terms(p, arrays)
            w = np.exp(terms - _logsumexp(terms)[:, None])
            wa, wb, wf = w[:, 0], w[:, 1], w[:, 2]
            jac = np.zeros((n + len(p), len(p)))
            jac[:n, 0] = wa
            jac[:n, 1] = wb
            jac[:n, 2] = wf
            jac[:n, 3] = wb * lb
            jac[:n, 4] = wf * np.where(hasf, lf, 0.0)
            jac[:n, 5:5 + k] = wb[:, None] * mods
            jac[:n, 5 + k:5 + 2 * k] = wf[:, None] * mods
            jac[:n, 5 + 2 * k:] = wa[:, None] * floors
            jac[n:, :] = np.diag(reg)
            return jac

        params = _robust_least_squares(residuals, jacobian, p0, n)
        return cls(params, ops, classes, n)

    def predict(self, samples: Sequence[Sample]) -> np.ndarray:
        """Seconds per sample."""
        if not samples:
            return np.zeros(0)
        arrays = self._arrays(samples, self.ops, self.classes)
        return np.exp(_logsumexp(self._terms(self.params, arrays)))

    def describe(self) -> str:
        c0, cb, cf, eb, ef = self.params[:5]
        return (f"floor {math.exp(c0) * 1e6:.3g} us + bytes^{1 + eb:.2f} + flops^{1 + ef:.2f} "
                f"({self.n} signatures, {len(self.ops)} ops with own terms)")


def _robust_least_squares(residuals: Any, jacobian: Any, p0: np.ndarray, n: int, *,
                          scale: float = 0.3, iterations: int = 100) -> np.ndarray:
    """Levenberg-Marquardt on iteratively reweighted residuals: a soft-L1 loss (scale
    ``scale``) on the first ``n`` residuals, plain squares on the rest (the penalties).

    Hand-written rather than ``scipy.optimize.least_squares``: its SVD of the tall Jacobian
    runs many times slower under a multi-threaded BLAS on a small machine; here the only
    factorisation is of a (parameters x parameters) system.
    """

    def cost(r: np.ndarray) -> float:
        z = (r[:n] / scale) ** 2
        return float(np.sum(2 * scale ** 2 * (np.sqrt(1 + z) - 1)) + np.sum(r[n:] ** 2))

    p = p0.copy()
    r = residuals(p)
    current = cost(r)
    damping = 1e-3
    for _ in range(iterations):
        jac = jacobian(p)
        w = np.ones(len(r))
        w[:n] = 1 / np.sqrt(1 + (r[:n] / scale) ** 2)
        jw = jac * w[:, None]
        normal = np.einsum("ij,ik->jk", jac, jw)  # einsum: no BLAS threads for a small product
        grad = np.einsum("ij,i->j", jw, r)
        diag = np.diag(normal).copy()
        while True:
            try:
                step = np.linalg.solve(normal + damping * (diag + 1e-9) * np.eye(len(p)) +
                                       1e-12 * np.eye(len(p)), -grad)
            except np.linalg.LinAlgError:
                step = np.zeros(len(p))
            trial = p + step
            r_trial = residuals(trial)
            new = cost(r_trial)
            if np.isfinite(new) and new <= current:
                break
            damping *= 4
            if damping > 1e8:
                return p
        p, r = trial, r_trial
        improvement = current - new
        current = new
        damping = max(damping / 3, 1e-9)
        if improvement <= 1e-6 * max(current, 1e-12) or np.max(np.abs(step)) < 1e-6:
            break
    return p


def _logsumexp(terms: np.ndarray) -> np.ndarray:
    top = np.max(terms, axis=1)
    return top + np.log(np.sum(np.exp(terms - top[:, None]), axis=1))


class ClassFits:
    """One fit per op class of a training set, pooled for classes with too few signatures."""

    def __init__(self, samples: Sequence[Sample], times: Sequence[float]) -> None:
        self.n = len(samples)
        self.fits: dict[str, LogRooflineFit] = {}
        self.pooled: LogRooflineFit | None = None
        if self.n < MIN_FIT:
            return
        by_class = Counter(s.cls for s in samples)
        for cls, count in by_class.items():
            if count >= MIN_CLASS:
                rows = [i for i, s in enumerate(samples) if s.cls == cls]
                self.fits[cls] = LogRooflineFit.fit([samples[i] for i in rows],
                                                    [times[i] for i in rows])
        if len(self.fits) < len(OP_CLASSES):
            self.pooled = LogRooflineFit.fit(samples, times, pooled=True)

    @property
    def usable(self) -> bool:
        return bool(self.fits) or self.pooled is not None

    def fit_for(self, cls: str) -> LogRooflineFit | None:
        return self.fits.get(cls, self.pooled)

    def predict(self, samples: Sequence[Sample]) -> np.ndarray:
        out = np.zeros(len(samples))
        groups: dict[int, list[int]] = {}
        fits: dict[int, LogRooflineFit] = {}
        for i, s in enumerate(samples):
            fit = self.fit_for(s.cls)
            if fit is None:
                raise ProfileError("no fit: too few measured signatures")
            groups.setdefault(id(fit), []).append(i)
            fits[id(fit)] = fit
        for key, rows in groups.items():
            out[rows] = fits[key].predict([samples[i] for i in rows])
        return out
