"""Build a partition plan with TVM: one library per region, a manifest, a small driver.

Issue 22, part 3 ("one build per device and a small driver"). Every region of a plan becomes a
Relax module of its own (``main(inputs..., weights...) -> (outputs...)``) compiled by
``tvm.compile`` for its device's target: regions on GPU devices (``tensorcore``'s Tensor Core
and CUDA-core regions; ``neuron``'s regions, the GPU standing in for the accelerator) for
``{"kind": "cuda", "arch": "sm_90"}``, host islands for ``{"kind": "llvm"}``; with
``cpu=True`` every region is built for llvm, so the driver runs here without a GPU. Each
library is exported with ``export_library``; identical region modules (the same region in
several plans) are built once. ``manifest.json`` lists, per model and platform, the plans with
their regions in topological order, each region's input, output and weight tensor names, its
device and its library. The driver (``bench/gpu/tvm_plans.py``: runtime-only TVM and numpy, no
compiler) runs the regions in order and copies a tensor (``Tensor.copyto``) where it crosses
devices.

Weights (float constants of the prepared module) are lifted to inputs of the region
functions, so a library holds code only and a weight appears once per model and platform, not
once per plan: ``weights="file"`` writes them to an ``.npz`` beside the manifest (real values,
used by the tests), ``weights="random"`` writes only their shapes and dtypes and the driver
fills them with seeded random values (for timing: the code, shapes and copies are the same;
the numbers are not the model's).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import tvm
from tvm import relax

from ..core.plan import PartitionPlan
from ..errors import PartitionLabError
from ..strategies.named import (  # noqa: F401 - CUT_PLANS, GPU_PLAN, HOST_PLAN: re-exported
    CUT_PLANS,
    DEFAULT_STRATEGIES,
    GPU_PLAN,
    HOST_PLAN,
    NamedPlan,
    named_plans,
)
from .graph import RelaxGraph, is_tensor_constant, relax_graph
from .outline import Env, _Outliner
from .prepare import bind_params

FORMAT = "partition_lab.tvm_plans/1"
CUDA_TARGET: dict[str, Any] = {"kind": "cuda", "arch": "sm_90"}
HOST_TARGET: dict[str, Any] = {"kind": "llvm"}
#: TVM's own build of the whole model, beside the named plans (GPU_PLAN, HOST_PLAN, the
#: strategies' and CUT_PLANS: :mod:`partition_lab.strategies.named`).
BASELINE = "tvm_unpartitioned"
LIFTED_DTYPES = ("float16", "float32", "float64", "bfloat16")


def tensor_name(ref: Any) -> str:
    """A plan tensor's name: a graph input by its own name, a node output as ``%node.index``."""
    return ref if isinstance(ref, str) else f"%{ref[0]}.{ref[1]}"


@dataclass
class RegionModule:
    """One region as a standalone Relax module: ``main(inputs..., weights...) -> (outputs,)``."""

    mod: tvm.IRModule
    inputs: list[tuple[str, Any]]   # (tensor name, TensorType)
    outputs: list[tuple[str, Any]]
    weights: dict[str, np.ndarray]  # lifted constants, in parameter order after the inputs


class _RegionBuilder(_Outliner):
    """The outliner's emission of nodes, into one function per region, constants lifted."""

    def __init__(self, rg: RelaxGraph, lift: bool = True) -> None:  # noqa: D107 (no plan)
        self.rg, self.graph = rg, rg.graph
        self.params = {p.name: p for p in rg.function.params}
        self.lift = lift
        self.bb = relax.BlockBuilder()
        self._node = -1
        self._count = 0
        self._lifted: list[tuple[relax.Var, np.ndarray]] = []

    def region(self, nodes: Iterable[int]) -> RegionModule:
        nodes = sorted(nodes)
        reads = self._reads_from_outside(nodes)
        self.bb = bb = relax.BlockBuilder()
        self._lifted = []
        params, env, inputs = self._parameters(reads, "in")
        outputs = self._region_outputs(nodes)
        with bb.function("main"):
            with bb.dataflow():
                for node in nodes:
                    self._node, self._count = node, 0
                    self._emit_node(node, env, inputs)
                result = bb.emit_output(relax.Tuple([env[ref] for ref in outputs]))
            bb.emit_func_output(result, params=params + [var for var, _ in self._lifted])
        mod = relax.transform.Normalize()(bb.get())
        specs = {ref: spec for ref, spec in reads}
        return RegionModule(
            mod,
            [(tensor_name(ref), specs[ref]) for ref, _ in reads],
            [(tensor_name(ref), self.graph[ref[0]].outputs[ref[1]]) for ref in outputs],
            {var.name: value for var, value in self._lifted})

    def _remap(self, expr: Any, env: Env, inputs: dict) -> Any:
        if self.lift and is_tensor_constant(expr) and str(expr.ty.dtype) in LIFTED_DTYPES \
                and len(expr.ty.shape.values) >= 1:
            # named by node and position: the same name means the same weight in every plan
            name = f"w{self._node}_{self._count}"
            self._count += 1
            var = relax.Var(name, expr.ty)
            self._lifted.append((var, expr.value.numpy()))
            return var
        return super()._remap(expr, env, inputs)


