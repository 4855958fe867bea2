"""Outline a plan's accelerator regions into Relay functions, as Relay's PartitionGraph does.

Each accelerator region becomes a global function with the attributes ``Compiler=<target>``,
``global_symbol=tvmgen_default_<target>_main_<i>``, ``Primitive=1`` and ``Inline=1`` (the form
``relay.transform.PartitionGraph`` produces, so BYOC codegens registered as
``relay.ext.<target>`` can consume it). ``main`` calls those functions; CPU islands stay in
``main`` as ordinary calls.
"""

from __future__ import annotations

import re

import networkx as nx
import tvm
from tvm import relay

from ..graph import TensorType
from ..plan import PartitionPlan
from ..relay_graph import RelayGraph, array_items

Env = dict[tuple[int, int], relay.Expr]


def compiler_name(target: str) -> str:
    """A valid C identifier for the target (``neuron@2020`` -> ``neuron_2020``)."""
    return re.sub(r"\W", "_", target)


def outline(rg: RelayGraph, plan: PartitionPlan, *, outline_cpu: bool = False) -> tvm.IRModule:
    """The partitioned module for ``plan`` (which must be a plan of ``rg.graph``).

    With ``outline_cpu`` the CPU islands become functions too (``cpu_island_<i>``, no Compiler
    attribute), so that ``main`` only calls regions; the region executor runs that form.
    """
    return _Outliner(rg, plan).run(outline_cpu)


class _Outliner:
    def __init__(self, rg: RelayGraph, plan: PartitionPlan) -> None:
        self.rg = rg
        self.plan = plan
        self.graph = rg.graph
        self.compiler = compiler_name(plan.target)

    def run(self, outline_cpu: bool) -> tvm.IRModule:
        new_params = [relay.Var(v.name_hint, v.type_annotation) for v in self.rg.function.params]
        inputs = {old.name_hint: new for old, new in zip(self.rg.function.params, new_params, strict=True)}
        env: Env = {}
        functions: dict[tvm.ir.GlobalVar, relay.Function] = {}
        order = nx.lexicographical_topological_sort(self.plan.region_graph())
        accel_index = cpu_index = 0
        for region_id in order:
            region = self.plan.regions[region_id]
            if region.is_accelerator:
                symbol = f"tvmgen_default_{self.compiler}_main_{accel_index}"
                accel_index += 1
                self._outline_region(region.nodes, symbol, env, inputs, functions, self.compiler)
            elif outline_cpu:
                symbol = f"cpu_island_{cpu_index}"
                cpu_index += 1
                self._outline_region(region.nodes, symbol, env, inputs, functions, None)
            else:
                for node in region.nodes:
                    self._rebuild_node(node, env, inputs)
        body = self._remap(self.rg.function.body, env, inputs)
        main = relay.Function(new_params, body, self.rg.function.ret_type,
                              self.rg.function.type_params, self.rg.function.attrs)
        # One type inference for the whole module: every region function declares its parameter
        # and return types, so main's calls to them type-check before their bodies are inferred.
        functions[tvm.ir.GlobalVar("main")] = main
        return relay.transform.InferType()(tvm.IRModule(functions))

    # ------------------------------------------------------------------ pieces
    def _outline_region(self, nodes, symbol, main_env: Env, main_inputs, functions,
                        compiler: str | None) -> None:
        members = set(nodes)
        local_env: Env = {}
        local_inputs: dict[str, relay.Var] = {}
        params: list[relay.Var] = []
        call_args: list[relay.Expr] = []
        # Inputs: every tensor a member consumes that is produced outside the region.
        for node in nodes:
            for pred in self.graph.predecessors(node):
                if pred in members:
                    continue
                for index in self.graph.nx.edges[pred, node]["indices"]:
                    if (pred, index) in local_env:
                        continue
                    var = relay.Var(f"{symbol}_in{len(params)}",
                                    _relay_type(self.graph[pred].outputs[index]))
                    local_env[(pred, index)] = var
                    params.append(var)
                    call_args.append(main_env[(pred, index)])
            for tensor in self.graph.graph_inputs.values():
                if node in tensor.consumers and tensor.input_name not in local_inputs:
                    var = relay.Var(f"{symbol}_in{len(params)}", _relay_type(tensor.spec))
                    local_inputs[tensor.input_name] = var
                    params.append(var)
                    call_args.append(main_inputs[tensor.input_name])
        for node in nodes:
            self._rebuild_node(node, local_env, local_inputs)
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
        call = relay.Call(gvar, call_args)
        for k, ref in enumerate(outputs):
            main_env[ref] = call if len(outputs) == 1 else relay.TupleGetItem(call, k)
        functions[gvar] = func

    def _rebuild_node(self, node: int, env: Env, inputs: dict[str, relay.Var]) -> None:
        parts = self.rg.parts[node]
        args = [self._remap(arg, env, inputs) for arg in parts.args]
        # type_args stay empty: type inference fills them in for primitive ops.
        new_call = relay.Call(parts.op, args, parts.attrs, None, parts.span)
        n_out = len(self.graph[node].outputs)
        if n_out == 1:
            env[(node, 0)] = new_call
        else:
            for i in range(n_out):
                env[(node, i)] = relay.TupleGetItem(new_call, i)

    def _remap(self, expr: relay.Expr, env: Env, inputs: dict[str, relay.Var]) -> relay.Expr:
        if isinstance(expr, relay.Call):
            node = self.rg.node_of(expr)
            n_out = len(self.graph[node].outputs)
            if n_out == 1:
                return env[(node, 0)]
            return relay.Tuple([env[(node, i)] for i in range(n_out)])
        if isinstance(expr, relay.TupleGetItem):
            value = expr.tuple_value
            if isinstance(value, relay.Call):
                return env[(self.rg.node_of(value), expr.index)]
            return relay.TupleGetItem(self._remap(value, env, inputs), expr.index)
        if isinstance(expr, relay.Tuple):
            return relay.Tuple([self._remap(f, env, inputs) for f in array_items(expr.fields)])
        if isinstance(expr, relay.Var):
            return inputs.get(expr.name_hint, expr)
        return expr  # constants


def _relay_type(spec: TensorType) -> relay.TensorType:
    return relay.TensorType(spec.shape, spec.dtype)
