"""The PyTorch side of the TVM-built plans: the TVM-built plans' names, as bundles for the executor (runs HERE).

``bench/gpu/tvm_plans.py`` builds, per model and platform, the named plans of
:func:`partition_lab.strategies.named.named_plans` with TVM (Relax) and times them. This script
makes the same named plans of the same ONNX files through the Relay path (``load_model``,
``analyze``: the package's preparation and support table, the strategies under the cost model
``analyze`` picks) and writes one bundle per model and platform
(:mod:`partition_lab.executors.graph_io`), which ``evidence.py`` times with the PyTorch
executor and ``profile_bundles.py`` profiles, on the GPU machine. The bundle's plans are the
distinct ones (first name kept); ``meta.plans`` lists, per plan, the other names with the same
device per op (``also``), where the ops went, and its predicted time under the cost model the
plans were made with (``planned``: the shipped H200 profile on tensorcore, the inferentia1
roofline on neuron), the per-device roofline with every GPU-side device priced as the H200
(``roofline_h200``) and the shipped profile where the platform has one (``shipped``); None where
a cost model cannot price a plan (an op on a device that does not support it).

    # here (TVM 0.19 Relay; ~4-10 s per model for both platforms on 2 cores, 60 kB a bundle)
    PYTHONPATH=src TOPHUB_LOCATION=NONE .venv/bin/python bench/gpu/torch_side.py \\
        --onnx /work/onnx16 --out .gpu_bundle/torch_side [--models resnet18 googlenet ...]
    # there (python3 with torch, no TVM): the named plans timed in turns, then the profile
    PYTHONPATH=src python3 bench/gpu/evidence.py --bundles .gpu_bundle/torch_side \\
        --out $OUT/torch_side_evidence.json --budget 170 --interleave all \\
        --reference-seconds 1 --plan-seconds 1 --interleave-seconds 4
    PYTHONPATH=src python3 bench/gpu/profile_bundles.py --bundles .gpu_bundle/torch_side \\
        --device cuda:0 --cache $OUT/torch_side_profile.json --budget 100 --repeats 5 \\
        --batch-s 0.003 --log $OUT/torch_side_profile_log.json
    # here, without a GPU: the same with every crossing a CPU copy
    PYTHONPATH=src .venv/bin/python bench/gpu/evidence.py --bundles .gpu_bundle/torch_side \\
        --out /tmp/ev.json --device cpu --separate-memories --interleave all

On the H200 a plan of these models runs in 3-40 ms (the shipped profile's predictions; the
host-only plan is the slowest), so a bundle's evidence takes about 6-14 s, most of it building
executors and the plans in turns (40 rounds); 7 models x 2 platforms about 2-2.5 minutes. The
profile measures each op signature once per device kind and reuses it across bundles; what the
budget leaves unmeasured is fitted.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from partition_lab.executors.graph_io import Bundle, bindings_from_relay, write_bundle
from partition_lab.strategies.named import DEFAULT_STRATEGIES, NamedPlan, named_plans

sys.path.insert(0, str(Path(__file__).resolve().parent))
from export_bundles import placement  # noqa: E402

PLATFORMS = ("tensorcore", "neuron")


def prediction_models(support: Any, planned: Any) -> dict[str, Any]:
    """label -> cost model to price each plan with (see the module docstring)."""
    from partition_lab.cost_models import get_cost_model, shipped_cost_model

    models = {"planned": planned,
              "roofline_h200": get_cost_model(support.platform, accel_profile="h200")}
    shipped = shipped_cost_model(support.platform)
    if shipped is not None:
        models["shipped"] = shipped
    return models


def plan_record(named: NamedPlan, models: dict[str, Any]) -> dict[str, Any]:
    """What ``meta.plans`` says of one plan: its other names, placement and predictions."""
    from partition_lab.strategies.named import predicted_total

    return {"also": named.also, "strategy": named.plan.strategy, **placement(named.plan),
            "predicted_s": {label: predicted_total(named.plan, model)
                            for label, model in models.items()}}


def runnable(plans: list[NamedPlan]) -> tuple[list[NamedPlan], dict[str, str]]:
    """The plans a bundle can hold, and why each other one cannot: ``all_gpu`` and the cut
    plans put every op of their GPU part on one device whatever it supports (TVM builds any op
    for the GPU), but a bundle's plan must be valid (an op on a device that rejects it is not
    read back). The TVM-built plans' CNNs have no such op on either platform."""
    from partition_lab.errors import PlanError

    kept, left_out = [], {}
    for named in plans:
        try:
            named.plan.validate()
        except PlanError as err:
            left_out[named.name] = str(err)
            continue
        kept.append(named)
    return kept, left_out


