"""``partition(mod, target)``: the one call most users need.

Data flows one way: Relay module -> (prepare for the target) -> OpGraph -> support verdicts
-> strategy -> PartitionPlan (validated) -> partitioned Relay module, with the cost model's
explanation alongside.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from os import PathLike
from typing import Any

import tvm

from ._optional import tvm_has_relay
from ._stages import stage
from ._tvm_logs import quiet_tvm_logs
from ._units import counted, format_bytes, format_time
from .comparison import Comparison, compare_plans
from .core.graph import OpGraph
from .core.hazards import NumericHazard
from .core.plan import PartitionPlan
from .core.platform import Platform
from .core.support import Support, Verdict
from .cost_models import ProfiledCostModel, pricing_model
from .cost_models.base import CostBreakdown, CostModel, evaluate
from .errors import ArgumentError, PartitionLabError
from .strategies import default_strategy, get_strategy
from .targets import TargetSpec, get_platform
from .targets.annotate import support_table

if tvm_has_relay():  # TVM <= 0.19; apache-tvm >= 0.20 is Relax only: partition_lab.relax
    from tvm import relay

    from .relay.frontends._cache import Deferred, cached_prepare
    from .relay.passes.outline import outline, with_compiler
    from .relay.passes.prepare import prepare
    from .relay.relay_graph import RelayGraph, relay_graph


@dataclass(repr=False)
class PartitionResult:
    """What :func:`partition` returns.

    ``mod`` is the partitioned module (accelerator regions outlined as ``Compiler`` functions);
    ``prepared_mod`` the module as it was partitioned (params bound, layout/precision converted for
    the target), which is what ``mod`` must compute the same outputs as.
    """

    mod: tvm.IRModule
    plan: PartitionPlan
    graph: OpGraph
    target: Any
    cost: CostBreakdown | None
    cost_model: CostModel | None
    prepared_mod: tvm.IRModule
    relay: RelayGraph = field(repr=False)
    timings: dict[str, float] = field(default_factory=dict)

    def summary(self) -> str:
        lines = [self.plan.summary()]
        if self.cost is not None:
            c = self.cost
            lines.append(
                f"  predicted ({c.model}): total {format_time(c.total)} = CPU "
                f"{format_time(c.compute_cpu)} + accelerator {format_time(c.compute_accel)} + "
                f"copies {format_time(c.transfer)} ({counted(len(c.cuts), 'tensor')}, "
                f"{format_bytes(c.transfer_bytes)}) + launches {format_time(c.overhead)}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        data = self.plan.to_dict(self.cost.node_times if self.cost is not None else None)
        data["cost"] = self.cost.to_dict() if self.cost is not None else None
        return data

    def to_json(self, indent: int | None = 2) -> str:
        import json

        return json.dumps(self.to_dict(), indent=indent)

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:  # short: the modules and the graph are megabytes of text
        total = f", predicted {format_time(self.cost.total)}" if self.cost is not None else ""
        return (f"PartitionResult({self.graph.name or 'graph'!r}, platform={self.plan.platform_name!r}, "
                f"strategy={self.plan.strategy!r}, {self.plan.regions_text()}, "
                f"{len(self.graph)} ops{total})")


@dataclass(repr=False)
class Analysis:
    """A model prepared for a platform: its OpGraph and every (op, device) verdict."""

    prepared_mod: tvm.IRModule
    relay: RelayGraph
    platform: Platform
    support: Support
    cost_model: CostModel | None
    #: Constants that overflowed the dtype a device computes in, by the op that uses them.
    hazards: tuple[NumericHazard, ...] = ()

    def __repr__(self) -> str:
        return (f"Analysis({self.graph.name or 'graph'!r}, platform={self.platform.name!r}, "
                f"{len(self.graph)} ops)")

    @property
    def graph(self) -> OpGraph:
        return self.relay.graph

    @property
    def target(self) -> Any:
        """The primary accelerator's TargetSpec (its rules and options)."""
        return self.platform.primary.target

    @property
    def verdicts(self) -> tuple[Verdict, ...]:
        """The primary accelerator's verdicts."""
        return self.support.primary


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
    debug: bool = False,
    shipped_profile: bool = True,
    **target_options: Any,
) -> Analysis:
    """Prepare ``mod`` for a platform and compute every (op, device) verdict.

    ``target`` names a platform (see :func:`~partition_lab.targets.get_platform`);
    ``compiler`` sets the ``Compiler`` name of its BYOC device(s) (see :func:`partition`).
    A Relax module (apache-tvm >= 0.20) goes to :func:`partition_lab.relax.analyze`. TVM's log
    lines are kept off stderr unless ``debug`` (see :func:`partition`). The cost model is
    :func:`~partition_lab.cost_models.pricing_model`'s: ``cost_model``, else the profile
    cache, else the platform's shipped profile (unless ``shipped_profile`` is False), else the
    roofline.
    """
    if is_relax_module(mod):
        return _relax().analyze(mod, target, params=params, excl_node_names=excl_node_names,
                                exclude_ops=exclude_ops, cost_model=cost_model,
                                profile_cache=profile_cache, name=name, compiler=compiler,
                                shipped_profile=shipped_profile, **target_options)
    with quiet_tvm_logs(not debug):
        return _analyze(mod, target, params, excl_node_names, exclude_ops, cost_model,
                        profile_cache, name, compiler, shipped_profile, target_options)


