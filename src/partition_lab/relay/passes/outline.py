"""Outline a plan's regions into Relay functions, per device, as Relay's PartitionGraph does.

What each region becomes depends on its device's role in the plan's platform:

* ``byoc`` (an accelerator compiled by a BYOC codegen): a global function with the attributes
  ``Compiler=<device.compiler>``, ``global_symbol=tvmgen_default_<compiler>_main_<i>`` (``i``
  counts that compiler's functions), ``Primitive=1`` and ``Inline=1`` (the form
  ``relay.transform.PartitionGraph`` produces, so codegens registered as ``relay.ext.<compiler>``
  can consume it). Each device keeps its own ``Compiler``: an NPU and a DSP of one platform give
  two sets of functions. Inside, each pattern unit of the plan (``layer_norm``, ``gelu``...)
  is a call of a local function with ``Composite=<pattern>``, as ``MergeComposite`` makes them,
  so a codegen sees the composite op, not the ops an importer decomposed it into.
* ``main`` (the module's main target, e.g. the GPU's CUDA cores on ``tensorcore``): stays inline in
  ``main``, compiled by the main target.
* ``host``: stays inline in ``main`` too. When the platform's main target is not the host (a GPU
  platform), host islands are marked the way TVM's heterogeneous execution (``PlanDevices``)
  reads them:

  - every host-island call is wrapped in ``relay.annotation.on_device(call, tvm.cpu())`` (TVM's
    defaults: the call runs on the CPU, its result is free);
  - every tensor the plan copies between the host and the GPU passes through one explicit
    ``device_copy(tensor, src, dst)`` per direction, shared by its consumers on that side. The
    GPU is the main device's TVM device (``tvm.device("cuda")`` on ``tensorcore``); BYOC regions
    in its memory count as GPU code. Graph inputs start on the host only where both sides read
    them (an input only the GPU reads lives on the GPU, as TVM places it).

  The copies are needed because ``on_device`` alone does not say where the code between two host
  islands runs: ``PlanDevices``' defaulting gives an unconstrained argument the device of the value
  it feeds, which pulls the GPU code upstream of an island (BYOC calls included) onto the CPU. With both
  marks, ``PlanDevices`` (the GPU as its default device) places exactly the plan's host islands on
  the CPU and adds no copy of its own. On a platform whose main target is the host nothing is
  annotated. A main device whose name is not a TVM device kind gets the ``on_device`` marks only.

With ``outline_cpu`` (the form the region executor runs) the inline regions become functions too,
``cpu_island_<i>`` for host islands and ``<device>_region_<i>`` for main-target regions (no
``Compiler`` attribute), so that ``main`` only calls regions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import networkx as nx
import tvm
from tvm import relay

from ...core.graph import TensorType
from ...core.patterns import Unit
from ...core.plan import PartitionPlan, Region
from ...core.platform import Device, Platform, compiler_name
from ...errors import PartitionLabError
from ..relay_graph import RelayGraph, array_items

Env = dict[tuple[int, int], relay.Expr]

__all__ = ["OutlinedFunction", "annotates_host", "compiler_name", "host_virtual_device",
           "main_tvm_device", "outline", "outline_regions"]


@dataclass(frozen=True)
class OutlinedFunction:
    """One global function of an outlined module: the region it holds and its device."""

    symbol: str
    region: Region
    device: Device
    compiler: str | None  # the BYOC Compiler attribute; None for inline-target regions


def annotates_host(platform: Platform) -> bool:
    """Whether host islands get ``on_device`` annotations: the main target is not the host."""
    return not platform.main.is_host


def host_virtual_device() -> tvm.runtime.Device:
    """The device host islands are annotated with (``tvm.cpu(0)``)."""
    return tvm.cpu(0)


def main_tvm_device(platform: Platform) -> tvm.runtime.Device | None:
    """The TVM device of the platform's main target (``cuda`` -> ``tvm.cuda(0)``), or None when
    the main device's name is not a TVM device kind."""
    try:
        return tvm.device(platform.main.name)
    except ValueError:
        return None


