"""Profiles of TVM-built kernels: op signatures built as standalone functions (``--cpu``: all
llvm), timed by ``bench/gpu/tvm_ops.py time`` on the CPU, converted to a profile cache that
validates and prices plans (no wall-clock assertions)."""

from __future__ import annotations

import copy
import json
import math
import os
from pathlib import Path

import pytest
import tvm
from helpers import bench_script, load

from partition_lab import api
from partition_lab.core.patterns import COMPOSITE_OP_PREFIX, composite_node
from partition_lab.core.plan import PartitionPlan
from partition_lab.cost_models import ProfiledCostModel, op_signature
from partition_lab.cost_models.base import evaluate
from partition_lab.cost_models.cache_records import ProfileCache
from partition_lab.profiling import relax_ops as op_profile
from partition_lab.profiling import tvm_built
from partition_lab.profiling.profile import signatures_per_device

os.environ.setdefault("TOPHUB_LOCATION", "NONE")
MODELS = ("convnet", "attention")  # attention: a unit priced whole on neuron's accelerator
PLATFORMS = ("tensorcore", "neuron")


def script():
    return bench_script("tvm_ops.py")


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    """Build, time (small budget) and convert: the bundle with timings.json and cache.json."""
    out = tmp_path_factory.mktemp("tvm_ops")
    collector = op_profile.collect([(m, load(m)) for m in MODELS], PLATFORMS)
    op_profile.build_ops(collector, out, cpu=True)
    tvm_ops = script()
    tvm_ops.main(["time", "--bundle", str(out), "--out", str(out / "timings.json"),
                  "--budget-s", "20", "--repeat", "2", "--min-repeat-ms", "1"])
    tvm_ops.main(["to-cache", "--bundle", str(out), "--timings", str(out / "timings.json"),
                  "--out", str(out / "cache.json"), "--report", str(out / "report.json")])
    return out


def _read(bundle: Path, name: str) -> dict:
    return json.loads((bundle / name).read_text())


def test_manifest_dedupes_signatures_per_role(bundle):
    manifest = _read(bundle, "manifest.json")
    assert manifest["format"] == op_profile.FORMAT and manifest["mode"] == "cpu"
    assert set(manifest["platforms"]) == set(PLATFORMS)
    seen = set()
    for lib in manifest["libraries"]:
        assert lib["built"] and (bundle / lib["lib"]).is_file()
        for fn in lib["functions"]:
            key = (lib["role"], fn["signature"])
            assert key not in seen
            seen.add(key)
            assert fn["models"] and set(fn["models"]) <= set(MODELS)
            roles = {"host" if d == "cpu" else "gpu" for _, d in fn["devices"]}
            assert roles == {lib["role"]}
    gpu = [f for lib in manifest["libraries"] if lib["role"] == "gpu" for f in lib["functions"]]
    # tensorcore's two GPU devices share their kernels: one function serves both
    assert any({("tensorcore", "tensorcore"), ("tensorcore", "cuda")} <= set(map(tuple,
               f["devices"])) for f in gpu)
    units = [f for f in gpu if f["unit"]]
    assert units and all(f["signature"].startswith(COMPOSITE_OP_PREFIX) for f in units)
    assert [lib["floor"] for lib in manifest["libraries"]].count(True) == 2


def test_timings_hold_floors_and_copies(bundle):
    timings = _read(bundle, "timings.json")
    assert set(timings["floors"]) == {"gpu", "host"}
    for floors in timings["floors"].values():
        assert all(floors[k] > 0 for k in ("empty_s", "tiny_s", "tiny_synced_s"))
    assert len(timings["copies"]["host->gpu"]) == len(script().COPY_SIZES)


def test_every_needed_signature_has_a_record_or_a_failure(bundle):
    data = _read(bundle, "cache.json")
    store = ProfileCache.from_dict(data)
    failed = _read(bundle, "report.json")["failed"]
    for name in MODELS:
        for platform in PLATFORMS:
            analysis = api.analyze(load(name), platform)
            binding = store.binding(platform)
            wanted = {d: set(sigs) for d, sigs in
                      signatures_per_device(analysis.graph, analysis.support).items()}
            for unit, device in op_profile.unit_holders(analysis.graph, analysis.support):
                wanted[device].add(op_signature(composite_node(analysis.graph, unit)))
            for device, sigs in wanted.items():
                role = "host" if analysis.platform.device(device).is_host else "gpu"
                assert binding[device].startswith(f"{tvm_built.RUNNER}-{role}|")
                ops = store.devices[binding[device]].ops
                missing = [s for s in sigs if s not in ops and s not in failed[role]]
                assert not missing, (name, platform, device, missing[:3])
                for sig in sigs & set(ops):
                    assert name in ops[sig].models


