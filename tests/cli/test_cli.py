"""The partition-lab command line: help, outputs, and one-line errors with exit code 2.

Most tests call ``main(argv)`` in-process (fast); one runs the installed console script to check
the real exit status and that no traceback reaches the user. Models: a five-op ONNX file built
here, and the small variant of a zoo model.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from partition_lab.cli import (
    COMPARE_JSON_DOC,
    PLAN_JSON_DOC,
    main,
    parse_input_shapes,
    parse_options,
)
from repo_paths import REPO_ROOT

SVG = "{http://www.w3.org/2000/svg}"
COMMANDS = ["viz", "partition", "compare", "profile", "targets", "zoo", "cache"]
ZOO_SMALL = "zoo:simple_pose_resnet152_v1b:small"


@pytest.fixture(scope="module")
def tiny_onnx(tmp_path_factory) -> Path:
    """conv -> relu -> sign -> conv -> relu: Sign is not in neuron's list, so it splits the net."""
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
        nodes, "tiny", [helper.make_tensor_value_info("data", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 8, 16, 16])],
        initializer=[w0, w1])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    path = tmp_path_factory.mktemp("models") / "tiny.onnx"
    onnx.save(model, str(path))
    return path


def run(argv, capsys) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


# ---------------------------------------------------------------------------------- help
@pytest.mark.parametrize("command", [[], *([c] for c in COMMANDS)])
def test_every_help_exits_0_with_examples(command, capsys):
    code, out, err = run([*command, "--help"], capsys)
    assert code == 0 and err == ""
    assert "examples:" in out and "usage: partition-lab" in out


@pytest.mark.parametrize("command", ["viz", "partition", "compare", "profile"])
def test_the_model_help_states_the_trust_model(command, capsys):
    """--help says a model file is data, and which .pt2 files are refused."""
    out = " ".join(run([command, "--help"], capsys)[1].split())
    assert "loading runs no code from it" in out
    assert "a .pt2 with pickles or compiled code is refused" in out


def test_every_help_example_parses(capsys):
    from partition_lab.cli import build_parser

    parser = build_parser()
    examples, counts = [], {}
    for command in [[], *([c] for c in COMMANDS)]:
        help_text = run([*command, "--help"], capsys)[1]
        found = [line.split()[1:] for line in help_text.split("examples:\n")[1].splitlines()
                 if line.strip().startswith("partition-lab")]
        counts[command[0] if command else "partition-lab"] = len(found)
        assert not command or found[0][0] == command[0]  # a command's page shows it first
        examples += found
    assert counts == {"partition-lab": 3, "viz": 7, "partition": 2, "compare": 2, "profile": 3,
                      "targets": 3, "zoo": 3, "cache": 3}
    for argv in examples:
        parser.parse_args(argv)  # raises UsageError on a flag that does not exist


def test_compare_help_documents_exactly_the_keys_compare_json_prints():
    import re

    from partition_lab import synthetic
    from partition_lab.cli import COMPARE_JSON_DOC
    from partition_lab.comparison import compare_plans
    from partition_lab.cost_models import get_cost_model
    from partition_lab.targets import get_platform

    graph = synthetic.chain(["nn.conv2d", "nn.relu", "sign", "nn.conv2d"])
    verdicts = synthetic.verdicts_by_op(graph, ["sign"])
    data = compare_plans(graph, synthetic.one_accelerator(verdicts, "acc"), strategies=["greedy", "all_accel"],
                         cost_model=get_cost_model(get_platform("neuron"))).to_dict()
    printed = set(data) | {key for row in data["rows"] for key in row}
    documented = set(re.findall(r'"(\w+)":', COMPARE_JSON_DOC))
    assert documented == printed


# ---------------------------------------------------------------------------------- parsing
def test_parse_input_shapes():
    assert parse_input_shapes(["data=1,3,224,224", "mask=2x5"]) == {
        "data": (1, 3, 224, 224), "mask": (2, 5)}
    for bad in ["data", "data=", "=1,2", "data=1,,2", "data=1,a", "data=0,3"]:
        with pytest.raises(Exception, match="bad --input-shape"):
            parse_input_shapes([bad])


