"""Run a partition plan on real devices with PyTorch: each plan device's regions where its
memory space lives (a GPU, or the host CPU), real copies and casts between them, every region
and crossing timed.

>>> outputs, timings = run_plan(graph, plan, inputs, weights, bindings=bindings,
...                             device="cuda")                             # doctest: +SKIP

:func:`run_plan` runs a plan once; :class:`PlanExecutor` prepares it once, then runs and times
it many times; :func:`calibrate_batch_norm` makes synthetic weights (:mod:`.weights`) keep a
deep network in float16 range. The op translations are in :mod:`.kernels`, places, dtypes and
the crossing copy in :mod:`.placement`, timing records in :mod:`.benchmark`.

This is a stand-in for TVM's CUDA build: GPU regions run each Relay op as the matching eager
PyTorch op through cuDNN/cuBLAS (on Tensor Cores for the ``tensorcore`` target's fp16, NHWC
graphs; PyTorch cannot keep an fp16 convolution off them, so ``tensorcore`` and ``cuda`` regions
differ only in what the plan puts on them). Host islands run with PyTorch's CPU kernels. Ops
run one by one: nothing is fused. With ``device="cpu"`` every region runs on the CPU (CI tests
that path against TVM's llvm build); ``separate_memories=True`` then keeps each memory space a
place of its own, so a plan's crossings run as real copies and casts, in the same order as on
a GPU.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..core.graph import OpGraph, OpNode
from ..core.plan import PartitionPlan
from ..core.platform import HOST
from ..errors import PartitionLabError
from .benchmark import Benchmark, RunTimings
from .graph_io import Bindings
from .kernels import KERNELS, TORCH_DTYPES, check_kernels
from .placement import DTYPE_MODES, Place, places_of, single_place, transfer, wire_dtype


# ---------------------------------------------------------------------------- executor
@dataclass(frozen=True)
class _Step:
    """One region to run, or one tensor to move to another place (copy and/or cast)."""

    kind: str  # "region" or "copy"
    label: str
    place: str  # where the region runs / where the tensor goes
    device: str  # the plan device of the region / of the tensor's first consumer there
    nodes: tuple[int, ...] = ()
    tensor: str = ""
    src: str = ""  # the source place
    src_device: str = ""
    graph_dtype: str = ""
    nbytes: float = 0.0
    what: str = ""  # "copy", "cast" or "copy+cast"
    moves: bool = False


class PlanExecutor:
    """Runs one plan of one graph, many times, on real devices.

    Parameters
    ----------
    graph, plan, bindings:
        The OpGraph, a :class:`PartitionPlan` of it (None: the whole graph as one region on
        ``device``, the unpartitioned reference) and the call-argument bindings
        (:func:`partition_lab.executors.graph_io.bindings_from_relay` or a bundle's).
    weights:
        ``{node id: [array per weight]}`` (:func:`~partition_lab.executors.graph_io.weights_from_relay`
        or :func:`~partition_lab.executors.weights.synthetic_weights`). They are placed on
        their region's device once, as an accelerator keeps them resident; copies of weights
        are never timed.
    device:
        The torch device of every non-host memory space of the plan's platform: ``"cuda"``
        (Tensor Core and CUDA-core regions on the GPU, host islands on the CPU) or ``"cpu"``
        (everything on the CPU; no copies unless ``separate_memories``).
    dtype:
        ``"graph"`` or ``"float32"`` (the reference run: half tensors computed and moved in
        float32 everywhere).
    device_map, separate_memories:
        See :func:`~partition_lab.executors.placement.places_of`. ``separate_memories=True``
        on the CPU runs a plan's crossings as real copies (``clone``) with the same bookkeeping
        as on a GPU: CI's way to exercise copies, casts and island order without one.

    Raises
    ------
    UnsupportedKernelError
        Before anything runs, listing every op of the graph without a translation
        (:func:`~partition_lab.executors.kernels.supported_ops`) or with attribute values its
        kernel does not translate.
    """

    def __init__(self, graph: OpGraph, plan: PartitionPlan | None, bindings: Bindings,
                 weights: Mapping[int, Sequence[np.ndarray]], *, device: str = "cuda",
                 dtype: str = "graph", device_map: Mapping[str, str] | None = None,
                 separate_memories: bool = False) -> None:
        if dtype not in DTYPE_MODES:
            raise PartitionLabError(f"dtype must be one of {DTYPE_MODES}, not {dtype!r}")
        check_kernels(graph.nodes, f"graph {graph.name!r}" if graph.name else "the graph")
        self.graph, self.plan, self.bindings = graph, plan, bindings
        self.device, self.dtype = device, dtype
        if plan is None:
            main = single_place(device, dtype)
            host = main if main.torch_device == "cpu" else single_place("cpu", dtype)
            self.device_places = {device: main, HOST: host}
            self.node_device = [device] * len(graph)
        else:
            self.device_places = places_of(plan.platform, device=device, dtype=dtype,
                                           device_map=device_map,
                                           separate_memories=separate_memories)
            self.node_device = [plan.device_of(n) for n in range(len(graph))]
        self.host_place = self.device_places[HOST]
        self.places = {p.name: p for p in self.device_places.values()}
        self.node_place = [self.device_places[d] for d in self.node_device]
        self._cuda = any(not p.torch_device.startswith("cpu") for p in self.places.values())
        if self._cuda and not torch.cuda.is_available():
            raise PartitionLabError(f"device {device!r} asked for but torch sees no CUDA device")
        self.steps = self._schedule()
        self._weights = weights
        self._args: dict[int, list[Any]] = {}
        self._prepared: dict[int, Any] = {}
        self._last_use = self._last_uses()
        self._output_keys = {f"{graph[n].name}:{i}" for n, i in graph.outputs}

    # ------------------------------------------------------------------ schedule
    def _schedule(self) -> list[_Step]:
        """Regions in a topological order (ties: the region with the lowest node first), each
        followed by the moves of its outputs to the other places that read them."""
        import networkx as nx

        if self.plan is None:
            kind = "cpu" if self.device.startswith("cpu") else "accel"
            groups = [(f"{kind}0", tuple(range(len(self.graph))))]
        else:
            quotient = self.plan.region_graph()
            first = {r.id: min(r.nodes) for r in self.plan.regions}
            order = nx.lexicographical_topological_sort(quotient, key=lambda r: first[r])
            groups = [(self.plan.regions[r].label, self.plan.regions[r].nodes) for r in order]
        steps = list(self._moves_of_inputs())
        for label, nodes in groups:
            members = tuple(sorted(nodes))
            place = self.node_place[members[0]]
            steps.append(_Step("region", label, place.name, self.node_device[members[0]],
                               members))
            steps.extend(self._moves_after(members, place))
        return steps

    def _destinations(self, tensor: Any) -> dict[str, str]:
        """Places that read ``tensor`` -> the device of its first consumer there (the host
        for graph outputs), as :meth:`PartitionPlan.crossing_tensors` names them."""
        places: dict[str, str] = {}
        for c in tensor.consumers:
            places.setdefault(self.node_place[c].name, self.node_device[c])
        if tensor.is_output:
            places[self.host_place.name] = HOST
        return places

    def _move(self, tensor: Any, src: Place, src_device: str, dst_name: str,
              dst_device: str) -> _Step:
        dst = self.places[dst_name]
        moves = src.torch_device != dst.torch_device or src.memory != dst.memory
        wire = TORCH_DTYPES.get(wire_dtype(tensor.spec.dtype, self.dtype))
        casts = src.dtype(tensor.spec.dtype) != wire or wire != dst.dtype(tensor.spec.dtype)
        what = "copy+cast" if moves and casts else "copy" if moves else "cast"
        return _Step("copy", f"{tensor.key}->{dst_device}", dst_name, dst_device,
                     tensor=tensor.key, src=src.name, src_device=src_device,
                     graph_dtype=tensor.spec.dtype, nbytes=tensor.nbytes, what=what,
                     moves=moves)

    def _moves_of_inputs(self) -> list[_Step]:
        steps = []
        for tensor in self.graph.graph_inputs.values():
            for dst, dst_device in sorted(self._destinations(tensor).items()):
                if dst != self.host_place.name:
                    steps.append(self._move(tensor, self.host_place, HOST, dst, dst_device))
        return steps

    def _moves_after(self, nodes: Sequence[int], place: Place) -> list[_Step]:
        members = set(nodes)
        steps = []
        for tensor in self.graph.tensors:
            if tensor.producer in members:
                for dst, dst_device in sorted(self._destinations(tensor).items()):
                    if dst != place.name:
                        steps.append(self._move(tensor, place, self.node_device[tensor.producer],
                                                dst, dst_device))
        return steps

    def crossings(self) -> list[dict[str, Any]]:
        """Every move a run makes, in order: tensor, devices, places, what and bytes."""
        return [{"tensor": s.tensor, "src": s.src_device, "dst": s.device, "src_place": s.src,
                 "dst_place": s.place, "kind": s.what, "nbytes": s.nbytes}
                for s in self.steps if s.kind == "copy"]

    def region_order(self) -> list[str]:
        """Region labels in the order a run executes them."""
        return [s.label for s in self.steps if s.kind == "region"]

    def _last_uses(self) -> dict[tuple[str, str], int]:
        """Per (tensor, place), the last step that reads it, so it can be freed after."""
        last: dict[tuple[str, str], int] = {}
        refs_of = {n: [r.key for r in refs if r.kind == "tensor"]
                   for n, refs in enumerate(self.bindings)}
        for i, step in enumerate(self.steps):
            if step.kind == "region":
                for n in step.nodes:
                    for key in refs_of[n]:
                        last[(key, step.place)] = i
            else:
                last[(step.tensor, step.src)] = i
        return last

    # ------------------------------------------------------------------ weights
    def _node_args(self, node_id: int, prepare: bool) -> tuple[list[Any], Any]:
        """The node's weight arguments in its place (activations None) and its prepared state."""
        if node_id not in self._args:
            node = self.graph[node_id]
            place = self.node_place[node_id]
            arrays = self._weights.get(node_id, ())
            if len(arrays) != len(node.weights):
                raise PartitionLabError(f"node {node.name} needs {len(node.weights)} weights, "
                                        f"got {len(arrays)}")
            args: list[Any] = [None] * len(node.args)
            for position, ref in enumerate(self.bindings[node_id]):
                if ref.kind == "weight":
                    spec = node.args[position]
                    args[position] = torch.as_tensor(np.asarray(arrays[ref.index])).to(
                        device=place.torch_device, dtype=place.dtype(spec.dtype))
            kern = KERNELS[node.op]
            self._args[node_id] = args
            self._prepared[node_id] = kern.prepare(node, args) if (prepare and kern.prepare) else None
        return self._args[node_id], self._prepared[node_id]

    def prepare(self) -> None:
        """Place every weight on its device and run the kernels' ``prepare`` (done on first run)."""
        for node in self.graph.nodes:
            self._node_args(node.id, prepare=True)
        self._sync_all()

    # ------------------------------------------------------------------ running
    def run(self, inputs: Mapping[str, np.ndarray], *, timings: RunTimings | None = None,
            before_node: Callable[[OpNode, list[Any]], None] | None = None,
            prepare_weights: bool = True,
            after_region: Callable[[str], None] | None = None) -> list[np.ndarray]:
        """The graph's outputs (as numpy arrays, in graph output order) for ``inputs``.

        With ``timings``, every region and move is synchronised and timed into it (slower: use
        :meth:`benchmark` for end-to-end times). ``before_node(node, args)`` is called before
        each op (used by :func:`calibrate_batch_norm`), ``after_region(label)`` after each
        region's last op is issued (before its outputs move).
        """
        values = self._start(inputs)
        for i, step in enumerate(self.steps):
            start = self._clock() if timings is not None else 0.0
            if step.kind == "region":
                self._run_region(step, values, before_node, prepare_weights)
                if after_region is not None:
                    after_region(step.label)
            else:
                self._copy(step, values)
            if timings is not None:
                elapsed = self._clock() - start
                if step.kind == "region":
                    timings.regions[step.label] = elapsed
                    timings.devices[step.label] = step.device
                else:
                    timings.copies.append({"tensor": step.tensor, "src": step.src_device,
                                           "dst": step.device, "src_place": step.src,
                                           "dst_place": step.place, "kind": step.what,
                                           "nbytes": step.nbytes, "time_s": elapsed})
            self._free(values, i)
        return self._finish(values)

    def _start(self, inputs: Mapping[str, np.ndarray]) -> dict[str, dict[str, Any]]:
        values: dict[str, dict[str, Any]] = {}
        for name, tensor in self.graph.graph_inputs.items():
            if name not in inputs:
                raise PartitionLabError(f"missing input {name!r}; the graph needs "
                                        f"{', '.join(self.graph.graph_inputs)}")
            array = np.asarray(inputs[name])
            if tuple(array.shape) != tensor.spec.shape:
                raise PartitionLabError(f"input {name!r} has shape {array.shape}, the graph "
                                        f"expects {tensor.spec.shape}")
            dtype = self.host_place.dtype(tensor.spec.dtype)
            values[tensor.key] = {self.host_place.name: torch.from_numpy(
                np.ascontiguousarray(array)).to(dtype)}
        return values

    def _run_region(self, step: _Step, values: dict[str, dict[str, Any]],
                    before_node: Callable[[OpNode, list[Any]], None] | None,
                    prepare_weights: bool) -> None:
        place = self.places[step.place]
        for node_id in step.nodes:
            node = self.graph[node_id]
            weight_args, prepared = self._node_args(node_id, prepare_weights)
            args = list(weight_args)
            for position, ref in enumerate(self.bindings[node_id]):
                if ref.kind == "tensor":
                    args[position] = values[ref.key][place.name]
            if before_node is not None:
                before_node(node, args)
            result = KERNELS[node.op].run(node, args, prepared)
            self._store(node, result, place, values)

    def _store(self, node: OpNode, result: Any, place: Place,
               values: dict[str, dict[str, Any]]) -> None:
        results = result if isinstance(result, tuple) else (result,)
        if len(results) != len(node.outputs):
            raise PartitionLabError(f"{node.op} kernel gave {len(results)} outputs, the graph "
                                    f"has {len(node.outputs)} ({node.name})")
        for index, (value, spec) in enumerate(zip(results, node.outputs, strict=True)):
            key = f"{node.name}:{index}"
            if tuple(value.shape) != spec.shape:
                raise PartitionLabError(f"{node.op} kernel gave shape {tuple(value.shape)} for "
                                        f"{node.name}, the graph says {spec.shape}")
            wanted = place.dtype(spec.dtype)
            values.setdefault(key, {})[place.name] = value if value.dtype == wanted else \
                value.to(wanted)

    def _copy(self, step: _Step, values: dict[str, dict[str, Any]]) -> None:
        source = values[step.tensor][step.src]
        dst = self.places[step.place]
        values[step.tensor][step.place] = transfer(
            source, dst.torch_device, wire_dtype(step.graph_dtype, self.dtype),
            dst.dtype(step.graph_dtype), copy=step.moves)

    def _free(self, values: dict[str, dict[str, Any]], step_index: int) -> None:
        step = self.steps[step_index]
        keys = [(r.key, step.place) for n in step.nodes for r in self.bindings[n]
                if r.kind == "tensor"] if step.kind == "region" else [(step.tensor, step.src)]
        for key, place in keys:
            if self._last_use.get((key, place)) == step_index and key not in self._output_keys:
                values.get(key, {}).pop(place, None)

    def _finish(self, values: dict[str, dict[str, Any]]) -> list[np.ndarray]:
        outputs = [values[f"{self.graph[node_id].name}:{index}"][self.host_place.name]
                   for node_id, index in self.graph.outputs]
        self._sync_all()
        return [o.numpy() for o in outputs]

    def _sync_all(self) -> None:
        if self._cuda:
            torch.cuda.synchronize()

    def _clock(self) -> float:
        self._sync_all()
        return time.perf_counter()

    # ------------------------------------------------------------------ timing
    def benchmark(self, inputs: Mapping[str, np.ndarray], *, warmup: int = 2, repeats: int = 10,
                  max_seconds: float = 5.0, min_repeats: int = 3,
                  breakdown_repeats: int = 3) -> Benchmark:
        """Median end-to-end time over ``repeats`` runs (fewer if ``max_seconds`` is reached,
        never under ``min_repeats``), plus ``breakdown_repeats`` synchronised breakdown runs.

        End-to-end runs synchronise only where the program must (a copy to the host, the end),
        as a deployed runtime would.
        """
        self.prepare()
        for _ in range(warmup):
            self.run(inputs)
        times: list[float] = []
        budget_start = time.perf_counter()
        while len(times) < repeats:
            start = self._clock()
            self.run(inputs)
            times.append(self._clock() - start)
            if len(times) >= min_repeats and time.perf_counter() - budget_start > max_seconds:
                break
        breakdowns = []
        for _ in range(breakdown_repeats):
            timing = RunTimings(0.0)
            start = self._clock()
            self.run(inputs, timings=timing)
            timing.total_s = self._clock() - start
            breakdowns.append(timing)
        return Benchmark(times, breakdowns)


def run_plan(graph: OpGraph, plan: PartitionPlan | None, inputs: Mapping[str, np.ndarray],
             weights: Mapping[int, Sequence[np.ndarray]], *, bindings: Bindings,
             device: str = "cuda", dtype: str = "graph", timed: bool = False,
             device_map: Mapping[str, str] | None = None, separate_memories: bool = False
             ) -> tuple[list[np.ndarray], RunTimings | None]:
    """Run ``plan`` once; returns ``(outputs, timings)`` (timings None unless ``timed``).

    A one-call wrapper around :class:`PlanExecutor` (see it for the parameters). For repeated
    timings build the executor once and call :meth:`PlanExecutor.benchmark`.
    """
    executor = PlanExecutor(graph, plan, bindings, weights, device=device, dtype=dtype,
                            device_map=device_map, separate_memories=separate_memories)
    timings = RunTimings(0.0) if timed else None
    start = time.perf_counter()
    outputs = executor.run(inputs, timings=timings)
    if timings is not None:
        timings.total_s = time.perf_counter() - start
    return outputs, timings


# ---------------------------------------------------------------------------- weights
def calibrate_batch_norm(graph: OpGraph, bindings: Bindings, weights: dict[int, list[np.ndarray]],
                         inputs: Mapping[str, np.ndarray], device: str = "cpu") -> None:
    """Set every batch norm's moving mean and variance to its input's statistics, in place.

    Random weights make activations grow layer after layer (residual adds double the variance
    each block); with each batch norm normalising its actual input, a deep network stays in
    float16 range, as a trained one does. Runs the whole graph once in float32 on ``device``.
    """
    def record(node: OpNode, args: list[Any]) -> None:
        if node.op != "nn.batch_norm":
            return
        x = args[0].float()
        axis = int(node.attrs.get("axis", 1)) % x.dim()
        dims = [d for d in range(x.dim()) if d != axis]
        var, mean = torch.var_mean(x, dim=dims, correction=0)
        refs = bindings[node.id]
        for position, value in ((3, mean), (4, var)):
            ref = refs[position]
            if ref.kind == "weight":
                arrays = weights[node.id]
                arrays[ref.index] = value.cpu().numpy().astype(arrays[ref.index].dtype)
                args[position] = value.to(args[position].dtype)

    interpreter = PlanExecutor(graph, None, bindings, weights, device=device, dtype="float32")
    interpreter.run(inputs, before_node=record, prepare_weights=False)


__all__ = ["PlanExecutor", "calibrate_batch_norm", "run_plan"]