def _analyze(mod: tvm.IRModule, target: Any, params: Mapping[str, Any] | None,
             excl_node_names: Iterable[str], exclude_ops: Iterable[str],
             cost_model: CostModel | str | None, profile_cache: Any, name: str,
             compiler: str | Mapping[str, str] | None, shipped_profile: bool,
             target_options: dict[str, Any]) -> Analysis:
    if not isinstance(mod, Deferred):  # the command line's cached model, read when needed
        check_module(mod)
    excl_node_names = name_list(excl_node_names, "excl_node_names", "['conv0']")
    exclude_ops = name_list(exclude_ops, "exclude_ops", "['nn.conv2d']")
    platform = with_compiler(get_platform(target, **target_options), compiler)
    # Before binding: a new module drops the attributes.
    name = name or (mod.name if isinstance(mod, Deferred) else _module_name(mod))
    hazards: list[NumericHazard] = []
    steps, keep_fp32 = platform.prepare_steps(), keep_fp32_on_overflow(platform)
    with stage("prepare"):
        # From the prepared-module cache when mod and params came from the converted-model
        # cache (load_model(cache=True), the command line) unchanged.
        mod = cached_prepare(mod, params, steps, keep_fp32, hazards,
                             lambda mod, params, found: prepare(bind_params(mod, params),
                                                                steps, found, keep_fp32))
        rg = relay_graph(mod, name=name)
    support = support_table(rg.graph, platform, excl_node_names, exclude_ops)
    cost_model = pricing_model(platform, cost_model, profile_cache, shipped=shipped_profile)
    return Analysis(mod, rg, platform, support, cost_model,
                    placed_hazards(hazards, rg.graph, platform))


def keep_fp32_on_overflow(platform: Platform) -> bool:
    """Whether a device of ``platform`` asks for ops whose constants overflow float16 to be kept
    in float32 (the target option ``keep_fp32_on_overflow``, tensorcore's)."""
    return any(bool(getattr(d.target, "options", {}).get("keep_fp32_on_overflow"))
               for d in platform.devices)


def placed_hazards(hazards: Iterable[NumericHazard], graph: OpGraph,
                   platform: Platform) -> tuple[NumericHazard, ...]:
    """``hazards`` with the device whose precision asked for their dtype (the most preferred
    one that converts to it) and their node in ``graph`` (matched by source name and op)."""
    nodes = {(n.source_name, n.op): n.id for n in reversed(list(graph))}
    placed = []
    for hazard in hazards:
        step = f"mixed_precision:{hazard.dtype}"
        device = next((d.name for d in platform.devices if step in d.target.prepare_steps()),
                      platform.primary.name)
        placed.append(replace(hazard, device=device,
                              node=nodes.get((hazard.name or None, hazard.op))))
    return tuple(placed)


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
    choose: int | None = None,
    choose_device: str = "cpu",
    choose_seconds: float = 20.0,
    debug: bool = False,
    shipped_profile: bool = True,
    **target_options: Any,
) -> PartitionResult:
    """Split ``mod`` into regions over the devices of a platform (accelerators and CPU islands).

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
    ``relay.ext.<compiler>`` that ``relay.build`` will call (default: derived from the device
    name, ``neuron@2020`` -> ``neuron_2020``); ``{device: name}`` on a platform with several
    BYOC devices. ``partition_lab.relay.export.export_partitioned(result.mod, path)`` writes the
    result with its weights for a codegen to take away.

    ``choose=K`` decides by measurement (:func:`partition_lab.choice.choose`): the cost model
    proposes greedy's plan and the ``K`` best other distinct plans (by predicted mean and by
    optimism), the PyTorch executor times them in turns on ``choose_device`` (screening),
    times the two fastest and greedy again with new executors (confirming), about
    ``choose_seconds`` in all, and takes the faster where it beat greedy in both stages; the
    plan JSON records it under ``"choice"``. Not with ``strategy``. With
    ``profile_cache``, the decision is kept there and reused without timing when the same
    model is partitioned on the same platform and device again.

    TVM's C++ warnings (``convert_layout.cc``, ``to_mixed_precision.cc``) and its Python
    loggers' are kept off stderr while it runs, as the CLI does; ``debug=True`` shows them.

    The plan is validated before the module is rewritten; the result explains every decision.
    A Relax module (apache-tvm >= 0.20) goes to :func:`partition_lab.relax.partition`.
    """
    with quiet_tvm_logs(not debug):
        return _partition(mod, target, params, strategy, excl_node_names, exclude_ops,
                          cost_model, profile_cache, strategy_options, name, compiler, choose,
                          choose_device, choose_seconds, shipped_profile, target_options)


