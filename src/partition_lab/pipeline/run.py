"""The pipeline, written once for every IR.

module -> (the adapter checks it, binds the weights and prepares it for the platform, numeric
hazards found on the way) -> OpGraph -> support verdicts -> strategy or measured choice ->
validated PartitionPlan -> (the adapter outlines it) -> partitioned module, with the cost
model's explanation alongside. Which IR is the adapter's business (:mod:`.adapters`); every
check, hazard, strategy, validation and report here is the same for all of them.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from os import PathLike
from pathlib import Path
from typing import Any

from .._stages import stage
from .._tvm_logs import quiet_tvm_logs
from ..comparison import Comparison, compare_plans, plan_total_sigma
from ..core.hazards import NumericHazard
from ..core.plan import PartitionPlan
from ..core.platform import Platform
from ..cost_models import ProfiledCostModel, pricing_model
from ..cost_models.base import CostModel, evaluate
from ..errors import PartitionLabError
from ..strategies import default_strategy, get_strategy
from ..targets import TargetSpec, get_platform
from ..targets.annotate import support_table
from ..targets.devices import keep_fp32_on_overflow, with_compiler
from .adapters import IRAdapter, adapter_for
from .options import name_list, placed_hazards
from .results import Analysis, PartitionResult

Target = str | PathLike[str] | TargetSpec | Platform


def analyze(
    mod: Any,
    target: Target,
    *,
    params: Mapping[str, Any] | None = None,
    excl_node_names: Iterable[str] = (),
    exclude_ops: Iterable[str] = (),
    cost_model: CostModel | str | None = None,
    profile_cache: Any = None,
    name: str = "",
    compiler: str | Mapping[str, str] | None = None,
    debug: bool = False,
    shipped_profile: bool = True,
    **target_options: Any,
) -> Analysis:
    """Prepare ``mod`` (a Relay or Relax module) for a platform and compute every (op, device)
    verdict.

    ``target`` names a platform (see :func:`~partition_lab.targets.get_platform`);
    ``compiler`` sets the ``Compiler`` name of its BYOC device(s) (see :func:`partition`).
    TVM's log lines are kept off stderr unless ``debug``. The cost model is
    :func:`~partition_lab.cost_models.pricing_model`'s: ``cost_model``, else the profile
    cache, else the platform's shipped profile (unless ``shipped_profile`` is False), else the
    roofline. ``exclude_ops`` take Relay op names on every IR (``nn.conv2d``: the names the
    targets use).
    """
    adapter = adapter_for(mod)
    with quiet_tvm_logs(not debug):
        adapter.check(mod)
        excl_node_names = name_list(excl_node_names, "excl_node_names", "['conv0']")
        exclude_ops = name_list(exclude_ops, "exclude_ops", "['nn.conv2d']")
        platform = with_compiler(get_platform(target, **target_options), compiler)
        # Before preparing: a new module drops the attributes that carry the name.
        name = name or adapter.module_name(mod)
        hazards: list[NumericHazard] = []
        with stage("prepare"):
            prepared, context = adapter.prepare(mod, params, platform.prepare_steps(),
                                                keep_fp32_on_overflow(platform), hazards)
            ir = adapter.read_graph(prepared, context, name)
        support = support_table(ir.graph, platform, excl_node_names, exclude_ops)
        cost_model = pricing_model(platform, cost_model, profile_cache, shipped=shipped_profile)
        return Analysis(prepared, ir, platform, support, cost_model,
                        placed_hazards(hazards, ir.graph, platform), adapter)


def partition(
    mod: Any,
    target: Target,
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
    choose: int | None = None,
    choose_device: str = "cpu",
    choose_seconds: float = 20.0,
    debug: bool = False,
    shipped_profile: bool = True,
    **target_options: Any,
) -> PartitionResult:
    """Split ``mod`` into regions over the devices of a platform (accelerators and CPU islands).

    ``mod`` is a Relay module (TVM 0.19) or a Relax module (apache-tvm >= 0.20); the IR adapter
    is picked from it (:func:`~partition_lab.pipeline.adapters.adapter_for`) and every other
    step is the same for both.

    ``target`` names a platform: a built-in name (``"tensorcore"``: Tensor Cores + CUDA cores +
    host; ``"neuron"``, ``"neuron@2020"``; ``"cpu"``), a TOML/JSON target or platform file, a
    ``TargetSpec`` or a :class:`~partition_lab.core.platform.Platform`; ``target_options`` go to its
    accelerator (for example ``precision="fp32"`` for tensorcore). ``strategy`` is a name from
    ``partition_lab.strategies.available_strategies()``, with ``strategy_options``; by default
    ``"cost"`` when the prices come from measurements (``profile_cache``, or the profile that
    ships for the platform: the H200's for ``tensorcore``; ``shipped_profile=False`` leaves it
    out) and ``"greedy"`` (TVM's own rule) when they come from the roofline
    (:func:`~partition_lab.strategies.default_strategy`).
    ``excl_node_names`` keeps nodes with those source names on the CPU (neuron-cc's
    ``excl_node_names``); ``exclude_ops`` does the same by Relay op name. ``cost_model`` is a
    CostModel, an accelerator profile name, or None for the target's default. ``compiler`` is
    the ``Compiler`` attribute of the outlined accelerator functions, i.e. the codegen
    ``relay.ext.<compiler>`` (``relax.ext.<compiler>``) the build will call (default: derived
    from the device name, ``neuron@2020`` -> ``neuron_2020``); ``{device: name}`` on a platform
    with several BYOC devices. ``partition_lab.relay.export.export_partitioned(result.mod,
    path)`` writes a Relay result with its weights for a codegen to take away.

    ``choose=K`` decides by measurement (:func:`partition_lab.choice.choose`): the cost model
    proposes greedy's plan and the ``K`` best other distinct plans (by predicted mean and by
    optimism), they are timed in turns on ``choose_device`` (screening; the PyTorch executor
    for Relay, plans built by TVM for Relax), the two fastest and greedy timed again with new
    runners (confirming), about ``choose_seconds`` in all, and the faster taken where it beat
    greedy in both stages; the plan JSON records it under ``"choice"``. Not with ``strategy``.
    With ``profile_cache``, the decision is kept there and reused without timing when the same
    model is partitioned on the same platform and device again.

    TVM's C++ warnings (``convert_layout.cc``, ``to_mixed_precision.cc``) and its Python
    loggers' are kept off stderr while it runs, as the CLI does; ``debug=True`` shows them.

    The plan is validated before the module is rewritten; the result explains every decision.
    """
    if choose is not None and strategy is not None:
        raise PartitionLabError(f"choose={choose} picks among every strategy's plans by timing "
                                f"them: leave strategy ({strategy!r}) out")
    timings: dict[str, float] = {}
    start = time.perf_counter()
    analysis = analyze(mod, target, params=params, excl_node_names=excl_node_names,
                       exclude_ops=exclude_ops, cost_model=cost_model, profile_cache=profile_cache,
                       name=name, compiler=compiler, debug=debug,
                       shipped_profile=shipped_profile, **target_options)
    timings["analyze_s"] = time.perf_counter() - start
    with quiet_tvm_logs(not debug), stage("partition"):
        return plan_and_outline(analysis, strategy, strategy_options, choose, choose_device,
                                choose_seconds, profile_cache, timings)


def plan_and_outline(analysis: Analysis, strategy: str | None,
                     strategy_options: Mapping[str, Any] | None, choose: int | None,
                     choose_device: str, choose_seconds: float, profile_cache: Any,
                     timings: dict[str, float]) -> PartitionResult:
    """Run the strategy (or the measured choice) on the analysed model, validate the plan and
    outline it with the analysis's adapter."""
    adapter = _adapter_of(analysis)
    start = time.perf_counter()
    if choose is not None:
        plan = measured_choice(analysis, choose, choose_device, choose_seconds, profile_cache)
    else:
        if strategy is None:
            strategy = default_strategy(
                profiled=isinstance(analysis.cost_model, ProfiledCostModel))
        chosen = get_strategy(strategy, **dict(strategy_options or {}))
        plan = chosen.run(analysis.graph, analysis.support, cost_model=analysis.cost_model)
    plan.hazards = analysis.hazards
    plan.validate()
    timings["strategy_s"] = time.perf_counter() - start
    start = time.perf_counter()
    partitioned, functions = adapter.outline(analysis.ir, plan)
    timings["outline_s"] = time.perf_counter() - start
    cost = evaluate(plan, analysis.cost_model) if analysis.cost_model is not None else None
    sigma = plan_total_sigma(analysis.graph, analysis.support, analysis.cost_model, plan)
    return PartitionResult(partitioned, plan, analysis.graph, analysis.target, cost,
                           analysis.cost_model, analysis.prepared_mod, analysis.ir, timings,
                           functions, adapter.name, sigma)


