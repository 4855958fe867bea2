"""Planning from measurements: a cost model over a profile cache, with uncertainties.

:class:`ProfiledCostModel` prices ops, copies and regions of a platform from a profile cache
(schema ``partition_lab.profile_cache/1``, one JSON file; see the issue 11 spec)::

    {"schema": "partition_lab.profile_cache/1",
     "devices": {"<device_key>": {"runner", "kind", "name", "software",
         "ops": {"<op_signature>": {"median_s", "p10_s", "p90_s", "runs", "op", "class",
                                    "flops", "bytes", "dtype", "models", "measured_at"}},
         "copies": {"<src_memory>-><dst_memory>": [[nbytes, seconds], ...]},
         "overheads": {"region_s", "per_op_s", "island_wakeup_s"}}},
     "bindings": {"<platform>": {"<platform device>": "<device_key>"}}}

Two optional keys beyond the spec are read when present (:mod:`partition_lab.profiling`
writes both, and so does :func:`cache_from_measured_gpu`): ``overheads.op_floor_s`` (no op
takes less: launches issued one by one from the host, as on a GPU) and copy curves keyed by
domain, ``"<memory>:<precision>-><memory>:<precision>"`` (a crossing that copies *and* casts,
as the executor makes it; it replaces copy + cast).

How an op is priced on a device bound to a cache entry:

1. **Measured**: the entry has the op's :func:`~.measured.op_signature`: its median.
2. **Fitted**: otherwise a model fitted on every measured signature of that entry, per op class
   (matrix / vector / data; classes with fewer than :data:`MIN_CLASS` signatures share one fit
   with the class as a feature). In log space::

       t = exp(c0 + floor[op]) + exp(cb + (1+eb) ln bytes + mods.b) + exp(cf + (1+ef) ln flops + mods.f)

   a per-op floor (launch / call cost) plus a memory term and a compute term, roofline-like but
   summed, with exponents shrunk towards 1 (so it extrapolates like a roofline) and ridge-shrunk
   modifiers for dtype, NHWC layout and op name (ops with at least :data:`MIN_OP` signatures).
   Fitted by robust least squares (soft L1) on ln(time), with an analytic Jacobian.
3. **Fallback**: devices bound to no entry, or entries with too little data, use ``fallback``
   (default: the platform's roofline, :func:`~partition_lab.cost_models.get_cost_model`).

Then the executor's in-graph costs measured in the entry's ``overheads``: on a ``cpu`` entry
every op pays ``per_op_s`` on top (ops run as they are issued); on another entry with an
``op_floor_s`` (queued GPU launches) no op takes less than that host time per op, which holds
``per_op_s`` already (without ``op_floor_s``: ``per_op_s`` on top). A region pays ``region_s``;
a host region on a platform with accelerators also pays ``island_wakeup_s`` (the host's thread
pool woke up after waiting on a device).

Copies come from the measured curves (linear interpolation, linear extrapolation by the last
segment); a cast between precisions (the float32 host of ``tensorcore``) is priced as
:class:`~.roofline.RooflineCostModel` prices it unless a domain curve measured it.

Every price has an uncertainty (:meth:`op_sigma` ...): the relative standard deviation in log
space. Measured ops: their run spread ((ln p90 - ln p10) / 2.563) combined with
``in_graph_sigma``. Fitted ops: the root mean square of the cross-validated residuals of their
(entry, op class), combined with the same. Its cross-validation is leave-one-model-out on the
entries' ``models`` fields (:meth:`ProfiledCostModel.cross_validate`): for each model M, a fit on
the signatures M does not have predicts the signatures it has.
"""

from __future__ import annotations

import math
import re
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .._io import write_json_atomic
from ..core.graph import OpGraph, OpNode, TensorType
from ..core.ops import OP_CLASSES, ZERO_FLOP_OPS, estimate_flops, op_class
from ..errors import ProfileError
from .base import CostModel
from .measured import op_signature, read_json_file
from .measured_gpu import TransferCurve

SCHEMA = "partition_lab.profile_cache/1"

#: Signatures an op name needs in a training set before it gets its own modifiers.
MIN_OP = 3
#: Signatures an op class needs in an entry before it gets a fit of its own.
MIN_CLASS = 8
#: Signatures an entry needs before anything is fitted on it (below: the fallback model).
MIN_FIT = 3
#: Folds of a cross-validation at most (more models are grouped into this many folds).
MAX_FOLDS = 40
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
#: profiled. Measured on plans, not fitted to the cost model's errors: on the H200 the same
#: plan (all ops on the host, or all on the GPU) timed whole by the profile and again in the
#: timed run minutes later, on one instance, differed by a log rms of 0.19 (host) and 0.22
#: (GPU) in issue 11's run 1 (0.29 and 0.32 in run 2); run back to back a minute apart, by
#: 0.06-0.10 (``bench/gpu/stability.py``, ``bench/results/gpu_stability.json``).
DRIFT_SIGMA = 0.2
#: Signatures with both times an op class needs before its in-graph / alone ratio is its own.
MIN_RATIO = 5
#: (ln p90 - ln p10) of a normal distribution, in standard deviations.
_P10_P90 = 2.5631

