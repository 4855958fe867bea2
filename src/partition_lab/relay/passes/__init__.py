"""partition_lab's Relay passes, as ``tvm.transform`` passes that compose with ``Sequential``.

The passes ``PrepareForTarget -> AnnotateSupport -> FormRegions -> OutlineRegions`` are the
steps :func:`partition_lab.partition` runs (:mod:`partition_lab.pipeline`), calling the same
step functions (``prepare`` with the platform's float32 fallback, ``support_table``, the
strategies, ``PartitionPlan.validate``, ``outline``); ``partition`` adds the numeric-hazard
report, the measured choice and the predicted cost. The passes take a
:class:`~partition_lab.core.platform.Platform` (``partition_lab.targets.get_platform`` makes one
from a name or file). Between passes the state travels in module attributes (JSON strings), so
each pass can also be used alone or mixed with TVM's own passes::

    platform = get_platform("neuron@2020")
    seq = tvm.transform.Sequential([
        PrepareForTarget(platform),
        AnnotateSupport(platform, excl_node_names=["relu0_fwd"]),
        FormRegions("cost"),
        OutlineRegions(),
    ])
    partitioned = seq(mod)          # params bound beforehand

Attributes: ``partition_lab.target`` (the platform's name), ``partition_lab.verdicts`` (schema
``partition_lab.support/1``: the platform's devices and, per device, one ``[supported, reason,
rule, anchor]`` per node of the OpGraph; a plain list of rows, the older form, is one
accelerator named by the target attribute) and ``partition_lab.plan``
(``PartitionPlan.to_json()``; modules written by 0.1.0 releases between the two spellings use
``partition_lab.core.plan``, which is read too). Platforms annotated in this process are found
again by name; others are rebuilt from the devices recorded in the attribute (support is not
re-derived).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import tvm

from ...core.plan import PartitionPlan
from ...core.platform import Device, Platform, one_accelerator_platform, platform_from_records
from ...core.support import Support, Verdict
from ...errors import PartitionLabError
from ...targets.devices import keep_fp32_on_overflow
from ..relay_graph import relay_graph
from .annotate import support_table, support_verdicts
from .outline import outline, outline_regions
from .prepare import prepare

TARGET_ATTR = "partition_lab.target"
VERDICTS_ATTR = "partition_lab.verdicts"
PLAN_ATTR = "partition_lab.plan"
#: The key some plans carry instead of PLAN_ATTR (an import rewrite once changed the string);
#: read, never written.
LEGACY_PLAN_ATTR = "partition_lab.core.plan"
SUPPORT_SCHEMA = "partition_lab.support/1"

__all__ = ["AnnotateSupport", "FormRegions", "OutlineRegions", "PrepareForTarget",
           "outline", "outline_regions", "prepare", "support_table", "support_verdicts"]

#: Platforms annotated in this process, by name (a platform file or object is not re-read).
_PLATFORMS: dict[str, Platform] = {}


def _attr(mod: tvm.IRModule, key: str, needed_by: str, *also: str) -> str:
    """The module attribute ``key`` (or the first of the older keys ``also`` present)."""
    keys = mod.attrs.keys() if mod.attrs is not None else ()
    for name in (key, *also):
        if name in keys:
            return str(mod.attrs[name])
    raise PartitionLabError(f"{needed_by} needs the module attribute {key!r}; run the "
                            "preceding partition_lab pass first")


def _platform(platform: Any) -> Platform:
    if not isinstance(platform, Platform):
        raise PartitionLabError(
            f"the partition_lab passes take a Platform, not {type(platform).__name__}: "
            "partition_lab.targets.get_platform(name) makes one from a name or file")
    return platform


def PrepareForTarget(platform: Platform) -> tvm.transform.Pass:  # noqa: N802
    """Layout/precision conversion the platform's devices ask for (NHWC + fp16 for tensorcore)."""
    platform = _platform(platform)

    keep_fp32 = keep_fp32_on_overflow(platform)

    @tvm.transform.module_pass(opt_level=0, name="partition_lab.PrepareForTarget")
    def _pass(mod: tvm.IRModule, _ctx: Any) -> tvm.IRModule:
        # As partition() prepares: the float32 fallback for constants past float16, if asked.
        return prepare(mod, platform.prepare_steps(), keep_fp32=keep_fp32)

    return _pass


