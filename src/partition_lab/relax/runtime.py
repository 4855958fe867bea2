"""Run a partitioned Relax module on TVM's llvm backend: the stand-in for accelerator codegens.

:func:`as_plain_module` turns every ``Codegen`` function into an ordinary Relax function (its
``Composite`` functions lifted and unmarked), so ``tvm.compile`` builds the whole module for the
CPU; comparing its outputs with the unpartitioned module's checks that outlining kept the
computation (the Relay adapter's ``relay/runtime.py`` does the same for Relay).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import tvm
from tvm import relax

BYOC_ATTRS = ("Codegen", "Composite")


def as_plain_module(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` without BYOC marks: Codegen functions become plain functions TVM compiles."""
    mod = _strip(mod)
    mod = relax.transform.LambdaLift()(mod)  # the local Composite functions become globals
    return _strip(mod)


def _strip(mod: tvm.IRModule) -> tvm.IRModule:
    functions = {}
    for gvar, func in mod.functions.items():
        if isinstance(func, relax.Function) and func.attrs is not None:
            for key in BYOC_ATTRS:
                if key in func.attrs.keys():
                    func = func.without_attr(key)
        functions[gvar] = func
    stripped = tvm.IRModule(functions)
    return stripped.with_attrs(mod.attrs) if mod.attrs is not None else stripped


def run_llvm(mod: tvm.IRModule, inputs: Sequence[np.ndarray] | Mapping[str, np.ndarray]
             ) -> list[np.ndarray]:
    """Compile ``mod`` (BYOC marks stripped) for llvm and run ``main`` on ``inputs``."""
    target = tvm.target.Target({"kind": "llvm"})
    executable = tvm.compile(as_plain_module(mod), target=target)
    vm = relax.VirtualMachine(executable, tvm.cpu())
    if isinstance(inputs, Mapping):
        inputs = [inputs[p.name] for p in mod["main"].params]
    result = vm["main"](*[tvm.runtime.tensor(np.asarray(x), tvm.cpu()) for x in inputs])
    return _flatten(result)


def _flatten(value: Any) -> list[np.ndarray]:
    if hasattr(value, "numpy"):
        return [value.numpy()]
    return [array for item in value for array in _flatten(item)]
