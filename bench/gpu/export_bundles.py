"""Export zoo models, partitioned by every strategy, as bundles for the GPU machine (runs HERE).

The GPU machine has no TVM, so this script prepares each model for ``tensorcore`` here, plans it
with each strategy under a cost model, and writes one bundle per model
(:mod:`partition_lab.graph_io`): graph, argument bindings, plans and the predicted times.

    export TOPHUB_LOCATION=NONE
    # plans under the analytic H200 roofline (before a measured profile exists):
    .venv/bin/python bench/gpu/export_bundles.py --out .gpu_bundle/roofline
    # plans again under the measured profile, from those bundles (no TVM needed):
    .venv/bin/python bench/gpu/export_bundles.py --replan .gpu_bundle/roofline \\
        --measured src/partition_lab/cost_models/profiles/h200_measured.json --out .gpu_bundle/measured
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
from partition_lab.cost_models.base import evaluate
from partition_lab.errors import PlanError
from partition_lab.graph_io import Bundle, read_bundle, write_bundle
from partition_lab.plan import PartitionPlan

STRATEGIES = ("greedy", "min_size", "no_mac", "cost", "optimal", "all_cpu")
TARGET = "tensorcore"
#: The zoo in the order the GPU side runs it: the interesting tensorcore model first.
MODELS = ("resnet50_v1_b32", "resnet50_v1", "bert_encoder", "matmul_fp16_x100", "tiny_yolo_v2",
          "mobilenetv2_1.0", "densenet201", "resnet152_v1", "simple_pose_resnet152_v1b",
          "fcn_resnet101_ade")


def cost_model_for(args: argparse.Namespace) -> Any:
    """The measured-profile model if ``--measured`` is given, else the H200 roofline."""
    if args.measured:
        from partition_lab.cost_models.measured_gpu import MeasuredGpuCostModel

        return MeasuredGpuCostModel(args.measured)
    from partition_lab.cost_models import get_cost_model

    return get_cost_model(TARGET, accel_profile="h200")


def plan_bundle(bundle: Bundle, verdicts: Any, cost_model: Any, meta: dict[str, Any],
                variants: int = 0) -> Bundle:
    """``bundle`` with every strategy's plan under ``cost_model`` and the predictions in meta,
    plus ``variants`` hand-made plans (see :func:`variant_plans`)."""
    comparison = compare_plans(bundle.graph, verdicts, target=TARGET, strategies=STRATEGIES,
                               cost_model=cost_model)
    plans = dict(comparison.plans)
    plans.update(variant_plans(plans["greedy"], variants))
    predicted = {name: evaluate(plan, cost_model).to_dict() | {"regions": None, "cuts": None}
                 for name, plan in plans.items()}
    meta = {**meta, "cost_model": cost_model.name, "predicted": predicted,
            "comparison": comparison.to_dict()}
    return Bundle(bundle.graph, bundle.bindings, plans, meta)


def variant_plans(greedy: PartitionPlan, count: int, seed: int = 0) -> dict[str, PartitionPlan]:
    """Plans that are not any strategy's: the greedy plan with 1, 2, 4... random runs of
    consecutive accelerator ops moved to the CPU (as a user's exclusions would), each a valid
    plan. They spread the plans of one model so that the ranking within a model is tested too;
    reported apart from the strategies."""
    accel = greedy.accelerator_nodes
    if count <= 0 or len(accel) < 8:
        return {}
    rng = random.Random(seed)
    variants: dict[str, PartitionPlan] = {}
    for attempt in range(count * 20):
        if len(variants) == count:
            break
        runs = 2 ** (len(variants) % 4)
        length = max(1, len(accel) // (4 * runs) if attempt % 2 else len(accel) // 40)
        moved: set[int] = set()
        for _ in range(runs):
            start = rng.randrange(len(accel))
            moved.update(accel[start:start + length])
        plan = PartitionPlan.from_assignment(
            greedy.graph, greedy.target, f"variant{len(variants)}",
            [n for n in accel if n not in moved], greedy.verdicts,
            notes=[f"greedy with {len(moved)} accelerator ops moved to the CPU ({runs} runs)"])
        try:
            plan.validate()
        except PlanError:
            continue
        variants[plan.strategy] = plan
    return variants


def export_from_zoo(name: str, small: bool, cost_model: Any) -> Bundle:
    from partition_lab import zoo
    from partition_lab.api import analyze
    from partition_lab.graph_io import bindings_from_relay

    mod, params = zoo.load(name, small=small)
    analysis = analyze(mod, TARGET, params=params, cost_model=cost_model, name=name)
    entry = zoo.info(name)
    meta = {"model": name, "small": small, "target": TARGET, "input_dtype": entry.dtype,
            "input_shapes": {k: list(v) for k, v in entry.shapes(small).items()}}
    bundle = Bundle(analysis.graph, bindings_from_relay(analysis.relay))
    return plan_bundle(bundle, analysis.verdicts, cost_model, meta)


def replan(path: Path, cost_model: Any, variants: int) -> Bundle:
    old = read_bundle(path)
    verdicts = next(iter(old.plans.values())).verdicts
    meta = {k: v for k, v in old.meta.items() if k not in ("predicted", "comparison")}
    return plan_bundle(old, verdicts, cost_model, meta, variants)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for <model>.json.gz")
    parser.add_argument("--models", nargs="*", default=list(MODELS))
    parser.add_argument("--small", action="store_true", help="the zoo's small variants")
    parser.add_argument("--measured", type=Path, help="plan with this measured GPU profile")
    parser.add_argument("--replan", type=Path, help="re-plan the bundles in this folder")
    parser.add_argument("--variants", type=int, default=0,
                        help="also this many hand-made plans per model with accelerator regions")
    args = parser.parse_args(argv)
    cost_model = cost_model_for(args)
    args.out.mkdir(parents=True, exist_ok=True)
    # The GPU side runs the models in this order (the most telling first, for a cut-short run).
    (args.out / "order.json").write_text(json.dumps(args.models))
    for name in args.models:
        start = time.perf_counter()
        if args.replan:
            bundle = replan(args.replan / f"{name}.json.gz", cost_model, args.variants)
        else:
            bundle = export_from_zoo(name, args.small, cost_model)
        path = write_bundle(args.out / f"{name}.json.gz", bundle)
        totals = {s: round(p["total_s"] * 1e3, 3) for s, p in bundle.meta["predicted"].items()}
        print(f"{name}: {len(bundle.graph)} ops, {path.stat().st_size / 1e3:.0f} kB, "
              f"{time.perf_counter() - start:.1f} s, predicted ms {totals}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
