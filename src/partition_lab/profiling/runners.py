"""Runners: what times op signatures, copies and overheads on one device.

Every runner has the same interface (:class:`Runner`):

* ``device_key()``: the cache key of what it measures on (hardware plus the software versions
  that change timings), and ``describe()``: the entry's ``runner``, ``kind``, ``name`` and
  ``software``;
* ``measure_ops({signature: OpNode}) -> {signature: Timing}``: each op signature timed alone;
  where ``times_units`` is true, a pattern's composite node (``composite:<pattern>``, its refs a
  :class:`~partition_lab.executors.benchmark.UnitBinding`) is timed as one unit;
* ``measure_copies(host_memory, device_memory)``: copy-time curves between the host and the
  runner's device, keyed ``"<src_memory>-><dst_memory>"`` (empty where no copy is made);
* ``measure_overheads()``: ``region_s``, ``per_op_s`` and ``island_wakeup_s`` as its executor
  pays them;
* ``measure_graph(graph, bindings)`` (optional; None where a runner cannot): the whole graph
  run on the runner's device, end to end and each op's share of it (:class:`GraphTiming`):
  what an op costs inside a graph, which ops timed alone miss.

:class:`TorchRunner` (here) times the kernels of :mod:`partition_lab.executors.kernels` and
needs no TVM; the TVM runners live in :mod:`partition_lab.profiling.tvm_runners`.
"""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._io import cpu_name
from ..core.graph import OpNode
from ..errors import ProfileError

ProgressFn = Callable[[int, int, str], None]
"""``progress(done, total, what)``, called before each op is timed and once at the end."""

#: Copy sizes timed by default: 256 B to 256 MiB in steps of 4x.
COPY_SIZES = tuple(2 ** k for k in range(8, 29, 2))


@dataclass(frozen=True)
class Timing:
    """The time distribution of one op signature: median and 10th/90th percentiles of
    ``runs`` samples (each sample the mean of a back-to-back batch)."""

    median_s: float
    p10_s: float
    p90_s: float
    runs: int

    @classmethod
    def from_samples(cls, samples: Sequence[float]) -> Timing:
        if not samples:
            raise ProfileError("no timing samples")
        ordered = sorted(max(float(s), 1e-12) for s in samples)
        return cls(statistics.median(ordered), _quantile(ordered, 0.1),
                   _quantile(ordered, 0.9), len(ordered))


