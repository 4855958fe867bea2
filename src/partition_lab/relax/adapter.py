"""The Relax adapter (apache-tvm >= 0.20): what :mod:`partition_lab.pipeline` asks of an IR, for
Relax.

Checks and binding (:func:`check_module`, :func:`.prepare.bind_params`), preparation with Relax
passes (:mod:`.prepare`; source names taken first, since the passes drop spans, and the
constants past float16 noted for the hazard check), the OpGraph with Relay op names
(:mod:`.graph`, :mod:`.op_map`), outlining into ``Codegen``/``Composite`` functions
(:mod:`.outline`) and the measured choice's runner (plans built by TVM, :mod:`.timing`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import tvm
from tvm import relax

from ..core.hazards import NumericHazard
from ..core.plan import PartitionPlan
from ..errors import ArgumentError, PartitionLabError
from . import timing
from .byoc import remember
from .byoc.form import plan_module
from .graph import RelaxGraph, relax_graph, source_names
from .outline import OutlinedFunction, outline_regions
from .prepare import bind_params, large_constants, overflow_hazards, prepare


def check_module(mod: object) -> None:
    """:class:`ArgumentError` unless ``mod`` is an IRModule whose ``main`` is a Relax function."""
    if not isinstance(mod, tvm.IRModule):
        raise ArgumentError(
            f"mod must be a tvm.IRModule (as load_model returns it), not {type(mod).__name__}; "
            "load the model first: mod, params = partition_lab.load_model(path)")
    if "main" not in [gvar.name_hint for gvar in mod.get_global_vars()]:
        raise ArgumentError("mod has no 'main' function; partition_lab partitions main")
    if not isinstance(mod["main"], relax.Function):
        raise ArgumentError(f"mod's main is a {type(mod['main']).__name__}, not a Relax "
                            "function")


@dataclass
class _Prepared:
    """What :meth:`RelaxAdapter.read_graph` needs besides the prepared module."""

    hints: list[tuple[str, str | None]]  # (relax op, source name) before the passes
    large: list[tuple[str, str | None, float]]  # constants past float16 before the passes
    hazards: list[NumericHazard]  # the pipeline's list, filled once the graph is read


class RelaxAdapter:
    """:class:`~partition_lab.pipeline.adapters.IRAdapter` for Relax modules."""

    name = "relax"

    def check(self, mod: Any) -> None:
        check_module(mod)

    def module_name(self, mod: Any) -> str:
        attrs = mod.attrs
        if attrs is not None and "partition_lab.name" in attrs.keys():
            return str(attrs["partition_lab.name"])
        return ""

    def bind_params(self, mod: Any, params: Mapping[str, Any] | None) -> tvm.IRModule:
        return bind_params(mod, params)

    def prepare(self, mod: Any, params: Mapping[str, Any] | None, steps: Sequence[str],
                keep_fp32: bool, hazards: list[NumericHazard]) -> tuple[tvm.IRModule, _Prepared]:
        if keep_fp32:
            raise PartitionLabError(
                "keep_fp32_on_overflow is not implemented for Relax modules: Relax's "
                "ToMixedPrecision has no per-op float32 fallback here; leave it False (each "
                "overflow is still named in the plan) or partition the model through Relay")
        mod = bind_params(mod, params)
        # Taken before the passes: ConvertLayout and ToMixedPrecision drop spans and fold casts.
        context = _Prepared(source_names(mod), large_constants(mod), hazards)
        return prepare(mod, steps), context

    def read_graph(self, prepared: tvm.IRModule, context: _Prepared, name: str) -> RelaxGraph:
        rg = relax_graph(prepared, name=name, hints=context.hints)
        context.hazards.extend(overflow_hazards(rg, context.large))
        return remember(rg)  # for the tvm:<backend> targets, which judge the Relax module

    def outline(self, ir: RelaxGraph, plan: PartitionPlan
                ) -> tuple[tvm.IRModule, dict[str, OutlinedFunction]]:
        # a tvm:<backend> plan: in its partition_for_*'s form, by TVM's own passes
        return plan_module(ir, plan) or outline_regions(ir, plan)

    def choice_runner(self, ir: RelaxGraph, device: str, seconds: float,
                      shares: tuple[float, float]) -> tuple[str, Callable[[], dict[str, Any]]]:
        def make() -> dict[str, Any]:  # builds the plans: only when no kept decision is reused
            screen, confirm = timing.tvm_timers(ir, device=device, max_seconds=seconds,
                                                shares=shares)
            return {"timer": screen, "confirm_timer": confirm,
                    "runner": f"tvm-built ({key})"}

        key = timing.runner_key(device)
        return key, make


ADAPTER = RelaxAdapter()
