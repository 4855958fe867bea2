"""Outline a plan's regions into Relax functions, in the form Relax's BYOC produces.

``FuseOpsByPattern -> MergeCompositeFunctions`` (TVM's own Relax BYOC) leaves, per accelerator
region, a global function with the attributes ``Codegen=<backend>`` and ``global_symbol``, whose
body calls one local function per matched pattern, each with ``Composite=<backend>.<pattern>``;
``relax.transform.RunCodegen`` hands those functions to the codegen registered as
``relax.ext.<backend>``. This module writes the same form from a :class:`PartitionPlan`:

* a region on a ``byoc`` device becomes ``<compiler>_region_<i>`` (``Codegen=<compiler>``);
  each pattern unit of the plan inside it is a ``Composite=<compiler>.<pattern>`` function and
  each other op a ``Composite=<compiler>.<relax op>`` function of one call (a codegen sees every
  op through a composite, as after MergeCompositeFunctions);
* regions of the main target (the GPU's CUDA cores on ``tensorcore``) and host islands stay
  inline in ``main``, left to TVM's own build, without device annotations; the heterogeneous
  build of a plan (VDevices: GPU regions on cuda, host islands on llvm, one ``tvm.compile``) is
  :mod:`.vdevice`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import networkx as nx
import tvm
from tvm import relax

from ..core.graph import TensorType
from ..core.patterns import Unit
from ..core.plan import PartitionPlan, Region
from ..core.platform import Device, compiler_name
from ..errors import PartitionLabError
from .graph import RelaxGraph, is_tensor_constant

Env = dict[tuple[int, int], Any]  # (node, output index) -> the value in the new module


@dataclass(frozen=True)
class OutlinedFunction:
    """One ``Codegen`` function of an outlined module: the region it holds and its device."""

    symbol: str
    region: Region
    device: Device
    compiler: str


def outline(rg: RelaxGraph, plan: PartitionPlan) -> tvm.IRModule:
    """The partitioned module for ``plan`` (a plan of ``rg.graph``)."""
    return outline_regions(rg, plan)[0]


def outline_regions(rg: RelaxGraph, plan: PartitionPlan
                    ) -> tuple[tvm.IRModule, dict[str, OutlinedFunction]]:
    """:func:`outline`, plus each ``Codegen`` function's region and device, by symbol."""
    return _Outliner(rg, plan).run()


def tensor_type(spec: TensorType) -> relax.TensorType:
    return relax.TensorType(list(spec.shape), spec.dtype)


