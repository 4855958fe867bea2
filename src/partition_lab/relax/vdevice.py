"""One heterogeneous build of a plan: GPU regions on ``cuda``, host islands on ``llvm``.

:func:`vdevice_module` writes a plan of a prepared module as one Relax ``main`` whose tensors
carry TVM's virtual devices (``VDevice``, the module's ``global_infos["vdevice"]``): index 0 the
GPU (every non-host device of the plan: ``tensorcore``'s Tensor Core and CUDA-core regions),
index 1 the host. The graph's inputs and outputs live on the host; where a tensor crosses
between a GPU region and a host island an ``R.to_vdevice`` copies it (once per tensor and
device); ``relax.transform.RealizeVDevice`` then gives every binding its device, and one
``tvm.compile`` (:func:`compile_vdevice`) builds the library: TVM's ``LegalizeOps`` gives each
kernel its call's target, so host-island kernels are built for llvm and the rest for cuda.

Constants: the Relax VM puts every constant of an executable on its first device, which a
host kernel cannot read when that is the GPU, so every tensor constant is lifted to a
parameter placed on the device of the op that reads it: float tensors of rank >= 1 as
``w<node>_<k>`` (the names :mod:`.regions` gives the same weights, so the per-region driver's
arrays serve both builds), the others (integer tensors, scalars) as ``c<node>_<k>``.

``cpu=True`` maps both virtual devices to llvm (``llvm`` device 0 and 1: the VM then gets
``[cpu(0), cpu(1)]``), so the build runs and is checked on a machine without a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tvm
from tvm import relax

from ..core.plan import PartitionPlan
from .graph import RelaxGraph, is_tensor_constant
from .outline import Env, _Outliner
from .regions import CUDA_TARGET, HOST_TARGET, LIFTED_DTYPES, plan_order

GPU, HOST = 0, 1  # indices into the module's vdevice list


@dataclass
class VDeviceModule:
    """A plan as one module with virtual devices, and what its ``main`` takes."""

    mod: tvm.IRModule                     # before RealizeVDevice (compile_vdevice runs it)
    targets: list[dict[str, Any]]         # per vdevice index: GPU, host
    inputs: list[str]                     # main's first parameters: the graph's inputs (host)
    params: list[tuple[str, int]]         # then the lifted constants: (name, vdevice index)
    values: dict[str, np.ndarray] = field(default_factory=dict)  # every lifted constant
    copies: int = 0                       # R.to_vdevice calls written
    regions: list[tuple[str, int]] = field(default_factory=list)  # (device, vdevice) in order

    def devices(self, cuda: bool) -> list[Any]:
        """The VM's devices, in vdevice order: ``[cuda(0), cpu(0)]`` or ``[cpu(0), cpu(1)]``."""
        return [tvm.cuda(0), tvm.cpu(0)] if cuda else [tvm.cpu(0), tvm.cpu(1)]

    def arguments(self, inputs: dict[str, np.ndarray], cuda: bool) -> list[Any]:
        """``main``'s arguments: the inputs on the host, each constant on its device."""
        devs = self.devices(cuda)
        host = [tvm.runtime.tensor(np.asarray(inputs[n]), devs[HOST]) for n in self.inputs]
        return host + [tvm.runtime.tensor(self.values[n], devs[d]) for n, d in self.params]


def vdevice_targets(cpu: bool) -> list[dict[str, Any]]:
    return [dict(HOST_TARGET), dict(HOST_TARGET)] if cpu else [dict(CUDA_TARGET),
                                                               dict(HOST_TARGET)]


def vdevice_module(rg: RelaxGraph, plan: PartitionPlan, *, cpu: bool = False) -> VDeviceModule:
    """``plan`` (of ``rg``, a prepared module) as one module with VDevice annotations."""
    return _VDeviceBuilder(rg, plan, cpu).run()


def realize(vmod: VDeviceModule) -> tvm.IRModule:
    """``RealizeVDevice`` of the module: every binding's tensor type names its device."""
    return relax.transform.RealizeVDevice()(vmod.mod)


