"""``partition(mod, target)``: the one call most users need, and its companions.

A thin face over :mod:`partition_lab.pipeline`, which is written once for every IR: the module
decides its adapter (Relay for TVM 0.19, Relax for apache-tvm >= 0.20). Data flows one way:
module -> (prepared for the target) -> OpGraph -> support verdicts -> strategy ->
PartitionPlan (validated) -> partitioned module, with the cost model's explanation alongside.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .pipeline import Analysis, PartitionResult, adapter_for, analyze, compare, partition
from .pipeline.adapters import main_function_module
from .pipeline.options import name_list, placed_hazards
from .targets.devices import keep_fp32_on_overflow, with_compiler

__all__ = ["Analysis", "PartitionResult", "analyze", "bind_params", "check_module", "compare",
           "is_relax_module", "keep_fp32_on_overflow", "name_list", "partition",
           "placed_hazards", "with_compiler"]


def check_module(mod: object) -> None:
    """:class:`~partition_lab.errors.ArgumentError` unless ``mod`` is a module an IR adapter
    takes (an IRModule with a ``main`` function of its IR)."""
    adapter_for(mod).check(mod)


def bind_params(mod: Any, params: Mapping[str, Any] | None) -> Any:
    """``mod`` with ``params`` bound as constants, by the module's own IR adapter.

    Raises :class:`~partition_lab.errors.ArgumentError` when ``params`` is not a mapping or
    names a parameter ``main`` does not have.
    """
    return adapter_for(mod).bind_params(mod, params)


def is_relax_module(mod: Any) -> bool:
    """Whether ``mod`` is a Relax module (its ``main`` a ``relax.Function``)."""
    return main_function_module(mod).startswith("tvm.relax")