def test_parse_options_types():
    assert parse_options(["min_size=3", "fp32=true", "gain=0.5", "precision=fp32", "max-ops=2"]) == {
        "min_size": 3, "fp32": True, "gain": 0.5, "precision": "fp32", "max_ops": 2}


# ---------------------------------------------------------------------------------- errors
def assert_one_line_error(code: int, err: str, *needles: str) -> None:
    assert code == 2
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("partition-lab: error: ")
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0]


@pytest.mark.parametrize("case", ["missing", "corrupt", "target", "strategy", "shape", "usage",
                                  "suffix", "zoo-name"])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(case, tiny_onnx, tmp_path, capsys):
    corrupt = tmp_path / "corrupt.onnx"
    corrupt.write_bytes(b"\x08\x07this is not a protobuf" * 10)
    output = tmp_path / "out.svg"
    argv = {
        "missing": ["viz", tmp_path / "missing.onnx"],
        "corrupt": ["viz", corrupt],
        "target": ["viz", tiny_onnx, "--target", "no_such_target"],
        "strategy": ["viz", tiny_onnx, "--strategy", "no_such_strategy"],
        "shape": ["viz", tiny_onnx, "--input-shape", "data=1,3,x"],
        "usage": ["viz", tiny_onnx, "--no-such-flag"],
        "suffix": ["viz", tiny_onnx],
        "zoo-name": ["viz", "zoo:no_such_model"],
    }[case]
    out_name = tmp_path / "out.jpg" if case == "suffix" else output
    code, _, err = run([*argv, "-o", out_name], capsys)
    needles = {"missing": ["missing.onnx"], "target": ["no_such_target"],
               "strategy": ["no_such_strategy"], "shape": ["data=1,3,x"],
               "usage": ["--no-such-flag"], "suffix": [".jpg"],
               "zoo-name": ["no_such_model"]}.get(case, [])
    assert_one_line_error(code, err, *needles)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corrupt.onnx"]


def test_partition_failure_writes_neither_file(tiny_onnx, tmp_path, capsys):
    code, _, err = run(["partition", tiny_onnx, "--exclude-node", "no_such_node",
                        "-o", tmp_path / "plan.json"], capsys)
    assert_one_line_error(code, err, "no_such_node")
    assert list(tmp_path.iterdir()) == []