def _quantile(ordered: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile of sorted values (numpy's default method)."""
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass(frozen=True)
class GraphTiming:
    """One graph run whole on one device: ``total_s``, the median end-to-end time of a run
    (inputs copied in, outputs copied out), and ``in_graph_s``, per op signature the median
    time an op of that signature took inside the run (its slot: from its start to the next
    op's start, on the device's own clock), scaled so that the slots of a run add up to the
    run without the timing marks. ``runs``: timed runs of each kind."""

    total_s: float
    ops: int
    runs: int
    in_graph_s: dict[str, float]
    outside_s: float = 0.0


class Runner:
    """The interface every runner implements (see the module docstring)."""

    runner: str = ""
    kind: str = "cpu"
    #: Whether :meth:`measure_ops` can time a pattern's unit as one unit (a composite node).
    times_units: bool = False

    def device_key(self) -> str:
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        """``{"runner", "kind", "name", "software"}`` of this runner's cache entry."""
        raise NotImplementedError

    def measure_ops(self, ops: Mapping[str, OpNode], *,
                    refs: Mapping[str, Sequence[Any]] | None = None,
                    progress: ProgressFn | None = None,
                    errors: dict[str, str] | None = None,
                    deadline: float | None = None) -> dict[str, Timing]:
        """Time every op signature of ``ops`` alone.

        ``refs`` gives, per signature, which call arguments are weights (the graph's
        :class:`~partition_lab.executors.graph_io.ArgRef` bindings; inferred from the node's
        types where missing). An op that cannot be timed raises ProfileError, unless ``errors``
        is given: then its message is recorded there and the others are timed. Past
        ``deadline`` (a ``time.perf_counter()`` value) the rest is left unmeasured. A composite
        node (a pattern's unit) comes with a
        :class:`~partition_lab.executors.benchmark.UnitBinding` as its refs, and only to runners
        whose ``times_units`` is true.
        """
        raise NotImplementedError

    def measure_copies(self, host_memory: str, device_memory: str, *, dtype: str = "float32",
                       sizes: Sequence[int] = COPY_SIZES) -> dict[str, list[tuple[float, float]]]:
        return {}

    def measure_overheads(self) -> dict[str, float]:
        raise NotImplementedError

    def measure_graph(self, graph: Any, bindings: Sequence[Sequence[Any]], *,
                      deadline: float | None = None) -> GraphTiming | None:
        """The whole graph on this runner's device (see :class:`GraphTiming`); None where the
        runner cannot run whole graphs."""
        return None

    def close(self) -> None:
        """Release what the runner holds (sessions, memory)."""


def infer_refs(node: OpNode) -> tuple[Any, ...]:
    """Which of ``node.args`` are weights, from the node's types alone.

    Used where the graph's argument bindings are not at hand. Arguments are matched in call
    order against the remaining activation types first, then weight types; where both match,
    the two candidates have the same type, which is all that timing an op needs.
    """
    from ..executors.graph_io import ArgRef

    inputs, weights = list(node.inputs), list(node.weights)
    refs = []
    for spec in node.args:
        if spec in inputs:
            inputs.remove(spec)
            refs.append(ArgRef("tensor", key=f"input:{len(refs)}"))
        elif spec in weights:
            refs.append(ArgRef("weight", index=len(node.weights) - len(weights)))
            weights.remove(spec)
        else:
            raise ProfileError(f"{node.op} ({node.name}): argument type {spec} is neither an "
                               "input nor a weight of the node")
    if len(refs) != len(node.args) or weights:
        raise ProfileError(f"{node.op} ({node.name}): cannot tell its weights from its inputs")
    return tuple(refs)


# ---------------------------------------------------------------------------- PyTorch
class TorchRunner(Runner):
    """Times what :class:`~partition_lab.executors.torch_exec.PlanExecutor` runs, on ``device``.

    Ops: each signature alone with the executor's own kernel
    (:func:`~partition_lab.executors.benchmark.op_callable`: synthetic weights prepared once,
    the casts of its outputs included): a warm-up call, a batch size chosen so that a batch
    takes about ``batch_s``, then ``repeats`` back-to-back batches, each ended by a CUDA
    synchronisation; a sample is a batch's time per call, which is what an op costs inside an
    eagerly launched region (the larger of its launch and its kernel). Stats are the median and
    the 10th/90th percentiles of the samples.

    Units (a pattern's ops, as a device that declares the pattern runs them): the unit's ops
    run in order in one timed call (:func:`~partition_lab.executors.benchmark.unit_callable`),
    the same way; its time is the unit's, launches and intermediates included.

    Copies (CUDA only): inside executor runs of a two-region probe plan, as the executor copies
    (pageable host memory, casts at the boundary included), median of several runs per size.
    On the CPU the executor makes no copies and none are measured.

    Overheads: see :meth:`measure_overheads`.

    ``precision="float32"`` times half tensors in float32 on the GPU (a plan device whose
    precision is float32); on the CPU half tensors are always computed in float32, as the
    executor does.
    """

    runner = "torch"
    times_units = True

    def __init__(self, device: str = "cpu", *, precision: str = "as-prepared",
                 repeats: int = 9, batch_s: float = 0.005, max_calls: int = 200,
                 seed: int = 0, graph_s: float = 3.0) -> None:
        import torch

        if device.startswith("cuda"):
            if not torch.cuda.is_available():
                raise ProfileError(f"device {device!r} asked for but torch sees no CUDA device")
            if ":" not in device:
                device = f"cuda:{torch.cuda.current_device()}"
        elif device != "cpu":
            raise ProfileError(f"torch runner device must be 'cpu' or 'cuda[:N]', not {device!r}")
        if repeats < 1 or batch_s <= 0 or max_calls < 1:
            raise ProfileError("repeats and max_calls must be at least 1 and batch_s positive")
        self.device = device
        self.kind = "cuda" if device.startswith("cuda") else "cpu"
        self.precision = "float32" if precision == "float32" and self.kind == "cuda" \
            else "as-prepared"
        self.repeats, self.batch_s, self.max_calls, self.seed = repeats, batch_s, max_calls, seed
        self.graph_s = graph_s  # whole-graph runs: at least 3 each, more while under graph_s

    # ------------------------------------------------------------------ identity
    def describe(self) -> dict[str, Any]:
        from ..executors.benchmark import torch_device

        info = torch_device(self.device, float32=self.precision == "float32")
        return {"runner": self.runner, **info}

    def device_key(self) -> str:
        from ..executors.benchmark import torch_device_key

        return torch_device_key(self.device, float32=self.precision == "float32")

    # ------------------------------------------------------------------ ops
    def measure_ops(self, ops: Mapping[str, OpNode], *,
                    refs: Mapping[str, Sequence[Any]] | None = None,
                    progress: ProgressFn | None = None,
                    errors: dict[str, str] | None = None,
                    deadline: float | None = None) -> dict[str, Timing]:
        from ..core.patterns import COMPOSITE_OP_PREFIX
        from ..executors.benchmark import UnitBinding, op_callable, unit_callable
        from ..executors.kernels import KERNELS

        mode = "float32" if self.precision == "float32" else "graph"
        times: dict[str, Timing] = {}
        total = len(ops)
        for done, (sig, node) in enumerate(ops.items()):
            if deadline is not None and time.perf_counter() > deadline:
                break
            if progress:
                progress(done, total, node.op)
            unit = (refs or {}).get(sig)
            if node.op.startswith(COMPOSITE_OP_PREFIX) and isinstance(unit, UnitBinding):
                try:
                    times[sig] = self._time(unit_callable(unit, device=self.device, dtype=mode,
                                                          seed=self.seed))
                except Exception as err:  # noqa: BLE001 - the unit's ops stay priced one by one
                    self._failed(sig, node, err, errors)
                continue
            if node.op not in KERNELS:
                message = f"{node.op}: no PyTorch translation for {node.op}"
                if errors is None:
                    raise ProfileError(f"could not time {sig} on {self.device}: {message}")
                errors[sig] = message
                continue
            try:
                node_refs = (refs or {}).get(sig) or infer_refs(node)
                fn = op_callable(node, node_refs, device=self.device, dtype=mode, seed=self.seed)
                times[sig] = self._time(fn)
                del fn
            except Exception as err:  # noqa: BLE001 - one odd op must not lose the profile
                self._failed(sig, node, err, errors)
        if progress:
            progress(total, total, "")
        self._empty_cache()
        return times

    def _failed(self, sig: str, node: OpNode, err: BaseException,
                errors: dict[str, str] | None) -> None:
        """Record why ``sig`` could not be timed in ``errors``, or raise if there is none."""
        message = f"{node.op}: {type(err).__name__}: {str(err).strip().splitlines()[0]}" \
            if str(err).strip() else f"{node.op}: {type(err).__name__}"
        if errors is None:
            raise ProfileError(f"could not time {sig} on {self.device}: {message}") from err
        errors[sig] = message

    def _time(self, fn: Callable[[], Any]) -> Timing:
        """Samples of seconds per call, each from a back-to-back batch ended by a sync."""
        fn()
        self._sync()
        start = time.perf_counter()
        fn()
        self._sync()
        single = max(time.perf_counter() - start, 1e-7)
        calls = int(min(max(self.batch_s / single, 1), self.max_calls))
        return Timing.from_samples(self._batches(fn, calls, self.repeats))

    def _batches(self, fn: Callable[[], Any], calls: int, repeats: int) -> list[float]:
        """Seconds per call of ``repeats`` back-to-back batches of ``calls``, each synced."""
        samples = []
        for _ in range(repeats):
            self._sync()
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            self._sync()
            samples.append((time.perf_counter() - start) / calls)
        return samples

    def _sync(self) -> None:
        if self.kind == "cuda":
            import torch

            torch.cuda.synchronize(self.device)

    def _empty_cache(self) -> None:
        if self.kind == "cuda":
            import torch

            torch.cuda.empty_cache()

    # ------------------------------------------------------------------ whole graphs
    def measure_graph(self, graph: Any, bindings: Sequence[Sequence[Any]], *,
                      deadline: float | None = None, runs: int = 7,
                      max_seconds: float | None = None) -> GraphTiming | None:
        """The graph run whole by :class:`~partition_lab.executors.torch_exec.PlanExecutor` on
        this device (synthetic weights, random inputs), ``runs`` times plain and ``runs``
        times with a mark before each op and one after the last (a CUDA event on a GPU, the
        clock on the CPU).

        A slot is the time from an op's mark to the next one: inside an eagerly launched
        graph it is the larger of the op's kernel and the host's time to issue it, the cost
        an op timed alone back to back does not show (ops timed alone under-predict whole
        graphs by about 1.6x). The marks themselves cost time: slots are scaled so that
        they add up to the plain run less what lies outside the ops (``outside_s``: the input
        and output copies as the executor makes them, and its start and finish). Fewer runs
        (at least 3) once ``max_seconds`` (default the runner's ``graph_s``) have passed, and
        past ``deadline`` (at least one).
        """
        from ..cost_models.signatures import op_signature
        from ..executors.torch_exec import PlanExecutor
        from ..executors.weights import sample_inputs, synthetic_weights

        mode = "float32" if self.precision == "float32" else "graph"
        executor = PlanExecutor(graph, None, bindings, synthetic_weights(graph, bindings),
                                device=self.device, dtype=mode)
        inputs = sample_inputs(graph)
        executor.prepare()
        for _ in range(2):
            executor.run(inputs)
        plain, spans, outside, slots = [], [], [], []
        max_seconds = self.graph_s if max_seconds is None else max_seconds
        began = time.perf_counter()
        for _ in range(runs):
            now = time.perf_counter()
            if plain and ((deadline is not None and now > deadline)
                          or (len(plain) >= 3 and now - began > max_seconds)):
                break
            plain.append(self._run_time(executor, inputs))
            marks: list[Any] = []
            marked = self._run_time(executor, inputs, marks)
            run_slots = self._slots(marks)
            spans.append(sum(run_slots.values()))
            outside.append(max(marked - spans[-1], 0.0))
            slots.append(run_slots)
        outside_s = statistics.median(outside)
        scale = min(1.0, max(statistics.median(plain) - outside_s, 1e-9)
                    / max(statistics.median(spans), 1e-9))
        by_signature: dict[str, list[float]] = {}
        for node_id in slots[0]:
            seconds = statistics.median(run[node_id] for run in slots) * scale
            by_signature.setdefault(op_signature(graph[node_id]), []).append(seconds)
        del executor
        self._empty_cache()
        return GraphTiming(float(statistics.median(plain)), len(graph), len(plain),
                           {sig: float(statistics.median(v)) for sig, v in by_signature.items()},
                           float(outside_s))

    def _run_time(self, executor: Any, inputs: Any, marks: list[Any] | None = None) -> float:
        """Seconds of one synchronised run; with ``marks``, a mark before each op and one
        after the region (``(node id or None, mark)``)."""
        self._sync()
        start = time.perf_counter()
        if marks is None:
            executor.run(inputs)
        else:
            executor.run(inputs, before_node=functools.partial(self._mark_node, marks),
                         after_region=lambda _label: marks.append((None, self._mark())))
        self._sync()
        return time.perf_counter() - start

    def _mark_node(self, marks: list[Any], node: OpNode, _args: Any) -> None:
        marks.append((node.id, self._mark()))

    def _mark(self) -> Any:
        """A point in time on this device's clock: a recorded CUDA event, or the CPU clock."""
        if self.kind != "cuda":
            return time.perf_counter()
        import torch

        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def _slots(self, marks: Sequence[tuple[int | None, Any]]) -> dict[int, float]:
        """Seconds from each op's mark to the next mark (the region's end mark ends the last)."""
        self._sync()
        out = {}
        for (node_id, begin), (_, end) in zip(marks, marks[1:], strict=False):
            if node_id is None:
                continue
            seconds = (begin.elapsed_time(end) / 1e3 if self.kind == "cuda" else end - begin)
            out[node_id] = max(seconds, 1e-9)
        return out

    # ------------------------------------------------------------------ copies
    def measure_copies(self, host_memory: str, device_memory: str, *, dtype: str = "float16",
                       sizes: Sequence[int] = COPY_SIZES) -> dict[str, list[tuple[float, float]]]:
        """Host <-> GPU copy times by size, as the executor's runs see them.

        A probe graph (a relu on the GPU fed from the host, then a relu on the host) runs as a
        two-region plan of the ``tensorcore`` platform through the executor; its copies are
        read from synchronised breakdown runs (median of 9 runs, 5 from 16 MiB on), after two
        warm-up runs, with the allocator in the state repeated runs leave it. Payloads are
        ``dtype`` tensors (the graph dtype; the host computes half tensors in float32, so
        the casts at the boundary are included, as the executor makes them). Empty on the CPU,
        where the executor copies nothing.
        """
        if self.kind != "cuda":
            return {}
        import numpy as np

        from ..core.graph import OpGraphBuilder, TensorType
        from ..core.plan import PartitionPlan
        from ..core.support import Support, Verdict
        from ..executors.benchmark import RunTimings
        from ..executors.graph_io import ArgRef
        from ..executors.torch_exec import PlanExecutor
        from ..targets import get_platform

        h2d, d2h = f"{host_memory}->{device_memory}", f"{device_memory}->{host_memory}"
        curves: dict[str, list[tuple[float, float]]] = {h2d: [], d2h: []}
        itemsize = np.dtype(dtype).itemsize
        tensorcore = get_platform("tensorcore")
        for nbytes in sizes:
            n = max(int(nbytes) // itemsize, 1)
            builder = OpGraphBuilder("copy_probe")
            first = builder.op("nn.relu", [builder.input("x", TensorType((n,), dtype))])
            graph = builder.build(outputs=[builder.op("nn.relu", [first])])
            bindings = ((ArgRef("tensor", key="input:x"),),
                        (ArgRef("tensor", key="nn.relu_0:0"),))
            support = Support(tensorcore, {d: [Verdict(True, "probe")] * 2
                                           for d in tensorcore.names})
            plan = PartitionPlan.from_devices(graph, support, "copy_probe", ["tensorcore", "cpu"])
            executor = PlanExecutor(graph, plan, bindings, {}, device=self.device)
            inputs = {"x": np.random.default_rng(0).standard_normal(n).astype(dtype)}
            samples: dict[str, list[float]] = {h2d: [], d2h: []}
            for _ in range(2):
                executor.run(inputs)
            for _ in range(9 if nbytes < 2 ** 24 else 5):
                timings = RunTimings(0.0)
                executor.run(inputs, timings=timings)
                for copy in timings.copies:
                    samples[d2h if copy["dst"] == "cpu" else h2d].append(copy["time_s"])
            for link in curves:
                curves[link].append((float(n * itemsize), statistics.median(samples[link])))
            del executor
        self._empty_cache()
        return curves

    # ------------------------------------------------------------------ overheads
    def measure_overheads(self, *, length: int = 64) -> dict[str, float]:
        """Fixed costs as :class:`PlanExecutor` pays them on this device.

        ``per_op_s``: what the executor adds to each op (argument lookup, storing results): a
        chain of ``length`` tiny relus run by the executor, minus a chain of one, per op,
        minus the relu called alone. ``op_floor_s``: that chain's time per op (on a GPU no op
        issued in a region takes less: launches are queued one by one).

        ``region_s``: what one more region costs: the chain split into ``length`` regions
        (alternating Tensor Core / CUDA-core devices of one place, so no copy is made) minus
        the chain as one region, per region; on a GPU plus the launch latency a region starts
        with after the host waited for it (a relu followed by a synchronisation, minus relus
        issued back to back).

        ``island_wakeup_s`` (CPU): a host island starts after the host waited (for a copy from
        the GPU), when PyTorch's CPU threads may have gone to sleep: a multi-threaded op
        (layer norm of 128 x 768) right after a 1 ms wait, minus the same op back to back; mean
        of 40 trials, since the wake-ups come and go. 0 on a GPU.
        """
        import torch

        one_region = self._chain_time(length, split=False)
        per_op_total = (one_region - self._chain_time(1, split=False)) / (length - 1)
        x = torch.ones(16, device=self.device)
        alone = self._call_time(lambda: torch.relu(x))
        split = self._chain_time(length, split=True)
        region = max((split - one_region) / (length - 1), 0.0)
        wakeup = 0.0
        if self.kind == "cuda":
            synced = self._call_time(lambda: (torch.relu(x), self._sync()))
            region += max(synced - alone, 0.0)
        else:
            wakeup = _island_wakeup()
        return {"per_op_s": max(per_op_total - alone, 0.0), "op_floor_s": max(per_op_total, 0.0),
                "region_s": region, "island_wakeup_s": wakeup}

    def _call_time(self, fn: Callable[[], Any], calls: int = 200) -> float:
        """Median over 7 batches of ``calls`` back-to-back calls, seconds per call."""
        fn()
        return statistics.median(self._batches(fn, calls, 7))

    def _chain_time(self, length: int, *, split: bool) -> float:
        """Seconds of one executor run of a chain of ``length`` tiny relus (median)."""
        import numpy as np

        from ..core.plan import PartitionPlan
        from ..core.support import Support, Verdict
        from ..executors.torch_exec import PlanExecutor
        from ..targets import get_platform

        graph, bindings = relu_chain(length)
        tensorcore = get_platform("tensorcore")
        support = Support(tensorcore, {d: [Verdict(True, "probe")] * length
                                       for d in tensorcore.names})
        devices = [("tensorcore", "cuda")[i % 2] if split else "tensorcore"
                   for i in range(length)]
        plan = PartitionPlan.from_devices(graph, support, "probe", devices)
        # Tensor Core and CUDA-core regions share one place (this runner's device): the split
        # chain makes no copy, and both chains make the same two (graph input and output).
        executor = PlanExecutor(graph, plan, bindings, {}, device=self.device)
        inputs = {"x": np.ones(16, dtype="float32")}
        return self._call_time(lambda: executor.run(inputs), calls=20)


def relu_chain(length: int) -> tuple[Any, tuple]:
    """A chain of ``length`` relus on a 16-float tensor, with the executor's argument bindings:
    the probe whose per-op time is the executor's own overhead."""
    from ..core.graph import OpGraphBuilder, TensorType
    from ..executors.graph_io import ArgRef

    builder = OpGraphBuilder("relu_chain")
    handle = builder.input("x", TensorType((16,), "float32"))
    for _ in range(length):
        handle = builder.op("nn.relu", [handle])
    graph = builder.build(outputs=[handle])
    bindings = tuple((ArgRef("tensor", key="input:x" if i == 0 else f"nn.relu_{i - 1}:0"),)
                     for i in range(length))
    return graph, bindings


def _island_wakeup(trials: int = 40) -> float:
    import torch
    import torch.nn.functional as F

    data, ones, zeros = torch.randn(1, 128, 768), torch.ones(768), torch.zeros(768)

    def layer_norm() -> Any:
        return F.layer_norm(data, (768,), ones, zeros)

    for _ in range(5):
        layer_norm()
    hot = []
    for _ in range(trials):
        start = time.perf_counter()
        layer_norm()
        hot.append(time.perf_counter() - start)
    after_wait = []
    for _ in range(trials):
        time.sleep(0.001)
        start = time.perf_counter()
        layer_norm()
        after_wait.append(time.perf_counter() - start)
    return max(statistics.mean(after_wait) - statistics.median(hot), 0.0)


__all__ = ["COPY_SIZES", "ProgressFn", "Runner", "Timing", "TorchRunner", "cpu_name",
           "infer_refs"]