def bundle_for(mod: Any, params: Any, model: str, platform: str,
               strategies: tuple[str, ...] = DEFAULT_STRATEGIES) -> Bundle:
    """``model`` prepared for ``platform`` as ``analyze`` does, with its named plans."""
    from partition_lab.api import analyze

    analysis = analyze(mod, platform, params=params, name=model)
    plans, left_out = runnable(named_plans(analysis.graph, analysis.support, analysis.cost_model,
                                           strategies))
    models = prediction_models(analysis.support, analysis.cost_model)
    inputs = analysis.graph.graph_inputs
    meta = {
        # the model's own name, so that a profile's leave-one-model-out holds out both platforms
        "model": model, "platform": platform, "key": f"{model}@{platform}",
        "source": "torch_side", "input_dtype": next(iter(inputs.values())).spec.dtype,
        "input_shapes": {k: list(t.spec.shape) for k, t in inputs.items()},
        "cost_model": analysis.cost_model.name,
        "cost_models": {label: m.name for label, m in models.items()},
        "plans": {p.name: plan_record(p, models) for p in plans}, "left_out": left_out}
    return Bundle(analysis.graph, bindings_from_relay(analysis.relay),
                  {p.name: p.plan for p in plans}, meta, analysis.support.platform)


def bundle_name(model: str, platform: str) -> str:
    return f"{model}_{platform.replace('@', '_')}"


def main(argv: list[str] | None = None) -> int:
    import partition_lab

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--onnx", type=Path, required=True, help="folder of <model>.onnx")
    parser.add_argument("--out", type=Path, required=True, help="folder for the bundles")
    parser.add_argument("--models", nargs="*", help="default: every .onnx of --onnx, sorted")
    parser.add_argument("--platforms", nargs="*", default=list(PLATFORMS))
    args = parser.parse_args(argv)
    models = args.models or sorted(p.stem for p in args.onnx.glob("*.onnx"))
    args.out.mkdir(parents=True, exist_ok=True)
    written = []
    for model in models:
        start = time.perf_counter()
        mod, params = partition_lab.load_model(args.onnx / f"{model}.onnx")
        for platform in args.platforms:
            bundle = bundle_for(mod, params, model, platform)
            name = bundle_name(model, platform)
            path = write_bundle(args.out / f"{name}.json.gz", bundle)
            written.append(name)
            print(f"{name}: {len(bundle.graph)} ops, {len(bundle.plans)} plans, "
                  f"{path.stat().st_size / 1e3:.0f} kB, {time.perf_counter() - start:.1f} s",
                  flush=True)
            for plan_name, why in bundle.meta["left_out"].items():
                print(f"  {plan_name:<19} left out: {why}", flush=True)
            for plan_name, rec in bundle.meta["plans"].items():
                placed = " ".join(f"{d}={c}" for d, c in rec["ops_per_device"].items())
                times = " ".join(f"{k}={'-' if v is None else f'{v * 1e3:.2f}'}"
                                 for k, v in rec["predicted_s"].items())
                also = f" (also {', '.join(rec['also'])})" if rec["also"] else ""
                print(f"  {plan_name:<19} {placed:<34} ms: {times}{also}", flush=True)
    # evidence.py and profile_bundles.py run the bundles in this order
    (args.out / "order.json").write_text(json.dumps(written))
    return 0


if __name__ == "__main__":
    sys.exit(main())
