"""Op signatures built by TVM, for a profile of TVM's own kernels.

Every distinct op signature a platform's devices may run (every op on every device that supports
it, :func:`~partition_lab.profiling.profile.signatures_per_device`; and each pattern unit that a
device prices whole, as one function) becomes a standalone Relax function, its weights lifted to
inputs (:func:`~.build.region_modules`: shapes only, no values). Signatures are deduplicated
across models and platforms per *role*: ``gpu`` (every non-host device: ``tensorcore``'s
``tensorcore`` and ``cuda``, ``neuron``'s accelerator, all built for the GPU) and ``host``.
Each role's functions go into a few IRModules (``op_<k>``, ``chunk`` functions each), compiled
once per library with :mod:`.build`'s configuration (GPU roles for :data:`~.build.CUDA_TARGET`,
the host for :data:`~.build.HOST_TARGET`; ``cpu=True``: every role for llvm) in a forked child;
a library that fails to build is built again function by function and the failures are
recorded. Each role also gets a small ``<role>_floor`` library (an empty and a one-kernel
function) for the per-call floor.

``manifest.json`` (:data:`FORMAT`) lists per library its functions: the signature, the op and
its class, FLOPs and bytes, the argument shapes and dtypes, the (platform, device) pairs and the
models it serves. The benchmark suite's op timer (docs/guide/relax.md) times them on the device
(runtime-only TVM) and
:mod:`partition_lab.profiling.tvm_built` turns the timings into a profile cache.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tvm
from tvm import relax

from ..core.graph import OpGraph, OpNode
from ..core.ops import op_class
from ..core.patterns import Unit, composite_node
from ..core.support import Support
from ..cost_models.base import priced_whole
from ..cost_models.signatures import op_signature
from ..pipeline import analyze
from ..relax import regions
from ..relax.graph import RelaxGraph
from . import relax_build as build
from .profile import signatures_per_device

FORMAT = "partition_lab.tvm_ops/1"
ROLES = ("gpu", "host")
DEFAULT_CHUNK = 64  # functions per library: a failed batch costs one chunk's rebuild


@dataclass
class OpFunction:
    """One signature on one role: its standalone function and what it serves."""

    role: str
    signature: str
    node: OpNode
    func: relax.Function  # main(inputs..., weights...) of its region module
    extra: dict[str, Any]  # other functions of the region module (PrimFuncs made by emit_te)
    inputs: list[dict[str, Any]]
    weights: list[dict[str, Any]]
    unit: bool = False
    devices: list[list[str]] = field(default_factory=list)  # [platform, device] pairs
    models: list[str] = field(default_factory=list)

    def serve(self, platform: str, device: str, model: str) -> None:
        if [platform, device] not in self.devices:
            self.devices.append([platform, device])
        if model not in self.models:
            self.models.append(model)

    def record(self, name: str) -> dict[str, Any]:
        """The manifest's record of this function, named ``name`` in its library."""
        node = self.node
        args = node.args or node.inputs or node.outputs
        return {"name": name, "signature": self.signature, "op": node.op,
                "class": op_class(node), "flops": float(node.flops),
                "bytes": float(node.bytes_moved), "dtype": args[0].dtype if args else "float32",
                "unit": self.unit, "inputs": self.inputs, "weights": self.weights,
                "devices": sorted(self.devices), "models": sorted(self.models)}


