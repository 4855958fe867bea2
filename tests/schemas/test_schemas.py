"""Every JSON the CLI writes validates against its packaged JSON Schema; the CI exit code."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest

from partition_lab.cli import EXIT_FALLBACK, main
from partition_lab.schemas import SCHEMAS, load_schema, schema_path
from repo_paths import REPO_ROOT

MODEL = "zoo:resnet50_v1:small"


def validate(data: object, name: str) -> None:
    jsonschema.Draft202012Validator(load_schema(name)).validate(data)


@pytest.mark.parametrize("name", SCHEMAS)
def test_schemas_are_packaged_and_valid(name: str) -> None:
    assert schema_path(name).is_file()
    jsonschema.Draft202012Validator.check_schema(load_schema(name))


def test_setup_cfg_ships_the_schemas() -> None:
    setup = (REPO_ROOT / "setup.cfg").read_text()
    assert "schemas/*.json" in setup


@pytest.fixture(scope="module")
def plan_json(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("plan") / "plan.json"
    assert main(["partition", MODEL, "--target", "tensorcore", "-o", str(out)]) == 0
    return json.loads(out.read_text())


def test_plan_json_validates(plan_json: dict) -> None:
    validate(plan_json, "plan")
    # Per-op predicted times, shapes and dtypes are there, and the times add up to the cost.
    nodes = plan_json["nodes"]
    assert all(n["time_s"] is not None and n["outputs"] for n in nodes)
    conv = next(n for n in nodes if n["op"] == "nn.conv2d")
    assert len(conv["inputs"][0]["shape"]) == 4 and conv["weights"] and conv["flops"] > 0
    compute = sum(r["compute"] for r in plan_json["cost"]["regions"])
    assert sum(n["time_s"] for n in nodes) == pytest.approx(compute)


@pytest.mark.parametrize(("path", "value"), [
    (("nodes", 0, "time_s"), "fast"),
    (("nodes", 0, "outputs", 0, "shape"), "1x3"),
    (("regions", 0, "nodes"), []),
    (("schema",), "partition_lab.plan/1"),
])
def test_the_plan_schema_rejects_a_broken_plan(plan_json: dict, path: tuple, value: object) -> None:
    broken = copy.deepcopy(plan_json)
    where = broken
    for key in path[:-1]:
        where = where[key]
    where[path[-1]] = value
    with pytest.raises(jsonschema.ValidationError):
        validate(broken, "plan")


def test_plan_schema_requires_every_node_key(plan_json: dict) -> None:
    broken = copy.deepcopy(plan_json)
    del broken["nodes"][0]["time_s"]
    with pytest.raises(jsonschema.ValidationError, match="time_s"):
        validate(broken, "plan")


def test_compare_json_validates(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", MODEL, "--target", "tensorcore", "--strategies",
                 "greedy,all_accel,all_cpu", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    validate(data, "compare")
    assert any(not row["applicable"] for row in data["rows"])  # the null branch is exercised
    data["rows"][0]["total_s"] = None  # an applicable row without a total is invalid
    with pytest.raises(jsonschema.ValidationError):
        validate(data, "compare")


def test_profile_json_and_cache_validate(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    cache = tmp_path / "cache.json"
    assert main(["profile", MODEL, "--platform", "cpu", "--runner", "tvm-llvm", "--budget", "2",
                 "--cache", str(cache), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    validate(result, "profile_result")
    stored = json.loads(cache.read_text())
    validate(stored, "profile_cache")
    assert any(entry["ops"] for entry in stored["devices"].values())


# ---------------------------------------------------------------------------- the CI gate
@pytest.mark.parametrize(("argv", "status"), [
    ([], 0),
    (["--fail-on-fallback"], EXIT_FALLBACK),
    (["--max-host-ops", "0"], EXIT_FALLBACK),
    (["--max-host-ops", "100000"], 0),
])
def test_fallback_gate_exit_code(argv: list[str], status: int, tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    # FCN on neuron: its bilinear resizes fall back to the host.
    out = tmp_path / "plan.json"
    code = main(["partition", "zoo:fcn_resnet101_ade:small", "--target", "neuron", "-o",
                 str(out), *argv])
    assert code == status
    assert out.exists()  # the plan is written either way
    err = capsys.readouterr().err
    host = [n for n in json.loads(out.read_text())["nodes"] if n["device"] == "cpu"]
    assert host
    if status:
        assert f"{len(host)} op(s) on the host CPU" in err and len(err.strip().splitlines()) == 1
    else:
        assert "on the host CPU" not in err


def test_fallback_gate_passes_when_nothing_falls_back(tmp_path: Path) -> None:
    assert main(["viz", MODEL, "--target", "tensorcore", "--fail-on-fallback", "-o",
                 str(tmp_path / "r.dot")]) == 0


def test_bad_max_host_ops_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["partition", MODEL, "--max-host-ops", "-1"]) == 2
    assert "expected 0 or more" in capsys.readouterr().err


# ---------------------------------------------------------------------------- Python outputs
def test_reprs_are_one_short_line() -> None:
    import partition_lab
    from partition_lab import zoo

    mod, params = zoo.load("resnet50_v1", small=True)
    result = partition_lab.partition(mod, "tensorcore", params=params)
    comparison = partition_lab.compare(mod, "tensorcore", params=params,
                                       strategies=["greedy", "all_cpu"])
    for obj, start in ((result, "PartitionResult("), (comparison, "Comparison("),
                       (result.plan, "PartitionPlan(")):
        text = repr(obj)
        assert text.startswith(start) and "\n" not in text and len(text) < 200, text
    assert "'tensorcore'" in repr(result) and "best='greedy'" in repr(comparison)


def test_dir_lists_the_lazy_public_api() -> None:
    import partition_lab

    names = dir(partition_lab)
    assert {"partition", "load_model", "compare", "PartitionResult", "OpGraph"} <= set(names)
    assert set(partition_lab.__all__) <= set(names)


# ---------------------------------------------------------------------------- noise
@pytest.mark.parametrize("debug", [False, True])
def test_tvm_log_lines_only_with_debug(debug: bool, capfd: pytest.CaptureFixture[str]) -> None:
    # tensorcore's layout and precision passes log C++ warnings straight to file descriptor 2.
    argv = ["partition", MODEL, "--target", "tensorcore", *(["--debug"] if debug else [])]
    assert main(argv) == 0
    err = capfd.readouterr().err
    assert ("convert_layout.cc" in err or "to_mixed_precision.cc" in err) is debug, err[-2000:]


def test_quiet_tvm_logs_keeps_every_other_line() -> None:
    import subprocess
    import sys

    script = (
        "import os, sys\n"
        "from partition_lab._tvm_logs import quiet_tvm_logs\n"
        "with quiet_tvm_logs():\n"
        "    os.write(2, b'[12:00:00] /p/convert_layout.cc:99: Warning: noise\\n')\n"
        "    os.write(2, b'a C library line\\n')\n"
        "    print('a Python line', file=sys.stderr)\n"
        "print('after', file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=True)
    assert done.stderr.splitlines() == ["a Python line", "a C library line", "after"]


def test_a_plan_without_a_cost_model_validates() -> None:
    from partition_lab import synthetic
    from partition_lab.relay.passes.annotate import support_table
    from partition_lab.strategies import get_strategy
    from partition_lab.targets import get_platform

    graph = synthetic.simple_pose_like()
    plan = get_strategy("greedy").run(graph, support_table(graph, get_platform("neuron@2020")))
    data = json.loads(plan.to_json())
    validate(data, "plan")
    assert "cost" not in data and all(n["time_s"] is None for n in data["nodes"])
