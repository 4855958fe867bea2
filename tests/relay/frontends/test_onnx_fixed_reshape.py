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


# A torch.nn.TransformerEncoder as torch.onnx writes it: the TorchScript exporter without
# dynamic_axes declares the example's shape, the dynamo exporter with dynamic_axes declares a
# dynamic batch but still writes a batch of 1 into a Reshape of its second layer (it specializes a
# size-1 example dimension). Given batch 32, both used to end in TVM's "Check failed:
# oshape_sum == data_shape_sum".
@pytest.fixture(scope="module")
def encoder_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from partition_lab.errors import PartitionLabError

    try:
        from partition_lab._torch_onnx import quiet_torch, require_torch

        torch = require_torch("the TransformerEncoder cases")
    except PartitionLabError as missing:
        pytest.skip(str(missing))
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64,
                                             batch_first=True)
    encoder = torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
    encoder.eval()
    folder = tmp_path_factory.mktemp("encoder")
    files = {"torchscript": folder / "torchscript.onnx", "dynamo": folder / "dynamo.onnx",
             "dynamo_batch2": folder / "dynamo_batch2.onnx"}
    with quiet_torch():
        torch.onnx.export(encoder, (torch.randn(1, 16, 32),), files["torchscript"],
                          dynamo=False, opset_version=17, input_names=["src"])
        for key, batch in (("dynamo", 1), ("dynamo_batch2", 2)):
            torch.onnx.export(encoder, (torch.randn(batch, 16, 32),), files[key], dynamo=True,
                              input_names=["src"], dynamic_axes={"src": {0: "batch"}})
    return files


@pytest.mark.parametrize("form", ["torchscript", "dynamo"])
def test_a_transformer_encoder_gets_the_message_on_the_cli(
        encoder_files: dict[str, Path], form: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["partition", str(encoder_files[form]), "--target", "neuron",
                 "--input-shape", "src=32,16,32"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Check failed" not in err and "oshape_sum" not in err, err
    assert "so it cannot take input shape src=32,16,32" in err, err
    assert "(--input-shape src=1,16,32)" in err, err
    if form == "dynamo":
        assert f"{form}.onnx declares a dynamic batch ('src' dimension 0 (batch)) but fixes it " \
               "in Reshape node " in err, err
        assert "export it with an example batch of 2 or more" in err, err
    else:
        assert err.startswith(f"partition-lab: error: {form}.onnx fixes its batch in Reshape "
                              "node '/layers.0/self_attn/"), err


@pytest.mark.parametrize("form", ["torchscript", "dynamo"])
def test_a_transformer_encoder_gets_the_message_in_python(encoder_files: dict[str, Path],
                                                          form: str) -> None:
    with pytest.raises(InputShapeError, match=r"so it cannot take input shape src=32,16,32: .*"
                                              r"\(input_shapes=\{'src': \(1, 16, 32\)\}\)$"):
        load_model(encoder_files[form], {"src": (32, 16, 32)})


def test_the_encoder_advice_holds_an_example_batch_of_2_converts_at_32(
        encoder_files: dict[str, Path]) -> None:
    mod, _ = load_model(encoder_files["dynamo_batch2"], {"src": (32, 16, 32)})
    assert [int(d) for d in mod["main"].ret_type.shape] == [32, 16, 32]