_LAYOUT = re.compile(r"(?:^|[{,])(?:data_)?layout=([A-Za-z0-9]*)")


# ============================================================================ the cache file
def read_profile_cache(source: str | Path | Mapping[str, Any] | Any) -> dict[str, Any]:
    """The decoded cache: from a path, a mapping, or an object with ``to_dict()``/``data``.

    Raises
    ------
    ProfileError
        If the file is missing or not JSON, the schema differs, or an op entry has no positive
        ``median_s``.
    """
    if isinstance(source, (str, Path)):
        data = read_json_file(Path(source), "profile cache")
        where = str(source)
    elif isinstance(source, Mapping):
        data, where = source, "profile cache"
    elif hasattr(source, "to_dict"):
        data, where = source.to_dict(), "profile cache"
    elif isinstance(getattr(source, "data", None), Mapping):
        data, where = source.data, "profile cache"
    else:
        raise ProfileError(f"a profile cache must be a path or a mapping, got {type(source)}")
    if not isinstance(data, Mapping) or data.get("schema") != SCHEMA:
        raise ProfileError(f"{where}: 'schema' must be {SCHEMA!r}")
    devices = data.get("devices")
    if not isinstance(devices, Mapping):
        raise ProfileError(f"{where}: 'devices' must be an object")
    for key, entry in devices.items():
        for sig, rec in dict(entry.get("ops", {})).items():
            median = rec.get("median_s") if isinstance(rec, Mapping) else None
            if isinstance(median, bool) or not isinstance(median, (int, float)) or not (
                    math.isfinite(median) and median > 0):
                raise ProfileError(f"{where}: devices[{key!r}].ops[{sig!r}] needs a positive "
                                   f"'median_s', got {median!r}")
    return dict(data)


# ============================================================================ signatures
def node_from_signature(signature: str) -> OpNode:
    """An :class:`OpNode` rebuilt from an :func:`op_signature` text (for caches with no graph).

    Arguments become inputs (weights are not told apart); outputs and FLOPs are inferred for
    convolutions, dense/matmul, pools, resize, concatenate and elementwise ops, counting FLOPs
    like the Relay frontend (a MAC is 2). Anything else keeps the first argument's shape.

    >>> n = node_from_signature("nn.dense(float16[128,768],float16[3072,768]){units=3072}")
    >>> n.outputs[0], n.flops
    (TensorType(shape=(128, 3072), dtype='float16'), 603979776.0)
    """
    match = re.fullmatch(r"([^()]+)\((.*?)\)(\{.*\})?", signature)
    if match is None:
        raise ProfileError(f"not an op signature: {signature!r}")
    op, arg_text, attr_text = match.group(1), match.group(2), match.group(3)
    args = tuple(_parse_type(t) for t in _split(arg_text)) if arg_text else ()
    attrs = _parse_attrs(attr_text[1:-1]) if attr_text else {}
    outputs = _infer(op, args, attrs)
    return OpNode(0, op, op, None, args, outputs, (), attrs,
                  estimate_flops(op, args, outputs, attrs), args)


def _split(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in parts if p != ""]


def _parse_type(text: str) -> TensorType:
    match = re.fullmatch(r"(\w+)\[([0-9,]*)\]", text.strip())
    if match is None:
        raise ProfileError(f"not a tensor type in an op signature: {text!r}")
    dims = tuple(int(d) for d in match.group(2).split(",") if d)
    return TensorType(dims, match.group(1))


def _parse_value(text: str) -> Any:
    if text.startswith("[") and text.endswith("]"):
        return tuple(_parse_value(v) for v in _split(text[1:-1]))
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def _parse_attrs(text: str) -> dict[str, Any]:
    attrs = {}
    for item in _split(text):
        key, _, value = item.partition("=")
        attrs[key] = _parse_value(value)
    return attrs


def _pair(value: Any, n: int = 2) -> tuple[int, ...]:
    if isinstance(value, (int, float)):
        return (int(value),) * n
    value = tuple(int(v) for v in value)
    return value if len(value) == n else (value * n)[:n]