def region_modules(rg: RelaxGraph, groups: Sequence[Iterable[int]], lift: bool = True
                   ) -> list[RegionModule]:
    """A :class:`RegionModule` per group of nodes (each a region, in topological order)."""
    builder = _RegionBuilder(rg, lift)
    return [builder.region(group) for group in groups]


def plan_order(plan: PartitionPlan) -> list[int]:
    """The plan's region ids in a topological order (the order the driver runs them)."""
    return list(nx.lexicographical_topological_sort(plan.region_graph()))


def is_gpu(plan: PartitionPlan, device: str) -> bool:
    return not plan.platform.device(device).is_host


# ---------------------------------------------------------------------------- plans
def model_plans(mod: tvm.IRModule, platform: str,
                strategies: Sequence[str] = DEFAULT_STRATEGIES) -> tuple[Any, list[NamedPlan]]:
    """The analysis of ``mod`` on ``platform`` and its distinct plans
    (:func:`partition_lab.strategies.named.named_plans`: every op on the GPU, every op on the
    host, each strategy's plan and the cut plans; plans with the same device per op kept once),
    priced by the analysis' cost model."""
    from . import api

    analysis = api.analyze(mod, platform)
    return analysis, named_plans(analysis.graph, analysis.support, analysis.cost_model,
                                 strategies)


# ---------------------------------------------------------------------------- building
class LibraryCache:
    """Builds region modules once per (target, structure), exported under ``lib_dir``."""

    tensor_cores_crashed = False

    def __init__(self, lib_dir: Path, log: Callable[[str], None] | None = None) -> None:
        self.lib_dir = lib_dir
        lib_dir.mkdir(parents=True, exist_ok=True)
        self.built: dict[str, str] = {}
        self.no_tensor_cores: set[str] = set()
        self.build_s = 0.0
        self.log = log or (lambda _msg: None)

    def get(self, mod: tvm.IRModule, kind: str) -> str:
        target = CUDA_TARGET if kind == "cuda" else HOST_TARGET
        digest = hashlib.sha1(f"{kind}:{mod.script(show_meta=True)}".encode()).hexdigest()[:16]
        if digest in self.built:
            return self.built[digest]
        name = f"{kind}_{digest}.so"
        path = self.lib_dir / name
        note = ""
        if path.exists() and kind == "cuda" and LibraryCache.tensor_cores_crashed:
            self.no_tensor_cores.add(f"{self.lib_dir.name}/{name}")
        if not path.exists():
            start = time.perf_counter()
            if kind == "cuda" and (LibraryCache.tensor_cores_crashed or
                                   not _compile_in_child(mod, target, path, tensor_cores=True)):
                # dlight's Tensor Core rule (MatmulTensorization, fp16 matmuls and convolutions
                # with every extent > 64) crashed TVM 0.27 here (a segfault in Tensorize):
                # build again with that rule off, the kernels on CUDA cores.
                self.no_tensor_cores.add(f"{self.lib_dir.name}/{name}")
                note = ", Tensor Core rule off after a crash"
                LibraryCache.tensor_cores_crashed = True  # once per process: each crash costs
                if not _compile_in_child(mod, target, path, tensor_cores=False):
                    raise PartitionLabError(f"tvm.compile failed for {name} (cuda)")
            elif kind != "cuda":
                _compile(mod, target, path, tensor_cores=True)
            took = time.perf_counter() - start
            self.build_s += took
            self.log(f"    built {name} ({took:.1f} s, {path.stat().st_size / 1e6:.2f} MB{note})")
        self.built[digest] = f"{self.lib_dir.name}/{name}"
        return self.built[digest]


