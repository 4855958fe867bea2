"""A ``tvm:<backend>`` plan's partitioned module in the form the backend's ``partition_for_*``
leaves, written by TVM's own passes.

The plan's units on the backend (one per composite, :mod:`.target`) are handed back to TVM's
``FuseOpsByPattern`` on the tagged module (:func:`.matching.tagged_module`), every pattern's
check replaced by "is this match exactly one of the plan's units of this pattern", with the
backend's own ``bind_constants`` / ``annotate_codegen`` and each pattern's ``attrs_getter``;
then what ``partition_for_*`` runs after it:

* ``MergeCompositeFunctions`` (tensorrt, nnapi, coreml): one ``Codegen=<backend>`` function per
  region, the composites local functions inside it;
* nothing (cublas, hipblas): one global ``Codegen`` function per composite, structurally equal
  ones shared, as ``annotate_codegen=True`` leaves them;
* ``annotate_workspace`` and ``AllocateWorkspace`` (cutlass, cudnn): the same, with the
  ``WorkspaceSize`` attributes and the workspace ``main`` allocates.

Where the plan keeps everything greedy takes this is ``partition_for_*``'s own output (tested);
for another plan it is the same passes on fewer composites. :func:`backend_module` returns None
where a function of the result spans two of the plan's regions (MergeCompositeFunctions joined
them): the caller then outlines the plan itself. A region whose parts no tensor connects (two
parallel branches) is one function per part, as MergeCompositeFunctions leaves it.
"""

from __future__ import annotations

import importlib
from collections import Counter
from typing import Any

import tvm
from tvm import relax

from ...core.plan import PartitionPlan
from ...core.platform import Device
from ..graph import RelaxGraph
from ..outline import OutlinedFunction
from .backends import Backend
from .matching import _context_nodes, nodes_in, tagged_module
from .target import TvmBackendTarget


def backend_module(rg: RelaxGraph, plan: PartitionPlan, device: Device, spec: Backend,
                   patterns: list[Any], bind_constants: bool
                   ) -> tuple[tvm.IRModule, dict[str, OutlinedFunction]] | None:
    """The partitioned module of ``plan`` in ``partition_for_<backend>``'s form (see the module
    docstring), ``device`` the platform's device of the backend, with each ``Codegen``
    function's region; None where it cannot hold the plan's regions."""
    wanted: dict[frozenset[int], str] = {}
    for unit in plan.support.units:
        if all(plan.device_of(n) == device.name for n in unit.nodes):
            wanted[frozenset(unit.nodes)] = f"{spec.name}.{unit.name}"
    on_backend = {n for n in range(len(rg.graph)) if plan.device_of(n) == device.name}
    if set().union(*wanted) != on_backend:
        return None  # an op on the backend outside every composite: not a table's plan
    mod = _passes(rg, spec, [_restricted(p, wanted) for p in patterns], bind_constants)
    if set(range(len(rg.graph))) - _left_in_main(mod) != on_backend:
        return None
    if not spec.per_composite:
        # the same passes with every composite distinct (TVM shares a function structurally
        # equal to one it has, so a shared composite's calls name only its first use): each
        # merged function's ops, exactly, must lie in one region of the plan
        marked = _passes(rg, spec, [_restricted(p, wanted, mark=True) for p in patterns],
                         bind_constants)
        for _, func in _codegen_functions(marked):
            if len({plan.region_of(n).id for n in nodes_in(func)}) > 1:
                return None  # MergeCompositeFunctions joined two of the plan's regions
    return mod, _functions(mod, plan, device, spec.name)


def _passes(rg: RelaxGraph, spec: Backend, patterns: list[Any], bind_constants: bool
            ) -> tvm.IRModule:
    """What ``partition_for_<backend>`` runs, on the tagged module, with ``patterns``."""
    mod = tagged_module(rg)
    if spec.canonicalize:
        mod = relax.transform.CanonicalizeBindings()(mod)
    mod = relax.transform.FuseOpsByPattern(patterns, bind_constants=bind_constants,
                                           annotate_codegen=spec.per_composite)(mod)
    if not spec.per_composite:
        mod = relax.transform.MergeCompositeFunctions()(mod)
    if spec.workspace:
        annotate = importlib.import_module(spec.module).annotate_workspace
        try:
            mod = annotate(mod)
        except KeyError:  # apache-tvm 0.27 keys its byte sizes by str, the dtype is a DataType
            mod = annotate_workspace(mod, spec.name)
        mod = relax.transform.AllocateWorkspace()(mod)
    return mod