def measured_choice(analysis: Analysis, k: int, device: str, seconds: float,
                    profile_cache: Any) -> PartitionPlan:
    """The plan :func:`partition_lab.choice.choose` takes, timed by the runner the analysis's
    adapter provides; a decision kept in the profile cache (a file or a ProfileCache) is reused
    without timing, and a new one is kept there (the file rewritten atomically, merged under
    its lock)."""
    from ..choice import SCREEN_SHARE, choose, decision_key, remember, reuse
    from ..cost_models.cache_records import ProfileCache

    if analysis.cost_model is None:
        raise PartitionLabError("choose needs a cost model to propose plans")
    path = Path(profile_cache) if isinstance(profile_cache, (str, PathLike)) else None
    cache = ProfileCache.load(path) if path is not None else (
        profile_cache if isinstance(profile_cache, ProfileCache) else None)
    device_key, timing = _adapter_of(analysis).choice_runner(
        analysis.ir, device, seconds, (SCREEN_SHARE, 1 - SCREEN_SHARE))
    key = decision_key(analysis.graph, analysis.support, device_key)
    if cache is not None:
        kept = reuse(cache, key, analysis.graph, analysis.support)
        if kept is not None:
            return kept
    choice = choose(analysis.graph, analysis.support, analysis.cost_model, k=k, **timing())
    if cache is not None and choice.conclusive:
        remember(cache, key, choice, analysis.graph.name)
        if path is not None:
            cache.save(path)
    return choice.plan


