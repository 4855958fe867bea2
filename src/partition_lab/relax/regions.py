"""A plan's regions as standalone Relax modules, and their libraries built once each.

:func:`region_modules` turns each region of a plan into ``main(inputs..., weights...) ->
(outputs...)`` (float constants lifted to parameters, named by node and position, so the same
name is the same weight in every plan); :class:`LibraryCache` compiles each for its target
(``cuda`` sm_90 or ``llvm``) once, keyed by its text. :mod:`.build` (bundles for the GPU
machine) and :mod:`.timing` (the measured choice's runner) stand on this.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import tvm
from tvm import relax

from ..core.plan import PartitionPlan
from ..errors import PartitionLabError
from .graph import RelaxGraph, is_tensor_constant
from .outline import Env, _Outliner

CUDA_TARGET: dict[str, Any] = {"kind": "cuda", "arch": "sm_90"}
HOST_TARGET: dict[str, Any] = {"kind": "llvm"}
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
                                   not compile_in_child(mod, target, path, tensor_cores=True)):
                # dlight's Tensor Core rule (MatmulTensorization, fp16 matmuls and convolutions
                # with every extent > 64) crashed TVM 0.27 here (a segfault in Tensorize):
                # build again with that rule off, the kernels on CUDA cores.
                self.no_tensor_cores.add(f"{self.lib_dir.name}/{name}")
                note = ", Tensor Core rule off after a crash"
                LibraryCache.tensor_cores_crashed = True  # once per process: each crash costs
                if not compile_in_child(mod, target, path, tensor_cores=False):
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


def compile_in_child(mod: tvm.IRModule, target: dict[str, Any], path: Path,
                      tensor_cores: bool) -> bool:
    """:func:`_compile` in a forked process (TVM can crash): whether it wrote ``path``."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    child = ctx.Process(target=_compile, args=(mod, target, path, tensor_cores))
    child.start()
    child.join()
    return child.exitcode == 0 and path.exists()
