"""An ONNX model that fixes its batch in a Reshape, given another batch: one line that names the
node and says what to do, not TVM's report."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from partition_lab import load_model
from partition_lab.cli import main
from partition_lab.errors import InputShapeError


def reshape_model(path: Path, target: list[int]) -> Path:
    """data (1, 4, 8) -> Reshape to ``target`` (a constant) -> Relu."""
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["data", "target"], ["r"], name="heads_reshape"),
         helper.make_node("Relu", ["r"], ["out"], name="relu")],
        "fixed", [helper.make_tensor_value_info("data", TensorProto.FLOAT, [1, 4, 8])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
        initializer=[helper.make_tensor("target", TensorProto.INT64, [len(target)], target)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(model, path)
    return path


def test_cli_names_the_reshape_and_says_what_to_do(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    model = reshape_model(tmp_path / "fixed.onnx", [1, 4, 2, 4])
    assert main(["partition", str(model), "--target", "tensorcore",
                 "--input-shape", "data=32,4,8"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and "InternalError" not in err, err
    assert err.startswith("partition-lab: error: fixed.onnx fixes its batch in Reshape node "
                          "'heads_reshape' (to 1,4,2,4), so it cannot take input shape "
                          "data=32,4,8: export it with a dynamic batch"), err
    assert "keep its shape (--input-shape data=1,4,8)" in err


def test_python_caller_gets_the_hint_in_its_terms(tmp_path: Path) -> None:
    model = reshape_model(tmp_path / "fixed.onnx", [1, 4, 2, 4])
    with pytest.raises(InputShapeError, match=r"keep its shape \(input_shapes=\{'data': "
                                              r"\(1, 4, 8\)\}\)"):
        load_model(model, {"data": (32, 4, 8)})


def test_a_shape_other_than_the_batch_is_named_as_such(tmp_path: Path) -> None:
    model = reshape_model(tmp_path / "fixed.onnx", [1, 4, 2, 4])
    with pytest.raises(InputShapeError, match=r"fixes a shape in Reshape node 'heads_reshape' "
                                              r"\(to 1,4,2,4\) that input shape data=1,4,16"):
        load_model(model, {"data": (1, 4, 16)})


def test_the_advice_holds_a_dynamic_batch_converts(tmp_path: Path) -> None:
    model = reshape_model(tmp_path / "dynamic.onnx", [-1, 4, 2, 4])
    mod, _ = load_model(model, {"data": (32, 4, 8)})
    assert [int(d) for d in mod["main"].ret_type.shape] == [32, 4, 2, 4]


def test_the_readme_example_a_zoo_onnx_file_takes_batch_32(capsys: pytest.CaptureFixture[str]
                                                           ) -> None:
    # README: cp "$(... zoo.onnx_path("resnet50_v1"))" model.onnx; viz model.onnx --input-shape
    # data=32,... (here the small variant: the same exporter, so the same Reshape-free graph)
    from partition_lab import zoo

    path = zoo.onnx_path("resnet50_v1", small=True)
    shape = zoo.info("resnet50_v1").shapes(True)["data"]
    batch32 = ",".join(map(str, (32, *shape[1:])))
    assert main(["partition", str(path), "--target", "tensorcore",
                 "--input-shape", f"data={batch32}"]) == 0
    out = capsys.readouterr().out
    assert "on tensorcore" in out and "batch 1 is not a multiple" not in out, out
