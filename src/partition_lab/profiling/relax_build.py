"""Build a partition plan with TVM: one library per region, a manifest, a small driver.

One build per device and a small driver: every region of a plan becomes a
Relax module of its own (``main(inputs..., weights...) -> (outputs...)``) compiled by
``tvm.compile`` for its device's target: regions on GPU devices (``tensorcore``'s Tensor Core
and CUDA-core regions; ``neuron``'s regions, the GPU standing in for the accelerator) for
``{"kind": "cuda", "arch": "sm_90"}``, host islands for ``{"kind": "llvm"}``; with
``cpu=True`` every region is built for llvm, so the driver runs here without a GPU. Each
library is exported with ``export_library``; identical region modules (the same region in
several plans) are built once. ``manifest.json`` lists, per model and platform, the plans with
their regions in topological order, each region's input, output and weight tensor names, its
device and its library. The benchmark suite's driver (docs/guide/relax.md: runtime-only TVM and numpy,
no compiler) runs the regions in order and copies a tensor (``Tensor.copyto``) where it crosses
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
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import tvm

from ..core.plan import PartitionPlan
from ..errors import PartitionLabError
from ..pipeline import analyze
from ..relax.graph import RelaxGraph, relax_graph
from ..relax.prepare import bind_params
from ..relax.regions import (  # noqa: F401 - CUDA_TARGET, HOST_TARGET, RegionModule: re-exported
    CUDA_TARGET,
    HOST_TARGET,
    LibraryCache,
    RegionModule,
    is_gpu,
    plan_order,
    region_modules,
    tensor_name,
)
from ..relax.vdevice import GPU as VD_GPU
from ..relax.vdevice import export_vdevice, vdevice_module
from ..strategies.named import (  # noqa: F401 - CUT_PLANS, GPU_PLAN, HOST_PLAN: re-exported
    CUT_PLANS,
    DEFAULT_STRATEGIES,
    GPU_PLAN,
    HOST_PLAN,
    NamedPlan,
    named_plans,
)

FORMAT = "partition_lab.tvm_plans/1"
#: TVM's own build of the whole model, beside the named plans (GPU_PLAN, HOST_PLAN, the
#: strategies' and CUT_PLANS: :mod:`partition_lab.strategies.named`).
BASELINE = "tvm_unpartitioned"


# ---------------------------------------------------------------------------- plans
def model_plans(mod: tvm.IRModule, platform: str,
                strategies: Sequence[str] = DEFAULT_STRATEGIES) -> tuple[Any, list[NamedPlan]]:
    """The analysis of ``mod`` on ``platform`` and its distinct plans
    (:func:`partition_lab.strategies.named.named_plans`: every op on the GPU, every op on the
    host, each strategy's plan and the cut plans; plans with the same device per op kept once),
    priced by the analysis' cost model."""
    analysis = analyze(mod, platform)
    return analysis, named_plans(analysis.graph, analysis.support, analysis.cost_model,
                                 strategies)


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


#: the suffix of a plan's one-library VDevice build beside its per-region build
VDEVICE = "@vdevice"


def build_vdevice_plans(rg: RelaxGraph, plans: Sequence[NamedPlan], libs: LibraryCache, *,
                        cpu: bool, prefix: str = "p:") -> list[dict[str, Any]]:
    """Each plan of ``plans`` once more as one library (:mod:`partition_lab.relax.vdevice`:
    GPU regions for cuda, host islands for llvm, one ``tvm.compile``), a manifest entry
    ``<name>@vdevice`` whose ``vdevice`` record names the library, ``main``'s inputs and its
    lifted constants (weights by the names the region libraries use, ``prefix + name``; other
    constants, small, inline) with their device. A plan that fails to build is left out (logged)."""
    entries = []
    for named in plans:
        plan = named.plan
        vmod = vdevice_module(rg, plan, cpu=cpu)
        kind = "llvm+llvm" if cpu else "cuda+llvm"
        digest = hashlib.sha1(f"{kind}:{vmod.mod.script(show_meta=True)}".encode()
                              ).hexdigest()[:16]
        name = f"vdevice_{digest}.so"
        path = libs.lib_dir / name
        if not path.exists():
            start = time.perf_counter()
            if not _export_in_child(vmod, path, cpu):
                libs.log(f"    {named.name}{VDEVICE}: the VDevice build failed; left out")
                continue
            took = time.perf_counter() - start
            libs.build_s += took
            libs.log(f"    built {name} ({took:.1f} s, one tvm.compile, {vmod.copies} copies)")
        params = []
        constants: dict[str, Any] = {}
        for pname, dev in vmod.params:
            where = "gpu" if dev == VD_GPU else "host"
            if pname.startswith("w"):
                params.append([prefix + pname, where])
            else:
                value = vmod.values[pname]
                constants[pname] = {"shape": list(value.shape), "dtype": str(value.dtype),
                                    "data": value.ravel().tolist()}
                params.append([pname, where])
        entries.append({
            "name": named.name + VDEVICE, "also": [], "strategy": plan.strategy,
            "predicted_ms": None if named.predicted_s is None else named.predicted_s * 1e3,
            "devices": _device_counts(plan), "regions": [],
            "vdevice": {"lib": f"{libs.lib_dir.name}/{name}", "target": kind,
                        "inputs": vmod.inputs, "params": params, "constants": constants,
                        "copies": vmod.copies,
                        "regions": [{"device": d} for d, _ in vmod.regions],
                        "tensor_core_rule": not cpu and not LibraryCache.tensor_cores_crashed},
            "outputs": [tensor_name(ref) for ref in rg.graph.outputs]})
    return entries


def _export_in_child(vmod: Any, path: Path, cpu: bool) -> bool:
    """:func:`export_vdevice` in a forked process (TVM can crash), the Tensor Core rule tried
    first unless it crashed before (as :class:`LibraryCache` builds)."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    for tensor_cores in ((True, False) if not LibraryCache.tensor_cores_crashed else (False,)):
        if cpu and not tensor_cores:
            break
        child = ctx.Process(target=export_vdevice, args=(vmod, str(path), tensor_cores))
        child.start()
        child.join()
        if child.exitcode == 0 and path.exists():
            return True
        if tensor_cores and not cpu:
            LibraryCache.tensor_cores_crashed = True
    return False


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
                max_plans: int = 5, log: Callable[[str], None] | None = None,
                vdevice: bool = False
                ) -> list[dict[str, Any]]:
    """Build ``mod``'s plans on each platform into ``out_dir`` and return the manifest's model
    entries (one per platform; see :func:`write_manifest`). ``weights``: ``"file"`` (an npz per
    entry) or ``"random"`` (shapes only). ``vdevice``: each plan also as one VDevice library
    (:func:`build_vdevice_plans`), timed beside its per-region build."""
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
        if vdevice:
            entry_plans += build_vdevice_plans(analysis.relay, plans, libs, cpu=cpu)
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