def _pads(value: Any) -> tuple[int, int, int, int]:
    """(top, left, bottom, right) from Relay's 1, 2 or 4 paddings."""
    if isinstance(value, (int, float)):
        return (int(value),) * 4  # type: ignore[return-value]
    p = tuple(int(v) for v in value)
    if len(p) == 4:
        return p  # type: ignore[return-value]
    if len(p) == 2:
        return p[0], p[1], p[0], p[1]
    return (p[0],) * 4 if p else (0, 0, 0, 0)  # type: ignore[return-value]


def _spatial(layout: str, shape: tuple[int, ...]) -> tuple[int, int, int, int] | None:
    """(N, C, H, W) of a 4-d tensor in ``layout`` (default NCHW)."""
    layout = layout if len(layout) == 4 and len(shape) == 4 else "NCHW"
    if len(shape) != 4 or not set("NCHW") <= set(layout):
        return None
    return tuple(shape[layout.index(a)] for a in "NCHW")  # type: ignore[return-value]


def _shape_in(layout: str, n: int, c: int, h: int, w: int) -> tuple[int, ...]:
    layout = layout if len(layout) == 4 and set(layout) == set("NCHW") else "NCHW"
    values = {"N": n, "C": c, "H": h, "W": w}
    return tuple(values[a] for a in layout)


def _infer(op: str, args: tuple[TensorType, ...], attrs: Mapping[str, Any]
           ) -> tuple[TensorType, ...]:
    """Output types of a call known only by its signature."""
    if not args:
        return ()
    first = args[0]
    dtype = str(attrs.get("out_dtype") or "") or first.dtype
    if op == "cast":
        dtype = str(attrs.get("dtype") or first.dtype)
    layout = str(attrs.get("data_layout") or attrs.get("layout") or "NCHW")
    out_layout = str(attrs.get("out_layout") or "") or layout
    nchw = _spatial(layout, first.shape)

    def out(shape: Sequence[int]) -> tuple[TensorType, ...]:
        return (TensorType(tuple(int(s) for s in shape), dtype),)

    if op == "nn.conv2d" and len(args) >= 2 and nchw:
        n, _, h, w = nchw
        kernel_layout = str(attrs.get("kernel_layout") or "OIHW")
        k = args[1].shape
        kh, kw = (_pair(attrs["kernel_size"]) if "kernel_size" in attrs else
                  (k[kernel_layout.index("H")], k[kernel_layout.index("W")]))
        channels = int(attrs.get("channels") or k[kernel_layout.index("O")])
        sh, sw = _pair(attrs.get("strides", 1))
        dh, dw = _pair(attrs.get("dilation", 1))
        pt, pl, pb, pr = _pads(attrs.get("padding", 0))
        oh = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
        ow = (w + pl + pr - dw * (kw - 1) - 1) // sw + 1
        return out(_shape_in(out_layout, n, channels, oh, ow))
    if op == "nn.conv2d_transpose" and len(args) >= 2 and nchw:
        n, c, h, w = nchw
        k = args[1].shape
        kh, kw = _pair(attrs["kernel_size"]) if "kernel_size" in attrs else k[-2:]
        channels = int(attrs.get("channels") or k[1])
        sh, sw = _pair(attrs.get("strides", 1))
        dh, dw = _pair(attrs.get("dilation", 1))
        oph, opw = _pair(attrs.get("output_padding", 0))
        pt, pl, pb, pr = _pads(attrs.get("padding", 0))
        oh = (h - 1) * sh - pt - pb + dh * (kh - 1) + oph + 1
        ow = (w - 1) * sw - pl - pr + dw * (kw - 1) + opw + 1
        return out(_shape_in(out_layout, n, channels, oh, ow))
    if op in ("nn.dense", "nn.matmul") and len(args) >= 2:
        units = attrs.get("units")
        units = int(units) if isinstance(units, int) else (
            args[1].shape[0] if op == "nn.dense" or attrs.get("transpose_b") else
            args[1].shape[-1])
        return out((*first.shape[:-1], units))
    if op == "nn.batch_matmul" and len(args) >= 2:
        a, b = first.shape, args[1].shape
        m = a[-1] if attrs.get("transpose_a") else a[-2]
        n_ = b[-2] if attrs.get("transpose_b", 1) else b[-1]
        return out((max(a[0], b[0]), m, n_))
    if op.endswith("pool2d") and nchw:
        n, c, h, w = nchw
        if "global" in op or "adaptive" in op:
            size = _pair(attrs.get("output_size") or 1)
            return out(_shape_in(out_layout, n, c, *size))
        ph, pw = _pair(attrs.get("pool_size", 1))
        sh, sw = _pair(attrs.get("strides", 1))
        dh, dw = _pair(attrs.get("dilation", 1))
        pt, pl, pb, pr = _pads(attrs.get("padding", 0))
        rnd = math.ceil if attrs.get("ceil_mode") else math.floor
        oh = int(rnd((h + pt + pb - dh * (ph - 1) - 1) / sh)) + 1
        ow = int(rnd((w + pl + pr - dw * (pw - 1) - 1) / sw)) + 1
        return out(_shape_in(out_layout, n, c, oh, ow))
    if op == "image.resize2d" and nchw and "size" in attrs:
        n, c, _, _ = nchw
        return out(_shape_in(out_layout, n, c, *_pair(attrs["size"])))
    if op in ("concatenate", "stack"):
        axis = int(attrs.get("axis", 0))
        shape = list(first.shape)
        if op == "stack":
            shape.insert(axis % (len(shape) + 1), len(args))
        else:
            shape[axis] = sum(a.shape[axis] for a in args)
        return out(shape)
    if op == "nn.batch_norm":
        channels = first.shape[int(attrs.get("axis", 1))]
        stats = TensorType((channels,), dtype)
        return TensorType(first.shape, dtype), stats, stats
    if op == "nn.dropout":  # Relay's dropout also returns its mask
        return out(first.shape) * 2
    if op in ("sum", "mean", "max", "min"):
        return out((1,))
    if op in ZERO_FLOP_OPS:
        return out(first.shape)
    try:
        return out(np.broadcast_shapes(*(a.shape for a in args)))
    except ValueError:
        return out(max((a.shape for a in args), key=math.prod))