def annotate_workspace(mod: tvm.IRModule, backend: str) -> tvm.IRModule:
    """What cutlass's and cudnn's ``annotate_workspace`` writes, the dtype read as its name:
    ``WorkspaceSize`` (the output's bytes) on each attention composite and on the Codegen
    function wrapping it (TVM's own raises ``KeyError: 'T.float16'`` on any attention in 0.27)."""
    mod = mod.clone() if hasattr(mod, "clone") else tvm.IRModule(dict(mod.functions_items()),
                                                                  attrs=mod.attrs)
    for gvar, func in _codegen_functions(mod):
        symbol = str(func.attrs["global_symbol"]) if "global_symbol" in func.attrs.keys() else ""
        blocks = func.body.blocks
        if backend not in symbol or not blocks or not blocks[0].bindings:
            continue
        first = blocks[0].bindings[0]
        composite = first.value
        if not (isinstance(composite, relax.Function) and composite.attrs is not None
                and "attention" in str(composite.attrs.get("Composite", ""))):
            continue
        ret = composite.ret_ty
        size: Any = 1
        for dim in ret.shape:
            size = size * dim
        size = size * {"float16": 2, "float32": 4}.get(str(ret.dtype), 4)
        size = int(size) if isinstance(size, int | tvm.tirx.expr.IntImm) else 8  # 8: dynamic
        composite = composite.with_attr("WorkspaceSize", size)
        bindings = [relax.VarBinding(first.var, composite), *blocks[0].bindings[1:]]
        kind = type(blocks[0])
        body = relax.SeqExpr([kind(bindings), *blocks[1:]], func.body.body)
        new = relax.Function(func.params, body, func.ret_ty, func.is_pure, func.attrs, func.span)
        mod[gvar] = new.with_attr("WorkspaceSize", size)
    return mod


def _restricted(pattern: Any, wanted: dict[frozenset[int], str], mark: bool = False) -> Any:
    """``pattern`` taking exactly the plan's units of it, with its own ``attrs_getter`` (and,
    with ``mark``, an attribute making each composite distinct)."""
    def check(context: Any) -> bool:
        return wanted.get(frozenset(_context_nodes(context))) == pattern.name

    own = getter = pattern.attrs_getter
    if mark:
        made = [0]

        def marked(annotated: Any) -> dict[str, str]:
            made[0] += 1
            found = dict(own(annotated)) if own is not None else {}
            return {**found, "partition_lab.composite": f"{pattern.name}#{made[0]}"}

        getter = marked
    return relax.transform.FusionPattern(pattern.name, pattern.pattern,
                                         pattern.annotation_patterns, check, getter)


def _codegen_functions(mod: tvm.IRModule) -> list[tuple[Any, Any]]:
    return [(gvar, func) for gvar, func in mod.functions_items()
            if isinstance(func, relax.Function) and func.attrs is not None
            and "Codegen" in func.attrs.keys()]


def _left_in_main(mod: tvm.IRModule) -> set[int]:
    """The tagged nodes ``main`` still computes itself (not through a Codegen function)."""
    left: set[int] = set()
    codegen = {gvar.name_hint for gvar, _ in _codegen_functions(mod)}
    for block in mod["main"].body.blocks:
        for binding in block.bindings:
            value = binding.value
            if not (isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.GlobalVar)
                    and value.op.name_hint in codegen):
                left.update(nodes_in(value))
    return left


def _functions(mod: tvm.IRModule, plan: PartitionPlan, device: Device, compiler: str
               ) -> dict[str, OutlinedFunction]:
    """Each ``Codegen`` function's symbol -> the region most of its ops lie in (a function
    TVM shares between structurally equal uses names its first use's)."""
    functions: dict[str, OutlinedFunction] = {}
    for gvar, func in _codegen_functions(mod):
        counts = Counter(plan.region_of(n).id for n in nodes_in(func))
        if not counts:
            continue
        region = plan.regions[counts.most_common(1)[0][0]]
        attrs = func.attrs
        symbol = str(attrs["global_symbol"]) if "global_symbol" in attrs.keys() \
            else gvar.name_hint
        functions[symbol] = OutlinedFunction(symbol, region, device, compiler)
    return functions


def plan_module(rg: RelaxGraph, plan: PartitionPlan
                ) -> tuple[tvm.IRModule, dict[str, OutlinedFunction]] | None:
    """:func:`backend_module` for a plan whose one outlined device is a ``tvm:<backend>``
    target (a ``tvm:`` platform, or a platform file naming one); None for any other platform
    (two outlined devices, say: the plan is then outlined by :mod:`..outline`)."""
    outlined = [d for d in plan.platform.devices if d.outlined]
    if len(outlined) != 1 or not isinstance(outlined[0].target, TvmBackendTarget):
        return None
    device, target = outlined[0], outlined[0].target
    if target.problem:
        return None
    bind = target.options.get("bind_constants", target.backend.bind_constants)
    return backend_module(rg, plan, device, target.backend, target.tvm_patterns, bind)