def _compile(mod: tvm.IRModule, target: dict[str, Any], path: Path, tensor_cores: bool) -> None:
    from tvm.s_tir.dlight.gpu import matmul

    tgt = tvm.target.Target(target)
    saved = matmul.check_sm_version
    if not tensor_cores:
        matmul.check_sm_version = lambda _arch: -1
    try:
        with tvm.transform.PassContext(opt_level=3):
            ex = tvm.compile(mod, target=tgt,
                             relax_pipeline=relax.pipeline.get_default_pipeline(tgt))
        ex.export_library(str(path))
    finally:
        matmul.check_sm_version = saved


def _compile_in_child(mod: tvm.IRModule, target: dict[str, Any], path: Path,
                      tensor_cores: bool) -> bool:
    """:func:`_compile` in a forked process (TVM can crash): whether it wrote ``path``."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    child = ctx.Process(target=_compile, args=(mod, target, path, tensor_cores))
    child.start()
    child.join()
    return child.exitcode == 0 and path.exists()


def _region_entry(rm: RegionModule, device: str, kind: str, lib: str, prefix: str
                  ) -> dict[str, Any]:
    return {"device": device, "target": kind, "lib": lib,
            "inputs": [n for n, _ in rm.inputs], "outputs": [n for n, _ in rm.outputs],
            "weights": [prefix + n for n in rm.weights]}


def _tensor_spec(spec: Any) -> dict[str, Any]:
    return {"shape": [int(d) for d in spec.shape], "dtype": str(spec.dtype)}


def build_plans(rg: RelaxGraph, plans: Sequence[NamedPlan], libs: LibraryCache, *,
                cpu: bool, weights: dict[str, np.ndarray], prefix: str = "p:"
                ) -> list[dict[str, Any]]:
    """The manifest entries of ``plans`` (plans of ``rg.graph``), their libraries built;
    lifted weights are added to ``weights`` under ``prefix + name``."""
    entries = []
    for named in plans:
        plan = named.plan
        regions = []
        order = plan_order(plan)
        modules = region_modules(rg, [plan.regions[r].nodes for r in order])
        for region_id, rm in zip(order, modules, strict=True):
            device = plan.regions[region_id].device
            kind = "cuda" if is_gpu(plan, device) and not cpu else "llvm"
            lib = libs.get(rm.mod, kind)
            regions.append(_region_entry(rm, device, kind, lib, prefix) | {
                "ops": len(plan.regions[region_id].nodes),
                "tensor_core_rule": kind == "cuda" and lib not in libs.no_tensor_cores})
            for n, value in rm.weights.items():
                weights.setdefault(prefix + n, value)
        entries.append({
            "name": named.name, "also": named.also, "strategy": plan.strategy,
            "predicted_ms": None if named.predicted_s is None else named.predicted_s * 1e3,
            "devices": _device_counts(plan), "regions": regions,
            # every op's device, in graph order (the entry's graph_file): to re-price the plan
            "op_devices": [plan.device_of(n) for n in range(len(plan.graph))],
            "outputs": [tensor_name(ref) for ref in rg.graph.outputs]})
    return entries


def _device_counts(plan: PartitionPlan) -> dict[str, int]:
    counts: dict[str, int] = {}
    for n in range(len(plan.graph)):
        counts[plan.device_of(n)] = counts.get(plan.device_of(n), 0) + 1
    return counts


def build_baseline(mod: tvm.IRModule, libs: LibraryCache, *, cpu: bool,
                   weights: dict[str, np.ndarray], name: str = "") -> dict[str, Any]:
    """The whole (unprepared) model as one region on the GPU (llvm with ``cpu``): TVM's own
    build of the model, the baseline the plans are compared with."""
    rg = relax_graph(bind_params(mod), name=name)
    rm = region_modules(rg, [range(len(rg.graph))])[0]
    kind = "llvm" if cpu else "cuda"
    lib = libs.get(rm.mod, kind)
    for n, value in rm.weights.items():
        weights.setdefault("b:" + n, value)
    return {"name": BASELINE, "also": [], "strategy": BASELINE, "predicted_ms": None,
            "devices": {"gpu" if not cpu else "cpu": len(rg.graph)},
            "regions": [_region_entry(rm, "gpu", kind, lib, "b:") | {
                "ops": len(rg.graph),
                "tensor_core_rule": kind == "cuda" and lib not in libs.no_tensor_cores}],
            "outputs": [tensor_name(ref) for ref in rg.graph.outputs]}


def build_model(mod: tvm.IRModule, name: str, platforms: Sequence[str], out_dir: str | Path,
                *, cpu: bool = False, weights: str = "file",
                strategies: Sequence[str] = DEFAULT_STRATEGIES, baseline: bool = True,
                max_plans: int = 5, log: Callable[[str], None] | None = None
                ) -> list[dict[str, Any]]:
    """Build ``mod``'s plans on each platform into ``out_dir`` and return the manifest's model
    entries (one per platform; see :func:`write_manifest`). ``weights``: ``"file"`` (an npz per
    entry) or ``"random"`` (shapes only)."""
    if weights not in ("file", "random"):
        raise PartitionLabError(f"weights={weights!r}: 'file' or 'random'")
    out = Path(out_dir)
    libs = LibraryCache(out / "libs", log)
    say = log or (lambda _msg: None)
    entries = []
    base: dict[str, Any] | None = None
    base_weights: dict[str, np.ndarray] = {}
    for platform in platforms:
        start = time.perf_counter()
        built_before = libs.build_s
        try:
            analysis, plans = model_plans(mod, platform, strategies)
        except PartitionLabError as exc:
            say(f"  {name} on {platform}: FAILED {exc}")
            continue
        plans = plans[:max_plans]
        say(f"  {name} on {platform}: {len(plans)} plans "
            f"({', '.join(p.name for p in plans)})")
        values: dict[str, np.ndarray] = {}
        entry_plans = build_plans(analysis.relay, plans, libs, cpu=cpu, weights=values)
        if baseline:
            if base is None:
                base = build_baseline(mod, libs, cpu=cpu, weights=base_weights, name=name)
            entry_plans.append(base)
            values.update(base_weights)
        key = f"{name}@{platform}"
        entry: dict[str, Any] = {
            "key": key, "model": name, "platform": platform,
            "inputs": [{"name": p.name, "shape": [int(d) for d in p.ty.shape.values],
                        "dtype": str(p.ty.dtype)} for p in analysis.relay.function.params],
            "weights": {n: {"shape": list(v.shape), "dtype": str(v.dtype)}
                        for n, v in values.items()},
            "weights_file": None, "plans": entry_plans,
            "build_s": round(time.perf_counter() - start, 2),
            "compile_s": round(libs.build_s - built_before, 2)}
        entry["graph_file"] = write_graph(out, key, analysis.graph)
        if weights == "file":
            file = f"weights_{_safe(key)}.npz"
            np.savez(out / file, **values)
            entry["weights_file"] = file
        entries.append(entry)
    return entries


def write_graph(out: Path, key: str, graph: Any) -> str:
    """The entry's OpGraph (the prepared module's, which the plans' ``op_devices`` index) as
    gzipped JSON (``graph_io.graph_to_dict``; ``graph_from_dict`` reads it back without TVM):
    with the platform, enough to re-price every plan with a cost model."""
    import gzip

    from ..executors.graph_io import graph_to_dict

    (out / "graphs").mkdir(exist_ok=True)
    file = f"graphs/{_safe(key)}.json.gz"
    with gzip.open(out / file, "wt") as handle:
        json.dump(graph_to_dict(graph), handle)
    return file


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in text)


def write_manifest(out_dir: str | Path, models: Sequence[Mapping[str, Any]], *, cpu: bool,
                   seed: int = 0, extra: Mapping[str, Any] | None = None) -> Path:
    """``out_dir/manifest.json``: the format, the mode (``cpu``: every region on llvm), the
    targets and the model entries of :func:`build_model`."""
    path = Path(out_dir) / "manifest.json"
    data = {"format": FORMAT, "mode": "cpu" if cpu else "cuda",
            "targets": {"cuda": CUDA_TARGET, "llvm": HOST_TARGET}, "seed": seed,
            "tvm": tvm.__version__, "models": list(models)} | dict(extra or {})
    path.write_text(json.dumps(data, indent=1))
    return path


def load_manifest(out_dir: str | Path) -> dict[str, Any]:
    data = json.loads((Path(out_dir) / "manifest.json").read_text())
    if data.get("format") != FORMAT:
        raise PartitionLabError(f"{out_dir}: not a {FORMAT} manifest")
    return data


def env_compile_mode() -> None:
    """Build CUDA kernels to a fatbin with nvcc at build time where nvcc is installed, so the
    GPU machine does not compile them (NVRTC) when it loads a library."""
    from shutil import which

    if which("nvcc") and "TVM_CUDA_COMPILE_MODE" not in os.environ:
        os.environ["TVM_CUDA_COMPILE_MODE"] = "nvcc"