def test_cache_entries_are_tvm_built(bundle):
    store = ProfileCache.from_dict(_read(bundle, "cache.json"))
    assert len(store.devices) == 2
    for entry in store.devices.values():
        assert entry.runner == tvm_built.RUNNER and entry.software["tvm"] == tvm.__version__
        assert entry.kind == "cpu" and entry.overheads["region_s"] >= 0  # --cpu: both llvm
        assert entry.ops
    gpu = next(e for k, e in store.devices.items() if k.startswith("tvm-built-gpu"))
    assert {"host->gpu", "gpu->host", "host->accel", "accel->host"} <= set(gpu.copies)


def _all_gpu(analysis) -> PartitionPlan:
    gpu = analysis.platform.main if not analysis.platform.main.is_host \
        else analysis.platform.primary
    return PartitionPlan.from_devices(analysis.graph, analysis.support, "all_gpu",
                                      [gpu.name] * len(analysis.graph))


@pytest.mark.parametrize("platform", PLATFORMS)
def test_the_cache_prices_plans(bundle, platform):
    data = _read(bundle, "cache.json")
    analysis = api.analyze(load("convnet"), platform, profile_cache=data)
    assert isinstance(analysis.cost_model, ProfiledCostModel)
    plan = _all_gpu(analysis)
    total = evaluate(plan, analysis.cost_model).total
    assert math.isfinite(total) and total > 0
    # a slower op in the cache makes the plan slower: the cache's times are what prices it
    device = plan.device_of(0)
    key = data["bindings"][platform][device]
    sig = op_signature(analysis.graph[0])
    slower = copy.deepcopy(data)
    record = slower["devices"][key]["ops"][sig]
    for field in ("median_s", "p10_s", "p90_s"):
        record[field] = record[field] * 10 + 1e-3
    repriced = evaluate(plan, ProfiledCostModel(slower, analysis.platform)).total
    assert repriced > total


def test_a_failed_batch_is_built_one_by_one(tmp_path, monkeypatch):
    collector = op_profile.collect([("convnet", load("convnet"))], ["neuron"])
    functions = collector.by_role()["gpu"][:3]
    bad = functions[1].signature
    real = op_profile.compile_library

    def flaky(mod, kind, target, path):
        names = [gv.name_hint for gv in mod.get_global_vars() if gv.name_hint.startswith("op_")]
        if len(names) > 1 or (names and functions[int(names[0][3:])].signature == bad):
            return False  # the batch, and one of its functions alone, "crash"
        return real(mod, kind, target, path)

    monkeypatch.setattr(op_profile, "compile_library", flaky)
    records = op_profile.build_role(functions, "gpu", tmp_path, cpu=True)
    alone = [r for r in records if not r["floor"]]
    assert len(alone) == 3
    failed = [f["signature"] for r in alone for f in r["functions"] if "build_error" in f]
    assert failed == [bad]
    assert sum(r["built"] for r in alone) == 2


def test_a_spent_budget_leaves_recorded_skips(bundle, tmp_path):
    """No time for the functions: each is recorded as skipped, the cache still validates."""
    tvm_ops = script()
    timings, out = tmp_path / "timings.json", tmp_path / "cache.json"
    tvm_ops.main(["time", "--bundle", str(bundle), "--out", str(timings), "--budget-s", "0"])
    summary = tvm_ops.main(["to-cache", "--bundle", str(bundle), "--timings", str(timings),
                            "--out", str(out)])
    manifest = _read(bundle, "manifest.json")
    for role in ("gpu", "host"):
        want = {f["signature"] for lib in manifest["libraries"] if lib["role"] == role
                for f in lib["functions"]}
        assert set(summary["failed"][role]) == want
        assert set(summary["failed"][role].values()) == {"time budget spent"}
    store = ProfileCache.load(out)
    assert not any(e.ops for e in store.devices.values())
    assert all(e.overheads for e in store.devices.values())
