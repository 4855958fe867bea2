"""The partitioned program, run region by region (RegionExecutor), computes what the original
computes: every zoo model's small variant, both frontends, every accelerator platform."""

from __future__ import annotations

import numpy as np
import pytest
import tvm

import partition_lab
from partition_lab import zoo
from partition_lab.relay.runtime import RegionExecutor, run_module

ACCEL_TARGETS = ["neuron", "neuron@2020", "tensorcore"]
# fp32 plans: the partitioned program run region by region by TVM (llvm) against the framework
# that defined the model (MXNet, or onnxruntime for the ONNX file) on the same weights.
RTOL, ATOL = 1e-4, 1e-4
# fp16 plans (tensorcore converts the model to float16): against the unpartitioned fp16 module
# built by TVM; only fusion boundaries differ, but fp16 rounding then differs slightly too.
FP16_RTOL, FP16_ATOL = 2e-2, 2e-2


def compiler_functions(mod: tvm.IRModule) -> list:
    return [mod[g] for g in mod.get_global_vars()
            if mod[g].attrs is not None and "Compiler" in mod[g].attrs.keys()]


def byoc_regions(plan) -> list:
    """Regions outlined as Compiler functions (on BYOC devices, not on a main target's cores)."""
    return [r for r in plan.regions if plan.platform.device(r.device).outlined]


@pytest.mark.parametrize("frontend", ["mxnet", "onnx"])
@pytest.mark.parametrize("model", zoo.names())
def test_partitioned_small_model_computes_the_same(model: str, frontend: str) -> None:
    """Every accelerator platform: the plan validates and the partitioned program's outputs match.

    Platforms that yield the same plan (often neuron and neuron@2020) are executed once; a plan
    whose code all stays inline in one device (no Compiler function, no host island marked on
    a GPU) must leave the module unchanged, which is checked structurally.
    """
    mod, params = zoo.load(model, frontend=frontend, small=True)
    inputs = zoo.sample_inputs(model, small=True)
    executed: set = set()
    for target in ACCEL_TARGETS:
        result = partition_lab.partition(mod, target, params=params, name=model)
        result.plan.validate()
        outlined = byoc_regions(result.plan)
        assert len(compiler_functions(result.mod)) == len(outlined)
        if not outlined and len({r.device for r in result.plan.regions}) == 1:
            assert tvm.ir.structural_equal(result.mod["main"], result.prepared_mod["main"])
            continue
        fp16 = any(t.spec.dtype == "float16" for t in result.graph.tensors)
        key = (fp16, tuple(sorted((r.device == "cpu", r.nodes) for r in result.plan.regions)))
        if key in executed:
            continue
        executed.add(key)
        got = RegionExecutor(result, opt_level=0).run(inputs)
        if fp16:
            expected = run_module(result.prepared_mod, inputs, opt_level=0)
            rtol, atol = FP16_RTOL, FP16_ATOL
        else:
            expected = zoo.reference_outputs(model, inputs, small=True, frontend=frontend)
            rtol, atol = RTOL, ATOL
        assert len(got) == len(expected), target
        for g, e in zip(got, expected, strict=True):
            np.testing.assert_allclose(g.astype("float32"), e.astype("float32"), rtol=rtol, atol=atol,
                                       err_msg=f"{model} {frontend} {target}")