class OpCollector:
    """Distinct signatures per role over models and platforms (see the module docstring)."""

    def __init__(self, units: bool = True) -> None:
        self.units = units
        self.functions: dict[tuple[str, str], OpFunction] = {}
        self.platforms: dict[str, list[dict[str, Any]]] = {}
        self.errors: list[str] = []

    def add_model(self, mod: tvm.IRModule, name: str, platforms: Sequence[str],
                  log: Callable[[str], None] | None = None) -> None:
        """Add every signature ``mod`` may run on each device of each platform."""
        say = log or (lambda _msg: None)
        for platform in platforms:
            try:
                analysis = analyze(mod, platform)
            except Exception as exc:  # noqa: BLE001 - one platform failing keeps the others
                self.errors.append(f"{name}@{platform}: {type(exc).__name__}: {exc}")
                say(f"  {name} on {platform}: FAILED {exc}")
                continue
            plat = analysis.support.platform
            self.platforms[plat.name] = [
                {"name": d.name, "memory": d.memory, "precision": d.precision,
                 "host": d.is_host} for d in plat.devices]
            before = len(self.functions)
            rg, graph, support = analysis.relay, analysis.graph, analysis.support
            for device, found in signatures_per_device(graph, support).items():
                for sig, (node, _) in found.items():
                    self._add(rg, plat, device, sig, node, [node.id], name)
            if self.units:
                for unit, device in unit_holders(graph, support):
                    node = composite_node(graph, unit)
                    self._add(rg, plat, device, op_signature(node), node, sorted(unit.nodes),
                              name, unit=True)
            say(f"  {name} on {plat.name}: {len(graph)} ops, "
                f"{len(self.functions) - before} new signatures")

    def _add(self, rg: RelaxGraph, plat: Any, device: str, sig: str, node: OpNode,
             nodes: list[int], model: str, unit: bool = False) -> None:
        role = "host" if plat.device(device).is_host else "gpu"
        key = (role, sig)
        if key not in self.functions:
            self.functions[key] = _op_function(rg, role, sig, node, nodes, unit)
        self.functions[key].serve(plat.name, device, model)

    def by_role(self) -> dict[str, list[OpFunction]]:
        out: dict[str, list[OpFunction]] = {role: [] for role in ROLES}
        for (role, _), fn in self.functions.items():
            out[role].append(fn)
        return out


def unit_holders(graph: OpGraph, support: Support) -> list[tuple[Unit, str]]:
    """(unit, device) for each unit and each device that supports all its nodes and prices it
    whole: what ``signatures_per_device`` adds with refs (``_add_units``, without plans)."""
    platform = support.platform
    found = []
    for unit in support.units:
        allowed = set.intersection(*(set(support.allowed(n)) for n in unit.nodes))
        for device in sorted(platform.devices[i].name for i in allowed):
            if priced_whole(platform, device, [unit]):
                found.append((unit, device))
    return found


def _op_function(rg: RelaxGraph, role: str, sig: str, node: OpNode, nodes: list[int],
                 unit: bool) -> OpFunction:
    rm = build.region_modules(rg, [nodes])[0]
    extra = {gv.name_hint: rm.mod[gv] for gv in rm.mod.get_global_vars()
             if gv.name_hint != "main"}
    inputs = [{"name": n, **_spec(t)} for n, t in rm.inputs]
    weights = [{"name": n, "shape": list(v.shape), "dtype": str(v.dtype)}
               for n, v in rm.weights.items()]
    return OpFunction(role, sig, node, rm.mod["main"], extra, inputs, weights, unit)


def _spec(ty: Any) -> dict[str, Any]:
    return {"shape": [int(d) for d in ty.shape], "dtype": str(ty.dtype)}


# ---------------------------------------------------------------------------- building
def target_of(role: str, cpu: bool) -> tuple[str, dict[str, Any]]:
    """(kind, target) a role is built for; read from :mod:`.build` at call time (its host
    target may change)."""
    if role == "gpu" and not cpu:
        return "cuda", dict(build.CUDA_TARGET)
    return "llvm", dict(build.HOST_TARGET)


def compile_library(mod: tvm.IRModule, kind: str, target: dict[str, Any], path: Path) -> bool:
    """Compile ``mod`` to ``path`` in a forked child as :mod:`.build` does; whether it worked.

    CUDA: dlight's Tensor Core rule first unless it crashed before in this process, then
    without it (after which it stays off: each crash costs a child)."""
    if kind != "cuda":
        return regions.compile_in_child(mod, target, path, tensor_cores=True)
    if not regions.LibraryCache.tensor_cores_crashed and \
            regions.compile_in_child(mod, target, path, tensor_cores=True):
        return True
    ok = regions.compile_in_child(mod, target, path, tensor_cores=False)
    if ok:  # the rule was the culprit (a failure without it is the op's own)
        regions.LibraryCache.tensor_cores_crashed = True
    return ok


def _module(named: Sequence[tuple[str, OpFunction]]) -> tvm.IRModule | None:
    """One IRModule of the functions, each ``main`` renamed; None if their helper functions'
    names collide (such a function is then built alone)."""
    funcs: dict[str, Any] = {}
    for name, fn in named:
        for helper, value in fn.extra.items():
            if helper in funcs and not tvm.ir.structural_equal(funcs[helper], value):
                return None
            funcs[helper] = value
        funcs[name] = fn.func.with_attr("global_symbol", name)
    return tvm.IRModule(funcs)


