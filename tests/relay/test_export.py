"""The BYOC round trip: partition with a Compiler name, export, read back, build with a codegen
registered as relay.ext.<name>, run, and get the outputs of the unpartitioned model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tvm
from tvm import relay
from tvm.contrib import graph_executor

import partition_lab
from partition_lab.cli import main
from partition_lab.errors import ModelFormatError, PartitionLabError
from partition_lab.relay.export import (
    compiler_names,
    export_partitioned,
    inline_regions,
    read_partitioned,
    relay_text,
)
from partition_lab.relay.runtime import build_for_cpu
from reference_codegen import CODEGEN, compiled
from repo_paths import REPO_ROOT

REPO = REPO_ROOT
def _model() -> tuple[tvm.IRModule, dict[str, np.ndarray]]:
    """conv + relu (neuron) -> bilinear resize (host: not on neuron-cc's list) -> sigmoid (neuron)."""
    data = relay.var("data", shape=(1, 3, 8, 8))
    weight = relay.var("w", shape=(4, 3, 3, 3))
    x = relay.nn.relu(relay.nn.conv2d(data, weight, padding=(1, 1), channels=4, kernel_size=3))
    x = relay.image.resize2d(x, (16, 16), method="linear")
    x = relay.sigmoid(x)
    params = {"w": np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype("float32")}
    return tvm.IRModule.from_expr(relay.Function([data, weight], x)), params


INPUT = np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype("float32")


def _run(mod: tvm.IRModule) -> np.ndarray:
    lib = build_for_cpu(mod)
    runner = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    runner.set_input("data", INPUT)
    runner.run()
    return runner.get_output(0).numpy()


@pytest.fixture(scope="module")
def result() -> partition_lab.PartitionResult:
    mod, params = _model()
    return partition_lab.partition(mod, "neuron", params=params, compiler=CODEGEN)


def test_the_compiler_name_is_what_the_caller_set(result) -> None:
    names = compiler_names(result.mod)
    assert len(names) == 2 and set(names.values()) == {CODEGEN}
    assert all(symbol.startswith(f"tvmgen_default_{CODEGEN}_main_") for symbol in names)
    assert [d["compiler"] for d in result.to_dict()["devices"] if d["role"] == "byoc"] == [CODEGEN]
    # Without compiler= the name comes from the target (neuron@2020 -> neuron_2020).
    mod, params = _model()
    default = partition_lab.partition(mod, "neuron@2020", params=params)
    assert set(compiler_names(default.mod).values()) == {"neuron_2020"}


def test_byoc_round_trip_through_load_model(result, tmp_path) -> None:
    reference = _run(result.prepared_mod)
    path = export_partitioned(result.mod, tmp_path / "model.partitioned.relay")
    loaded, params = partition_lab.load_model(path)
    assert params == {}  # the weights are in the file
    assert set(compiler_names(loaded).values()) == {CODEGEN}
    compiled.clear()
    out = _run(loaded)
    assert sorted(compiled) == sorted(compiler_names(result.mod))  # the codegen built each region
    np.testing.assert_allclose(out, reference, rtol=1e-5, atol=1e-5)


def test_byoc_round_trip_through_tvm_alone(result, tmp_path) -> None:
    path = export_partitioned(result.mod, tmp_path / "model.relay")
    parsed = tvm.relay.fromtext(path.read_text())
    again = read_partitioned(path)
    # read_partitioned gives the PartitionGraph form back: the same global functions.
    assert compiler_names(again) == compiler_names(result.mod)
    assert {gv.name_hint for gv in again.get_global_vars()} == \
        {gv.name_hint for gv in result.mod.get_global_vars()}
    assert tvm.ir.structural_equal(again, result.mod, map_free_vars=True)
    reference = _run(result.prepared_mod)
    np.testing.assert_allclose(_run(parsed), reference, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_run(again), reference, rtol=1e-5, atol=1e-5)


def test_cli_export_with_compiler(tmp_path, capsys) -> None:
    mod, params = _model()
    bound = relay.build_module.bind_params_by_name(mod["main"], params)
    source = tmp_path / "model.relay"
    source.write_text(tvm.IRModule.from_expr(bound).astext(show_meta_data=True))
    out = tmp_path / "exported.relay"
    assert main(["partition", str(source), "--target", "neuron", "--compiler", CODEGEN,
                 "--export", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    loaded, _ = partition_lab.load_model(out)
    assert set(compiler_names(loaded).values()) == {CODEGEN}
    reference = _run(tvm.IRModule.from_expr(bound))
    np.testing.assert_allclose(_run(loaded), reference, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("target", "compiler", "message"), [
    ("neuron", "not-an-identifier", "is not an identifier"),
    ("cpu", "x", "has no BYOC device"),
    (str(REPO / "examples" / "platforms" / "npu_dsp_cpu.toml"), "x", "name each one"),
    ("neuron", {"cpu": "x"}, "not a BYOC device"),
])
def test_bad_compiler_names_are_one_line_errors(target, compiler, message) -> None:
    mod, params = _model()
    with pytest.raises(PartitionLabError, match=message):
        partition_lab.partition(mod, target, params=params, compiler=compiler)


def test_cli_compiler_per_device_and_bad_export(tmp_path, capsys) -> None:
    assert main(["partition", "zoo:resnet50_v1", "--compiler", "a=x", "--compiler", "b"]) == 2
    assert "DEVICE=NAME" in capsys.readouterr().err
    assert main(["partition", "zoo:resnet50_v1", "--export", str(tmp_path / "x.txt")]) == 2
    assert "unknown suffix" in capsys.readouterr().err


def test_read_partitioned_rejects_other_files(tmp_path) -> None:
    bad = tmp_path / "bad.relay"
    bad.write_text("not relay")
    with pytest.raises(ModelFormatError, match="not a partitioned module"):
        read_partitioned(bad)
    with pytest.raises(PartitionLabError, match="must end in .relay"):
        export_partitioned(tvm.IRModule(), tmp_path / "x.json")


def _constant_bytes(mod: tvm.IRModule) -> int:
    """The bytes of ``mod``'s constants, each object once (a shared constant is one weight)."""
    found: dict[int, int] = {}

    def visit(expr: relay.Expr) -> None:
        if isinstance(expr, relay.Constant):
            found[expr.handle.value] = expr.data.numpy().nbytes

    for func in mod.functions.values():
        if isinstance(func, relay.Function):
            relay.analysis.post_order_visit(func, visit)
    return sum(found.values())


@pytest.mark.parametrize("target", ["neuron", "tensorcore"])
def test_the_export_holds_each_weight_once(target: str, tmp_path: Path) -> None:
    """The export's weights are the prepared module's, once each, and no more than
    the model's (float16 on tensorcore: half); the file is their base64 (Relay text's metadata
    section) and the program text, nothing besides."""
    data = relay.var("data", shape=(1, 16, 16, 16))
    w1, w2 = relay.var("w1", shape=(32, 16, 3, 3)), relay.var("w2", shape=(32, 32, 3, 3))
    x = relay.nn.relu(relay.nn.conv2d(data, w1, padding=(1, 1), channels=32, kernel_size=3))
    x = relay.image.resize2d(x, (32, 32), method="linear")  # a host op between two regions
    x = relay.nn.conv2d(x, w2, padding=(1, 1), channels=32, kernel_size=3)
    rng = np.random.default_rng(0)
    params = {name: rng.standard_normal(v.type_annotation.concrete_shape).astype("float32")
              for name, v in (("w1", w1), ("w2", w2))}
    model_bytes = sum(array.nbytes for array in params.values())
    mod = tvm.IRModule.from_expr(relay.Function([data, w1, w2], x))
    result = partition_lab.partition(mod, target, params=params)
    path = export_partitioned(result.mod, tmp_path / "m.relay")
    weights = _constant_bytes(read_partitioned(path))
    assert weights == _constant_bytes(result.mod) == _constant_bytes(result.prepared_mod)
    assert weights <= (model_bytes // 2 if target == "tensorcore" else model_bytes)
    program = len(relay_text(inline_regions(result.mod)).encode())  # without the metadata
    assert path.stat().st_size <= weights * 4 / 3 + program + 8192