# ============================================================================ the fit
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


# ============================================================================ cross-validation
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
        """The errors as text tables (what ``bench/profile_cv.py`` prints)."""
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


def _kfold(signatures: Sequence[str], k: int = 5) -> dict[str, list[str]]:
    """Pseudo-models for an entry that names fewer than two: k folds by a stable hash."""
    import zlib

    return {s: [f"fold{zlib.crc32(s.encode()) % k}"] for s in signatures}


# ============================================================================ the model
@dataclass
class _Entry:
    """One device entry of the cache, with its fits (built when first needed)."""

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
    _fits: ClassFits | None = None
    _sigma: dict[str, float] | None = None
    _cache: dict[str, float] = field(default_factory=dict)
    _ratios: dict[str, tuple[float, float | None]] = field(default_factory=dict)

    @classmethod
    def build(cls, key: str, raw: Mapping[str, Any]) -> _Entry:
        ops = dict(raw.get("ops", {}))
        sigs = sorted(ops)
        samples = [Sample.of_record(s, ops[s]) for s in sigs]
        times = np.array([float(ops[s]["median_s"]) for s in sigs])
        spread = {}
        for s in sigs:
            p10, p90 = ops[s].get("p10_s"), ops[s].get("p90_s")
            spread[s] = (math.log(p90 / p10) / _P10_P90
                         if isinstance(p10, (int, float)) and isinstance(p90, (int, float))
                         and 0 < p10 <= p90 else 0.0)
        models = {s: [str(m) for m in ops[s].get("models") or []] for s in sigs}
        if len({m for ms in models.values() for m in ms}) < 2:
            models = _kfold(sigs)
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

    def measured(self, signature: str) -> float | None:
        rec = self.raw.get("ops", {}).get(signature)
        return None if rec is None else float(rec["median_s"])

    def typical_spread(self) -> float:
        return statistics.median(self.spread.values()) if self.spread else 0.0


@dataclass(frozen=True)
class _Folds:
    held_out: dict[str, list[str]]   # fold -> held-out signatures
    training: dict[str, list[str]]   # fold -> training signatures


