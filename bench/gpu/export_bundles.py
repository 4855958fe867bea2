"""Export zoo models, partitioned by every strategy, as bundles for the GPU machine (runs HERE).

The GPU machine has no TVM, so this script prepares each model for the ``tensorcore`` platform
here (Tensor Core regions, the GPU's CUDA cores, the host CPU in float32), plans it with each
strategy under a cost model, and writes one bundle per model (:mod:`partition_lab.executors.graph_io`):
the platform's devices, graph, argument bindings, plans and the predicted times. Besides the
strategies' plans, every bundle holds ``unpartitioned_gpu``: every op on the ``cuda`` device in
one region, the whole graph on the GPU (the baseline a platform plan is compared with).

    export TOPHUB_LOCATION=NONE
    # plans under the per-device H200 roofline (tensorcore / cuda / host in float32):
    .venv/bin/python bench/gpu/export_bundles.py --out .gpu_bundle/platforms
    # the zoo with another op-support pattern, every strategy and 8 variant plans:
    .venv/bin/python bench/gpu/export_bundles.py --out .gpu_bundle/p_neuron2020 \\
        --platform neuron@2020 --strategies all --variants 8
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

from partition_lab.comparison import compare_plans
from partition_lab.core.plan import PartitionPlan
from partition_lab.core.platform import HOST
from partition_lab.core.support import Support
from partition_lab.cost_models.base import evaluate
from partition_lab.errors import PlanError
from partition_lab.executors.graph_io import Bundle, read_bundle, write_bundle

STRATEGIES = ("greedy", "cost", "optimal", "all_cpu")
#: ``--strategies all``: every registered strategy (the profiled evidence).
ALL_STRATEGIES = ("greedy", "min_size", "no_mac", "cost", "optimal", "all_cpu", "all_accel")
TARGET = "tensorcore"
BASELINE = "unpartitioned_gpu"
#: The zoo in the order the GPU side runs it: batch 32 first, then the batch-1 models.
MODELS = ("resnet50_v1_b32", "resnet50_v1", "bert_encoder", "matmul_fp16_x100", "tiny_yolo_v2",
          "mobilenetv2_1.0", "densenet201", "resnet152_v1", "simple_pose_resnet152_v1b",
          "fcn_resnet101_ade")


def cost_model_for(args: argparse.Namespace) -> Any:
    """The platform's roofline (on ``tensorcore`` the per-device H200 roofline). Plans from a
    profile cache: ``bench/gpu/replan_profiled.py``."""
    from partition_lab.cost_models import get_cost_model
    from partition_lab.targets import get_platform

    platform = get_platform(args.platform)
    if args.platform == "tensorcore":
        return get_cost_model(platform, accel_profile="h200")
    return get_cost_model(platform)


def baseline_plan(graph: Any, support: Support) -> PartitionPlan:
    """Every op on the platform's main device (``cuda``: the GPU), as one region."""
    main = support.platform.main.name
    plan = PartitionPlan.from_devices(graph, support, BASELINE, [main] * len(graph),
                                      groups=[range(len(graph))],
                                      notes=["every op on the GPU in one region (baseline)"])
    plan.validate()
    return plan


def describe(plan: PartitionPlan, cost_model: Any) -> dict[str, Any]:
    """Predicted time and where the ops went, for the bundle's metadata."""
    cost = evaluate(plan, cost_model)
    return {**cost.to_dict(), "regions": None, "cuts": None, **placement(plan)}


def placement(plan: PartitionPlan) -> dict[str, Any]:
    """Where the plan puts the ops and what crosses between devices."""
    crossings = plan.crossing_tensors()
    return {
        "ops_per_device": plan.ops_per_device(),
        "regions_per_device": {d: len(plan.regions_on(d)) for d in plan.platform.names},
        "crossings": len(crossings),
        "crossing_bytes": sum(t.nbytes for t, _, _ in crossings),
        "host_ops": sorted({plan.graph[d.node].op for d in plan.decisions if d.device == HOST}),
    }


def plan_bundle(bundle: Bundle, support: Support, cost_model: Any, meta: dict[str, Any],
                variants: int = 0, strategies: tuple[str, ...] = STRATEGIES) -> Bundle:
    """``bundle`` with every strategy's plan and the baseline under ``cost_model`` and the
    predictions in meta, plus ``variants`` hand-made plans (see :func:`variant_plans`). The
    baseline (every op on the GPU) only where the platform's main device is not the host."""
    comparison = compare_plans(bundle.graph, support, strategies=strategies,
                               cost_model=cost_model)
    plans = dict(comparison.plans)
    if not support.platform.main.is_host:
        plans[BASELINE] = baseline_plan(bundle.graph, support)
    plans.update(variant_plans(plans["greedy"], variants))
    predicted = {name: describe(plan, cost_model) for name, plan in plans.items()}
    meta = {**meta, "cost_model": cost_model.name, "predicted": predicted,
            "comparison": comparison.to_dict()}
    return Bundle(bundle.graph, bundle.bindings, plans, meta, support.platform)