def compile_vdevice(vmod: VDeviceModule, tensor_cores: bool = True) -> Any:
    """One ``tvm.compile`` of the whole module for both targets (the GPU target's pipeline,
    dlight's rules skipping the llvm kernels); the executable. ``tensor_cores=False`` turns
    dlight's Tensor Core matmul rule off (it crashed TVM 0.27 on some float16 kernels:
    :class:`.regions.LibraryCache`)."""
    from tvm.s_tir.dlight.gpu import matmul

    mod = realize(vmod)
    target = tvm.target.Target(vmod.targets[GPU], host=vmod.targets[HOST])
    saved = matmul.check_sm_version
    if not tensor_cores:
        matmul.check_sm_version = lambda _arch: -1
    try:
        with tvm.transform.PassContext(opt_level=3):
            return tvm.compile(mod, target=target, relax_pipeline=vdevice_pipeline(target))
    finally:
        matmul.check_sm_version = saved


def vdevice_pipeline(target: Any) -> Any:
    """The target's default Relax pipeline (``cuda``'s, or ``cpu_generic``'s for llvm) without
    ``StaticPlanBlockMemory``: in TVM 0.27 that planner hands a tensor on one virtual device
    a storage it allocated on the other (seen in a plan whose host head feeds GPU regions:
    the first GPU kernel's output placed in the host's storage, and the VM stops on the
    device mismatch; on a GPU, a kernel would be handed memory of the wrong device). Without
    it each tensor is allocated on its own device, and the VM's pooled allocator reuses
    memory per device at run time."""
    from tvm.relax.backend.cpu_generic import pipeline as cpu_generic
    from tvm.relax.backend.cuda import pipeline as cuda

    backend = cuda if target.kind.name == "cuda" else cpu_generic
    passes = (backend.library_dispatch_passes(target) + backend.legalize_passes(target)
              + backend.dataflow_lower_passes(target) + backend.finalize_passes(target))
    kept = [p for p in passes if p.info.name != "StaticPlanBlockMemory"]

    @tvm.transform.module_pass(opt_level=0)
    def _pipeline(mod: tvm.IRModule, _ctx: Any) -> tvm.IRModule:
        with target:
            return tvm.transform.Sequential(kept)(mod)

    return _pipeline


def export_vdevice(vmod: VDeviceModule, path: str, tensor_cores: bool = True) -> None:
    """:func:`compile_vdevice`, the library exported to ``path`` (``export_library``)."""
    compile_vdevice(vmod, tensor_cores).export_library(path)


def run_vdevice(vmod: VDeviceModule, executable: Any, inputs: dict[str, np.ndarray],
                cuda: bool = False) -> list[np.ndarray]:
    """Run the built module's ``main`` on ``inputs`` (numpy), outputs back as numpy."""
    vm = relax.VirtualMachine(executable, vmod.devices(cuda))
    result = vm["main"](*vmod.arguments(inputs, cuda))
    return _flatten(result)


def _flatten(value: Any) -> list[np.ndarray]:
    if hasattr(value, "numpy"):
        return [value.numpy()]
    return [array for item in value for array in _flatten(item)]


def vdevice_counts(mod: tvm.IRModule) -> dict[str, int]:
    """How many bindings of ``main`` (after RealizeVDevice) sit on each vdevice, by its
    target's text and index, and how many are ``to_vdevice`` copies (``"copies"``)."""
    counts: dict[str, int] = {"copies": 0}
    for block in mod["main"].body.blocks:
        for binding in block.bindings:
            ty = binding.var.ty
            vdev = getattr(ty, "vdevice", None)
            key = "none" if vdev is None else f"{vdev.target.kind.name}:{vdev.vdevice_id}"
            counts[key] = counts.get(key, 0) + 1
            value = binding.value
            if isinstance(value, relax.Call) and getattr(value.op, "name", "") == \
                    "relax.to_vdevice":
                counts["copies"] += 1
    return counts


