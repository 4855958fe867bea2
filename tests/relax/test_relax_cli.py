"""The command line with apache-tvm (Relax): viz, partition and compare on .onnx files through the
Relax adapter, and one line with exit status 2 for what needs the Relay stack.

Models: small ONNX files from ``models.py`` written to tmp_path; each command runs in-process
through ``main(argv)``.
"""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import models
import onnx
import pytest

import partition_lab
from partition_lab.cli import main
from partition_lab.core.plan import PartitionPlan

#: deconv on neuron@2020: its ConvTranspose is not in that release's list, so the plan has a CPU
#: island with a reason, between two accelerator regions.
TARGET = "neuron@2020"


@pytest.fixture(scope="module")
def deconv_onnx(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("models") / "deconv.onnx"
    onnx.save(models.deconv(), str(path))
    return path


def run(argv, capsys) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(err: str, *words: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("partition-lab: error: "), err
    assert "Traceback" not in err
    for word in words:
        assert word in lines[0], lines[0]


def test_partition_writes_the_plan_json_and_the_relax_text(deconv_onnx, tmp_path, capsys):
    plan_path = tmp_path / "plan.json"
    code, out, err = run(["partition", deconv_onnx, "--target", TARGET, "-o", plan_path], capsys)
    assert code == 0, err
    assert f"deconv on {TARGET}" in out and f"wrote {plan_path}" in out
    data = json.loads(plan_path.read_text())
    assert data["schema"] == "partition_lab.plan/2" and data["target"] == TARGET
    assert all(node["reason"] for node in data["nodes"])
    assert any(node["device"] == "cpu" for node in data["nodes"])  # the ConvTranspose
    assert data["reason_groups"] and data["cost"] is not None
    # The file loads back as the plan of the same graph.
    mod, params = partition_lab.load_model(deconv_onnx)
    graph = partition_lab.analyze(mod, TARGET, params=params).graph
    plan = PartitionPlan.from_dict(graph, data)
    assert [plan.device_of(n) for n in range(len(graph))] == \
        [node["device"] for node in data["nodes"]]
    text = plan_path.with_suffix(".relax").read_text()
    assert "Codegen" in text and "@I.ir_module" in text


def test_viz_writes_a_drawing(deconv_onnx, tmp_path, capsys):
    svg = shutil.which("dot") is not None  # graphviz's dot renders SVG; the .dot source needs none
    drawing = tmp_path / ("deconv.svg" if svg else "deconv.dot")
    code, out, err = run(["viz", deconv_onnx, "-t", TARGET, "-o", drawing], capsys)
    assert code == 0, err
    assert f"wrote {drawing}" in out and "predicted total" in out
    if svg:
        assert ET.parse(drawing).getroot().tag.endswith("svg")
    else:
        assert drawing.read_text().startswith("digraph")


def test_compare_prints_the_strategies(deconv_onnx, capsys):
    code, out, err = run(["compare", deconv_onnx, "-t", TARGET, "--strategies",
                          "greedy,all_cpu"], capsys)
    assert code == 0, err
    assert "greedy" in out and "all_cpu" in out and "best:" in out


@pytest.mark.parametrize("argv, what", [
    (["partition", "{model}", "--export", "{tmp}/x.relay"], "--export"),
    (["partition", "zoo:resnet50_v1:small"], "zoo model"),
    (["viz", "-o", "{tmp}/x.svg"], "viz without MODEL"),
    (["compare", "{tmp}/model.pt2"], "model.pt2"),
    (["profile", "{model}", "--platform", "neuron"], "profile of a model"),
])
def test_relay_only_paths_are_one_line_and_exit_2(argv, what, deconv_onnx, tmp_path, capsys):
    (tmp_path / "model.pt2").write_bytes(b"")
    argv = [a.format(model=deconv_onnx, tmp=tmp_path) for a in argv]
    code, out, err = run(argv, capsys)
    assert code == 2 and out == ""
    assert_one_line_error(err, what, "Relay stack", "pip install partition-lab")
    assert not (tmp_path / "x.relay").exists() and not (tmp_path / "x.svg").exists()


def test_a_missing_model_is_one_line(tmp_path, capsys):
    code, out, err = run(["partition", tmp_path / "absent.onnx", "-t", TARGET], capsys)
    assert code == 2 and out == ""
    assert_one_line_error(err, "absent.onnx", "does not exist")


def test_an_input_shape_the_model_lacks_is_one_line(deconv_onnx, capsys):
    code, _, err = run(["compare", deconv_onnx, "--input-shape", "nope=1,2"], capsys)
    assert code == 2
    assert_one_line_error(err, "--input-shape names ['nope']")


def test_a_symbolic_dimension_names_the_flag_that_fixes_it(tmp_path, capsys):
    path = tmp_path / "symbolic.onnx"
    onnx.save(models.symbolic_batch(), str(path))
    code, _, err = run(["partition", path, "-t", TARGET], capsys)
    assert code == 2
    assert_one_line_error(err, "'N'", "--input-shape x=1,16,16,16")
    code, out, err = run(["partition", path, "-t", TARGET, "--input-shape", "x=2,16,16,16"],
                         capsys)
    assert code == 0, err


def test_zoo_says_its_models_need_the_relay_stack_and_names_no_relay_built_twin(capsys):
    code, out, _ = run(["zoo"], capsys)
    assert code == 0
    assert out.startswith("here: apache-tvm (Relax) is installed, and the zoo's models are built "
                          "through the Relay frontends")
    assert "; use tv:" not in out  # a tv: twin is built through Relay too


def test_the_torch_runner_without_torch_suggests_no_tvm_runner(monkeypatch):
    import sys

    from partition_lab.errors import PartitionLabError
    from partition_lab.profiling.binding import _default_torch_device

    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    with pytest.raises(PartitionLabError) as caught:
        _default_torch_device()
    assert str(caught.value) == ("the torch runner needs PyTorch (pip install "
                                 "'partition-lab[torch]')")
