"""Plan every bundled (model, platform) from a measured profile cache, in two protocols (runs HERE;
needs no TVM: bundles carry the graph and the support).

Protocol (a), *profile-guided*: the model was profiled, then planned: ``ProfiledCostModel`` on
the whole cache. Protocol (b), *unseen*: the model's own measurements are withheld, then
planned. Two ways to withhold, both computed (``--withhold``):

- ``lomo`` (leave one model out, the protocol reported as (b)): drop every signature whose
  ``models`` list holds only this model. What is left is exactly the cache that profiling every
  *other* model would have written (a signature another model also uses would be measured
  anyway), so this is what a user gets who plans a new model from a team's shared profile.
  The model's whole-graph runs (and its ops' times inside them) are dropped too.
- ``strict``: drop every signature this model's graph uses, also those other models share; every
  op of the model is then priced by the fitted model alone. Harsher than any real use; it
  measures the fit, not the profile.

Per bundle: every registered strategy's plan under (a) (``greedy``, ``cost``, ...), under (b)
(``lomo:cost``, ``strict:optimal``, ...), the baseline (``unpartitioned_gpu`` where the main
device is not the host), and 8 hand-made variant plans (greedy with runs of ops moved to the
host; see ``export_bundles.variant_plans``). Every plan is priced under all three cost models
(total and its standard deviation from the model's uncertainty,
:func:`partition_lab.strategies.robust.plan_sigma`), so each protocol's ranking can be compared
with the measured one over the same plans.

    .venv/bin/python bench/gpu/replan_profiled.py --cache bench/results/gpu_profiled_cache.json \\
        --bundles .gpu_bundle/base_tensorcore .gpu_bundle/base_neuron2020 \\
        .gpu_bundle/base_neuron --out .gpu_bundle/profiled --variants 8
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path
from typing import Any

from partition_lab.comparison import compare_plans
from partition_lab.cost_models.base import evaluate
from partition_lab.cost_models.profile_cache import read_profile_cache
from partition_lab.cost_models.profiled import ProfiledCostModel
from partition_lab.cost_models.signatures import op_signature
from partition_lab.executors.graph_io import Bundle, read_bundle, write_bundle
from partition_lab.strategies.costing import CostTables
from partition_lab.strategies.robust import plan_sigma

sys.path.insert(0, str(Path(__file__).resolve().parent))
from export_bundles import ALL_STRATEGIES, BASELINE, baseline_plan, variant_plans  # noqa: E402
from profile_bundles import bundle_paths  # noqa: E402

PROTOCOLS = ("profiled", "lomo", "strict")


def withheld_cache(cache: dict[str, Any], model: str, signatures: set[str], mode: str
                   ) -> tuple[dict[str, Any], dict[str, int]]:
    """A copy of ``cache`` without ``model``'s measurements (``mode``: lomo or strict) and how
    many signatures each entry lost."""
    out = copy.deepcopy(cache)
    dropped: dict[str, int] = {}
    for key, entry in out["devices"].items():
        ops = entry.get("ops", {})
        if mode == "lomo":
            gone = [s for s, rec in ops.items() if set(rec.get("models", [])) <= {model}]
        else:
            gone = [s for s in ops if s in signatures]
        for s in gone:
            del ops[s]
        # The model's whole-graph run and its ops' times inside it are its own measurements.
        for rec in ops.values():
            rec.get("in_graph_s", {}).pop(model, None)
            if not rec.get("in_graph_s", True):
                del rec["in_graph_s"]
        for run_key in [k for k, run in entry.get("graphs", {}).items()
                        if run.get("model", k.split("|")[0]) == model]:
            del entry["graphs"][run_key]
        dropped[key] = len(gone)
    return out, dropped


def price(plan: Any, model: Any, tables: CostTables) -> dict[str, Any]:
    cost = evaluate(plan, model)
    device = [plan.platform.index(d.device) for d in plan.decisions]
    sigma = plan_sigma(tables, device, [r.nodes for r in plan.regions])
    measured = sum(bool(model.is_measured(plan.graph[d.node], d.device)) for d in plan.decisions)
    return {"total_s": cost.total, "sigma_s": sigma, "ops_measured": measured,
            "compute_by_device_s": cost.compute_by_device(), "transfer_s": cost.transfer,
            "overhead_s": cost.overhead}


def plan_key(plan: Any) -> tuple:
    return tuple(sorted((r.device, r.nodes) for r in plan.regions))


def replan_bundle(path: Path, cache: dict[str, Any], variants: int,
                  protocols: tuple[str, ...] = PROTOCOLS) -> tuple[Bundle, dict]:
    old = read_bundle(path)
    support = next(iter(old.plans.values())).support
    graph = old.graph
    model_name = old.meta.get("model") or path.name[:-8]
    own = {op_signature(n) for n in graph.nodes}
    models: dict[str, Any] = {}
    withheld: dict[str, dict[str, int]] = {}
    for protocol in protocols:
        if protocol == "profiled":
            data = cache
        else:
            data, withheld[protocol] = withheld_cache(cache, model_name, own, protocol)
        models[protocol] = ProfiledCostModel(data, support.platform)
    plans: dict[str, Any] = {}
    comparisons: dict[str, Any] = {}
    timings: dict[str, float] = {}
    for protocol, model in models.items():
        start = time.perf_counter()
        comparison = compare_plans(graph, support, strategies=ALL_STRATEGIES, cost_model=model)
        timings[protocol] = time.perf_counter() - start
        comparisons[protocol] = comparison.to_dict()
        for name, plan in comparison.plans.items():
            plans[name if protocol == "profiled" else f"{protocol}:{name}"] = plan
    if not support.platform.main.is_host:
        plans[BASELINE] = baseline_plan(graph, support)
    plans.update(variant_plans(plans["greedy"], variants))
    tables = {p: CostTables(graph, m, support.platform, support.units) for p, m in models.items()}
    predicted = {p: {name: price(plan, m, tables[p]) for name, plan in plans.items()}
                 for p, m in models.items()}
    keys: dict[tuple, str] = {}
    same = {}
    for name, plan in plans.items():
        k = plan_key(plan)
        if k in keys:
            same[name] = keys[k]
        else:
            keys[k] = name
    coverage = {p: {d: sum(bool(m.is_measured(n, d)) for n in graph.nodes) / len(graph)
                    for d in support.platform.names} for p, m in models.items()}
    meta = {k: v for k, v in old.meta.items() if k not in ("predicted", "comparison")}
    meta.update({"cost_models": {p: m.name for p, m in models.items()},
                 "predicted_by_protocol": predicted, "comparisons": comparisons,
                 "withheld": withheld, "same_plan_as": same, "coverage": coverage,
                 "planning_s": timings, "distinct_plans": len(keys),
                 # what evidence.py and older readers take
                 "cost_model": models["profiled"].name,
                 "predicted": {n: {**v, "ops_per_device": plans[n].ops_per_device()}
                               for n, v in predicted["profiled"].items()}})
    summary = {"model": model_name, "platform": support.platform.name, "ops": len(graph),
               "plans": len(plans), "distinct": len(keys), "withheld": withheld,
               "planning_s": timings}
    return Bundle(graph, old.bindings, plans, meta, support.platform), summary


def _replan_one(job: tuple[Path, Path, Any, int, tuple[str, ...]]) -> dict[str, Any]:
    """Plan one bundle and write it under ``out``; runs in a worker process."""
    path, out, cache, variants, protocols = job
    start = time.perf_counter()
    if not isinstance(cache, dict):
        cache = read_profile_cache(cache)
    bundle, summary = replan_bundle(path, cache, variants, protocols)
    folder = out / path.parent.name
    folder.mkdir(parents=True, exist_ok=True)
    write_bundle(folder / path.name, bundle)
    summary["s"] = time.perf_counter() - start
    pred = bundle.meta["predicted_by_protocol"]
    line = " ".join(f"{n}={pred['profiled'][n]['total_s'] * 1e3:.2f}"
                    for n in ("greedy", "cost", "optimal") if n in pred["profiled"])
    print(f"{path.parent.name}/{summary['model']}: {summary['distinct']} distinct of "
          f"{summary['plans']} plans, {summary['s']:.1f} s; (a) {line}; withheld "
          f"{summary['withheld']}", flush=True)
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, required=True, help="the profile cache")
    parser.add_argument("--bundles", type=Path, nargs="+", required=True, help="folders")
    parser.add_argument("--out", type=Path, required=True,
                        help="folder: one subfolder per input folder")
    parser.add_argument("--variants", type=int, default=8)
    parser.add_argument("--models", nargs="*", help="only these models")
    parser.add_argument("--protocols", nargs="+", default=list(PROTOCOLS), choices=PROTOCOLS,
                        help="which cost models to plan under (default all three)")
    parser.add_argument("--jobs", type=int, default=1, help="bundles planned at once")
    args = parser.parse_args(argv)
    paths = [p for p in bundle_paths(args.bundles)
             if not args.models or p.name[:-8] in args.models]
    protocols = tuple(args.protocols)
    if "profiled" not in protocols:
        parser.error("--protocols needs 'profiled' (the bundle's greedy plan comes from it)")
    for folder in {p.parent for p in paths}:  # the run order of each output folder
        (args.out / folder.name).mkdir(parents=True, exist_ok=True)
        (args.out / folder.name / "order.json").write_text(json.dumps(
            [p.name[:-8] for p in paths if p.parent == folder]))
    if args.jobs > 1:
        from concurrent.futures import ProcessPoolExecutor

        jobs = [(p, args.out, args.cache, args.variants, protocols) for p in paths]
        with ProcessPoolExecutor(args.jobs) as pool:
            summaries = list(pool.map(_replan_one, jobs))
    else:
        cache = read_profile_cache(args.cache)
        summaries = [_replan_one((p, args.out, cache, args.variants, protocols)) for p in paths]
    (args.out / "replan_summary.json").write_text(json.dumps(summaries, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
