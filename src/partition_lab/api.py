"""``partition(mod, target)``: the one call most users need.

Data flows one way: Relay module -> (prepare for the target) -> OpGraph -> support verdicts
-> strategy -> PartitionPlan (validated) -> partitioned Relay module, with the cost model's
explanation alongside.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from os import PathLike
from typing import Any

import tvm

from ._optional import tvm_has_relay
from .comparison import Comparison, compare_plans
from .core.graph import OpGraph
from .core.plan import PartitionPlan
from .core.platform import Platform
from .core.support import Support, Verdict
from .cost_models import get_cost_model
from .cost_models.base import CostBreakdown, CostModel, evaluate
from .errors import PartitionLabError
from .strategies import default_strategy, get_strategy
from .targets import TargetSpec, get_platform
from .targets.annotate import support_table

if tvm_has_relay():  # TVM <= 0.19; apache-tvm >= 0.20 is Relax only: partition_lab.relax
    from tvm import relay

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
                f"  predicted ({c.model}): total {c.total * 1e3:.3f} ms = CPU {c.compute_cpu * 1e3:.3f}"
                f" + accelerator {c.compute_accel * 1e3:.3f} + copies {c.transfer * 1e3:.3f}"
                f" ({len(c.cuts)} tensors, {c.transfer_bytes / 1e6:.2f} MB)"
                f" + launches {c.overhead * 1e3:.3f}")
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
        total = f", predicted {self.cost.total * 1e3:.3f} ms" if self.cost is not None else ""
        return (f"PartitionResult({self.graph.name or 'graph'!r}, platform={self.plan.platform_name!r}, "
                f"strategy={self.plan.strategy!r}, {len(self.plan.accelerator_regions)} "
                f"accelerator region(s), {len(self.plan.cpu_regions)} CPU island(s), "
                f"{len(self.graph)} ops{total})")


@dataclass(repr=False)
class Analysis:
    """A model prepared for a platform: its OpGraph and every (op, device) verdict."""

    prepared_mod: tvm.IRModule
    relay: RelayGraph
    platform: Platform
    support: Support
    cost_model: CostModel | None

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
    **target_options: Any,
) -> Analysis:
    """Prepare ``mod`` for a platform and compute every (op, device) verdict.

    ``target`` names a platform (see :func:`~partition_lab.targets.get_platform`);
    ``compiler`` sets the ``Compiler`` name of its BYOC device(s) (see :func:`partition`).
    A Relax module (apache-tvm >= 0.20) goes to :func:`partition_lab.relax.analyze`.
    """
    if is_relax_module(mod):
        return _relax().analyze(mod, target, params=params, excl_node_names=excl_node_names,
                                exclude_ops=exclude_ops, cost_model=cost_model,
                                profile_cache=profile_cache, name=name, compiler=compiler,
                                **target_options)
    platform = with_compiler(get_platform(target, **target_options), compiler)
    name = name or _module_name(mod)  # before binding: a new module drops the attributes
    mod = bind_params(mod, params)
    mod = prepare(mod, platform.prepare_steps())
    rg = relay_graph(mod, name=name)
    support = support_table(rg.graph, platform, excl_node_names, exclude_ops)
    if cost_model is None or isinstance(cost_model, str):
        cost_model = get_cost_model(platform, accel_profile=cost_model, profile=profile_cache)
    elif profile_cache is not None:
        raise PartitionLabError("pass either a cost_model object or profile_cache=, not both")
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
    **target_options: Any,
) -> PartitionResult:
    """Split ``mod`` into regions over the devices of a platform (accelerators and CPU islands).

    ``target`` names a platform: a built-in name (``"tensorcore"``: Tensor Cores + CUDA cores +
    host; ``"neuron"``, ``"neuron@2020"``; ``"cpu"``), a TOML/JSON target or platform file, a
    ``TargetSpec`` or a :class:`~partition_lab.core.platform.Platform`; ``target_options`` go to its
    accelerator (for example ``precision="fp32"`` for tensorcore). ``strategy`` is a name from
    ``partition_lab.strategies.available_strategies()``, with ``strategy_options``; by default
    ``"cost"`` when ``profile_cache`` is given (priced from measurements, it was never slower
    than greedy on the H200, bench/results/gpu_profiled.md) and ``"greedy"`` (TVM's own
    rule) otherwise (:func:`~partition_lab.strategies.default_strategy`).
    ``excl_node_names`` keeps nodes with those source names on the CPU (neuron-cc's
    ``excl_node_names``); ``exclude_ops`` does the same by Relay op name. ``cost_model`` is a
    CostModel, an accelerator profile name, or None for the target's default. ``compiler`` is
    the ``Compiler`` attribute of the outlined accelerator functions, i.e. the codegen
    ``relay.ext.<compiler>`` that ``relay.build`` will call (default: derived from the device
    name, ``neuron@2020`` -> ``neuron_2020``); ``{device: name}`` on a platform with several
    BYOC devices. ``partition_lab.relay.export.export_partitioned(result.mod, path)`` writes the
    result with its weights for a codegen to take away.

    The plan is validated before the module is rewritten; the result explains every decision.
    A Relax module (apache-tvm >= 0.20) goes to :func:`partition_lab.relax.partition`.
    """
    if is_relax_module(mod):
        return _relax().partition(mod, target, params=params, strategy=strategy,
                                  excl_node_names=excl_node_names, exclude_ops=exclude_ops,
                                  cost_model=cost_model, profile_cache=profile_cache,
                                  strategy_options=strategy_options, name=name,
                                  compiler=compiler, **target_options)
    timings: dict[str, float] = {}
    start = time.perf_counter()
    analysis = analyze(mod, target, params=params, excl_node_names=excl_node_names,
                       exclude_ops=exclude_ops, cost_model=cost_model, profile_cache=profile_cache,
                       name=name, compiler=compiler, **target_options)
    timings["analyze_s"] = time.perf_counter() - start
    start = time.perf_counter()
    if strategy is None:
        strategy = default_strategy(profiled=profile_cache is not None)
    chosen = get_strategy(strategy, **dict(strategy_options or {}))
    plan = chosen.run(analysis.graph, analysis.support, cost_model=analysis.cost_model)
    plan.validate()
    timings["strategy_s"] = time.perf_counter() - start
    start = time.perf_counter()
    partitioned = outline(analysis.relay, plan)
    timings["outline_s"] = time.perf_counter() - start
    cost = evaluate(plan, analysis.cost_model) if analysis.cost_model is not None else None
    return PartitionResult(partitioned, plan, analysis.graph, analysis.target, cost,
                           analysis.cost_model, analysis.prepared_mod, analysis.relay, timings)


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
    **target_options: Any,
) -> Comparison:
    """Every strategy (or ``strategies``) on one model and target, priced by one cost model.

    Returns a :class:`~partition_lab.comparison.Comparison`: ``.rows`` (regions, ops on the
    accelerator, tensors and bytes crossing, predicted compute per device, copies, launches,
    total), ``.plans``, ``.to_table()`` and ``.to_json()``. The model is prepared once.
    """
    analysis = analyze(mod, target, params=params, excl_node_names=excl_node_names,
                       exclude_ops=exclude_ops, cost_model=cost_model, profile_cache=profile_cache,
                       name=name, **target_options)
    return compare_plans(analysis.graph, analysis.support, strategies=strategies,
                         cost_model=analysis.cost_model)


def bind_params(mod: tvm.IRModule, params: Mapping[str, Any] | None) -> tvm.IRModule:
    """``mod`` with ``params`` bound as constants (weights become part of the graph)."""
    mod = relay.transform.InferType()(mod)
    if not params:
        return mod
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
