"""``RunCodegen`` consumes a ``tvm:<backend>`` plan's module: a test codegen registered as
``relax.ext.<backend>`` builds each region it is handed for llvm (the region's composites
lifted and unmarked) and serves it under the region's symbol; the built module computes what
the unpartitioned one does."""

from __future__ import annotations

import models
import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm import relax

import partition_lab
from partition_lab.relax.runtime import as_plain_module, run_llvm


def _delegating_codegen(calls: list[str]):
    def codegen(funcs, options, constant_names):
        modules = []
        for func in funcs:
            symbol = str(func.attrs["global_symbol"])
            region = as_plain_module(tvm.IRModule({"main": func.with_attr("global_symbol",
                                                                          "main")}))
            vm = relax.VirtualMachine(tvm.compile(region, target="llvm"), tvm.cpu())

            def run(*args, vm=vm, symbol=symbol):
                *inputs, out = args  # call_dps_packed: the output tensor comes last
                calls.append(symbol)
                vm["main"](*inputs).copyto(out)

            tvm_ffi.register_global_func(symbol, run, override=True)
            modules.append(tvm.get_global_func("runtime.CSourceModuleCreate")(
                f"// {symbol}\n", "c", [symbol], []))
        return modules

    return codegen


@pytest.mark.parametrize("backend, model", [("tensorrt", "convnet"), ("nnapi", "mlp"),
                                            ("coreml", "resblock")])
def test_run_codegen_consumes_the_plan_and_the_build_computes_the_same(backend, model) -> None:
    mod, params = partition_lab.load_model(models.MODELS[model]())
    result = partition_lab.partition(mod, f"tvm:{backend}", params=params, strategy="greedy")
    regions = [str(f.attrs["global_symbol"]) for _, f in result.mod.functions_items()
               if f.attrs is not None and "Codegen" in f.attrs.keys()]
    assert regions
    calls: list[str] = []
    tvm_ffi.register_global_func(f"relax.ext.{backend}", _delegating_codegen(calls),
                                 override=True)
    lowered = relax.transform.RunCodegen()(result.mod)
    assert len(lowered.attrs["external_mods"]) == len(regions)
    vm = relax.VirtualMachine(tvm.compile(lowered, target="llvm"), tvm.cpu())
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal([int(d) for d in p.ty.shape.values]).astype("float32")
              for p in result.prepared_mod["main"].params]
    got = vm["main"](*[tvm.runtime.tensor(x) for x in inputs])
    got = [got.numpy()] if hasattr(got, "numpy") else [t.numpy() for t in got]
    expected = run_llvm(result.prepared_mod, inputs)
    assert sorted(set(calls)) == sorted(regions)  # every region ran through the codegen's build
    for a, b in zip(got, expected, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
