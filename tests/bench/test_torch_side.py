"""bench/gpu/torch_side.py: the Relax side's named plans as bundles, which evidence.py times."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from repo_paths import REPO_ROOT

onnx = pytest.importorskip("onnx")
pytest.importorskip("torch")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from partition_lab.executors.graph_io import read_bundle  # noqa: E402

GPU_BENCH = REPO_ROOT / "bench" / "gpu"


@pytest.fixture(scope="module")
def scripts():
    sys.path.insert(0, str(GPU_BENCH))
    import evidence
    import torch_side

    return torch_side, evidence


@pytest.fixture(scope="module")
def bundles(tmp_path_factory, scripts) -> Path:
    """conv -> relu -> sign -> conv -> relu at batch 2 (Sign is not neuron's: a host island)."""
    rng = np.random.default_rng(0)
    w0 = numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype("float32"), "w0")
    w1 = numpy_helper.from_array(rng.standard_normal((8, 8, 3, 3)).astype("float32"), "w1")
    nodes = [
        helper.make_node("Conv", ["data", "w0"], ["c0"], name="conv0", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c0"], ["r0"], name="relu0"),
        helper.make_node("Sign", ["r0"], ["e0"], name="sign0"),
        helper.make_node("Conv", ["e0", "w1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["out"], name="relu1"),
    ]
    graph = helper.make_graph(
        nodes, "tiny", [helper.make_tensor_value_info("data", TensorProto.FLOAT, [2, 3, 8, 8])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [2, 8, 8, 8])],
        initializer=[w0, w1])
    folder = tmp_path_factory.mktemp("torch_side")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
              str(folder / "tiny.onnx"))
    assert scripts[0].main(["--onnx", str(folder), "--out", str(folder / "b")]) == 0
    return folder / "b"


def test_one_bundle_per_model_and_platform_with_the_distinct_named_plans(bundles):
    assert json.loads((bundles / "order.json").read_text()) == ["tiny_tensorcore", "tiny_neuron"]
    neuron = read_bundle(bundles / "tiny_neuron.json.gz")
    ops = len(neuron.graph)
    assert neuron.meta["model"] == "tiny" and neuron.meta["platform"] == "neuron"
    plans = neuron.meta["plans"]
    assert list(neuron.plans) == list(plans) == ["all_cpu", "greedy"]
    assert plans["all_cpu"]["ops_per_device"] == {"neuron": 0, "cpu": ops}
    assert plans["greedy"]["ops_per_device"] == {"neuron": ops - 1, "cpu": 1}  # sign on the host
    # each strategy's name on the plan it made (cost may take all_cpu for so small a model)
    named = [n for p, r in plans.items() for n in [p, *r["also"]]]
    assert sorted(named) == ["all_cpu", "cost", "greedy", "min_size", "no_mac"]
    # sign on neuron: not a valid plan, left out of the bundle with the reason
    assert set(neuron.meta["left_out"]) == {"all_gpu", "gpu_head_host_tail",
                                            "host_head_gpu_tail"}
    # the planned cost model and the H200 roofline price every plan; no shipped neuron profile
    for record in plans.values():
        assert set(record["predicted_s"]) == {"planned", "roofline_h200"}
    planned = {name: record["predicted_s"]["planned"] for name, record in plans.items()}
    assert all(seconds > 0 for seconds in planned.values()), planned
    assert planned["greedy"] != planned["all_cpu"]  # each plan priced as it is
    tensorcore = read_bundle(bundles / "tiny_tensorcore.json.gz")
    assert "shipped" in next(iter(tensorcore.meta["plans"].values()))["predicted_s"]
    # on tensorcore cuda takes every op: the eight names, none left out
    assert tensorcore.meta["left_out"] == {}
    assert tensorcore.meta["plans"]["all_gpu"]["ops_per_device"]["cuda"] == len(tensorcore.graph)
    named = {n for p, r in tensorcore.meta["plans"].items() for n in [p, *r["also"]]}
    assert named == {"all_gpu", "all_cpu", "greedy", "cost", "min_size", "no_mac",
                     "gpu_head_host_tail", "host_head_gpu_tail"}


def test_evidence_times_every_named_plan_in_turns_on_the_cpu(bundles, scripts, tmp_path):
    out = tmp_path / "ev.json"
    assert scripts[1].main(["--bundles", str(bundles), "--out", str(out), "--device", "cpu",
                            "--separate-memories", "--interleave", "all", "--models",
                            "tiny_neuron", "--reference-seconds", "0.05", "--plan-seconds",
                            "0.05", "--interleave-seconds", "0.05"]) == 0
    row = json.loads(out.read_text())["models"][0]
    assert (row["bundle"], row["platform"]) == ("tiny_neuron", "neuron")
    plans = read_bundle(bundles / "tiny_neuron.json.gz").plans
    assert set(row["interleaved"]) == {"unpartitioned", "rounds", *plans}
    assert all(row["plans"][p]["float32_mode_error_vs_float32"] < 1e-5 for p in plans)
