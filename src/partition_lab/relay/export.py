"""A partitioned module a BYOC codegen can take away: one Relay text file, weights included.

:func:`export_partitioned` writes the partitioned module of a :func:`~partition_lab.partition`
result as Relay text *with* its metadata section, so every weight travels with it (the plan's
``.relay`` file elides them and is for reading only). Each accelerator region is written as a
function literal inside ``main`` that keeps its ``Compiler``, ``global_symbol``, ``Primitive``
and ``Inline`` attributes. That form is what both readers keep:

* ``partition_lab.load_model(path)`` returns it (its Relay text reader keeps only ``main``);
* ``tvm.relay.fromtext(text)`` parses it, and ``relay.build`` outlines the functions again
  (``OutlineCompilerFunctionsWithExistingGlobalSymbols``) and hands each to the codegen
  registered as ``relay.ext.<Compiler>``.

:func:`read_partitioned` reads the file back in the global-function form
``relay.transform.PartitionGraph`` produces (what ``PartitionResult.mod`` is).

Example (a codegen named ``mycomp`` registered with ``tvm.register_func("relay.ext.mycomp")``)::

    result = partition_lab.partition(mod, "neuron", params=params, compiler="mycomp")
    export_partitioned(result.mod, "model.partitioned.relay")
    mod, _ = partition_lab.load_model("model.partitioned.relay")
    lib = relay.build(mod, "llvm")
"""

from __future__ import annotations

import os
from pathlib import Path

import tvm
from tvm import relay

from .._io import write_atomic
from ..errors import ModelFormatError, PartitionLabError
from ._names import printable

SUFFIX = ".relay"


def inline_regions(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` with every global function called from ``main`` inlined as a function literal.

    The literals keep their attributes (``Compiler``, ``global_symbol``...), so TVM outlines the
    ``Compiler`` ones again when it builds the module.
    """

    class _Inline(relay.ExprMutator):
        def visit_global_var(self, gvar: tvm.ir.GlobalVar) -> relay.Expr:
            return self.visit(mod[gvar])

    main = _Inline().visit(mod["main"])
    return relay.transform.InferType()(tvm.IRModule.from_expr(main))


def outline_compiler_functions(mod: tvm.IRModule) -> tvm.IRModule:
    """The inverse of :func:`inline_regions` for ``Compiler`` functions: each becomes a global
    function named by its ``global_symbol`` (TVM's own pass)."""
    mod = relay.transform.OutlineCompilerFunctionsWithExistingGlobalSymbols()(mod)
    return relay.transform.InferType()(mod)


def relay_text(mod: tvm.IRModule, show_meta_data: bool = False) -> str:
    """``mod.astext()`` with the names a model file gave escaped (:mod:`._names`): a node or
    input name cannot add code to the text or keep it from being read back."""
    return printable(mod).astext(show_meta_data=show_meta_data)


def partitioned_text(mod: tvm.IRModule) -> str:
    """The Relay text of :func:`export_partitioned`: regions inlined, metadata (weights) kept."""
    return relay_text(inline_regions(mod), show_meta_data=True)


def export_partitioned(mod: tvm.IRModule, path: str | os.PathLike[str]) -> Path:
    """Write ``mod`` (a partitioned module) to ``path`` (``.relay``), weights included.

    The file is written atomically. Returns the path. Raises PartitionLabError for another
    suffix or a missing directory.
    """
    target = Path(path)
    if target.suffix != SUFFIX:
        raise PartitionLabError(f"cannot export to {target}: the file must end in {SUFFIX}")
    if not target.parent.is_dir():
        raise PartitionLabError(f"cannot export to {target}: directory {target.parent} "
                                "does not exist")
    write_atomic(target, partitioned_text(mod).encode("utf-8"))
    return target


def read_partitioned(path: str | os.PathLike[str]) -> tvm.IRModule:
    """A file written by :func:`export_partitioned`, in the global-function form (each region a
    global ``Compiler`` function, as ``PartitionResult.mod`` has it).

    Raises ModelFormatError when the file is not Relay text.
    """
    source = Path(path)
    try:
        mod = tvm.relay.fromtext(source.read_text(encoding="utf-8"), source_name=str(source))
    except (tvm.error.TVMError, UnicodeDecodeError) as exc:
        raise ModelFormatError(f"{str(source)!r} is not a partitioned module written by "
                               "export_partitioned (not valid Relay text)") from exc
    return outline_compiler_functions(mod)


def compiler_names(mod: tvm.IRModule) -> dict[str, str]:
    """``{global_symbol: Compiler}`` of a module's BYOC functions, global or inline."""
    found: dict[str, str] = {}

    def visit(expr: relay.Expr) -> None:
        if isinstance(expr, relay.Function) and expr.attrs is not None and \
                "Compiler" in expr.attrs.keys():
            found[str(expr.attrs["global_symbol"])] = str(expr.attrs["Compiler"])

    for gvar, func in mod.functions.items():
        if isinstance(func, relay.Function):
            if func.attrs is not None and "Compiler" in func.attrs.keys():
                found[gvar.name_hint] = str(func.attrs["Compiler"])
            relay.analysis.post_order_visit(func, visit)
    return found