def AnnotateSupport(  # noqa: N802
    platform: Platform, excl_node_names: Iterable[str] = (), exclude_ops: Iterable[str] = (),
) -> tvm.transform.Pass:
    """Record every device's verdict (with its reason) for every op, after exclusions."""
    platform = _platform(platform)
    names, ops = tuple(excl_node_names), tuple(exclude_ops)

    @tvm.transform.module_pass(opt_level=0, name="partition_lab.AnnotateSupport")
    def _pass(mod: tvm.IRModule, _ctx: Any) -> tvm.IRModule:
        graph = relay_graph(mod).graph
        support = support_table(graph, platform, names, ops)
        _PLATFORMS[platform.name] = platform
        encoded = json.dumps({
            "schema": SUPPORT_SCHEMA,
            "devices": [_device_dict(d) for d in platform.devices],
            "verdicts": {d.name: [[v.supported, v.reason, v.rule, v.anchor]
                                  for v in support.of(i)]
                         for i, d in enumerate(platform.devices)},
        })
        return mod.with_attr(TARGET_ATTR, platform.name).with_attr(VERDICTS_ATTR, encoded)

    return _pass


def FormRegions(strategy: str = "greedy", cost_model: Any = None, **options: Any) -> tvm.transform.Pass:  # noqa: N802
    """Run a strategy on the annotated module and record the validated plan."""
    from ...cost_models import get_cost_model
    from ...strategies import get_strategy

    chosen = get_strategy(strategy, **options)

    @tvm.transform.module_pass(opt_level=0, name="partition_lab.FormRegions")
    def _pass(mod: tvm.IRModule, _ctx: Any) -> tvm.IRModule:
        target = _attr(mod, TARGET_ATTR, "FormRegions")
        support = _read_support(target, json.loads(_attr(mod, VERDICTS_ATTR, "FormRegions")))
        graph = relay_graph(mod).graph
        model = cost_model if cost_model is not None else \
            _default_cost_model(support.platform, get_cost_model)
        plan = chosen.run(graph, support, cost_model=model)
        plan.validate()
        return mod.with_attr(PLAN_ATTR, plan.to_json(indent=None))

    return _pass


def OutlineRegions() -> tvm.transform.Pass:  # noqa: N802
    """Outline the recorded plan's regions: ``Compiler=<device compiler>`` functions per BYOC
    device, main-target regions and host islands inline (host islands marked on GPU platforms)."""

    @tvm.transform.module_pass(opt_level=0, name="partition_lab.OutlineRegions")
    def _pass(mod: tvm.IRModule, _ctx: Any) -> tvm.IRModule:
        rg = relay_graph(mod)
        data = json.loads(_attr(mod, PLAN_ATTR, "OutlineRegions", LEGACY_PLAN_ATTR))
        known = _PLATFORMS.get(data.get("target", ""))
        if known is not None and [d["name"] for d in data.get("devices", ())] != known.names:
            known = None
        plan = PartitionPlan.from_dict(rg.graph, data, platform=known)
        plan.validate()
        return outline(rg, plan)

    return _pass


# ---------------------------------------------------------------------------- attributes
def _device_dict(d: Device) -> dict[str, Any]:
    return {"name": d.name, "role": d.role, "memory": d.memory, "compiler": d.compiler,
            "precision": d.precision, "preference": d.preference, "colour": d.colour,
            "profile": d.profile, "matrix_engine": d.matrix_engine}


def _read_support(target: str, data: Any) -> Support:
    """The :class:`Support` an AnnotateSupport attribute records (either form)."""
    if isinstance(data, list):  # the one-accelerator form: rows of the target's verdicts
        verdicts = [Verdict(*row) for row in data]
        return Support.with_host(one_accelerator_platform(target), {target: verdicts})
    table = {name: [Verdict(*row) for row in rows] for name, rows in data["verdicts"].items()}
    return Support(_platform_for(target, data["devices"]), table)


def _platform_for(target: str, devices: list[Mapping[str, Any]]) -> Platform:
    known = _PLATFORMS.get(target)
    if known is not None and known.names == [d["name"] for d in devices]:
        return known
    return platform_from_records(target, devices)


def _default_cost_model(platform: Platform, get_cost_model: Any) -> Any:
    try:
        return get_cost_model(platform)
    except PartitionLabError:
        return None  # a device without a hardware profile: strategies without costs