def outline(rg: RelayGraph, plan: PartitionPlan, *, outline_cpu: bool = False) -> tvm.IRModule:
    """The partitioned module for ``plan`` (which must be a plan of ``rg.graph``).

    With ``outline_cpu`` the host islands and main-target regions become functions too (no
    Compiler attribute), so that ``main`` only calls regions; the region executor runs that form.
    """
    return outline_regions(rg, plan, outline_cpu=outline_cpu)[0]


def outline_regions(rg: RelayGraph, plan: PartitionPlan, *, outline_cpu: bool = False
                    ) -> tuple[tvm.IRModule, dict[str, OutlinedFunction]]:
    """:func:`outline`, plus each global function's region and device, by symbol."""
    return _Outliner(rg, plan).run(outline_cpu)


def _byoc_compiler(device: Device) -> str:
    return device.compiler or compiler_name(device.name)


Side = Literal["host", "device"] | None  # which side of the host/GPU boundary reads a value


class _Outliner:
    def __init__(self, rg: RelayGraph, plan: PartitionPlan) -> None:
        self.rg = rg
        self.plan = plan
        self.graph = rg.graph
        self.platform = plan.platform
        self.annotate = annotates_host(self.platform)
        self.host_device = host_virtual_device()
        self.gpu = main_tvm_device(self.platform) if self.annotate else None
        host = self.platform.host.name
        self.on_host = [d.device == host for d in plan.decisions]
        # Graph inputs that both the host and another device read: they start on the host and are
        # copied to the GPU (an input read on one side only lives on that side).
        self.shared_inputs = {
            t.input_name for t in self.graph.graph_inputs.values()
            if len({self.on_host[c] for c in t.consumers}) == 2}
        self.copies: dict[tuple[object, str], relay.Expr] = {}

    def run(self, outline_cpu: bool) -> tuple[tvm.IRModule, dict[str, OutlinedFunction]]:
        new_params = [relay.Var(v.name_hint, v.type_annotation) for v in self.rg.function.params]
        inputs = {old.name_hint: new for old, new in zip(self.rg.function.params, new_params, strict=True)}
        env: Env = {}
        functions: dict[tvm.ir.GlobalVar, relay.Function] = {}
        outlined: dict[str, OutlinedFunction] = {}
        counters: dict[str, int] = {}
        order = nx.lexicographical_topological_sort(self.plan.region_graph())
        for region_id in order:
            region = self.plan.regions[region_id]
            device = self.platform.device(region.device)
            side: Side = ("host" if device.is_host else "device") if self.annotate else None
            if device.outlined:
                compiler = _byoc_compiler(device)
                symbol = f"tvmgen_default_{compiler}_main_{_next(counters, compiler)}"
                self._outline_region(region.nodes, symbol, env, inputs, functions, compiler, side)
            elif outline_cpu:
                stem = "cpu_island" if device.is_host else f"{compiler_name(device.name)}_region"
                symbol = f"{stem}_{_next(counters, stem)}"
                compiler = None
                self._outline_region(region.nodes, symbol, env, inputs, functions, None, side)
            else:
                for node in region.nodes:
                    self._rebuild_node(node, env, inputs, side)
                continue
            outlined[symbol] = OutlinedFunction(symbol, region, device, compiler)
        body = self._remap(self.rg.function.body, env, inputs)
        main = relay.Function(new_params, body, self.rg.function.ret_type,
                              self.rg.function.type_params, self.rg.function.attrs)
        # One type inference for the whole module: every region function declares its parameter
        # and return types, so main's calls to them type-check before their bodies are inferred.
        functions[tvm.ir.GlobalVar("main")] = main
        return relay.transform.InferType()(tvm.IRModule(functions)), outlined

    # ------------------------------------------------------------------ device marks
    def _on_host(self, expr: relay.Expr) -> relay.Expr:
        """``expr`` constrained to run on the CPU (its result may live anywhere)."""
        return relay.annotation.on_device(expr, self.host_device)

    def _copy(self, key: object, expr: relay.Expr, side: str) -> relay.Expr:
        """``expr`` copied to ``side`` (``"host"`` or ``"device"``), once per value and side."""
        marked = self.copies.get((key, side))
        if marked is None:
            src, dst = ((self.gpu, self.host_device) if side == "host" else
                        (self.host_device, self.gpu))
            marked = relay.op.device_copy(expr, src, dst)
            self.copies[(key, side)] = marked
        return marked

    def _tensor_for(self, ref: tuple[int, int], expr: relay.Expr, side: Side) -> relay.Expr:
        """Tensor ``ref`` as a consumer on ``side`` reads it (copied if it lives elsewhere)."""
        if side is None or self.gpu is None or self.on_host[ref[0]] == (side == "host"):
            return expr
        return self._copy(ref, expr, side)

    def _input_for(self, name: str, expr: relay.Expr, side: Side) -> relay.Expr:
        if side != "device" or self.gpu is None or name not in self.shared_inputs:
            return expr
        return self._copy(("input", name), expr, side)

    # ------------------------------------------------------------------ pieces
    def _outline_region(self, nodes, symbol, main_env: Env, main_inputs, functions,
                        compiler: str | None, side: Side) -> None:
        members = set(nodes)
        local_env: Env = {}
        local_inputs: dict[str, relay.Var] = {}
        params: list[relay.Var] = []
        call_args: list[relay.Expr] = []
        # Inputs: every tensor a member consumes that is produced outside the region.
        for ref, spec in self._reads_from_outside(nodes):
            var = relay.Var(f"{symbol}_in{len(params)}", _relay_type(spec))
            params.append(var)
            if isinstance(ref, str):
                local_inputs[ref] = var
                call_args.append(self._input_for(ref, main_inputs[ref], side))
            else:
                local_env[ref] = var
                call_args.append(self._tensor_for(ref, main_env[ref], side))
        units = self._units_in(members) if compiler is not None else {}
        for node in nodes:
            unit = units.get(node)
            if unit is None:
                self._rebuild_node(node, local_env, local_inputs, None)
            elif node == unit.output:
                self._composite(unit, local_env, local_inputs)
        # Outputs: tensors used outside the region or returned by the graph.
        outputs = [
            (t.producer, t.index) for node in nodes for t in self.graph.tensors_of(node)
            if t.is_output or any(c not in members for c in t.consumers)
        ]
        results = [local_env[ref] for ref in outputs]
        body = results[0] if len(results) == 1 else relay.Tuple(results)
        types = [_relay_type(self.graph[node].outputs[index]) for node, index in outputs]
        ret_type = types[0] if len(types) == 1 else relay.TupleType(types)
        func = relay.Function(params, body, ret_type)
        if compiler is not None:
            func = func.with_attr("Primitive", tvm.tir.IntImm("int32", 1))
            func = func.with_attr("Inline", tvm.tir.IntImm("int32", 1))
            func = func.with_attr("Compiler", compiler)
        func = func.with_attr("global_symbol", symbol)
        gvar = tvm.ir.GlobalVar(symbol)
        call: relay.Expr = relay.Call(gvar, call_args)
        if side == "host":
            call = self._on_host(call)
        for k, ref in enumerate(outputs):
            main_env[ref] = call if len(outputs) == 1 else relay.TupleGetItem(call, k)
        functions[gvar] = func

    def _reads_from_outside(self, nodes: Sequence[int]) -> list[tuple[Any, TensorType]]:
        """The tensors ``nodes`` read from outside them (:meth:`OpGraph.reads_from_outside`)."""
        return self.graph.reads_from_outside(nodes)

    def _units_in(self, members: set[int]) -> dict[int, Unit]:
        """``{node: unit}`` for the pattern units wholly inside a region."""
        return {node: unit for unit in self.plan.support.units
                if members.issuperset(unit.nodes) for node in unit.nodes}

    def _composite(self, unit: Unit, env: Env, inputs: dict[str, relay.Var]) -> None:
        """The unit as a call of a ``Composite=<pattern>`` function (TVM's BYOC convention:
        what ``MergeComposite`` makes), its inputs the tensors it reads from outside."""
        sub_env: Env = {}
        sub_inputs: dict[str, relay.Var] = {}
        params: list[relay.Var] = []
        args: list[relay.Expr] = []
        for ref, spec in self._reads_from_outside(unit.nodes):
            var = relay.Var(f"{unit.name}_in{len(params)}", _relay_type(spec))
            params.append(var)
            if isinstance(ref, str):
                sub_inputs[ref] = var
                args.append(inputs[ref])
            else:
                sub_env[ref] = var
                args.append(env[ref])
        for node in unit.nodes:
            self._rebuild_node(node, sub_env, sub_inputs, None)
        output = unit.output
        if len(self.graph[output].outputs) != 1:
            raise PartitionLabError(f"pattern {unit.name} ends in an op with several outputs")
        func = relay.Function(params, sub_env[(output, 0)],
                              _relay_type(self.graph[output].outputs[0]))
        func = func.with_attr("Composite", unit.name)
        func = func.with_attr("PartitionedFromPattern",
                              "_".join(self.graph[n].op for n in unit.nodes) + "_")
        env[(output, 0)] = relay.Call(func, args)

    def _rebuild_node(self, node: int, env: Env, inputs: dict[str, relay.Var], side: Side) -> None:
        parts = self.rg.parts[node]
        args = [self._remap(arg, env, inputs, side) for arg in parts.args]
        # type_args stay empty: type inference fills them in for primitive ops.
        new_call: relay.Expr = relay.Call(parts.op, args, parts.attrs, None, parts.span)
        if side == "host":
            new_call = self._on_host(new_call)
        n_out = len(self.graph[node].outputs)
        if n_out == 1:
            env[(node, 0)] = new_call
        else:
            for i in range(n_out):
                env[(node, i)] = relay.TupleGetItem(new_call, i)

    def _remap(self, expr: relay.Expr, env: Env, inputs: dict[str, relay.Var],
               side: Side = None) -> relay.Expr:
        """``expr`` (an argument in the original graph) over the new module's values, as a
        consumer on ``side`` of the host/GPU boundary reads it (None: no boundary marks)."""
        if isinstance(expr, relay.Call):
            node = self.rg.node_of(expr)
            n_out = len(self.graph[node].outputs)
            if n_out == 1:
                return self._tensor_for((node, 0), env[(node, 0)], side)
            return relay.Tuple([self._tensor_for((node, i), env[(node, i)], side)
                                for i in range(n_out)])
        if isinstance(expr, relay.TupleGetItem):
            value = expr.tuple_value
            if isinstance(value, relay.Call):
                ref = (self.rg.node_of(value), expr.index)
                return self._tensor_for(ref, env[ref], side)
            if isinstance(value, relay.Tuple):
                # An item of a tuple literal is what it holds (ToMixedPrecision writes
                # ``(c, %6).0``): the other items may be in another region, so remapping the
                # whole tuple would read them here.
                return self._remap(array_items(value.fields)[expr.index], env, inputs, side)
            return relay.TupleGetItem(self._remap(value, env, inputs, side), expr.index)
        if isinstance(expr, relay.Tuple):
            return relay.Tuple([self._remap(f, env, inputs, side)
                                for f in array_items(expr.fields)])
        if isinstance(expr, relay.Var):
            return self._input_for(expr.name_hint, inputs.get(expr.name_hint, expr), side)
        return expr  # constants


def _next(counters: dict[str, int], key: str) -> int:
    value = counters.get(key, 0)
    counters[key] = value + 1
    return value


def _relay_type(spec: TensorType) -> relay.TensorType:
    return relay.TensorType(spec.shape, spec.dtype)
