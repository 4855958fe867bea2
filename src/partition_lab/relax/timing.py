"""Plans built by TVM and timed end to end: the measured choice's runner for Relax modules.

:func:`tvm_timers` returns :data:`partition_lab.choice.TimeFn` timers. Each plan it is given is built
region by region (:mod:`.regions`: one library per region, regions on a GPU device compiled for
``cuda`` when ``device`` is a GPU, every region for ``llvm`` with ``device="cpu"``, the stand-in
on a machine without one; identical regions built once), loaded with TVM's VM, run with the
prepared model's own weights and seeded random inputs, a tensor copied where it crosses between
GPU and host regions, and timed in turns (:func:`~partition_lab.executors.turns.timed_in_turns`).
Libraries are kept for the timer's life; each call loads them into new VMs, so the confirming
stage of a choice times runners built anew.

>>> [timer] = tvm_timers(analysis.relay, device="cpu", max_seconds=5)    # doctest: +SKIP
>>> timer({"greedy": plan_a, "cost": plan_b})  # {name: [seconds per round]} # doctest: +SKIP
"""

from __future__ import annotations

import tempfile
import time
import zlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import tvm

from ..choice import HARD_FACTOR, SETTLE_RUNS, TimeFn
from ..core.plan import PartitionPlan
from ..errors import PartitionLabError
from ..executors.turns import timed_in_turns
from .graph import RelaxGraph
from .regions import LibraryCache, is_gpu, plan_order, region_modules, tensor_name


class BuiltPlan:
    """One plan's regions loaded into VMs, run in topological order (the inputs on the host,
    the outputs brought back to it)."""

    def __init__(self, regions: list[dict[str, Any]], outputs: list[str], gpu: Any,
                 host: Any) -> None:
        self.regions, self.outputs, self.gpu, self.host = regions, outputs, gpu, host

    def run(self, inputs: Mapping[str, Any]) -> list[Any]:
        env = {name: (tensor, "host") for name, tensor in inputs.items()}
        for region in self.regions:
            args = []
            for name in region["inputs"]:
                tensor, where = env[name]
                if where != region["where"]:
                    tensor = tensor.copyto(region["dev"])
                    env[name] = (tensor, region["where"])
                args.append(tensor)
            result = region["fn"](*args, *region["weights"])
            outs = [result] if hasattr(result, "numpy") else list(result)
            for name, tensor in zip(region["outputs"], outs, strict=True):
                env[name] = (tensor, region["where"])
        results = []
        for name in self.outputs:
            tensor, where = env[name]
            results.append(tensor.copyto(self.host) if where != "host" else tensor)
        return results

    def _clock(self) -> float:
        """Seconds, after the GPU's queued work is done (what ``timed_in_turns`` reads)."""
        self.gpu.sync()
        return time.perf_counter()


def tvm_timers(rg: RelaxGraph, *, device: str = "cpu", shares: tuple[float, ...] = (1.0,),
               max_seconds: float = 10.0, rounds: int = 200, min_rounds: int = 6, seed: int = 0,
               workdir: str | Path | None = None, log: Callable[[str], None] | None = None
               ) -> list[TimeFn]:
    """Timers of plans of ``rg.graph`` built by TVM on ``device`` (``"cpu"``, ``"cuda"`` or
    ``"cuda:N"``), one per share of ``max_seconds`` (a choice's screening and confirming
    stages: ``shares=(0.5, 0.5)``), sharing their libraries. Each call loads the plans into new
    VMs, runs each once to warm up, then up to ``rounds`` rounds in turns (each timed run after
    :data:`~partition_lab.choice.SETTLE_RUNS` untimed ones of the same plan), stopped once its
    share of ``max_seconds`` has passed (after ``min_rounds``) and at
    :data:`~partition_lab.choice.HARD_FACTOR` times it whatever the rounds; building and the
    warm-up are not counted.
    Libraries go to ``workdir`` (default a temporary folder kept as long as the timers)."""
    gpu, host = _devices(device)
    scratch = None if workdir is not None else tempfile.TemporaryDirectory(prefix="pl_tvm_")
    libs = LibraryCache(Path(workdir or scratch.name) / "libs", log)
    inputs_np = {p.name: _random(p.name, [int(d) for d in p.ty.shape.values], str(p.ty.dtype),
                                 seed) for p in rg.function.params}

    def timer_for(seconds: float) -> TimeFn:
        def timer(plans: Mapping[str, PartitionPlan]) -> dict[str, list[float]]:
            _ = scratch  # the libraries' folder lives as long as the timers
            built = {name: _load(rg, plan, libs, device, gpu, host)
                     for name, plan in plans.items()}
            inputs = {k: tvm.runtime.tensor(v, host) for k, v in inputs_np.items()}
            for runner in built.values():
                runner.run(inputs)  # warm-up: TVM's first call of a library sets it up
            return timed_in_turns(built, inputs, rounds, seconds, min_rounds,
                                  hard_seconds=HARD_FACTOR * seconds, settle=SETTLE_RUNS)
        return timer

    return [timer_for(max_seconds * share) for share in shares]


