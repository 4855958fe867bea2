"""The named plans of one model on one platform, shared by the TVM-built and PyTorch timings.

The same plans are timed twice: built by TVM (Relax, :func:`partition_lab.profiling.relax_build.
model_plans`) and run by the PyTorch executor (Relay; docs/guide/relax.md). Both sides
take their plans from :func:`named_plans`, so a name means the same device per op on both
sides when the graphs are the same. No TVM here: only the graph, the support table and a cost
model.

The plans: every op on the GPU (:data:`GPU_PLAN`; the platform's main device, or its primary
accelerator where the main device is the host), every op on the host (:data:`HOST_PLAN`), each
strategy's plan, and the two cut plans of :data:`CUT_PLANS`. Plans that put every op on the
same device as an earlier one are kept once, under the first name, the others in ``also``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from ..core.graph import OpGraph
from ..core.plan import PartitionPlan
from ..core.support import Support
from . import NotApplicableError, get_strategy

GPU_PLAN, HOST_PLAN = "all_gpu", "all_cpu"
DEFAULT_STRATEGIES = ("greedy", "cost", "min_size", "no_mac")
#: name -> (where the head goes, the head's share of the ops in a topological order).
CUT_PLANS: dict[str, tuple[str, float]] = {"gpu_head_host_tail": ("gpu", 0.75),
                                           "host_head_gpu_tail": ("host", 0.25)}


@dataclass
class NamedPlan:
    name: str
    plan: PartitionPlan
    also: list[str] = field(default_factory=list)  # other plan names with the same devices
    predicted_s: float | None = None  # under the cost model the plans were made with


def gpu_device(support: Support) -> str:
    """The device :data:`GPU_PLAN` puts every op on: the main device (``cuda`` on tensorcore),
    or the primary accelerator where the main device is the host (``neuron``)."""
    plat = support.platform
    return (plat.main if not plat.main.is_host else plat.primary).name


def candidate_plans(graph: OpGraph, support: Support, cost_model: Any,
                    strategies: Sequence[str] = DEFAULT_STRATEGIES
                    ) -> list[tuple[str, PartitionPlan]]:
    """Every named plan in order, duplicates included; a strategy that does not apply to the
    platform (:class:`NotApplicableError`) is left out."""
    gpu, host = gpu_device(support), support.platform.host.name
    candidates = [(GPU_PLAN, PartitionPlan.from_devices(graph, support, GPU_PLAN,
                                                        [gpu] * len(graph)))]
    for name in (HOST_PLAN, *strategies):
        try:
            plan = get_strategy(name).run(graph, support, cost_model=cost_model)
        except NotApplicableError:
            continue
        plan.validate()
        candidates.append((name, plan))
    order = list(nx.lexicographical_topological_sort(graph.nx))
    for name, (first, share) in CUT_PLANS.items():  # a prefix of a topological order: a cut
        head = set(order[:int(len(order) * share)])
        first_name, rest_name = (gpu, host) if first == "gpu" else (host, gpu)
        devices = [first_name if n in head else rest_name for n in range(len(graph))]
        candidates.append((name, PartitionPlan.from_devices(graph, support, name, devices)))
    return candidates


def predicted_total(plan: PartitionPlan, cost_model: Any) -> float | None:
    """The plan's predicted time in seconds, or None where the cost model cannot price it
    (an op on a device that does not support it, in ``all_gpu`` or a cut plan)."""
    from ..cost_models.base import evaluate

    try:
        return float(evaluate(plan, cost_model).total)
    except Exception:  # noqa: BLE001 - a plan the cost model cannot price keeps None
        return None


def named_plans(graph: OpGraph, support: Support, cost_model: Any,
                strategies: Sequence[str] = DEFAULT_STRATEGIES) -> list[NamedPlan]:
    """The distinct plans of :func:`candidate_plans` (by device per op, the first name kept,
    the others in ``also``), each with its time predicted by ``cost_model``."""
    plans: dict[tuple[str, ...], NamedPlan] = {}
    for name, plan in candidate_plans(graph, support, cost_model, strategies):
        key = tuple(plan.device_of(n) for n in range(len(graph)))
        if key in plans:
            plans[key].also.append(name)
        else:
            plans[key] = NamedPlan(name, plan, [], predicted_total(plan, cost_model))
    return list(plans.values())