def test_console_script_exit_status_and_no_traceback(tmp_path):
    script = shutil.which("partition-lab") or str(REPO_ROOT / ".venv/bin/partition-lab")
    proc = subprocess.run([script, "viz", str(tmp_path / "nope.onnx")], capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 2 and proc.stdout == ""
    assert_one_line_error(proc.returncode, proc.stderr, "nope.onnx")


def test_debug_shows_the_traceback(tmp_path, capsys):
    code, _, err = run(["viz", tmp_path / "nope.onnx", "--debug"], capsys)
    assert code == 2
    assert "Traceback" in err and err.splitlines()[-1].startswith("partition-lab: error: ")


# ---------------------------------------------------------------------------------- commands
def svg_clusters_and_cut_labels(path: Path) -> tuple[list[str], list[list[str]]]:
    svg = ET.parse(path).getroot()
    clusters, labelled = [], []
    for g in svg.iter(f"{SVG}g"):
        if g.get("class") == "cluster":
            clusters.append(g.find(f"{SVG}title").text)
        elif g.get("class") == "edge":
            words = [t.text for t in g.iter(f"{SVG}text")]
            if words:
                labelled.append(words)
    return clusters, labelled


def test_viz_onnx_file_draws_regions_and_cuts(tiny_onnx, tmp_path, capsys):
    out = tmp_path / "tiny.svg"
    code, stdout, err = run(["viz", tiny_onnx, "--target", "neuron", "--expand", "-o", out],
                            capsys)
    assert code == 0, err
    assert f"wrote {out}" in stdout
    clusters, labelled = svg_clusters_and_cut_labels(out)
    assert clusters == ["cluster_accel0", "cluster_accel1"]  # sign splits the two conv blocks
    assert len(labelled) == 4  # input in, to sign, back from sign, output out
    assert all(words[0].startswith("float32[1,") for words in labelled)
    assert "sign is not in neuron" in out.read_text()


def test_viz_zoo_model_svg(tmp_path, capsys):
    out = tmp_path / "pose.svg"
    code, _, err = run(["viz", ZOO_SMALL, "--target", "neuron@2020", "-o", out], capsys)
    assert code == 0, err
    clusters, labelled = svg_clusters_and_cut_labels(out)
    assert len(clusters) >= 2 and len(labelled) >= len(clusters)
    assert any("B" in " ".join(words) for words in labelled)  # bytes on aggregated edges


def test_viz_dot_is_identical_across_runs(tiny_onnx, tmp_path, capsys):
    first, second = tmp_path / "a.dot", tmp_path / "b.dot"
    for path in (first, second):
        assert run(["viz", tiny_onnx, "--strategy", "cost", "-o", path], capsys)[0] == 0
    assert first.read_bytes() == second.read_bytes()
    assert first.read_text().startswith("digraph")


def test_partition_writes_plan_json_and_relay_text(tiny_onnx, tmp_path, capsys):
    out = tmp_path / "plan.json"
    code, stdout, err = run(["partition", tiny_onnx, "--target", "neuron", "-o", out], capsys)
    assert code == 0, err
    plan = json.loads(out.read_text())
    assert plan["schema"] == "partition_lab.plan/2" and plan["target"] == "neuron"
    sign = [n for n in plan["nodes"] if n["op"] == "sign"]
    assert sign and sign[0]["device"] == "cpu" and "not in neuron" in sign[0]["reason"]
    always, sometimes = PLAN_JSON_DOC.split("(keys")[1].split("Present only where")
    documented = set(re.findall(r'"(\w+)"', always))
    optional = set(re.findall(r'"(\w+)"', sometimes.split("Nodes are")[0]))
    present = {*plan, *plan["devices"][0], *plan["regions"][0], *plan["nodes"][0],
               *plan["nodes"][0]["support"]["cpu"], *plan["nodes"][0]["why"], *plan["cost"],
               *plan["cost"]["regions"][0], *plan["cost"]["cuts"][0],
               *plan["nodes"][0]["outputs"][0], *plan["reason_groups"][0],
               *plan["reason_groups"][0]["details"][0]}
    assert present - (optional - documented) == documented
    assert "patterns" in plan["devices"][0]  # neuron judges patterns whole; the tiny model has
    assert "units" not in plan               # no unit, so no "units" key
    relay = (tmp_path / "plan.relay").read_text()
    assert 'Compiler="neuron"' in relay
    assert "2 regions on neuron, 1 CPU island" in stdout  # each region's device, not "accelerator"


def test_tensorcore_is_priced_by_its_shipped_profile_unless_told_otherwise(tiny_onnx, tmp_path,
                                                                         capsys):
    out = tmp_path / "plan.json"
    code, stdout, err = run(["partition", tiny_onnx, "--target", "tensorcore", "-o", out], capsys)
    assert code == 0, err
    assert "on tensorcore (cost)" in stdout  # measured prices make cost the default
    assert "shipped profile measured 2026-12-01 (not your machine)" in stdout
    assert "shipped profile" in json.loads(out.read_text())["cost"]["model"]
    for flags in (["--no-shipped-profile"], ["--profile", "t4"]):
        code, stdout, err = run(["partition", tiny_onnx, "--target", "tensorcore", *flags],
                                capsys)
        assert code == 0, err
        assert "on tensorcore (greedy)" in stdout and "predicted (roofline(" in stdout, flags
    code, stdout, err = run(["partition", tiny_onnx, "--target", "neuron"], capsys)
    assert code == 0 and "on neuron (greedy)" in stdout and "shipped" not in stdout


def test_compare_json(tiny_onnx, capsys):
    code, stdout, err = run(["compare", tiny_onnx, "--strategies", "greedy,all_cpu", "--json"],
                            capsys)
    assert code == 0, err
    data = json.loads(stdout)
    assert [row["strategy"] for row in data["rows"]] == ["greedy", "all_cpu"]
    documented = re.findall(r'"(\w+)":', COMPARE_JSON_DOC)
    assert set(data) | set(data["rows"][0]) == set(documented)
    code, table, _ = run(["compare", tiny_onnx, "--strategies", "greedy,all_cpu"], capsys)
    assert code == 0 and "greedy" in table and "all_cpu" in table


def test_targets_and_zoo_list_what_exists(capsys):
    code, out, _ = run(["targets"], capsys)
    assert code == 0 and "tensorcore" in out and "neuron" in out
    code, out, _ = run(["zoo"], capsys)
    assert code == 0 and "simple_pose_resnet152_v1b" in out and "fcn_resnet101_ade" in out


def test_profile_then_plan_from_the_measurements(tmp_path, capsys):
    cache = tmp_path / "profile.json"
    code, _, err = run(["profile", "zoo:tiny_yolo_v2:small", "--platform", "neuron@2020",
                        "--cache", cache, "--device", "cpu"], capsys)
    assert code == 0, err
    code, stdout, err = run(["compare", "zoo:tiny_yolo_v2:small", "--target", "neuron@2020",
                             "--profile-cache", cache, "--json"], capsys)
    assert code == 0, err
    data = json.loads(stdout)
    assert data["cost_model"].startswith("profiled(")
    for row in data["rows"]:
        if row["applicable"]:
            assert row["ops_measured"] == data["ops"]  # every op of every plan was timed
            assert 0 < row["total_sigma_s"] < row["total_s"]
    broken = tmp_path / "broken.json"
    broken.write_text('{"schema": "something else"}')
    code, _, err = run(["compare", "zoo:tiny_yolo_v2:small", "--profile-cache", broken], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "broken.json" in err


# ----------------------------------------------------------------- from any folder, newcomers
def test_bundled_examples_run_from_an_empty_folder(tiny_onnx, tmp_path, monkeypatch, capsys):
    """example:NAME is the package's file, whatever the current folder holds."""
    monkeypatch.chdir(tmp_path)
    code, out, err = run(["targets", "example:npu_dsp_cpu"], capsys)
    assert code == 0, err
    assert out.startswith("platform npu_dsp_cpu:") and "Compiler='dsp'" in out
    code, out, err = run(["viz", tiny_onnx, "--target", "example:npu_dsp_cpu", "--expand"],
                         capsys)
    assert code == 0, err
    assert out.splitlines()[0] == "wrote tiny.npu_dsp_cpu.greedy.svg"  # no colon in the name
    code, out, err = run(["partition", tiny_onnx, "--target", "example:npu"], capsys)
    assert code == 0, err
    assert out.startswith("tiny on npu (greedy)")
    listing = run(["targets"], capsys)[1]
    assert all(f"example:{name} " in listing
               for name in ("npu_dsp_cpu", "npu", "dsp", "mac_npu", "neuron_resize"))


def test_a_missing_target_file_points_to_the_bundled_examples(tiny_onnx, tmp_path, monkeypatch,
                                                              capsys):
    monkeypatch.chdir(tmp_path)
    code, _, err = run(["viz", tiny_onnx, "--target", "examples/platforms/npu_dsp_cpu.toml"],
                       capsys)
    assert_one_line_error(code, err, "no such target file", "example:npu_dsp_cpu",
                          "works from any folder")
    code, _, err = run(["viz", tiny_onnx, "--target", "mine.toml"], capsys)
    assert_one_line_error(code, err, "mine.toml: no such target file", "example:npu_dsp_cpu",
                          "example:neuron_resize", "targets/examples")
    code, _, err = run(["viz", tiny_onnx, "--target", "example:npu_dsp_cpo"], capsys)
    assert_one_line_error(code, err, "no bundled example example:npu_dsp_cpo",
                          "did you mean 'example:npu_dsp_cpu'?")
    assert list(tmp_path.iterdir()) == []


def test_every_bundled_example_is_package_data_and_linked_from_examples():
    """setup.cfg's package_data takes every bundled file into the wheel, and the repository's
    examples/ links to the package's files rather than holding copies."""
    import configparser
    from fnmatch import fnmatch

    from partition_lab.targets.bundled import FOLDER, example_names

    config = configparser.ConfigParser()
    config.read(REPO_ROOT / "setup.cfg")
    patterns = config["options.package_data"]["partition_lab"].split()
    package = FOLDER.parents[1]
    files = sorted(p for p in FOLDER.iterdir() if p.is_file())
    assert [p.stem for p in files] == example_names() and len(files) == 5
    for path in files:
        assert any(fnmatch(path.relative_to(package).as_posix(), p) for p in patterns), path
    examples = REPO_ROOT / "examples"
    for link in (*examples.glob("platforms/*.*"), *examples.glob("targets/*.t*"),
                 *examples.glob("targets/*.json")):
        assert link.is_symlink() and link.resolve().parent == FOLDER.resolve(), link


def test_the_bundled_examples_docstring_holds():
    import doctest

    from partition_lab.targets import bundled

    result = doctest.testmod(bundled)
    assert result.attempted >= 2 and result.failed == 0


def test_a_typo_in_a_zoo_name_says_the_close_one_in_one_line(capsys):
    from partition_lab import zoo

    unlisted = zoo.evaluation_names()
    code, _, err = run(["viz", "tv:resnet51"], capsys)
    assert_one_line_error(code, err, "no zoo model named 'tv:resnet51'",
                          "did you mean 'tv:resnet50'?", "'partition-lab zoo' lists")
    assert not any(name in err for name in unlisted) and "tv:swin_t" not in err
    code, _, err = run(["viz", "zoo:resnet51_v1"], capsys)
    assert_one_line_error(code, err, "did you mean 'zoo:resnet50_v1'?")
    code, _, err = run(["viz", "hf:bert"], capsys)  # nothing close: the hf: models, listed
    assert_one_line_error(code, err, "the hf: models are hf:bert_base, hf:distilbert;")
    assert "tv:" not in err and not any(name in err for name in unlisted)
    code, _, err = run(["viz", "mx:resnet50"], capsys)  # not a prefix: a file, but close to one
    assert_one_line_error(code, err, "does not exist", "the bundled model 'tv:resnet50'")
    code, _, err = run(["viz", "resnet50.onnx"], capsys)  # a file gone astray: no zoo guess
    assert_one_line_error(code, err, "does not exist")
    assert "bundled model" not in err


def test_zoo_marks_the_hf_models_where_transformers_is_missing(monkeypatch, capsys):
    """As it marks the gluoncv builds without MXNet: one 'here:' line saying what to install."""
    from partition_lab import zoo

    monkeypatch.setitem(sys.modules, "transformers", None)  # as where it is not installed
    out = run(["zoo"], capsys)[1]
    blocks = {b.split("\n", 1)[0]: b for b in re.split(r"\n(?=\S)", out)}
    for name in zoo.transformers_names():
        assert "here: building it needs transformers, which is not installed: pip install '." \
            in blocks[name] and ",hf]'" in blocks[name], blocks[name]
    assert "building it needs" not in blocks["tv:resnet50"]
    monkeypatch.delitem(sys.modules, "transformers")
    if zoo.missing_packages("hf:bert_base"):
        pytest.skip("transformers is not installed here")
    assert "building it needs" not in run(["zoo"], capsys)[1]


def test_the_help_says_what_viz_writes_and_prints(tiny_onnx, tmp_path, capsys):
    top = " ".join(run(["--help"], capsys)[1].split())
    assert "zoo list the bundled models (use them as tv:NAME, hf:NAME or, with MXNet, zoo:NAME)" \
        in top
    viz = " ".join(run(["viz", "--help"], capsys)[1].split())
    assert "interactive HTML view" in viz and "-o NAME.html writes the interactive view" in viz
    assert ("Prints the file written, the summary's first line (the model, target, strategy, "
            "regions and ops per device) and the predicted total") in viz
    html = tmp_path / "tiny.html"
    code, out, err = run(["viz", tiny_onnx, "-o", html], capsys)
    assert code == 0, err
    assert "<html" in html.read_text()[:500].lower()
    wrote, summary, total = out.splitlines()  # what the help says, in that order
    assert wrote == f"wrote {html}" and summary.startswith("tiny on neuron")
    assert total.startswith("predicted total: ")
