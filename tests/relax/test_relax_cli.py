"""The command line with apache-tvm (Relax): viz, partition and compare on .onnx files and tv:
zoo models through the Relax adapter, --export as TVMScript with the weights, profile with the
torch runner, and one line with exit status 2 for what needs the Relay stack.

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
    (["compare", "{tmp}/model.pt2"], "model.pt2"),
    (["profile", "{model}", "--platform", "neuron", "--runner", "tvm-llvm"],
     "--runner tvm-llvm builds each op as a Relay module"),
])
def test_relay_only_paths_are_one_line_and_exit_2(argv, what, deconv_onnx, tmp_path, capsys):
    (tmp_path / "model.pt2").write_bytes(b"")
    argv = [a.format(model=deconv_onnx, tmp=tmp_path) for a in argv]
    code, out, err = run(argv, capsys)
    assert code == 2 and out == ""
    assert_one_line_error(err, what, "Relay stack", "pip install '.[relay]'")


def test_a_gluoncv_zoo_model_names_the_relay_stack_and_its_torchvision_build(capsys):
    code, out, err = run(["partition", "zoo:resnet50_v1:small", "-t", TARGET], capsys)
    assert code == 2 and out == ""
    assert_one_line_error(err, "zoo:resnet50_v1:small is built with MXNet", "Relay stack",
                          "pip install '.[relay]'", "use its torchvision build tv:resnet50:small")


# ------------------------------------------------------------------------------- --export
def test_export_writes_tvmscript_with_the_weights_that_reads_back(deconv_onnx, tmp_path, capsys):
    import tvm

    export = tmp_path / "out.relax"
    code, out, err = run(["partition", deconv_onnx, "-t", TARGET, "--export", export], capsys)
    assert code == 0, err
    assert f"wrote {export} (the partitioned module with its weights)" in out
    text = export.read_text()
    assert text.startswith("# The partitioned module of deconv as TVMScript")
    assert "metadata" in text and 'Codegen' in text
    back = tvm.script.from_source(text)
    mod, params = partition_lab.load_model(deconv_onnx)
    result = partition_lab.partition(mod, TARGET, params=params)
    tvm.ir.assert_structural_equal(back, result.mod)  # the same module, its weights included


@pytest.mark.parametrize("name, message", [
    ("out.relay", "use the suffix .relax"),
    ("out.txt", "use the suffix .relax"),
])
def test_export_to_another_suffix_is_one_line(name, message, deconv_onnx, tmp_path, capsys):
    code, out, err = run(["partition", deconv_onnx, "-t", TARGET, "--export", tmp_path / name],
                         capsys)
    assert code == 2 and out == ""
    assert_one_line_error(err, message, "TVMScript")
    assert not (tmp_path / name).exists()


def test_export_refuses_the_tvm_ffi_that_crashes_before_loading(deconv_onnx, tmp_path, capsys,
                                                               monkeypatch):
    from partition_lab.cli import relax as cli_relax

    real = cli_relax.metadata.version
    monkeypatch.setattr(cli_relax.metadata, "version", lambda name: "0.1.15.post2"
                        if name == "apache-tvm-ffi" else real(name))
    monkeypatch.setattr(cli_relax, "load", lambda *a, **k: pytest.fail("loaded the model"))
    code, out, err = run(["partition", deconv_onnx, "-t", TARGET, "--export",
                          tmp_path / "out.relax"], capsys)
    assert code == 2 and out == ""
    assert_one_line_error(err, "apache-tvm-ffi 0.1.15.post2", "pip install '.[relax]'")
    assert not (tmp_path / "out.relax").exists()


# ------------------------------------------------------------------------- tv:/hf: zoo models
@pytest.fixture
def zoo_file(deconv_onnx, monkeypatch, tmp_path):
    """tv:/hf: models' ONNX files: the deconv model stands in for the torch export (no torch
    build here); the calls the command line made are recorded."""
    from partition_lab import zoo

    monkeypatch.setenv("PARTITION_LAB_CACHE", str(tmp_path / "cache"))
    calls = []

    def onnx_path(name, *, small=False, input_shapes=None):
        calls.append((name, small, input_shapes))
        return deconv_onnx

    monkeypatch.setattr(zoo, "onnx_path", onnx_path)
    return calls


def test_a_tv_model_loads_through_its_onnx_export(zoo_file, tmp_path, capsys):
    plan = tmp_path / "plan.json"
    code, out, err = run(["partition", "tv:resnet50:small", "-t", TARGET, "-o", plan], capsys)
    assert code == 0, err
    assert zoo_file == [("tv:resnet50", True, None)]
    assert f"tv:resnet50 (small) on {TARGET}" in out
    assert json.loads(plan.read_text())["target"] == TARGET
    assert "Codegen" in plan.with_suffix(".relax").read_text()


def test_a_tv_model_at_other_shapes_is_exported_at_them(zoo_file, tmp_path, capsys):
    drawing = tmp_path / "b2.dot"
    code, out, err = run(["viz", "tv:resnet50:small", "-t", TARGET, "--input-shape",
                          "data=2,3,64,64", "-o", drawing], capsys)
    assert code == 0, err
    assert zoo_file == [("tv:resnet50", True, {"data": (2, 3, 64, 64)})]
    assert drawing.read_text().startswith("digraph")


def test_a_tv_model_without_torch_names_the_relax_torch_extra(tmp_path, capsys, monkeypatch):
    import sys

    monkeypatch.setenv("PARTITION_LAB_CACHE", str(tmp_path / "cache"))  # nothing built yet
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    code, out, err = run(["partition", "tv:resnet50:small", "-t", "tensorcore", "--export",
                          tmp_path / "out.relax"], capsys)
    assert code == 2 and out == ""
    assert_one_line_error(err, "building the zoo model 'tv:resnet50' needs torch",
                          "pip install '.[relax,torch]'")
    assert not (tmp_path / "out.relax").exists()


# --------------------------------------------------------------------------------- profile
def test_profile_times_a_models_ops_with_the_torch_runner(deconv_onnx, tmp_path, capsys):
    cache = tmp_path / "profile.json"
    code, out, err = run(["profile", deconv_onnx, "--platform", TARGET, "--cache", cache,
                          "--budget", "20"], capsys)
    assert code == 0, err
    assert out.startswith(f"profiled deconv on {TARGET}") and "measured now" in out
    assert "a Relax module: each op timed alone" in out
    data = json.loads(cache.read_text())
    (entry,) = data["devices"].values()
    assert entry["ops"] and entry["runner"] == "torch"


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


def test_zoo_says_which_models_load_here(capsys):
    code, out, _ = run(["zoo"], capsys)
    assert code == 0
    assert out.startswith("here: apache-tvm (Relax) is installed: the tv: and hf: models load "
                          "through their ONNX export")
    assert out.index("tv:resnet50\n") < out.index("resnet50_v1\n")  # what works here first
    assert "here: it needs MXNet and the Relay stack; use tv:resnet50" in out


def test_the_torch_runner_without_torch_suggests_no_tvm_runner(monkeypatch):
    import sys

    from partition_lab.errors import PartitionLabError
    from partition_lab.profiling.binding import _default_torch_device

    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    with pytest.raises(PartitionLabError) as caught:
        _default_torch_device()
    assert str(caught.value) == ("the torch runner needs PyTorch (pip install "
                                 "'.[relax,torch]' in a clone of partition_lab (torch and "
                                 "torchvision))")
