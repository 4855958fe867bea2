"""One uncertainty per plan: every report quotes one sigma per plan and question:
``total_sigma_s`` for how long a plan takes, ``gain_sigma_s`` for whether it beats greedy's (the
sigma ``cost`` and ``optimal`` test); "best" is the plan ``cost`` takes, with the reason when
that is not the lowest total. Otherwise, on the README tour's model, ``compare`` could say
"best: all_cpu" and, two lines down, that ``cost`` kept greedy's plan because all_cpu's gain was
within an uncertainty three times what its own table showed for greedy's plan.
The model here is that tour model's behaviour in 10 ops (mobilenet_v3_small takes minutes to
export and convert).
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from partition_lab._units import format_time
from partition_lab.cli import main
from partition_lab.schemas import load_schema
from partition_lab.strategies.base import ms


@pytest.fixture(scope="module")
def readme_like(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three blocks of conv -> relu -> depthwise conv. neuron@2020 rejects grouped convs (as
    in mobilenet_v3_small), so greedy runs four regions on the accelerator with a launch each;
    all on the CPU is predicted faster, by less than 2 sigma of that gain (the launch figure's
    error is shared by the four regions)."""
    rng = np.random.default_rng(0)
    c, inits, nodes, x = 128, [], [], "data"
    for b in range(3):
        inits += [numpy_helper.from_array(0.1 * rng.standard_normal((c, c, 3, 3)).astype("float32"),
                                          f"w{b}"),
                  numpy_helper.from_array(0.1 * rng.standard_normal((c, 1, 3, 3)).astype("float32"),
                                          f"d{b}")]
        nodes += [helper.make_node("Conv", [x, f"w{b}"], [f"c{b}"], name=f"conv{b}", pads=[1] * 4),
                  helper.make_node("Relu", [f"c{b}"], [f"r{b}"], name=f"relu{b}"),
                  helper.make_node("Conv", [f"r{b}", f"d{b}"], [f"dw{b}"], name=f"dw{b}",
                                   group=c, pads=[1] * 4)]
        x = f"dw{b}"
    nodes.append(helper.make_node("Relu", [x], ["out"], name="relu_out"))
    shape = [1, c, 28, 28]
    graph = helper.make_graph(nodes, "readme_like",
                              [helper.make_tensor_value_info("data", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, shape)],
                              initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    path = tmp_path_factory.mktemp("models") / "readme_like.onnx"
    onnx.save(model, str(path))
    return path


def run(argv: list[object], capsys: pytest.CaptureFixture[str]) -> str:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


@pytest.fixture(scope="module")
def compared(readme_like: Path) -> tuple[dict, str]:
    """compare --json and the table, both once (the table off a terminal: plain text)."""
    import contextlib
    import io

    outputs = []
    for extra in (["--json"], []):
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            assert main(["compare", str(readme_like), "--target", "neuron@2020", *extra]) == 0
        outputs.append(buffer.getvalue())
    return json.loads(outputs[0]), outputs[1]


def test_best_is_the_plan_cost_keeps(compared: tuple[dict, str]) -> None:
    data, _ = compared
    jsonschema.Draft202012Validator(load_schema("compare")).validate(data)
    rows = {r["strategy"]: r for r in data["rows"] if r["applicable"]}
    greedy, cost, all_cpu = rows["greedy"], rows["cost"], rows["all_cpu"]
    # The situation of the README model: the lowest total is all_cpu's, cost keeps greedy's.
    assert min(r["total_s"] for r in rows.values()) == all_cpu["total_s"] < greedy["total_s"]
    assert cost["robust"]["left_greedy"] is False
    assert cost["total_s"] == greedy["total_s"] and cost["gain_s"] == 0
    assert data["best"] == "cost" and data["default_strategy"] == "greedy"
    assert data["best_reason"].startswith("cost keeps greedy's plan")


def test_one_sigma_per_plan(compared: tuple[dict, str]) -> None:
    data, _ = compared
    rows = {r["strategy"]: r for r in data["rows"] if r["applicable"]}
    greedy, robust, all_cpu = rows["greedy"], rows["cost"]["robust"], rows["all_cpu"]
    # The plan cost declined is all_cpu's: its row shows the gain and the sigma cost decided by.
    assert robust["candidate_total_s"] == pytest.approx(all_cpu["total_s"])
    assert robust["gain_s"] == pytest.approx(all_cpu["gain_s"])
    assert robust["gain_sigma_s"] == pytest.approx(all_cpu["gain_sigma_s"])
    assert robust["gain_s"] <= robust["threshold_s"] == pytest.approx(2 * robust["gain_sigma_s"])
    assert rows["optimal"]["robust"] == pytest.approx(robust)
    # One error model for both sigmas: the gain's uncertainty is never more than the two
    # totals' together (the roofline's sigmas are not rescaled).
    for row in rows.values():
        assert row["gain_sigma_s"] <= greedy["total_sigma_s"] + row["total_sigma_s"] + 1e-15
        if row["total_s"] == greedy["total_s"]:
            assert row["gain_s"] == 0 and row["gain_sigma_s"] == 0


def test_the_table_says_what_the_json_says(compared: tuple[dict, str]) -> None:
    data, table = compared
    rows = {r["strategy"]: r for r in data["rows"] if r["applicable"]}
    robust, all_cpu = rows["cost"]["robust"], rows["all_cpu"]
    lines = table.splitlines()
    assert "best: all_cpu" not in table and "move(s) kept" not in table
    best = next(line for line in lines if line.startswith("best: "))
    assert best.startswith(f"best: greedy's plan, kept by cost ({format_time(rows['greedy']['total_s'])} "
                           "predicted): the best other plan it found predicts "
                           f"{ms(all_cpu['total_s'])}, a gain of {ms(robust['gain_s'])} within "
                           f"2 sigma = {ms(robust['threshold_s'])}")
    sigma = f"1 sigma = {ms(robust['gain_sigma_s'])}"
    assert sigma in best
    notes = [line for line in lines if line.startswith("  cost: ")]
    assert any(sigma in note and "kept greedy's plan" in note for note in notes)
    # The cost row is greedy's plan, and says so; its gain cells show, in parentheses, what it
    # declined: the all_cpu row's gain and +-2 sd.
    row = next(line for line in lines if line.startswith("cost "))
    assert row.startswith("cost (kept greedy's plan)")
    twice = format_time(2 * robust["gain_sigma_s"])
    assert f"({format_time(robust['gain_s'])})" in row and f"({twice})" in row
    cpu_row = next(line for line in lines if line.startswith("all_cpu "))
    assert f" {format_time(all_cpu['gain_s'])} " in cpu_row and f" {twice} " in cpu_row


def test_the_plan_json_and_summary_quote_the_same_sigma(
        readme_like: Path, compared: tuple[dict, str], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    data, _ = compared
    robust = next(r for r in data["rows"] if r["strategy"] == "cost")["robust"]
    sigma = f"1 sigma = {ms(robust['gain_sigma_s'])}"
    out = tmp_path / "plan.json"
    summary = run(["partition", readme_like, "--target", "neuron@2020", "--strategy", "cost",
                   "-o", out], capsys)
    notes = json.loads(out.read_text())["notes"]
    assert any(sigma in note and "kept greedy's plan" in note for note in notes)
    assert sigma in summary and "move(s) kept" not in summary
    # The plan's own total: the +-2 sd the summary prints and the plan JSON's total_sigma_s are
    # the cost row's total_sigma_s, which is greedy's plan's.
    total_sigma = next(r for r in data["rows"] if r["strategy"] == "cost")["total_sigma_s"]
    plan = json.loads(out.read_text())
    jsonschema.Draft202012Validator(load_schema("plan")).validate(plan)
    assert plan["cost"]["total_sigma_s"] == pytest.approx(total_sigma)
    assert f"(+-2 sd {format_time(2 * total_sigma)})" in summary