class _VDeviceBuilder(_Outliner):
    def __init__(self, rg: RelaxGraph, plan: PartitionPlan, cpu: bool) -> None:  # noqa: D107
        self.rg, self.plan, self.graph = rg, plan, rg.graph
        self.params = {p.name: p for p in rg.function.params}
        self.targets = vdevice_targets(cpu)
        self.vdevices = [relax.VDevice(tvm.target.Target(t), i if cpu else 0)
                         for i, t in enumerate(self.targets)]
        self.bb = relax.BlockBuilder()
        self._lifted: list[tuple[relax.Var, np.ndarray, int]] = []
        self._node, self._count, self._other, self._dev = -1, 0, 0, HOST
        self.copies = 0

    def _typed(self, ty: Any, dev: int) -> Any:
        return relax.TensorType(ty.shape, ty.dtype, vdevice=self.vdevices[dev])

    def run(self) -> VDeviceModule:
        func = self.rg.function
        params = [relax.Var(p.name, self._typed(p.ty, HOST)) for p in func.params]
        host_inputs = dict(zip([p.name for p in func.params], params, strict=True))
        on: list[Env] = [{}, {}]          # per vdevice: a node output's value there
        inputs_on: list[dict[str, Any]] = [{}, host_inputs]
        where: dict[tuple[int, int], int] = {}
        regions = []
        with self.bb.function("main"):
            with self.bb.dataflow():
                for region_id in plan_order(self.plan):
                    region = self.plan.regions[region_id]
                    dev = HOST if self.plan.platform.device(region.device).is_host else GPU
                    regions.append((region.device, dev))
                    for node in sorted(region.nodes):
                        self._bring(node, dev, on, inputs_on, where, host_inputs)
                        self._node, self._count, self._other, self._dev = node, 0, 0, dev
                        self._emit_node(node, on[dev], inputs_on[dev])
                        for i in range(len(self.graph[node].outputs)):
                            where[(node, i)] = dev
                for ref in {ref for ref, d in where.items() if d == GPU}:
                    if on[HOST].get(ref) is None and self._is_output(ref):
                        on[HOST][ref] = self._copy(on[GPU][ref], HOST)
                self._node = -1
                result = self.bb.emit_output(self._remap(func.body.body, on[HOST], host_inputs))
            self.bb.emit_func_output(result, params=params + [v for v, _, _ in self._lifted])
        mod = _with_vdevices(relax.transform.Normalize()(self.bb.get()), self.vdevices)
        return VDeviceModule(mod, self.targets, [p.name for p in func.params],
                             [(v.name, d) for v, _, d in self._lifted],
                             {v.name: a for v, a, _ in self._lifted}, self.copies, regions)

    def _is_output(self, ref: tuple[int, int]) -> bool:
        return any(t.is_output for t in self.graph.tensors_of(ref[0]) if t.index == ref[1])

    def _bring(self, node: int, dev: int, on: list[Env], inputs_on: list[dict[str, Any]],
               where: dict[tuple[int, int], int], host_inputs: dict[str, Any]) -> None:
        """Every tensor ``node`` reads, on ``dev`` (copied there once, where it crosses)."""
        for ref, _ in self.graph.reads_from_outside([node]):
            if isinstance(ref, str):
                if ref not in inputs_on[dev]:
                    inputs_on[dev][ref] = self._copy(host_inputs[ref], dev)
            elif ref not in on[dev]:
                on[dev][ref] = self._copy(on[where[ref]][ref], dev)

    def _copy(self, value: Any, dev: int) -> Any:
        self.copies += 1
        return self.bb.emit(relax.op.to_vdevice(value, self.vdevices[dev]))

    def _remap(self, expr: Any, env: Env, inputs: dict) -> Any:
        if is_tensor_constant(expr) and self._node >= 0:
            array = expr.value.numpy()
            if str(expr.ty.dtype) in LIFTED_DTYPES and array.ndim >= 1:
                name = f"w{self._node}_{self._count}"  # as regions.py names the same weight
                self._count += 1
            else:
                name = f"c{self._node}_{self._other}"
                self._other += 1
            var = relax.Var(name, self._typed(expr.ty, self._dev))
            self._lifted.append((var, array, self._dev))
            return var
        return super()._remap(expr, env, inputs)


def _with_vdevices(mod: tvm.IRModule, vdevices: list[Any]) -> tvm.IRModule:
    mod.update_global_info("vdevice", vdevices)
    return mod