def _partition(mod: tvm.IRModule, target: Any, params: Mapping[str, Any] | None,
               strategy: str | None, excl_node_names: Iterable[str],
               exclude_ops: Iterable[str], cost_model: CostModel | str | None,
               profile_cache: Any, strategy_options: Mapping[str, Any] | None, name: str,
               compiler: str | Mapping[str, str] | None, choose: int | None,
               choose_device: str, choose_seconds: float, shipped_profile: bool,
               target_options: dict[str, Any]) -> PartitionResult:
    if choose is not None and strategy is not None:
        raise PartitionLabError(f"choose={choose} picks among every strategy's plans by timing "
                                f"them: leave strategy ({strategy!r}) out")
    if is_relax_module(mod):
        return _relax().partition(mod, target, params=params, strategy=strategy,
                                  excl_node_names=excl_node_names, exclude_ops=exclude_ops,
                                  cost_model=cost_model, profile_cache=profile_cache,
                                  strategy_options=strategy_options, name=name,
                                  compiler=compiler, shipped_profile=shipped_profile,
                                  choose=choose, choose_device=choose_device,
                                  choose_seconds=choose_seconds, **target_options)
    timings: dict[str, float] = {}
    start = time.perf_counter()
    analysis = analyze(mod, target, params=params, excl_node_names=excl_node_names,
                       exclude_ops=exclude_ops, cost_model=cost_model, profile_cache=profile_cache,
                       # debug=True: the block partition() runs in decides what is shown
                       name=name, compiler=compiler, debug=True,
                       shipped_profile=shipped_profile, **target_options)
    timings["analyze_s"] = time.perf_counter() - start
    with stage("partition"):
        return _plan_and_outline(analysis, strategy, strategy_options, choose, choose_device,
                                 choose_seconds, profile_cache, timings)


def _plan_and_outline(analysis: Analysis, strategy: str | None,
                      strategy_options: Mapping[str, Any] | None, choose: int | None,
                      choose_device: str, choose_seconds: float, profile_cache: Any,
                      timings: dict[str, float]) -> PartitionResult:
    """Run the strategy (or the measured choice) on the analysed model, and outline the plan."""
    start = time.perf_counter()
    if strategy is None:
        strategy = default_strategy(profiled=isinstance(analysis.cost_model, ProfiledCostModel))
    if choose is not None:
        plan = _measured_choice(analysis, choose, choose_device, choose_seconds, profile_cache)
    else:
        chosen = get_strategy(strategy, **dict(strategy_options or {}))
        plan = chosen.run(analysis.graph, analysis.support, cost_model=analysis.cost_model)
    plan.hazards = analysis.hazards
    plan.validate()
    timings["strategy_s"] = time.perf_counter() - start
    start = time.perf_counter()
    partitioned = outline(analysis.relay, plan)
    timings["outline_s"] = time.perf_counter() - start
    cost = evaluate(plan, analysis.cost_model) if analysis.cost_model is not None else None
    return PartitionResult(partitioned, plan, analysis.graph, analysis.target, cost,
                           analysis.cost_model, analysis.prepared_mod, analysis.relay, timings)


