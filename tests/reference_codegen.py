"""A reference BYOC codegen registered as ``relay.ext.plab_test_codegen``: importing this
module registers it (the export tests build partitioned modules with it)."""

from __future__ import annotations

import tvm
from tvm import relay

from partition_lab.relay.runtime import BUILD_CONFIG

CODEGEN = "plab_test_codegen"
compiled: list[str] = []  # the global symbols the test codegen was asked to compile


@tvm.register_func(f"relay.ext.{CODEGEN}", override=True)
def _codegen(func: relay.Function) -> tvm.runtime.Module:
    """A reference BYOC codegen: lowers the region with TVM's own TE compiler for llvm and
    exports it under the region's global_symbol (the calling convention of external functions:
    inputs then outputs as DLTensors)."""
    symbol = str(func.attrs["global_symbol"])
    compiled.append(symbol)
    plain = relay.Function(func.params, func.body, func.ret_type)
    plain = plain.with_attr("Primitive", tvm.tir.IntImm("int32", 1))
    mod = relay.transform.InferType()(tvm.IRModule.from_expr(plain))
    target = tvm.target.Target("llvm")
    lowered = relay.backend.te_compiler.get().lower(mod["main"], target)
    (prim,) = [f for _, f in lowered.funcs.functions.items()]
    with tvm.transform.PassContext(config=BUILD_CONFIG):
        return tvm.build(tvm.IRModule({symbol: prim.with_attr("global_symbol", symbol)}),
                         target=target)