class ProfiledCostModel:
    """Op, copy and region times of a platform from a profile cache, with uncertainties.

    Parameters
    ----------
    cache:
        The cache: a path, its decoded JSON, or an object with ``to_dict()``.
    platform:
        A :class:`~partition_lab.core.platform.Platform` or a platform name.
    binding:
        ``{platform device name: cache device key}``; default the cache's
        ``bindings[platform.name]``, else each host bound to the only ``kind: "cpu"`` entry and
        each other device to the only other entry (a device left unbound uses ``fallback``).
    fallback:
        The model of unbound devices and of entries with too few signatures to fit; default
        the platform's roofline (:func:`~partition_lab.cost_models.get_cost_model`).
    in_graph_sigma:
        The error of an op timed alone when it runs inside a graph (added to every op sigma),
        per entry ``kind``: default :data:`IN_GRAPH_SIGMA` (host CPU 0.25: on the H200 host,
        islands inside a graph took 1.5-2x their ops timed alone on 4 of 11 models, issue 11;
        GPU 0.05). A number applies to every kind. Used only where the entry has too few
        whole-graph measurements (below).
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

    def __init__(self, cache: Any, platform: Any, *, binding: Mapping[str, str] | None = None,
                 fallback: CostModel | None = None,
                 in_graph_sigma: float | Mapping[str, float] | None = None,
                 drift_sigma: float | None = None) -> None:
        from ..core.platform import Platform, get_platform

        self.drift_sigma = DRIFT_SIGMA if drift_sigma is None else float(drift_sigma)
        self.cache = read_profile_cache(cache)
        self.platform = platform if isinstance(platform, Platform) else get_platform(platform)
        if in_graph_sigma is None:
            in_graph_sigma = IN_GRAPH_SIGMA
        self.in_graph_sigma: dict[str, float] = (
            dict(in_graph_sigma) if isinstance(in_graph_sigma, Mapping) else
            {"default": float(in_graph_sigma)})
        devices = self.cache["devices"]
        self.binding = self._bind(binding, devices)
        self._entries = {key: _Entry.build(key, devices[key])
                         for key in dict.fromkeys(self.binding.values())}
        if fallback is None:
            from . import get_cost_model

            fallback = get_cost_model(self.platform)
        self.fallback = fallback
        self._roofline = _find_roofline(fallback, self.platform)
        self._add_in_graph_copies()
        parts = [f"{'+'.join(d for d, k in self.binding.items() if k == key)}="
                 f"{devices[key].get('name') or key} ({len(e.signatures)} ops)"
                 for key, e in self._entries.items()]
        self.name = f"profiled({self.platform.name}: {'; '.join(parts) or 'nothing bound'})"

    def _bind(self, binding: Mapping[str, str] | None, devices: Mapping[str, Any]
              ) -> dict[str, str]:
        if binding is None:
            binding = dict(self.cache.get("bindings", {}).get(self.platform.name, {}))
            if not binding:
                binding = self._auto_bind(devices)
        unknown = {d: k for d, k in binding.items() if k not in devices}
        if unknown:
            raise ProfileError(f"binding names cache entries that do not exist: {unknown}; "
                               f"the cache has {sorted(devices)}")
        names = set(self.platform.names)
        stray = sorted(set(binding) - names)
        if stray:
            raise ProfileError(f"binding names devices {stray} that platform "
                               f"{self.platform.name!r} does not have ({sorted(names)})")
        return dict(binding)

    def _auto_bind(self, devices: Mapping[str, Any]) -> dict[str, str]:
        cpus = [k for k, v in devices.items() if v.get("kind") == "cpu"]
        others = [k for k, v in devices.items() if v.get("kind") != "cpu"]
        out = {}
        for d in self.platform.devices:
            pool = cpus if d.is_host else others
            if len(pool) > 1:
                raise ProfileError(
                    f"the cache has several {'cpu' if d.is_host else 'accelerator'} entries "
                    f"({', '.join(pool)}); {_binding_hint(self.platform.name, d.name)}")
            if pool:
                out[d.name] = pool[0]
        return out

    # ------------------------------------------------------------------ lookups
    def entry_of(self, device: str) -> _Entry | None:
        key = self.binding.get(device)
        return None if key is None else self._entries[key]

    def is_measured(self, node: OpNode, device: str) -> bool:
        entry = self.entry_of(device)
        return entry is not None and entry.measured(op_signature(node)) is not None

    def _alone(self, node: OpNode, entry: _Entry, sig: str) -> float | None:
        """The op timed alone: measured, else fitted; None if the entry cannot fit."""
        measured = entry.measured(sig)
        if measured is not None:
            return measured
        cached = entry._cache.get(sig)
        if cached is None:
            if not entry.fits.usable:
                return None
            cached = float(entry.fits.predict([Sample.of_node(node, sig)])[0])
            entry._cache[sig] = cached
        return cached

    @staticmethod
    def _with_overheads(alone: float, entry: _Entry) -> float:
        """The op as the executor runs it in a graph: on a device whose launches are queued
        (an entry of kind other than ``cpu`` that measured ``op_floor_s``) no op takes less
        than the host's time per op, which already holds ``per_op_s``; elsewhere ops run as
        they are issued and each pays ``per_op_s`` on top."""
        floor = entry.overheads.get("op_floor_s")
        if floor is not None and entry.raw.get("kind", "cpu") != "cpu":
            return max(alone, floor)
        return alone + entry.overheads.get("per_op_s", 0.0)

    # ------------------------------------------------------------------ CostModel protocol
    def _in_graph_time(self, node: OpNode, entry: _Entry, sig: str, alone: float) -> float:
        """The op inside a graph: measured there, else alone (with overheads) times its class's
        in-graph ratio."""
        measured = entry.in_graph.get(sig)
        if measured is not None:
            return measured
        ratio, _ = self._ratio(entry, op_class(node))
        return self._with_overheads(alone, entry) * ratio

    def _ratio(self, entry: _Entry, cls: str) -> tuple[float, float | None]:
        """(median, log sd) of in-graph / alone over the entry's signatures of class ``cls``
        that have both (of every class if ``cls`` has too few); (1, None) without any."""
        key = f"ratio:{cls}"
        if key not in entry._ratios:
            logs: dict[str, list[float]] = {}
            for sig, seconds in entry.in_graph.items():
                alone = entry.measured(sig)
                if alone:
                    rec_cls = entry.raw["ops"][sig].get("class", "vector")
                    ratio = math.log(seconds / self._with_overheads(alone, entry))
                    logs.setdefault(rec_cls, []).append(ratio)
                    logs.setdefault("*", []).append(ratio)
            chosen = logs.get(cls) if len(logs.get(cls, ())) >= MIN_RATIO else logs.get("*")
            if not chosen or len(chosen) < 2:
                entry._ratios[key] = (1.0, None)
            else:
                entry._ratios[key] = (math.exp(statistics.median(chosen)),
                                      statistics.pstdev(chosen))
        return entry._ratios[key]

    def op_time(self, node: OpNode, device: str) -> float:
        entry = self.entry_of(device)
        if entry is None:
            return self.fallback.op_time(node, device)
        sig = op_signature(node)
        alone = self._alone(node, entry, sig)
        if alone is None:
            return self.fallback.op_time(node, device)
        return self._in_graph_time(node, entry, sig, alone)

    def op_times(self, nodes: Sequence[OpNode], device: str) -> list[float]:
        """``[op_time(n, device) for n in nodes]``, fitting the unmeasured ones in one batch."""
        entry = self.entry_of(device)
        if entry is None or not (entry.fits.usable or all(
                self.is_measured(n, device) for n in nodes)):
            return [self.op_time(n, device) for n in nodes]
        sigs = [op_signature(n) for n in nodes]
        todo = {}
        for n, s in zip(nodes, sigs, strict=True):
            if entry.measured(s) is None and s not in entry._cache and s not in todo:
                todo[s] = Sample.of_node(n, s)
        if todo:
            for s, t in zip(todo, entry.fits.predict(list(todo.values())), strict=True):
                entry._cache[s] = float(t)
        return [self._in_graph_time(n, entry, s, entry.measured(s) or entry._cache[s])
                for n, s in zip(nodes, sigs, strict=True)]

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
        domain_name, copy_name = _link_curves(a, b)
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
        within a factor of 2 of its size: the probe times copies in a two-op graph, and on the
        H200 it priced a 69 MB float16 output with its cast at 45 ms where whole graphs paid
        about 8 ms (issue 11, deeplab on tensorcore).
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
    def _curve_name(device: Any, host: Any, out: bool, entry: _Entry) -> str:
        """The curve a copy between ``device`` and the host is priced by (see _transfer_parts)."""
        domain, copy = _link_curves(*((device, host) if out else (host, device)))
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
        in_graph = self._in_graph(entry, op_class(node))
        if entry.measured(sig) is not None:
            return math.hypot(entry.spread.get(sig, 0.0), in_graph)
        if not entry.fits.usable:
            return FALLBACK_SIGMA
        cv = self.fitted_sigma(entry.key).get(op_class(node))
        if cv is None:
            cv = max(self.fitted_sigma(entry.key).values(), default=FALLBACK_SIGMA)
        return math.sqrt(cv ** 2 + in_graph ** 2 + entry.typical_spread() ** 2)

    def _in_graph(self, entry: _Entry, cls: str) -> float:
        """The in-graph part of an op's sigma: the measured spread of its class's in-graph
        ratios where the entry has them, else the assumed :data:`IN_GRAPH_SIGMA`."""
        _, spread = self._ratio(entry, cls)
        if spread is not None:
            return spread
        kind = str(entry.raw.get("kind", "cpu"))
        return self.in_graph_sigma.get(kind, self.in_graph_sigma.get("default", 0.05))

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
        if entry._sigma is None:
            errors: dict[str, list[float]] = {}
            for p in self._cv_predictions(entry):
                errors.setdefault(p.op_class, []).append(p.log_error)
            entry._sigma = {c: float(np.sqrt(np.mean(np.square(v)))) for c, v in errors.items()}
        return entry._sigma

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
        if floor is not None and entry.raw.get("kind", "cpu") != "cpu":
            extra = f"; in a graph at least {floor * 1e6:.3g} us (queued launches)"
        else:
            extra = f"; in a graph +{entry.overheads.get('per_op_s', 0.0) * 1e6:.3g} us per op"
        ratio, spread = self._ratio(entry, op_class(node))
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
    def folds(self, key: str) -> _Folds:
        """Per held-out model of entry ``key``: its signatures, and the training signatures
        (every signature that no held-out model has)."""
        entry = self._entries[key]
        held: dict[str, list[str]] = {}
        train: dict[str, list[str]] = {}
        for fold, names in _folds(entry.models):
            held[fold] = [s for s in entry.signatures if names & set(entry.models[s])]
            train[fold] = [s for s in entry.signatures if not names & set(entry.models[s])]
        return _Folds(held, train)

    def _cv_predictions(self, entry: _Entry) -> list[CVPrediction]:
        index = {s: i for i, s in enumerate(entry.signatures)}
        folds = self.folds(entry.key)
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

    def cross_validate(self, graphs: Mapping[str, OpGraph] | Iterable[OpGraph] | None = None
                       ) -> CrossValidation:
        """Leave-one-model-out errors of the fitted model on every bound entry.

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
        for key, entry in self._entries.items():
            preds = self._cv_predictions(entry)
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
            f = self.folds(key)
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
        names = {key: "+".join(d for d, k in self.binding.items() if k == key)
                 for key in self._entries}
        return CrossValidation("; ".join(sorted(protocols)), by_class, by_graph, totals,
                               predictions, folds, names, by_op)