def built_plan(rg: RelaxGraph, plan: PartitionPlan, workdir: str | Path, *,
               device: str = "cpu") -> BuiltPlan:
    """One plan built by TVM into ``workdir`` and loaded, as the timers run it (for checking
    what it computes: ``built_plan(...).run({name: tvm tensor on the host})``)."""
    gpu, host = _devices(device)
    return _load(rg, plan, LibraryCache(Path(workdir) / "libs"), device, gpu, host)


def runner_key(device: str) -> str:
    """What a kept decision made with these timers is filed under: TVM's version, the
    device's name and the host CPU (``tvm-built|llvm|Intel Xeon ...|tvm 0.27.0``)."""
    from .._io import cpu_name

    gpu, _ = _devices(device)
    name = "llvm" if device == "cpu" else f"cuda {gpu.device_name}"
    return f"tvm-built|{name}|{cpu_name()}|tvm {tvm.__version__}"


def _devices(device: str) -> tuple[Any, Any]:
    host = tvm.cpu(0)
    if device == "cpu":
        return host, host
    if device == "cuda" or device.startswith("cuda:") and device[5:].isdigit():
        gpu = tvm.cuda(int(device[5:] or 0) if ":" in device else 0)
        if not gpu.exist:
            raise PartitionLabError(f"choose_device={device!r}: TVM sees no such CUDA GPU here")
        return gpu, host
    raise PartitionLabError(f"choose_device={device!r}: expected cpu, cuda or cuda:N")


def _load(rg: RelaxGraph, plan: PartitionPlan, libs: LibraryCache, device: str, gpu: Any,
          host: Any) -> BuiltPlan:
    """Build (once) and load one plan's regions."""
    from tvm.runtime.vm import VirtualMachine

    order = plan_order(plan)
    regions = []
    for region_id, rm in zip(order, region_modules(rg, [plan.regions[r].nodes for r in order]),
                             strict=True):
        on_gpu = is_gpu(plan, plan.regions[region_id].device)
        kind = "cuda" if on_gpu and device != "cpu" else "llvm"
        lib = libs.lib_dir.parent / libs.get(rm.mod, kind)
        dev = gpu if on_gpu else host
        vm = VirtualMachine(tvm.runtime.load_module(str(lib)), dev)
        regions.append({"fn": vm["main"], "where": "gpu" if on_gpu else "host", "dev": dev,
                        "inputs": [n for n, _ in rm.inputs], "outputs": [n for n, _ in rm.outputs],
                        "weights": [tvm.runtime.tensor(v, dev) for v in rm.weights.values()]})
    return BuiltPlan(regions, [tensor_name(ref) for ref in rg.graph.outputs], gpu, host)


def _random(name: str, shape: list[int], dtype: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed + zlib.crc32(name.encode()))
    if np.issubdtype(np.dtype(dtype), np.integer):
        return np.zeros(shape, dtype=dtype)
    return rng.standard_normal(shape).astype(dtype)


__all__ = ["BuiltPlan", "built_plan", "runner_key", "tvm_timers"]