def compare(
    mod: Any,
    target: Target,
    *,
    params: Mapping[str, Any] | None = None,
    strategies: Iterable[Any] | None = None,
    cost_model: CostModel | str | None = None,
    profile_cache: Any = None,
    excl_node_names: Iterable[str] = (),
    exclude_ops: Iterable[str] = (),
    name: str = "",
    debug: bool = False,
    shipped_profile: bool = True,
    **target_options: Any,
) -> Comparison:
    """Every strategy (or ``strategies``) on one model and target, priced by one cost model.

    Returns a :class:`~partition_lab.comparison.Comparison`: ``.rows`` (regions, ops on the
    accelerator, tensors and bytes crossing, predicted compute per device, copies, launches,
    total), ``.plans``, ``.to_table()`` and ``.to_json()``. The model is prepared once;
    TVM's log lines stay off stderr unless ``debug``.
    """
    analysis = analyze(mod, target, params=params, excl_node_names=excl_node_names,
                       exclude_ops=exclude_ops, cost_model=cost_model, profile_cache=profile_cache,
                       name=name, debug=debug, shipped_profile=shipped_profile, **target_options)
    return compare_plans(analysis.graph, analysis.support, strategies=strategies,
                         cost_model=analysis.cost_model)


def _adapter_of(analysis: Analysis) -> IRAdapter:
    if analysis.adapter is None:
        return adapter_for(analysis.prepared_mod)
    return analysis.adapter
