"""A plan as one heterogeneous build (relax/vdevice.py): GPU regions and host islands carry
VDevices, one ``tvm.compile`` builds the whole plan, and on the CPU (both devices llvm) it
computes what the unpartitioned module does."""

from __future__ import annotations

import os

import numpy as np
import pytest
import tvm
from helpers import load
from tvm import relax

import partition_lab
from partition_lab.relax import vdevice as vd
from partition_lab.relax.graph import is_tensor_constant
from partition_lab.relax.regions import plan_order, region_modules
from partition_lab.relax.runtime import run_llvm

os.environ.setdefault("TOPHUB_LOCATION", "NONE")

#: (model, the ONNX node excluded: a host island between GPU regions on tensorcore)
CASES = (("mlp", "relu"), ("convnet", "pool1"))


def plan_with_island(name: str, node: str):
    result = partition_lab.partition(load(name), "tensorcore", excl_node_names=[node])
    devices = [result.plan.regions[r].device for r in plan_order(result.plan)]
    assert "cpu" in devices and devices[0] != "cpu" and devices[-1] != "cpu", devices
    return result


def random_inputs(rg) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {p.name: rng.standard_normal([int(d) for d in p.ty.shape]).astype(str(p.ty.dtype))
            for p in rg.function.params}


@pytest.mark.parametrize(("name", "node"), CASES)
def test_one_compile_matches_the_unpartitioned_module(name, node):
    result = plan_with_island(name, node)
    vmod = vd.vdevice_module(result.relax, result.plan, cpu=True)
    executable = vd.compile_vdevice(vmod)  # one tvm.compile, both devices
    inputs = random_inputs(result.relax)
    got = vd.run_vdevice(vmod, executable, inputs)
    prepared = partition_lab.analyze(load(name), "tensorcore").prepared_mod
    want = run_llvm(prepared, inputs)
    assert len(got) == len(want) >= 1
    for a, b in zip(want, got, strict=True):
        assert b.dtype == a.dtype and b.shape == a.shape
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


def test_realized_module_has_two_devices_and_the_copies():
    result = plan_with_island("mlp", "relu")
    vmod = vd.vdevice_module(result.relax, result.plan, cpu=True)
    assert [str(v.target.kind.name) for v in vmod.mod.global_infos["vdevice"]] == ["llvm"] * 2
    realized = vd.realize(vmod)
    counts = vd.vdevice_counts(realized)
    # input -> GPU, GPU -> host island, island -> GPU, output -> host
    assert counts["copies"] == vmod.copies == 4
    assert counts.get("llvm:0", 0) > 0 and counts.get("llvm:1", 0) > 0
    assert "none" not in counts  # RealizeVDevice gave every binding a device
    main = realized["main"]
    assert all(p.ty.vdevice is not None for p in main.params)
    relu = [b for block in main.body.blocks for b in block.bindings
            if isinstance(b.value, relax.Call) and getattr(b.value.op, "name", "") == "relax.nn.relu"]
    assert relu and all(int(b.var.ty.vdevice.vdevice_id) == vd.HOST for b in relu)
    assert vmod.regions[0][1] == vd.GPU and vd.HOST in {d for _, d in vmod.regions}


def test_cuda_mode_builds_island_kernels_for_llvm():
    """Without building for cuda: after RealizeVDevice and LegalizeOps the island's kernel has
    the llvm target and the GPU regions' kernels the cuda one."""
    result = plan_with_island("mlp", "relu")
    vmod = vd.vdevice_module(result.relax, result.plan, cpu=False)
    assert [t["kind"] for t in vmod.targets] == ["cuda", "llvm"]
    lowered = relax.transform.LegalizeOps()(vd.realize(vmod))
    kinds = {gv.name_hint: str(f.attrs["target"].kind.name)
             for gv, f in lowered.functions.items()
             if not isinstance(f, relax.Function) and f.attrs is not None and "target" in f.attrs}
    assert {k for n, k in kinds.items() if n.startswith("relu")} == {"llvm"}
    assert {k for n, k in kinds.items() if n.startswith("matmul")} == {"cuda"}


def test_constants_are_lifted_under_the_region_builders_names():
    result = plan_with_island("convnet", "pool1")
    rg, plan = result.relax, result.plan
    vmod = vd.vdevice_module(rg, plan, cpu=True)
    regions = region_modules(rg, [plan.regions[r].nodes for r in plan_order(plan)])
    weights = {n for rm in regions for n in rm.weights}
    lifted = {n for n, _ in vmod.params}
    assert weights and weights <= lifted
    assert all(n.startswith("c") for n in lifted - weights)
    constants = []
    relax.analysis.post_order_visit(vmod.mod["main"], lambda e: constants.append(e)
                                    if is_tensor_constant(e) else None)
    assert not constants  # the VM would put them on its first device, the GPU
    assert set(vmod.values) == lifted


def test_bundle_times_vdevice_builds_beside_the_per_region_driver(tmp_path):
    """``tvm_plans.py build --vdevice`` (here --cpu): every plan also as one VDevice library,
    ``<name>@vdevice``, whose outputs equal its per-region build's, timed in the same turns."""
    from helpers import bench_script

    from partition_lab.profiling import relax_build as build

    tvm_plans = bench_script("tvm_plans.py")
    entries = build.build_model(load("mlp"), "mlp", ["tensorcore"], tmp_path, cpu=True,
                                weights="file", baseline=False, vdevice=True)
    build.write_manifest(tmp_path, entries, cpu=True)
    raw = build.load_manifest(tmp_path)["models"][0]
    names = [p["name"] for p in raw["plans"]]
    twins = [n for n in names if n.endswith(build.VDEVICE)]
    assert twins and all(t.removesuffix(build.VDEVICE) in names for t in twins)
    mixed = [p for p in raw["plans"] if p.get("vdevice")
             and len({r["device"] == "cpu" for r in p["vdevice"]["regions"]}) == 2]
    assert mixed  # a cut plan: GPU regions and a host island in one library
    entry = tvm_plans.Entry(tvm, tmp_path, raw, cuda=False, seed=0, modules={})
    for twin in twins:
        want = entry.outputs(twin.removesuffix(build.VDEVICE))
        got = entry.outputs(twin)
        for a, b in zip(want, got, strict=True):
            np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6, err_msg=twin)
    for plan in mixed:
        assert entry.copies[plan["name"]] == plan["vdevice"]["copies"] >= 2
    record = tvm_plans.time_entry(entry, 5.0, repeat=1, min_rounds=1, max_rounds=2, warmup=1)
    timed = {p["name"]: p for p in record["plans"]}
    assert set(timed) == set(names)
    assert all(timed[t]["vdevice"] and timed[t]["median_ms"] > 0 for t in twins)