def _link_curves(src: Any, dst: Any) -> tuple[str, str]:
    """The names of the curves a copy from device ``src`` to ``dst`` is read from: the domain
    curve (copy and cast as the executor makes them), else the plain memory-to-memory copy."""
    return (f"{src.memory}:{src.precision}->{dst.memory}:{dst.precision}",
            f"{src.memory}->{dst.memory}")


def _binding_hint(platform: str, device: str) -> str:
    """How to say which cache entry a device is timed by: ``binding=`` in Python; on the
    command line, by profiling the model for the platform, which records its bindings."""
    from .._audience import is_command_line

    if is_command_line():
        return (f"run `partition-lab profile MODEL --platform {platform} --cache FILE` once on "
                f"the device that runs {device!r}: it records which entry each device uses")
    return f"pass binding={{device: key}} for {device!r}"


def _curve_sigma(curve: TransferCurve, nbytes: float) -> float:
    if nbytes <= curve.sizes[-1]:
        return COPY_SIGMA
    return COPY_SIGMA + 0.05 * math.log2(nbytes / curve.sizes[-1])


def _find_roofline(model: Any, platform: Any) -> Any:
    from .roofline import RooflineCostModel

    seen = 0
    while model is not None and seen < 5:
        if isinstance(model, RooflineCostModel):
            return model
        model = getattr(model, "base", None) or getattr(model, "fallback", None)
        seen += 1
    from . import get_cost_model

    found = get_cost_model(platform)
    return found if isinstance(found, RooflineCostModel) else getattr(found, "base", None)