class _Outliner:
    def __init__(self, rg: RelaxGraph, plan: PartitionPlan) -> None:
        self.rg, self.plan, self.graph = rg, plan, rg.graph
        self.platform = plan.platform
        # The module's other functions (the PrimFuncs a host-side relax.call_tir calls) go
        # along under the same GlobalVars; only main is rebuilt.
        others = {gv: f for gv, f in rg.module.functions.items() if gv.name_hint != "main"}
        self.bb = relax.BlockBuilder(tvm.IRModule(others) if others else None)
        self.params = {p.name: p for p in rg.function.params}

    def run(self) -> tuple[tvm.IRModule, dict[str, OutlinedFunction]]:
        order = list(nx.lexicographical_topological_sort(self.plan.region_graph()))
        outlined: dict[str, OutlinedFunction] = {}
        gvars: dict[int, Any] = {}
        counters: dict[str, int] = {}
        for region_id in order:  # the Codegen functions first: main calls them
            region = self.plan.regions[region_id]
            device = self.platform.device(region.device)
            if not device.outlined:
                continue
            compiler = device.compiler or compiler_name(device.name)
            symbol = f"{compiler}_region_{counters.setdefault(compiler, 0)}"
            counters[compiler] += 1
            func = self._codegen_function(region.nodes, symbol, compiler)
            gvars[region_id] = self.bb.add_func(func, symbol)
            outlined[symbol] = OutlinedFunction(symbol, region, device, compiler)
        self._main(order, gvars)
        mod = self.bb.get()
        for key in ("partition_lab.name",):
            attrs = self.rg.module.attrs
            if attrs is not None and key in attrs.keys():
                mod = mod.with_attr(key, attrs[key])
        return mod, outlined

    # ------------------------------------------------------------------ main
    def _main(self, order: Sequence[int], gvars: dict[int, Any]) -> None:
        func = self.rg.function
        params = [relax.Var(p.name, p.ty) for p in func.params]
        inputs = dict(zip([p.name for p in func.params], params, strict=True))
        attrs = {k: func.attrs[k] for k in func.attrs.keys()} if func.attrs is not None else {}
        attrs.pop("global_symbol", None)
        env: Env = {}
        with self.bb.function("main", params, attrs or None):
            with self.bb.dataflow():
                for region_id in order:
                    region = self.plan.regions[region_id]
                    if region_id in gvars:
                        self._call_region(region.nodes, gvars[region_id], env, inputs)
                    else:
                        for node in region.nodes:
                            self._emit_node(node, env, inputs)
                result = self.bb.emit_output(self._remap(func.body.body, env, inputs))
            self.bb.emit_func_output(result)

    def _call_region(self, nodes: Sequence[int], gvar: Any, env: Env, inputs: dict) -> None:
        args = [inputs[ref] if isinstance(ref, str) else env[ref]
                for ref, _ in self._reads_from_outside(nodes)]
        outputs = self._region_outputs(nodes)
        call = self.bb.emit(relax.Call(gvar, args), name_hint=gvar.name_hint)
        for k, ref in enumerate(outputs):
            env[ref] = call if len(outputs) == 1 else self.bb.emit(relax.TupleGetItem(call, k))

    def _emit_node(self, node: int, env: Env, inputs: dict, output: bool = False) -> None:
        binding = self.rg.bindings[node]
        call = binding.value
        args = [self._remap(a, env, inputs) for a in call.args]
        new = relax.Call(call.op, args, call.attrs, call.ty_args, call.span)
        emit = self.bb.emit_output if output else self.bb.emit
        var = emit(new, name_hint=binding.var.name)
        n_out = len(self.graph[node].outputs)
        if isinstance(call.ty, relax.TupleType):
            for i in range(n_out):
                env[(node, i)] = relax.TupleGetItem(var, i)
        else:
            env[(node, 0)] = var

    @staticmethod
    def _parameters(reads: Sequence[tuple[Any, Any]], prefix: str
                    ) -> tuple[list[Any], Env, dict[str, Any]]:
        """One parameter ``<prefix><k>`` per tensor a group of nodes reads from outside, and
        where each stands: ``env`` for node outputs, ``inputs`` for the graph's inputs (by
        name)."""
        params = [relax.Var(f"{prefix}{k}", tensor_type(spec)) for k, (_, spec) in enumerate(reads)]
        env: Env = {}
        inputs: dict[str, Any] = {}
        for (ref, _), var in zip(reads, params, strict=True):
            if isinstance(ref, str):
                inputs[ref] = var
            else:
                env[ref] = var
        return params, env, inputs

    # ------------------------------------------------------------------ Codegen functions
    def _codegen_function(self, nodes: Sequence[int], symbol: str, compiler: str) -> Any:
        """``symbol(inputs) -> outputs`` with ``Codegen=compiler``, one composite call per
        pattern unit or op."""
        reads = self._reads_from_outside(nodes)
        params, env, inputs = self._parameters(reads, f"{symbol}_in")
        units = self._units_in(set(nodes))
        composites = [(unit.nodes, f"{compiler}.{unit.name}") for unit in units]
        in_unit = {n for unit in units for n in unit.nodes}
        composites += [((n,), f"{compiler}.{self._op_label(n)}") for n in nodes if n not in in_unit]
        composites.sort(key=lambda item: max(item[0]))  # every operand emitted before its use
        bb = relax.BlockBuilder()
        with bb.function(symbol, params, {"Codegen": compiler, "global_symbol": symbol}):
            for members, name in composites:
                self._composite(bb, members, name, env, inputs)
            outputs = self._region_outputs(nodes)
            values = [env[ref] for ref in outputs]
            bb.emit_func_output(values[0] if len(values) == 1 else relax.Tuple(values))
        return bb.get()[symbol]

    def _composite(self, bb: Any, members: Sequence[int], name: str, env: Env,
                   inputs: dict) -> None:
        """``members`` as a call of a local ``Composite=name`` function."""
        reads = self._reads_from_outside(members)
        params = [relax.Var(f"in{k}", tensor_type(spec)) for k, (_, spec) in enumerate(reads)]
        sub_env: Env = {}
        sub_inputs: dict[str, Any] = {}
        args = []
        for (ref, _), var in zip(reads, params, strict=True):
            if isinstance(ref, str):
                sub_inputs[ref] = var
                args.append(inputs[ref])
            else:
                sub_env[ref] = var
                args.append(env[ref])
        outputs = self._region_outputs(members, within=set(members))
        inner = relax.BlockBuilder()
        with inner.function("composite", params, {"Composite": name}, private=True):
            with inner.dataflow():
                last = members[-1]
                single = len(outputs) == 1 and outputs[0][0] == last
                for node in members:
                    self._emit_into(inner, node, sub_env, sub_inputs, output=single and node == last)
                values = [sub_env[ref] for ref in outputs]
                result = values[0] if single else inner.emit_output(
                    values[0] if len(values) == 1 else relax.Tuple(values))
            inner.emit_func_output(result)
        func = inner.get()["composite"]
        call = bb.emit(relax.Call(func, args), name_hint=name.split(".", 1)[1].replace(".", "_"))
        for k, ref in enumerate(outputs):
            env[ref] = call if len(outputs) == 1 else bb.emit(relax.TupleGetItem(call, k))

    def _emit_into(self, bb: Any, node: int, env: Env, inputs: dict, output: bool) -> None:
        saved, self.bb = self.bb, bb
        try:
            self._emit_node(node, env, inputs, output)
        finally:
            self.bb = saved

    # ------------------------------------------------------------------ pieces
    def _op_label(self, node: int) -> str:
        return self.rg.relax_ops[node].removeprefix("relax.")

    def _units_in(self, members: set[int]) -> list[Unit]:
        return [unit for unit in self.plan.support.units if members.issuperset(unit.nodes)]

    def _reads_from_outside(self, nodes: Sequence[int]) -> list[tuple[Any, TensorType]]:
        """The tensors ``nodes`` read from outside them (:meth:`OpGraph.reads_from_outside`)."""
        return self.graph.reads_from_outside(sorted(set(nodes)))

    def _region_outputs(self, nodes: Sequence[int], within: set[int] | None = None
                        ) -> list[tuple[int, int]]:
        """Tensors of ``nodes`` used outside them (or returned by the graph), in order."""
        members = within if within is not None else set(nodes)
        return [(t.producer, t.index) for node in sorted(members)
                for t in self.graph.tensors_of(node)
                if t.is_output or any(c not in members for c in t.consumers)]

    def _remap(self, expr: Any, env: Env, inputs: dict) -> Any:
        """``expr`` (an argument in the original function) over the new module's values."""
        if expr in self.rg.node_of_var:
            node = self.rg.node_of_var[expr]
            if isinstance(self.rg.bindings[node].value.ty, relax.TupleType):
                return relax.Tuple([env[(node, i)] for i in range(len(self.graph[node].outputs))])
            return env[(node, 0)]
        if expr in self.rg.glue:
            return self._remap(self.rg.glue[expr], env, inputs)
        if isinstance(expr, relax.TupleGetItem):
            value = expr.tuple_value
            if value in self.rg.node_of_var:
                return env[(self.rg.node_of_var[value], expr.index)]
            if isinstance(value, relax.Tuple):
                return self._remap(value.fields[expr.index], env, inputs)
            return relax.TupleGetItem(self._remap(value, env, inputs), expr.index)
        if isinstance(expr, relax.Tuple):
            return relax.Tuple([self._remap(f, env, inputs) for f in expr.fields])
        if isinstance(expr, tvm.ir.Var) and expr.name in self.params and \
                self.params[expr.name].same_as(expr):
            if expr.name not in inputs:
                raise PartitionLabError(f"input {expr.name!r} is not an input of this function")
            return inputs[expr.name]
        if is_tensor_constant(expr) or not isinstance(expr, tvm.ir.Var):
            return expr  # constants, shapes, scalars
        raise PartitionLabError(f"unbound variable {expr.name} while outlining")
