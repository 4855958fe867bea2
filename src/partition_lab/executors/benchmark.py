"""Timing records and helpers of the executor.

:class:`RunTimings` holds one run's region and copy times
(:meth:`~partition_lab.executors.torch_exec.PlanExecutor.run` with ``timings=``);
:class:`Benchmark` is what :meth:`~partition_lab.executors.torch_exec.PlanExecutor.benchmark`
returns (repeated end-to-end times and median breakdowns). :func:`op_callable` runs one op as
the executor runs it, for timing it alone (profiling's ``TorchRunner``); :func:`unit_callable`
runs a pattern's unit (its ops in order, intermediates passed along) for timing it as one unit.

>>> fn = op_callable(node, refs, device="cuda")                            # doctest: +SKIP
>>> fn()  # one call of the op's kernel, not synchronised                  # doctest: +SKIP
"""

from __future__ import annotations

import statistics
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from .._io import cpu_name
from ..core.graph import OpNode, TensorType
from .graph_io import ArgRef
from .kernels import KERNELS, TORCH_DTYPES, check_kernels
from .placement import compute_dtype
from .weights import synthetic_node_weights


@dataclass
class RunTimings:
    """Times of one run (seconds). ``regions`` by label; ``copies`` one row per copied tensor."""

    total_s: float
    regions: dict[str, float] = field(default_factory=dict)
    copies: list[dict[str, Any]] = field(default_factory=list)
    devices: dict[str, str] = field(default_factory=dict)  # region label -> plan device

    @property
    def copy_s(self) -> float:
        return sum(c["time_s"] for c in self.copies)

    def to_dict(self) -> dict[str, Any]:
        return {"total_s": self.total_s, "regions": dict(self.regions), "copies": list(self.copies),
                "copy_s": self.copy_s, "devices": dict(self.devices)}


@dataclass
class Benchmark:
    """Repeated timings of a plan: end-to-end runs and separately synchronised breakdown runs."""

    end_to_end_s: list[float]
    breakdowns: list[RunTimings]

    @property
    def median_s(self) -> float:
        return statistics.median(self.end_to_end_s)

    def median_breakdown(self) -> dict[str, Any]:
        """Per region and per copy, the median over the breakdown runs."""
        if not self.breakdowns:
            return {}
        regions = {label: statistics.median(b.regions[label] for b in self.breakdowns)
                   for label in self.breakdowns[0].regions}
        copies = []
        for i, row in enumerate(self.breakdowns[0].copies):
            copies.append({**row, "time_s": statistics.median(b.copies[i]["time_s"]
                                                                for b in self.breakdowns)})
        return {"total_s": statistics.median(b.total_s for b in self.breakdowns),
                "regions": regions, "devices": dict(self.breakdowns[0].devices), "copies": copies,
                "copy_s": sum(c["time_s"] for c in copies)}

    def to_dict(self) -> dict[str, Any]:
        return {"median_s": self.median_s, "end_to_end_s": self.end_to_end_s,
                "breakdown": self.median_breakdown()}


# ---------------------------------------------------------------------------- where it runs
def torch_device(device: str, *, float32: bool = False) -> dict[str, Any]:
    """``{"kind", "name", "software"}`` of the torch device the executor runs on: the GPU's or
    CPU's name and the versions that change timings (torch, CUDA, cuDNN, driver; the CPU's
    threads). ``float32``: half tensors computed in float32 there (a float32 plan device)."""
    kind = "cuda" if device.startswith("cuda") else "cpu"
    software = {"torch": torch.__version__}
    if kind == "cuda":
        name = torch.cuda.get_device_name(device)
        software["cuda"] = str(torch.version.cuda)
        if torch.backends.cudnn.is_available():
            software["cudnn"] = str(torch.backends.cudnn.version())
        driver = _nvidia_smi("driver_version")
        if driver:
            software["driver"] = driver
    else:
        name = cpu_name()
        software["threads"] = str(torch.get_num_threads())
    if float32:
        software["precision"] = "float32"
    return {"kind": kind, "name": name, "software": software}


def torch_device_key(device: str, *, float32: bool = False) -> str:
    """A stable key of :func:`torch_device`: what a profile entry and a kept measured choice
    are filed under (``torch-cuda|NVIDIA H200|torch 2.14.1+cu130|cudnn 91900``)."""
    info = torch_device(device, float32=float32)
    software = info["software"]
    parts = [f"torch-{info['kind']}", info["name"], f"torch {software['torch']}"]
    if info["kind"] == "cuda":
        parts.append(f"cudnn {software.get('cudnn', 'none')}")
    else:
        parts.append(f"threads {software['threads']}")
    if float32:
        parts.append("float32")
    return "|".join(parts)


def _nvidia_smi(field: str) -> str:
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={field}", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip().splitlines()[0] if out.stdout.strip() else ""