def floor_module() -> tvm.IRModule:
    """``empty(x) -> x`` (a VM call, no kernel) and ``tiny(x) -> x + x`` (one small kernel)."""
    funcs = {}
    for name in ("empty", "tiny"):
        bb = relax.BlockBuilder()
        x = relax.Var("x", relax.TensorType((1,), "float32"))
        with bb.function(name, [x]):
            out = x if name == "empty" else bb.emit(relax.op.add(x, x))
            bb.emit_func_output(out)
        funcs[name] = bb.get()[name].with_attr("global_symbol", name)
    return tvm.IRModule(funcs)


def build_role(functions: Sequence[OpFunction], role: str, out: Path, *, cpu: bool,
               chunk: int = DEFAULT_CHUNK, log: Callable[[str], None] | None = None
               ) -> list[dict[str, Any]]:
    """Build ``functions`` (all of ``role``) into libraries under ``out/libs``; the manifest's
    library records (functions that failed to build carry ``build_error``)."""
    say = log or (lambda _msg: None)
    kind, target = target_of(role, cpu)
    libs = out / "libs"
    libs.mkdir(parents=True, exist_ok=True)
    records = []
    floor = f"libs/{role}_floor.so"
    start = time.perf_counter()
    ok = compile_library(floor_module(), kind, target, out / floor)
    records.append(_library(floor, role, kind, target, time.perf_counter() - start, out,
                            floor=True, functions=[] if ok else None))
    named = [(f"op_{k}", fn) for k, fn in enumerate(functions)]
    for first in range(0, len(named), chunk):
        part = named[first:first + chunk]
        lib = f"libs/{role}_{first // chunk:03d}.so"
        start = time.perf_counter()
        mod = _module(part)
        if mod is not None and compile_library(mod, kind, target, out / lib):
            took = time.perf_counter() - start
            records.append(_library(lib, role, kind, target, took, out,
                                    functions=[fn.record(name) for name, fn in part]))
            say(f"    built {lib}: {len(part)} functions, {took:.1f} s, "
                f"{(out / lib).stat().st_size / 1e6:.2f} MB")
            continue
        say(f"    {lib}: the batch did not build; building its {len(part)} functions alone")
        for name, fn in part:
            records.append(_build_alone(name, fn, role, kind, target, out))
    return records


def _build_alone(name: str, fn: OpFunction, role: str, kind: str, target: dict[str, Any],
                 out: Path) -> dict[str, Any]:
    lib = f"libs/{role}_{name}.so"
    start = time.perf_counter()
    mod = _module([(name, fn)])
    ok = mod is not None and compile_library(mod, kind, target, out / lib)
    record = fn.record(name)
    if not ok:
        record["build_error"] = f"tvm.compile failed for {kind} (see the build log)"
    return _library(lib, role, kind, target, time.perf_counter() - start, out,
                    functions=[record], built=ok)


def _library(lib: str, role: str, kind: str, target: dict[str, Any], took: float, out: Path,
             *, functions: list[dict[str, Any]] | None, floor: bool = False,
             built: bool | None = None) -> dict[str, Any]:
    built = (functions is not None) if built is None else built
    return {"lib": lib if built else None, "role": role, "kind": kind, "target": target,
            "floor": floor, "built": built, "build_s": round(took, 2),
            "size_bytes": (out / lib).stat().st_size if built else 0,
            "functions": functions or []}


def build_ops(collector: OpCollector, out_dir: str | Path, *, cpu: bool = False,
              chunk: int = DEFAULT_CHUNK, log: Callable[[str], None] | None = None,
              extra: dict[str, Any] | None = None) -> Path:
    """Build every collected function and write ``out_dir/manifest.json``; its path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    libraries = []
    for role, functions in collector.by_role().items():
        if functions:
            libraries += build_role(functions, role, out, cpu=cpu, chunk=chunk, log=log)
    data = {"format": FORMAT, "mode": "cpu" if cpu else "cuda", "tvm": tvm.__version__,
            "targets": {role: target_of(role, cpu)[1] for role in ROLES},
            "platforms": collector.platforms, "errors": collector.errors,
            "libraries": libraries} | dict(extra or {})
    path = out / "manifest.json"
    path.write_text(json.dumps(data, indent=1))
    return path


def collect(models: Iterable[tuple[str, tvm.IRModule]], platforms: Sequence[str], *,
            units: bool = True, log: Callable[[str], None] | None = None) -> OpCollector:
    """An :class:`OpCollector` over ``(name, module)`` pairs on ``platforms``."""
    collector = OpCollector(units)
    for name, mod in models:
        collector.add_model(mod, name, platforms, log)
    return collector
