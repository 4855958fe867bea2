"""``analyze`` and ``partition`` for a Relax module: the Relay pipeline's steps, Relax passes.

Relax module -> (weights bound, prepared for the platform) -> OpGraph (Relay op names, see
:mod:`.op_map`) -> support verdicts -> strategy -> validated PartitionPlan -> partitioned Relax
module (``Codegen``/``Composite`` functions, :mod:`.outline`). Everything between the OpGraph and
the plan is the TVM-free core, unchanged.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from os import PathLike
from typing import Any

import tvm

from ..api import Analysis, PartitionResult
from ..core.platform import Platform
from ..cost_models import ProfiledCostModel, pricing_model
from ..cost_models.base import CostModel, evaluate
from ..errors import PartitionLabError
from ..strategies import default_strategy, get_strategy
from ..targets import TargetSpec, get_platform
from ..targets.annotate import support_table
from .graph import RelaxGraph, relax_graph, source_names
from .outline import OutlinedFunction, outline_regions
from .prepare import bind_params, prepare


@dataclass(repr=False)
class RelaxPartitionResult(PartitionResult):
    """:class:`~partition_lab.api.PartitionResult` of a Relax module: ``mod`` holds one
    ``Codegen`` function per accelerator region; ``relay`` holds the :class:`RelaxGraph` (the
    field keeps the shared name), also as ``relax``; ``functions`` each ``Codegen`` function's
    region and device, by symbol."""

    functions: dict[str, OutlinedFunction] = dataclasses.field(default_factory=dict)

    @property
    def relax(self) -> RelaxGraph:
        return self.relay


def analyze(
    mod: tvm.IRModule,
    target: str | PathLike[str] | TargetSpec | Platform,
    *,
    params: Mapping[str, Any] | None = None,
    excl_node_names: Iterable[str] = (),
    exclude_ops: Iterable[str] = (),
    cost_model: CostModel | str | None = None,
    profile_cache: Any = None,
    name: str = "",
    compiler: str | Mapping[str, str] | None = None,
    shipped_profile: bool = True,
    **target_options: Any,
) -> Analysis:
    """Prepare a Relax ``mod`` for a platform and compute every (op, device) verdict; the
    arguments are :func:`partition_lab.analyze`'s. ``exclude_ops`` take Relay op names (the
    names the targets use: ``nn.conv2d``, not ``relax.nn.conv2d``)."""
    platform = _with_compiler(get_platform(target, **target_options), compiler)
    name = name or _module_name(mod)
    mod = bind_params(mod, params)
    hints = source_names(mod)  # the preparation passes drop spans
    mod = prepare(mod, platform.prepare_steps())
    rg = relax_graph(mod, name=name, hints=hints)
    support = support_table(rg.graph, platform, excl_node_names, exclude_ops)
    cost_model = pricing_model(platform, cost_model, profile_cache, shipped=shipped_profile)
    return Analysis(mod, rg, platform, support, cost_model)


def partition(
    mod: tvm.IRModule,
    target: str | PathLike[str] | TargetSpec | Platform,
    *,
    params: Mapping[str, Any] | None = None,
    strategy: str | None = None,
    excl_node_names: Iterable[str] = (),
    exclude_ops: Iterable[str] = (),
    cost_model: CostModel | str | None = None,
    profile_cache: Any = None,
    strategy_options: Mapping[str, Any] | None = None,
    name: str = "",
    compiler: str | Mapping[str, str] | None = None,
    shipped_profile: bool = True,
    choose: int | None = None,
    choose_device: str = "cpu",
    choose_seconds: float = 20.0,
    **target_options: Any,
) -> RelaxPartitionResult:
    """Split a Relax ``mod`` over a platform's devices (see :func:`partition_lab.partition`).

    The result's ``mod`` has one ``Codegen=<compiler>`` function per accelerator region (the
    form ``relax.transform.RunCodegen`` consumes, with a codegen registered as
    ``relax.ext.<compiler>``); main-target regions and host islands stay in ``main``.

    ``choose=K`` decides by measurement as :func:`partition_lab.partition` does, with plans
    built by TVM (:mod:`.timing`): every region for ``llvm`` with ``choose_device="cpu"`` (a
    stand-in for the accelerators), GPU regions for ``cuda`` with ``"cuda"``; building the
    candidates comes on top of ``choose_seconds``.
    """
    if choose is not None and strategy is not None:
        raise PartitionLabError(f"choose={choose} picks among every strategy's plans by timing "
                                f"them: leave strategy ({strategy!r}) out")
    timings: dict[str, float] = {}
    start = time.perf_counter()
    analysis = analyze(mod, target, params=params, excl_node_names=excl_node_names,
                       exclude_ops=exclude_ops, cost_model=cost_model,
                       profile_cache=profile_cache, name=name, compiler=compiler,
                       shipped_profile=shipped_profile, **target_options)
    timings["analyze_s"] = time.perf_counter() - start
    start = time.perf_counter()
    if choose is not None:
        plan = _measured_choice(analysis, choose, choose_device, choose_seconds, profile_cache)
    else:
        if strategy is None:
            strategy = default_strategy(
                profiled=isinstance(analysis.cost_model, ProfiledCostModel))
        chosen = get_strategy(strategy, **dict(strategy_options or {}))
        plan = chosen.run(analysis.graph, analysis.support, cost_model=analysis.cost_model)
    plan.validate()
    timings["strategy_s"] = time.perf_counter() - start
    start = time.perf_counter()
    partitioned, functions = outline_regions(analysis.relay, plan)
    timings["outline_s"] = time.perf_counter() - start
    cost = evaluate(plan, analysis.cost_model) if analysis.cost_model is not None else None
    return RelaxPartitionResult(partitioned, plan, analysis.graph, analysis.target, cost,
                                analysis.cost_model, analysis.prepared_mod, analysis.relay,
                                timings, functions)


def _measured_choice(analysis: Analysis, k: int, device: str, seconds: float,
                     profile_cache: Any) -> Any:
    """:func:`partition_lab.api._measured_choice` with TVM-built plans as the runner."""
    from ..api import _measured_choice as measured_choice
    from ..choice import SCREEN_SHARE
    from .timing import runner_key, tvm_timers

    def make_timers() -> list[Any]:  # only when no kept decision is reused
        return tvm_timers(analysis.relay, device=device, max_seconds=seconds,
                          shares=(SCREEN_SHARE, 1 - SCREEN_SHARE))

    return measured_choice(analysis, k, device, seconds, profile_cache,
                           make_timers=make_timers, device_key=runner_key(device))


def _with_compiler(platform: Platform, compiler: str | Mapping[str, str] | None) -> Platform:
    """``platform`` with its BYOC devices' codegen names set (``relax.ext.<name>``)."""
    if compiler is None:
        return platform
    byoc = [d.name for d in platform.devices if d.outlined]
    names = {byoc[0]: compiler} if isinstance(compiler, str) and len(byoc) == 1 else compiler
    if not isinstance(names, Mapping) or not set(names) <= set(byoc):
        raise PartitionLabError(f"compiler {compiler!r}: name the BYOC devices of "
                                f"{platform.name} ({', '.join(byoc) or 'none'}), "
                                "{device: name}")
    devices = tuple(dataclasses.replace(d, compiler=names.get(d.name, d.compiler))
                    for d in platform.devices)
    return dataclasses.replace(platform, devices=devices)


def _module_name(mod: tvm.IRModule) -> str:
    attrs = mod.attrs
    if attrs is not None and "partition_lab.name" in attrs.keys():
        return str(attrs["partition_lab.name"])
    return ""