# ---------------------------------------------------------------------------- one op alone
def op_callable(node: OpNode, refs: Sequence[ArgRef], *, device: str, dtype: str = "graph",
                seed: int = 0) -> Callable[[], Any]:
    """A zero-argument function running one op as the executor runs it, for timing it alone.

    Activations are random tensors of the node's argument types (integer ones zeros, but an
    NMS sees every box valid), weights are
    :func:`~partition_lab.executors.weights.synthetic_node_weights` and prepared once; each call
    runs the kernel and the casts of its outputs to their compute dtype, nothing else (no
    synchronisation).
    """
    check_kernels([node], f"node {node.name}")
    generator = torch.Generator().manual_seed(seed)
    args: list[Any] = []
    weights = iter(synthetic_node_weights(node, refs, seed))
    for spec, ref in zip(node.args, refs, strict=True):
        torch_dtype = compute_dtype(spec.dtype, device, dtype)
        if ref.kind == "weight":
            value = torch.as_tensor(next(weights))
        else:
            value = _activation(node, len(args), spec, generator)
        args.append(value.to(device=device, dtype=torch_dtype))
    kern = KERNELS[node.op]
    weight_args = [a if r.kind == "weight" else None for a, r in zip(args, refs, strict=True)]
    prepared = kern.prepare(node, weight_args) if kern.prepare else None
    wanted = [compute_dtype(spec.dtype, device, dtype) for spec in node.outputs]

    def call() -> Any:
        result = kern.run(node, args, prepared)
        results = result if isinstance(result, tuple) else (result,)
        return [r if r.dtype == w else r.to(w) for r, w in zip(results, wanted, strict=True)]

    return call


# ---------------------------------------------------------------------------- one unit alone
@dataclass(frozen=True)
class UnitBinding:
    """What timing a pattern's unit needs besides its composite node: the unit's ops in graph
    order and, per op, its call arguments (:class:`~.graph_io.ArgRef`; a tensor key another
    member produces is passed along inside the unit, any other is an input from outside)."""

    members: tuple[OpNode, ...]
    refs: tuple[tuple[ArgRef, ...], ...]


def unit_callable(unit: UnitBinding, *, device: str, dtype: str = "graph",
                  seed: int = 0) -> Callable[[], Any]:
    """A zero-argument function running a pattern's unit once, as the executor runs its ops.

    The tensors the unit reads from outside are random (as :func:`op_callable` makes them) and
    made once, each op's weights are synthetic and prepared once; a call runs the member ops'
    kernels in order, each intermediate handed to the next op on the device, and returns the
    last op's outputs. One timed call is the unit's time, launches and intermediates included.
    """
    members = unit.members
    check_kernels(members, f"unit of {members[-1].name}")
    generator = torch.Generator().manual_seed(seed)
    produced = {f"{node.name}:{i}" for node in members for i in range(len(node.outputs))}
    outside: dict[str, torch.Tensor] = {}
    steps = []
    for node, refs in zip(members, unit.refs, strict=True):
        weights = iter(synthetic_node_weights(node, refs, seed))
        args: list[Any] = []
        for position, (spec, ref) in enumerate(zip(node.args, refs, strict=True)):
            torch_dtype = compute_dtype(spec.dtype, device, dtype)
            if ref.kind == "weight":
                args.append(torch.as_tensor(next(weights)).to(device=device, dtype=torch_dtype))
            elif ref.key in produced:
                args.append(None)  # filled at call time from the member that makes it
            else:
                if ref.key not in outside:
                    outside[ref.key] = _activation(node, position, spec, generator).to(
                        device=device, dtype=torch_dtype)
                args.append(outside[ref.key])
        kern = KERNELS[node.op]
        weight_args = [a if r.kind == "weight" else None for a, r in zip(args, refs, strict=True)]
        prepared = kern.prepare(node, weight_args) if kern.prepare else None
        wanted = [compute_dtype(spec.dtype, device, dtype) for spec in node.outputs]
        steps.append((node, refs, args, kern, prepared, wanted))

    def call() -> Any:
        values: dict[str, Any] = {}
        results: tuple[Any, ...] = ()
        for node, refs, args, kern, prepared, wanted in steps:
            call_args = [values[r.key] if a is None else a
                         for a, r in zip(args, refs, strict=True)]
            result = kern.run(node, call_args, prepared)
            results = result if isinstance(result, tuple) else (result,)
            results = tuple(r if r.dtype == w else r.to(w)
                            for r, w in zip(results, wanted, strict=True))
            for index, value in enumerate(results):
                values[f"{node.name}:{index}"] = value
        return list(results)

    return call


def _activation(node: OpNode, position: int, spec: TensorType,
                generator: torch.Generator) -> torch.Tensor:
    """A random activation for timing ``node`` alone; integer ones are zeros, except the box
    count and indices of an NMS (all boxes valid), which zeros would make a no-op."""
    if node.op == "vision.non_max_suppression" and position in (1, 2):
        anchors = node.args[0].shape[1]
        if position == 1:
            return torch.full(spec.shape, anchors)
        return torch.arange(anchors).expand(spec.shape)
    if TORCH_DTYPES.get(spec.dtype, torch.float32).is_floating_point:
        return torch.randn(spec.shape, generator=generator)
    return torch.zeros(spec.shape)


__all__ = ["Benchmark", "RunTimings", "UnitBinding", "op_callable",
           "torch_device", "torch_device_key", "unit_callable"]