def _measured_choice(analysis: Analysis, k: int, device: str, seconds: float,
                     profile_cache: Any, *,
                     make_timers: Callable[[], Sequence[Any]] | None = None,
                     device_key: str | None = None) -> PartitionPlan:
    """The plan :func:`partition_lab.choice.choose` takes, timing with the PyTorch executor
    (or with the screening and confirming timers ``make_timers()`` returns, filed under
    ``device_key``: the Relax adapter's TVM-built plans); a decision kept in the profile cache (a file or a
    ProfileCache) is reused without timing, and a new one is kept there (the file rewritten
    atomically, merged under its lock)."""
    from pathlib import Path

    from .choice import choose, decision_key, remember, reuse
    from .cost_models.cache_records import ProfileCache

    if analysis.cost_model is None:
        raise PartitionLabError("choose needs a cost model to propose plans")
    path = Path(profile_cache) if isinstance(profile_cache, (str, PathLike)) else None
    cache = ProfileCache.load(path) if path is not None else (
        profile_cache if isinstance(profile_cache, ProfileCache) else None)
    if device_key is None:
        from .executors.benchmark import torch_device_key

        device_key = torch_device_key(device)
    key = decision_key(analysis.graph, analysis.support, device_key)
    if cache is not None:
        kept = reuse(cache, key, analysis.graph, analysis.support)
        if kept is not None:
            return kept
    if make_timers is None:
        from .executors.graph_io import bindings_from_relay

        choice = choose(analysis.graph, analysis.support, analysis.cost_model,
                        bindings_from_relay(analysis.relay), k=k, device=device,
                        max_seconds=seconds, runner=f"torch executor ({device_key})")
    else:
        screen, confirm = make_timers()
        choice = choose(analysis.graph, analysis.support, analysis.cost_model, k=k,
                        timer=screen, confirm_timer=confirm, runner=f"tvm-built ({device_key})")
    if cache is not None and choice.conclusive:
        remember(cache, key, choice, analysis.graph.name)
        if path is not None:
            cache.save(path)
    return choice.plan


def compare(
    mod: tvm.IRModule,
    target: str | PathLike[str] | TargetSpec | Platform,
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


def check_module(mod: object) -> None:
    """:class:`ArgumentError` unless ``mod`` is an IRModule with a ``main`` function."""
    if not isinstance(mod, tvm.IRModule):
        raise ArgumentError(
            f"mod must be a tvm.IRModule (as load_model returns it), not {type(mod).__name__}; "
            "load the model first: mod, params = partition_lab.load_model(path)")
    if "main" not in [gvar.name_hint for gvar in mod.get_global_vars()]:
        raise ArgumentError("mod has no 'main' function; partition_lab partitions main")


def name_list(value: object, what: str, example: str) -> tuple[str, ...]:
    """``value`` as a tuple of names; :class:`ArgumentError` for a lone string (which would be
    read letter by letter) or for items that are not strings."""
    if isinstance(value, str | bytes):
        raise ArgumentError(f"{what} must be a list of names, not the string {value!r} (read "
                            f"as its letters); pass [{value!r}]")
    try:
        names = tuple(value)  # type: ignore[call-overload]
    except TypeError:
        raise ArgumentError(f"{what} must be a list of names such as {example}, not "
                            f"{type(value).__name__}") from None
    wrong = [name for name in names if not isinstance(name, str)]
    if wrong:
        raise ArgumentError(f"{what} must hold names (strings), not {wrong[0]!r}; e.g. {example}")
    return names


def bind_params(mod: tvm.IRModule, params: Mapping[str, Any] | None) -> tvm.IRModule:
    """``mod`` with ``params`` bound as constants (weights become part of the graph).

    Raises :class:`ArgumentError` when ``params`` is not a mapping or names a parameter
    ``main`` does not have (a misspelled weight would otherwise stay an unbound input).
    """
    mod = relay.transform.InferType()(mod)
    if not params:
        return mod
    if not isinstance(params, Mapping):
        raise ArgumentError(f"params must map parameter names to arrays (as load_model returns "
                            f"them), not {type(params).__name__}")
    known = [param.name_hint for param in mod["main"].params]
    unknown = sorted(set(params) - set(known), key=str)
    if unknown:
        raise ArgumentError(
            f"params names {unknown[:5]}{' and more' if len(unknown) > 5 else ''}, which main "
            f"does not have as parameters (it has {known[:8]}{'...' if len(known) > 8 else ''}); "
            "check the names, or pass the params load_model returned with this module")
    func = relay.build_module.bind_params_by_name(mod["main"], dict(params))
    return relay.transform.InferType()(tvm.IRModule.from_expr(func))


def _module_name(mod: tvm.IRModule) -> str:
    attrs = mod.attrs
    if attrs is not None and "partition_lab.name" in attrs.keys():
        return str(attrs["partition_lab.name"])
    return ""


# ---------------------------------------------------------------------------- Relax
def is_relax_module(mod: Any) -> bool:
    """Whether ``mod`` is a Relax module (its ``main`` a ``relax.Function``)."""
    try:
        main = mod["main"]
    except (KeyError, TypeError, ValueError, AttributeError, RuntimeError):
        return False
    return type(main).__module__.startswith("tvm.relax")


def _relax() -> Any:
    """The Relax adapter (MissingDependencyError without apache-tvm >= 0.20)."""
    import importlib

    return importlib.import_module("partition_lab.relax")
