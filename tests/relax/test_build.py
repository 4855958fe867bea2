"""Plans built by TVM, one library per region, run by the driver (bench/gpu/tvm_plans.py) on
the CPU: every region built for llvm (``--cpu``), outputs == the unpartitioned llvm build."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import tvm
from helpers import bench_script, load

import partition_lab
from partition_lab.profiling import relax_build as build
from partition_lab.relax.graph import is_tensor_constant
from partition_lab.relax.runtime import run_llvm

os.environ.setdefault("TOPHUB_LOCATION", "NONE")
MODELS = ("convnet", "upsample", "depthwise")
PLATFORMS = ("tensorcore", "neuron")


def driver():
    return bench_script("tvm_plans.py")


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tvm_plans")
    entries = []
    for name in MODELS:
        entries += build.build_model(load(name), name, PLATFORMS, out, cpu=True, weights="file")
    build.write_manifest(out, entries, cpu=True)
    return out


def test_manifest_is_well_formed(bundle):
    manifest = build.load_manifest(bundle)
    assert manifest["mode"] == "cpu" and manifest["targets"]["cuda"]["arch"] == "sm_90"
    keys = [e["key"] for e in manifest["models"]]
    assert keys == [f"{m}@{p}" for m in MODELS for p in PLATFORMS]
    for entry in manifest["models"]:
        names = [p["name"] for p in entry["plans"]]
        assert len(set(names)) == len(names) >= 3
        assert {build.GPU_PLAN, build.BASELINE} <= set(names)
        assert build.HOST_PLAN in names or any(build.HOST_PLAN in p["also"]
                                               for p in entry["plans"])
        weights = np.load(bundle / entry["weights_file"])
        assert set(weights.files) == set(entry["weights"])
        for plan in entry["plans"]:
            known = {i["name"] for i in entry["inputs"]}
            for region in plan["regions"]:  # topological order: every input made before
                assert set(region["inputs"]) <= known, (entry["key"], plan["name"])
                assert set(region["weights"]) <= set(entry["weights"])
                assert region["target"] == "llvm" and (bundle / region["lib"]).is_file()
                known |= set(region["outputs"])
            assert set(plan["outputs"]) <= known


def test_gpu_platform_plans_cross_devices(bundle):
    """At least one plan has regions on both the GPU devices and the host (copies between)."""
    manifest = build.load_manifest(bundle)
    mixed = [(e["key"], p["name"]) for e in manifest["models"] for p in e["plans"]
             if len({r["device"] == "cpu" for r in p["regions"]}) == 2]
    assert mixed


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("platform", PLATFORMS)
def test_driver_outputs_equal_the_unpartitioned_llvm_build(bundle, name, platform):
    tvm_plans = driver()
    manifest = build.load_manifest(bundle)
    raw = next(e for e in manifest["models"] if e["key"] == f"{name}@{platform}")
    entry = tvm_plans.Entry(tvm, bundle, raw, cuda=False, seed=0, modules={})
    prepared = partition_lab.analyze(load(name), platform).prepared_mod
    want = run_llvm(prepared, entry.inputs)
    whole = run_llvm(load(name), entry.inputs)
    for plan in raw["plans"]:
        got = entry.outputs(plan["name"])
        reference = whole if plan["name"] == build.BASELINE else want
        assert len(got) == len(reference)
        for a, b in zip(reference, got, strict=True):
            np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-4 if a.dtype == np.float32
                                       else 1e-2, err_msg=f"{name}@{platform} {plan['name']}")
        regions = plan["regions"]
        crossings = sum(1 for a, b in zip(regions, regions[1:], strict=False)
                        if (a["device"] == "cpu") != (b["device"] == "cpu"))
        assert entry.copies[plan["name"]] >= min(crossings, 1)


def test_driver_times_every_plan(bundle, tmp_path):
    out = tmp_path / "results.json"
    tvm_plans = driver()
    # A budget far above what 3 rounds take: the rounds stop at --max-rounds, and a loaded
    # machine (a round over twice the budget ends the rounds early) cannot cut them short.
    tvm_plans.main(["run", "--bundle", str(bundle), "--cpu", "--budget-s", "120", "--repeat", "1",
                    "--min-rounds", "2", "--max-rounds", "3", "--warmup", "1",
                    "--only", "convnet", "--out", str(out)])
    results = json.loads(out.read_text())
    assert results["mode"] == "cpu" and results["format"].endswith("/results")
    assert [e["key"] for e in results["entries"]] == [f"convnet@{p}" for p in PLATFORMS]
    for record in results["entries"]:
        assert "error" not in record and 2 <= record["rounds"] <= 3
        for plan in record["plans"]:
            assert plan["median_ms"] > 0 and plan["n"] == record["rounds"] * plan["repeat"]
            assert plan["regions"] >= 1 and plan["copies"] is not None
        base = next(p for p in record["plans"] if p["name"] == build.BASELINE)
        assert base["predicted_ms"] is None and base["gpu_regions"] == 1


def test_region_modules_lift_weights_and_keep_names():
    result = partition_lab.partition(load("convnet"), "neuron", excl_node_names=["conv2"])
    rg, plan = result.relax, result.plan
    order = build.plan_order(plan)
    modules = build.region_modules(rg, [plan.regions[r].nodes for r in order])
    assert len(modules) == len(plan.regions) >= 3
    names = [n for rm in modules for n in rm.weights]
    assert len(names) == len(set(names)) and all(n.startswith("w") for n in names)
    for rm in modules:
        params = rm.mod["main"].params
        assert len(params) == len(rm.inputs) + len(rm.weights)
        assert not [c for c in _constants(rm.mod) if len(c.ty.shape.values) >= 1]


def _constants(mod):
    found = []

    def visit(expr):
        if is_tensor_constant(expr):
            found.append(expr)

    tvm.relax.analysis.post_order_visit(mod["main"].body, visit)
    return found


def test_entries_carry_what_reprices_their_plans(bundle):
    """The entry's graph (gzipped JSON, read back without TVM) and each plan's device per op
    give the plan's predicted time again."""
    import gzip

    from partition_lab.core.plan import PartitionPlan
    from partition_lab.cost_models.base import evaluate
    from partition_lab.executors.graph_io import graph_from_dict

    manifest = build.load_manifest(bundle)
    raw = next(e for e in manifest["models"] if e["key"] == "convnet@tensorcore")
    with gzip.open(bundle / raw["graph_file"], "rt") as handle:
        graph = graph_from_dict(json.load(handle))
    analysis = partition_lab.analyze(load("convnet"), "tensorcore")
    assert len(graph) == len(analysis.graph)
    for plan in raw["plans"]:
        if plan["name"] == build.BASELINE:
            assert "op_devices" not in plan
            continue
        devices = plan["op_devices"]
        assert len(devices) == len(graph)
        assert {d: devices.count(d) for d in set(devices)} == plan["devices"]
        again = PartitionPlan.from_devices(analysis.graph, analysis.support, "again", devices)
        assert evaluate(again, analysis.cost_model).total * 1e3 == \
            pytest.approx(plan["predicted_ms"])
