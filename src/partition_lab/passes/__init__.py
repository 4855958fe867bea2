"""partition_lab's Relay passes, as ``tvm.transform`` passes that compose with ``Sequential``.

The pipeline ``PrepareForTarget -> AnnotateSupport -> FormRegions -> OutlineRegions`` is what
:func:`partition_lab.partition` runs. Between passes the state travels in module attributes
(JSON strings), so each pass can also be used alone or mixed with TVM's own passes::

    seq = tvm.transform.Sequential([
        PrepareForTarget("neuron@2020"),
        AnnotateSupport("neuron@2020", excl_node_names=["relu0_fwd"]),
        FormRegions("cost"),
        OutlineRegions(),
    ])
    partitioned = seq(mod)          # params bound beforehand

Attributes: ``partition_lab.target`` (name), ``partition_lab.verdicts`` (one
``[supported, reason, rule, anchor]`` per node of the OpGraph) and ``partition_lab.plan``
(``PartitionPlan.to_json()``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import tvm

from ..errors import PartitionLabError
from ..plan import PartitionPlan, Verdict
from ..relay_graph import relay_graph
from .annotate import support_verdicts
from .outline import outline
from .prepare import prepare

TARGET_ATTR = "partition_lab.target"
VERDICTS_ATTR = "partition_lab.verdicts"
PLAN_ATTR = "partition_lab.plan"

__all__ = ["AnnotateSupport", "FormRegions", "OutlineRegions", "PrepareForTarget",
           "outline", "prepare", "support_verdicts"]


def _attr(mod: tvm.IRModule, key: str, needed_by: str) -> str:
    if mod.attrs is None or key not in mod.attrs.keys():
        raise PartitionLabError(f"{needed_by} needs the module attribute {key!r}; run the "
                                "preceding partition_lab pass first")
    return str(mod.attrs[key])


def PrepareForTarget(target: Any, **target_options: Any) -> tvm.transform.Pass:  # noqa: N802
    """Layout/precision conversion the target asks for (e.g. NHWC + fp16 for tensorcore)."""
    from ..targets import get_target

    spec = get_target(target, **target_options)

    @tvm.transform.module_pass(opt_level=0, name="partition_lab.PrepareForTarget")
    def _pass(mod: tvm.IRModule, _ctx: Any) -> tvm.IRModule:
        return prepare(mod, spec.prepare_steps())

    return _pass


def AnnotateSupport(  # noqa: N802
    target: Any, excl_node_names: Iterable[str] = (), exclude_ops: Iterable[str] = (),
    **target_options: Any,
) -> tvm.transform.Pass:
    """Record the target's verdict (with its reason) for every op, after exclusions."""
    from ..targets import get_target

    spec = get_target(target, **target_options)
    names, ops = tuple(excl_node_names), tuple(exclude_ops)

    @tvm.transform.module_pass(opt_level=0, name="partition_lab.AnnotateSupport")
    def _pass(mod: tvm.IRModule, _ctx: Any) -> tvm.IRModule:
        graph = relay_graph(mod).graph
        verdicts = support_verdicts(graph, spec, names, ops)
        encoded = json.dumps([[v.supported, v.reason, v.rule, v.anchor] for v in verdicts])
        return mod.with_attr(TARGET_ATTR, spec.name).with_attr(VERDICTS_ATTR, encoded)

    return _pass


def FormRegions(strategy: str = "greedy", cost_model: Any = None, **options: Any) -> tvm.transform.Pass:  # noqa: N802
    """Run a strategy on the annotated module and record the validated plan."""
    from ..cost_models import get_cost_model
    from ..strategies import get_strategy

    chosen = get_strategy(strategy, **options)

    @tvm.transform.module_pass(opt_level=0, name="partition_lab.FormRegions")
    def _pass(mod: tvm.IRModule, _ctx: Any) -> tvm.IRModule:
        target = _attr(mod, TARGET_ATTR, "FormRegions")
        verdicts = [Verdict(*row) for row in json.loads(_attr(mod, VERDICTS_ATTR, "FormRegions"))]
        graph = relay_graph(mod).graph
        model = cost_model if cost_model is not None else _default_cost_model(target, get_cost_model)
        plan = chosen.run(graph, verdicts, target=target, cost_model=model)
        plan.validate()
        return mod.with_attr(PLAN_ATTR, plan.to_json(indent=None))

    return _pass


def OutlineRegions() -> tvm.transform.Pass:  # noqa: N802
    """Outline the recorded plan's accelerator regions into ``Compiler=<target>`` functions."""

    @tvm.transform.module_pass(opt_level=0, name="partition_lab.OutlineRegions")
    def _pass(mod: tvm.IRModule, _ctx: Any) -> tvm.IRModule:
        rg = relay_graph(mod)
        plan = PartitionPlan.from_dict(rg.graph, json.loads(_attr(mod, PLAN_ATTR, "OutlineRegions")))
        plan.validate()
        return outline(rg, plan)

    return _pass


def _default_cost_model(target: str, get_cost_model: Any) -> Any:
    try:
        from ..targets import get_target

        return get_cost_model(get_target(target))
    except PartitionLabError:
        return None  # a user target registered only in another process: strategies without costs