# ============================================================================ old H200 format
def cache_from_measured_gpu(data: Mapping[str, Any] | str | Path | None = None, *,
                            graphs: Mapping[str, OpGraph] | Iterable[OpGraph] | None = None,
                            platform: Any = "tensorcore", group: str = "op") -> dict[str, Any]:
    """A profile cache (schema ``partition_lab.profile_cache/1``) from an old two-kind profile
    (``partition_lab.gpu_profile/1``, :mod:`.measured_gpu`; default the shipped H200 one).

    The ``accel`` table becomes a ``cuda`` entry bound to every non-host device of
    ``platform``, ``cpu`` a ``cpu`` entry bound to the host. That format does not record which
    models a signature came from, nor FLOPs and bytes: ``graphs`` (the profiled models' graphs)
    supply both for the signatures they contain; other signatures get FLOPs and bytes from
    :func:`node_from_signature` and, as their ``models``, a group named by ``group``: ``"op"``
    (``"op:nn.conv2d"``: cross-validation then leaves one op name out, which is not leaving one
    model out) or ``"signature"`` (each its own group). Copies ``h2d``/``d2h`` as the executor
    made them (they include the host's float32 conversion) are stored under memory keys and
    the host-domain keys; per-op overheads: ``overhead_per_op_s`` is ``per_op_s``,
    ``host_per_op_s`` is ``op_floor_s``; the old CPU region overhead (a wake-up after waiting
    on the GPU) is the host's ``island_wakeup_s``. Op, copy and region prices of measured
    signatures then equal :class:`~.measured_gpu.MeasuredGpuCostModel`'s.
    """
    from ..core.platform import Platform, get_platform
    from .measured_gpu import SCHEMA as OLD_SCHEMA
    from .measured_gpu import default_profile_path

    if data is None or isinstance(data, (str, Path)):
        path = default_profile_path() if data is None else Path(data)
        data = read_json_file(path, "measured GPU profile")
    if data.get("schema") != OLD_SCHEMA:
        raise ProfileError(f"not a {OLD_SCHEMA!r} profile")
    plat = platform if isinstance(platform, Platform) else get_platform(platform)
    meta = dict(data.get("meta", {}))
    info = dict(data.get("op_info", {}))
    nodes: dict[str, OpNode] = {}
    models: dict[str, list[str]] = {}
    if graphs is not None:
        items = graphs.items() if isinstance(graphs, Mapping) else ((g.name, g) for g in graphs)
        for name, graph in items:
            for node in graph:
                sig = op_signature(node)
                nodes.setdefault(sig, node)
                if name not in models.setdefault(sig, []):
                    models[sig].append(name)
    date = str(meta.get("date", ""))[:10]

    def record(sig: str, seconds: float) -> dict[str, Any]:
        node = nodes.get(sig) or node_from_signature(sig)
        args = node.args or node.inputs + node.weights
        named = models.get(sig) or [f"op:{node.op}" if group == "op" else f"sig:{sig}"]
        return {"median_s": float(seconds), "p10_s": float(seconds), "p90_s": float(seconds),
                "runs": 3, "op": node.op,
                "class": info.get(sig, {}).get("class") or op_class(node),
                "flops": float(node.flops), "bytes": float(node.bytes_moved),
                "dtype": args[0].dtype if args else "float32", "models": named,
                "measured_at": date}

    gpu, cpu = str(meta.get("gpu", "GPU")), str(meta.get("host_cpu", "host CPU"))
    torch = str(meta.get("torch", "?"))
    gpu_key = f"torch-cuda|{gpu}|torch {torch}|cudnn {meta.get('cudnn', '?')}"
    cpu_key = f"torch-cpu|{cpu}|torch {torch}|{meta.get('cpu_threads', '?')} threads"
    transfers = dict(data.get("transfers", {}))
    suffix = "" if data.get("executor_transfers", "pageable") == "pageable" else (
        "_" + str(data["executor_transfers"]))
    host = plat.host
    accel_memories = list(dict.fromkeys(d.memory for d in plat.accelerators)) or ["gpu"]
    copies: dict[str, list[list[float]]] = {}
    for memory in accel_memories:
        for name, (a, b) in {"h2d": (host.memory, memory), "d2h": (memory, host.memory)}.items():
            points = transfers.get(name + suffix)
            if points:
                copies[f"{a}->{b}"] = [list(map(float, p)) for p in points]
        domains = {d.domain for d in plat.accelerators if d.memory == memory}
        for mem, precision in domains:
            if precision == host.precision:
                continue
            for name, (a, b) in {"h2d": ((host.memory, host.precision), (mem, precision)),
                                 "d2h": ((mem, precision), (host.memory, host.precision))
                                 }.items():
                points = transfers.get(name + suffix)
                if points:
                    copies[f"{a[0]}:{a[1]}->{b[0]}:{b[1]}"] = [list(map(float, p))
                                                               for p in points]
    region = dict(data.get("region_overhead_s", {}))
    per_op = dict(data.get("executor_op_overhead", {}))
    software = {k: str(meta[k]) for k in ("torch", "cuda", "cudnn", "driver", "python")
                if k in meta}
    ops = dict(data.get("ops", {}))
    devices = {
        gpu_key: {"runner": "torch", "kind": "cuda", "name": gpu, "software": software,
                  "ops": {s: record(s, t) for s, t in ops.get("accel", {}).items()},
                  "copies": copies,
                  "overheads": {"region_s": float(region.get("accel", 0.0)),
                                "per_op_s": float(per_op.get("accel", {}).get(
                                    "overhead_per_op_s", 0.0)),
                                "op_floor_s": float(per_op.get("accel", {}).get(
                                    "host_per_op_s", 0.0))}},
        cpu_key: {"runner": "torch", "kind": "cpu", "name": cpu, "software": software,
                  "ops": {s: record(s, t) for s, t in ops.get("cpu", {}).items()},
                  "copies": {},
                  "overheads": {"region_s": 0.0,
                                "per_op_s": float(per_op.get("cpu", {}).get(
                                    "overhead_per_op_s", 0.0)),
                                "op_floor_s": float(per_op.get("cpu", {}).get(
                                    "host_per_op_s", 0.0)),
                                "island_wakeup_s": float(region.get("cpu", 0.0))}},
    }
    binding = {d.name: (cpu_key if d.is_host else gpu_key) for d in plat.devices}
    return {"schema": SCHEMA, "devices": devices, "bindings": {plat.name: binding},
            "converted_from": {"schema": OLD_SCHEMA, "date": meta.get("date"),
                               "models": "from graphs" if graphs is not None else
                               f"grouped by {group} (no model names in the old format)"}}


def write_profile_cache(path: str | Path, cache: Mapping[str, Any]) -> Path:
    """Write ``cache`` as JSON atomically (a temporary file, then a rename)."""
    return write_json_atomic(path, cache)