def variant_plans(greedy: PartitionPlan, count: int, seed: int = 0) -> dict[str, PartitionPlan]:
    """Plans that are not any strategy's: the greedy plan with 1, 2, 4... random runs of
    consecutive off-host ops moved to the host (as a user's exclusions would), each a valid
    plan. They spread the plans of one model so that the ranking within a model is tested too;
    reported apart from the strategies."""
    off_host = greedy.accelerator_nodes
    if count <= 0 or len(off_host) < 8:
        return {}
    rng = random.Random(seed)
    variants: dict[str, PartitionPlan] = {}
    for attempt in range(count * 20):
        if len(variants) == count:
            break
        runs = 2 ** (len(variants) % 4)
        length = max(1, len(off_host) // (4 * runs) if attempt % 2 else len(off_host) // 40)
        moved: set[int] = set()
        for _ in range(runs):
            start = rng.randrange(len(off_host))
            moved.update(off_host[start:start + length])
        devices = [HOST if n in moved else greedy.device_of(n) for n in range(len(greedy.graph))]
        plan = PartitionPlan.from_devices(
            greedy.graph, greedy.support, f"variant{len(variants)}", devices,
            notes=[f"greedy with {len(moved)} GPU ops moved to the host ({runs} runs)"])
        try:
            plan.validate()
        except PlanError:
            continue
        variants[plan.strategy] = plan
    return variants


def export_from_zoo(name: str, small: bool, cost_model: Any, variants: int,
                    target: str = TARGET, strategies: tuple[str, ...] = STRATEGIES,
                    batch: int | None = None, patterns: bool = True) -> Bundle:
    """The zoo model ``name`` planned for ``target``; ``batch``: the same weights loaded from
    the zoo's MXNet files with that batch size instead of the catalog's; ``patterns=False``:
    every target's patterns removed (support judged op by op; bundle ``<model>_op_by_op``)."""
    from partition_lab import zoo
    from partition_lab.api import analyze
    from partition_lab.executors.graph_io import bindings_from_relay
    from partition_lab.targets import get_platform
    from partition_lab.targets.devices import without_patterns

    entry = zoo.info(name)
    shapes = {k: tuple(v) for k, v in entry.shapes(small).items()}
    if batch is None:
        mod, params = zoo.load(name, small=small)
    elif entry.built_with in ("torch", "transformers"):  # tv:/hf: builds re-export at a shape
        shapes = {k: (batch, *v[1:]) for k, v in shapes.items()}
        mod, params = zoo.load(name, small=small, input_shapes=shapes)
    else:
        from partition_lab.relay.frontends import load_model

        shapes = {k: (batch, *v[1:]) for k, v in shapes.items()}
        symbol, weights = zoo.mxnet_paths(name, small=small)
        mod, params = load_model(symbol, shapes, params=weights,
                                 input_dtypes=dict.fromkeys(shapes, entry.dtype))
    label = name.replace(":", "_") + ("" if batch is None else f"_b{batch}") + \
        ("" if patterns else "_op_by_op")
    platform = get_platform(target) if patterns else without_patterns(get_platform(target))
    analysis = analyze(mod, platform, params=params, cost_model=cost_model, name=label)
    meta = {"model": label, "small": small, "target": target, "input_dtype": entry.dtype,
            "input_shapes": {k: list(v) for k, v in shapes.items()}}
    bundle = Bundle(analysis.graph, bindings_from_relay(analysis.relay))
    return plan_bundle(bundle, analysis.support, cost_model, meta, variants, strategies)


def replan(path: Path, cost_model: Any, variants: int,
           strategies: tuple[str, ...] = STRATEGIES) -> Bundle:
    old = read_bundle(path)
    support = next(iter(old.plans.values())).support
    meta = {k: v for k, v in old.meta.items() if k not in ("predicted", "comparison")}
    return plan_bundle(old, support, cost_model, meta, variants, strategies)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for <model>.json.gz")
    parser.add_argument("--models", nargs="*", default=list(MODELS))
    parser.add_argument("--small", action="store_true", help="the zoo's small variants")
    parser.add_argument("--replan", type=Path, help="re-plan the bundles in this folder")
    parser.add_argument("--variants", type=int, default=0,
                        help="also this many hand-made plans per model with GPU regions")
    parser.add_argument("--platform", default=TARGET,
                        help="the platform (op-support pattern) to prepare and plan for: "
                             "tensorcore (default), neuron@2020, neuron, ...")
    parser.add_argument("--strategies", nargs="*", default=list(STRATEGIES),
                        help="strategies to plan with; 'all' = every registered strategy")
    parser.add_argument("--no-patterns", action="store_true",
                        help="judge support op by op (every target's patterns removed); "
                             "bundles <model>_op_by_op")
    parser.add_argument("--batch", type=int,
                        help="load the zoo models at this batch size (bundle <model>_b<N>)")
    args = parser.parse_args(argv)
    strategies = ALL_STRATEGIES if args.strategies == ["all"] else tuple(args.strategies)
    cost_model = cost_model_for(args)
    args.out.mkdir(parents=True, exist_ok=True)
    # The GPU side runs the models in this order (the most telling first, for a cut-short run).
    suffix = ("" if args.batch is None or args.replan else f"_b{args.batch}") + \
        ("_op_by_op" if args.no_patterns and not args.replan else "")
    order = args.out / "order.json"
    earlier = json.loads(order.read_text()) if order.exists() else []
    names = [m.replace(":", "_") + suffix for m in args.models]
    order.write_text(json.dumps(earlier + [n for n in names if n not in earlier]))
    for name in args.models:
        start = time.perf_counter()
        if args.replan:
            bundle = replan(args.replan / f"{name}.json.gz", cost_model, args.variants,
                            strategies)
        else:
            bundle = export_from_zoo(name, args.small, cost_model, args.variants,
                                     args.platform, strategies, args.batch,
                                     patterns=not args.no_patterns)
        path = write_bundle(args.out / f"{bundle.meta['model']}.json.gz", bundle)
        print(f"{name}: {len(bundle.graph)} ops, {path.stat().st_size / 1e3:.0f} kB, "
              f"{time.perf_counter() - start:.1f} s", flush=True)
        for strategy, p in bundle.meta["predicted"].items():
            placed = " ".join(f"{d}={c}" for d, c in p["ops_per_device"].items())
            print(f"  {strategy:<18} {p['total_s'] * 1e3:9.3f} ms  {placed}  "
                  f"crossings {p['crossings']}  host ops {p['host_ops']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
