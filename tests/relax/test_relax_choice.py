"""The measured choice on a Relax module, its candidates built by TVM and timed
(``partition_lab.relax.timing``): here every region is built for llvm (``choose_device="cpu"``),
the stand-in for the accelerators on a machine without a GPU."""

from __future__ import annotations

import json

import models
import numpy as np
import onnx
import pytest
import tvm
from helpers import load

import partition_lab
from partition_lab import api as relax_api
from partition_lab.choice import propose
from partition_lab.cli import main
from partition_lab.errors import PartitionLabError
from partition_lab.relax.runtime import run_llvm
from partition_lab.relax.timing import built_plan, runner_key, tvm_timers

#: deconv on neuron@2020: a CPU island between two accelerator regions, so the candidates
#: differ in where they cut (greedy, all on the host, ...).
MODEL, TARGET = "deconv", "neuron@2020"


@pytest.fixture(scope="module")
def analysis():
    return relax_api.analyze(load(MODEL), TARGET)


@pytest.fixture(scope="module")
def candidates(analysis):
    proposed = propose(analysis.graph, analysis.support, analysis.cost_model, k=2)
    assert len(proposed) >= 2
    return proposed


def test_the_timer_times_every_plan_in_turns(analysis, candidates):
    [timer] = tvm_timers(analysis.relay, device="cpu", max_seconds=0.2, min_rounds=3)
    times = timer({c.name: c.plan for c in candidates})
    assert set(times) == {c.name for c in candidates}
    assert all(len(t) >= 3 and all(s > 0 for s in t) for t in times.values())


def test_the_timed_plans_compute_what_the_unpartitioned_build_computes(analysis, candidates,
                                                                       tmp_path):
    rng = np.random.default_rng(0)
    inputs = {p.name: rng.standard_normal([int(d) for d in p.ty.shape.values])
              .astype(str(p.ty.dtype)) for p in analysis.relay.function.params}
    want = run_llvm(analysis.prepared_mod, inputs)
    on_host = {k: tvm.runtime.tensor(v, tvm.cpu(0)) for k, v in inputs.items()}
    for candidate in candidates:
        got = built_plan(analysis.relay, candidate.plan, tmp_path).run(on_host)
        assert len(got) == len(want)
        for a, b in zip(got, want, strict=True):
            np.testing.assert_allclose(a.numpy(), b, rtol=1e-4, atol=1e-4, err_msg=candidate.name)


def test_partition_choose_times_tvm_built_plans_and_records_the_choice():
    result = partition_lab.partition(load(MODEL), TARGET, choose=2, choose_seconds=1.0)
    choice = result.plan.choice
    assert choice is not None
    names = [c["plan"] for c in choice["candidates"]]
    assert names[0] == "greedy" and len(names) >= 2 and choice["chosen"] in names
    assert choice["runner"] == f"tvm-built ({runner_key('cpu')})"
    assert all(len(c["measured_s"]) >= 6 for c in choice["candidates"])
    assert result.plan.notes[-1].startswith("measured choice: ")
    result.plan.validate()


def test_a_kept_tvm_built_decision_is_reused_without_timing(monkeypatch):
    from partition_lab.cost_models.cache_records import ProfileCache

    cache = ProfileCache()  # no op timings: the roofline prices, the decision is kept here
    first = partition_lab.partition(load(MODEL), TARGET, choose=1, choose_seconds=0.5,
                                    profile_cache=cache)
    assert "reused" not in first.plan.choice
    [record] = cache.choices.values()
    assert record["choice"]["runner"].startswith("tvm-built (")

    def no_timing(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("timed again")

    monkeypatch.setattr("partition_lab.relax.timing.tvm_timers", no_timing)
    again = partition_lab.partition(load(MODEL), TARGET, choose=1, choose_seconds=0.5,
                                    profile_cache=cache)
    assert again.plan.choice["reused"] is True
    assert [d.device for d in again.plan.decisions] == [d.device for d in first.plan.decisions]


@pytest.mark.parametrize("device, message", [
    ("gpu", "choose_device='gpu': expected cpu, cuda or cuda:N"),
    ("cuda:7", "choose_device='cuda:7': TVM sees no such CUDA GPU here"),
])
def test_a_bad_or_missing_choose_device_is_one_error(device, message):
    if device.startswith("cuda") and tvm.cuda(7).exist:
        pytest.skip("this machine has eight GPUs")
    with pytest.raises(PartitionLabError) as caught:
        partition_lab.partition(load(MODEL), TARGET, choose=1, choose_device=device)
    assert str(caught.value) == message


def test_choose_with_a_strategy_is_refused():
    with pytest.raises(PartitionLabError, match="leave strategy"):
        relax_api.partition(load(MODEL), TARGET, choose=1, strategy="greedy")


def test_the_cli_chooses_with_tvm_built_plans(tmp_path, capsys):
    model, out = tmp_path / "deconv.onnx", tmp_path / "p.json"
    onnx.save(models.deconv(), str(model))
    code = main(["partition", str(model), "-t", TARGET, "--choose", "1", "--choose-seconds",
                 "0.5", "-o", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    choice = json.loads(out.read_text())["choice"]
    assert choice["runner"].startswith("tvm-built (") and choice["chosen"]
    assert "measured choice:" in captured.out
