"""partition_lab.relay.frontends.load_model: every source kind, source-name spans, every bad input."""

from __future__ import annotations

import contextlib
import json
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import pytest
import tvm
from onnx import TensorProto, helper, numpy_helper
from tvm import relay

from partition_lab import zoo
from partition_lab.errors import (
    InputShapeError,
    ModelFormatError,
    ModelNotFoundError,
    UnsupportedOperatorError,
)
from partition_lab.relay.frontends import _onnx as onnx_frontend
from partition_lab.relay.frontends import calls_without_source_name, load_model, source_name
from partition_lab.relay.frontends._spans import calls_in_order
from partition_lab.relay.runtime import run_module


def op_counts(mod: tvm.IRModule) -> Counter[str]:
    return Counter(call.op.name for call in calls_in_order(mod["main"]))


def source_names(mod: tvm.IRModule) -> list[str | None]:
    return [source_name(call) for call in calls_in_order(mod["main"])]


def files_under(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


# ---------------------------------------------------------------------------- ONNX
def conv_relu_onnx(path: Path, batch: int | str = 1, conv_name: str = "my_conv",
                   relu_name: str = "") -> Path:
    """A Conv (named ``conv_name``) + Relu (unnamed by default) ONNX model with one weight."""
    weight = numpy_helper.from_array(
        np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype("float32"), "conv_w"
    )
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["data", "conv_w"], ["c"], name=conv_name, pads=[1] * 4),
            helper.make_node("Relu", ["c"], ["out"], name=relu_name),
        ],
        "conv_relu",
        [helper.make_tensor_value_info("data", TensorProto.FLOAT, [batch, 3, 8, 8])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
        [weight],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(model, path)
    return path


def test_onnx_keeps_node_names_and_returns_weights_as_params(tmp_path: Path) -> None:
    mod, params = load_model(conv_relu_onnx(tmp_path / "m.onnx"))
    assert op_counts(mod) == {"nn.conv2d": 1, "nn.relu": 1}
    # Named node: its name; unnamed node: TVM's "<OpType>_<k>".
    assert source_names(mod) == ["my_conv", "Relu_0"]
    assert set(params) == {"conv_w"}
    assert params["conv_w"].shape == (4, 3, 3, 3)
    assert [p.name_hint for p in mod["main"].params] == ["data", "conv_w"]
    assert mod["main"].ret_type == relay.TensorType((1, 4, 8, 8), "float32")


def test_onnx_dynamic_dimension_needs_input_shapes(tmp_path: Path) -> None:
    path = conv_relu_onnx(tmp_path / "dyn.onnx", batch="N")
    with pytest.raises(InputShapeError) as err:
        load_model(path)
    message = str(err.value)
    assert "input 'data' dimension 0 is dynamic ('N')" in message
    assert "input_shapes={'data': (1, 3, 224, 224)}" in message
    mod, _ = load_model(path, {"data": (2, 3, 8, 8)})
    assert mod["main"].params[0].checked_type == relay.TensorType((2, 3, 8, 8), "float32")


@pytest.mark.parametrize(
    ("shapes", "expected"),
    [
        ({"image": (1, 3, 8, 8)}, "does not have as inputs; its inputs are ['data']"),
        ({"data": (1, 3, 8)}, "has rank 3 but the model's input 'data' has rank 4"),
        ({"data": (1, 3, 0, 8)}, "is not a shape; give a tuple of positive ints"),
        ({"data": "1x3x8x8"}, "is not a shape"),
    ],
)
def test_onnx_bad_input_shapes(tmp_path: Path, shapes: dict, expected: str) -> None:
    with pytest.raises(InputShapeError) as err:
        load_model(conv_relu_onnx(tmp_path / "m.onnx", batch="N"), shapes)
    assert expected in str(err.value)


def test_onnx_unsupported_operator_names_op_and_node(tmp_path: Path) -> None:
    graph = helper.make_graph(
        [helper.make_node("LpNormalization", ["data"], ["out"], name="norm_1")],
        "lp",
        [helper.make_tensor_value_info("data", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 4])],
    )
    path = tmp_path / "lp.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    with pytest.raises(UnsupportedOperatorError) as err:
        load_model(path)
    assert "LpNormalization" in str(err.value) and "norm_1" in str(err.value)


def reduce_model(op: str, axes: list[int] | None, **attrs: int) -> onnx.ModelProto:
    """An opset-18 model of one ``op`` node on a [2, 3, 4] input, its axes a constant input
    (none at all when ``axes`` is None)."""
    inputs, constants = ["x"], []
    if axes is not None:
        inputs.append("axes")
        constants.append(numpy_helper.from_array(np.array(axes, dtype=np.int64), "axes"))
    graph = helper.make_graph(
        [helper.make_node(op, inputs, ["y"], name="norm", **attrs)], "reduce",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], constants)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


@pytest.mark.parametrize("op", ["ReduceL2", "ReduceL1", "ReduceLogSum", "ReduceSumSquare"])
@pytest.mark.parametrize(("axes", "attrs"), [
    ([1], {"keepdims": 0}),
    ([-1, 0], {"keepdims": 1}),
    (None, {"keepdims": 0}),  # no axes: every axis
    ([], {"keepdims": 1}),  # an empty list: every axis too
    (None, {"noop_with_empty_axes": 1}),  # no axes and the no-op asked for: no reduction
    ([], {"noop_with_empty_axes": 1, "keepdims": 0}),
    ([2], {"noop_with_empty_axes": 1, "keepdims": 0}),  # axes given: the no-op does not apply
])
def test_opset_18_reductions_with_axes_as_an_input_compute_what_onnxruntime_does(
        tmp_path: Path, op: str, axes: list[int] | None, attrs: dict[str, int]) -> None:
    """From opset 18 these ops take their axes as an input, not an attribute (PyTorch writes
    ``F.normalize`` as ReduceL2 so)."""
    import onnxruntime

    model = reduce_model(op, axes, **attrs)
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype("float32")
    if op == "ReduceLogSum":
        x = np.abs(x) + 0.1  # a log of positive sums
    want = onnxruntime.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    path = tmp_path / "reduce.onnx"
    onnx.save(model, path)
    mod, params = load_model(path)
    bound = relay.build_module.bind_params_by_name(mod["main"], params)
    got = run_module(tvm.IRModule.from_expr(bound), {"x": x}, opt_level=0)[0]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_tvm_alone_fails_on_opset_18_reduce_l2() -> None:
    """Why the loader converts ReduceL2 itself: TVM 0.19's converter passes the axes input to
    ``sum`` as well as the attribute (when this fails, TVM converts it and the loader's own
    converter can go)."""
    model = reduce_model("ReduceL2", [1], keepdims=1)
    with pytest.raises(TypeError, match="multiple values for argument 'axis'"):
        relay.frontend.from_onnx(model, shape={"x": (2, 3, 4)}, freeze_params=True)


@pytest.mark.parametrize("name", ["fcn_resnet101_ade", "matmul_fp16_x100"])
def test_incremental_onnx_import_gives_tvms_module(name: str, monkeypatch) -> None:
    # load_model speeds up TVM's ONNX importer (incremental typing and folding); the module
    # must be exactly what the importer makes on its own.
    path = zoo.onnx_path(name, small=True)
    fast, fast_params = load_model(path)
    monkeypatch.setattr(onnx_frontend, "incremental_inference", contextlib.nullcontext)
    plain, plain_params = load_model(path)
    assert tvm.ir.structural_equal(fast, plain, map_free_vars=True)
    assert source_names(fast) == source_names(plain)
    assert set(fast_params) == set(plain_params)


# ---------------------------------------------------------------------------- MXNet
@pytest.fixture(scope="module")
def yolo_files() -> tuple[Path, Path]:
    return zoo.mxnet_paths("tiny_yolo_v2", small=True)


def test_mxnet_symbol_file_gets_mxnet_node_names(yolo_files: tuple[Path, Path]) -> None:
    symbol_path, _ = yolo_files
    mod, params = load_model(symbol_path, {"data": (1, 3, 64, 64)})
    assert calls_without_source_name(mod) == []
    names = source_names(mod)
    # Names of the MXNet JSON nodes, one per Relay call made from them.
    graph_nodes = {n["name"] for n in json.loads(symbol_path.read_text())["nodes"]}
    assert set(names) <= graph_nodes
    assert names[:3] == ["tinyyolov20_conv0_fwd", "tinyyolov20_batchnorm0_fwd",
                         "tinyyolov20_leakyrelu0_fwd"]
    assert "tinyyolov20_conv0_weight" in params and "data" not in params


def test_mxnet_params_found_beside_or_given(tmp_path: Path, yolo_files: tuple[Path, Path]) -> None:
    symbol_path, params_path = yolo_files
    shutil.copy(symbol_path, tmp_path / "net-symbol.json")
    shutil.copy(params_path, tmp_path / "weights.params")
    with pytest.raises(ModelNotFoundError) as err:
        load_model(tmp_path / "net-symbol.json", {"data": (1, 3, 64, 64)})
    assert "net-NNNN.params" in str(err.value) and "params=" in str(err.value)
    mod, params = load_model(tmp_path / "net-symbol.json", {"data": (1, 3, 64, 64)},
                             params=tmp_path / "weights.params")
    assert op_counts(mod)["nn.conv2d"] == 8
    # The checkpoint naming convention is found without help.
    shutil.copy(params_path, tmp_path / "net-0007.params")
    assert len(load_model(tmp_path / "net-symbol.json", {"data": (1, 3, 64, 64)})[1]) == len(params)


def test_mxnet_symbol_without_shapes_lists_inputs(yolo_files: tuple[Path, Path]) -> None:
    with pytest.raises(InputShapeError) as err:
        load_model(yolo_files[0])
    assert "['data']" in str(err.value) and "input_shapes={'data':" in str(err.value)


def test_mxnet_symbol_object_with_params() -> None:
    import mxnet as mx  # here, so that the module's other tests run without MXNet
    data = mx.sym.var("data")
    out = mx.sym.Activation(mx.sym.FullyConnected(data, num_hidden=5, name="fc1"),
                            act_type="relu", name="act1")
    weights = {"fc1_weight": mx.nd.ones((5, 4)), "fc1_bias": mx.nd.zeros((5,))}
    mod, params = load_model(out, {"data": (2, 4)}, arg_params=weights)
    assert set(params) == {"fc1_weight", "fc1_bias"}
    assert Counter(source_names(mod)) == {"fc1": 3, "act1": 1}  # flatten, dense, bias_add
    assert calls_without_source_name(mod) == []


def test_gluon_block_deferred_init_and_names() -> None:
    import mxnet as mx  # here, so that the module's other tests run without MXNet
    with mx.name.NameManager():
        block = mx.gluon.nn.HybridSequential(prefix="net_")
        with block.name_scope():
            block.add(mx.gluon.nn.Conv2D(8, 3, padding=1), mx.gluon.nn.BatchNorm(),
                      mx.gluon.nn.Activation("relu"))
    block.initialize()  # shapes deferred: load_model runs the first forward pass itself
    mod, params = load_model(block, {"data": (1, 3, 16, 16)})
    assert source_names(mod) == ["net_conv0_fwd", "net_conv0_fwd", "net_batchnorm0_fwd",
                                 "net_relu0_fwd"]
    assert op_counts(mod) == {"nn.conv2d": 1, "nn.bias_add": 1, "nn.batch_norm": 1, "nn.relu": 1}
    assert params["net_conv0_weight"].shape == (8, 3, 3, 3)


def test_gluon_block_needs_named_shapes() -> None:
    import mxnet as mx  # here, so that the module's other tests run without MXNet
    block = mx.gluon.nn.Dense(3)
    block.initialize()
    with pytest.raises(InputShapeError, match="input_shapes="):
        load_model(block)


def test_unsupported_mxnet_operator_names_op_and_node(tmp_path: Path) -> None:
    import mxnet as mx  # here, so that the module's other tests run without MXNet
    data = mx.sym.var("data")
    loc = mx.sym.FullyConnected(mx.sym.flatten(data), num_hidden=6, name="loc")
    out = mx.sym.SpatialTransformer(data, loc, target_shape=(4, 4), transform_type="affine",
                                    sampler_type="bilinear", name="warp")
    path = tmp_path / "st-symbol.json"
    path.write_text(out.tojson())
    with pytest.raises(UnsupportedOperatorError) as err:
        load_model(path, {"data": (1, 1, 8, 8)})
    assert "SpatialTransformer" in str(err.value) and "warp" in str(err.value)


# ---------------------------------------------------------------------------- Relay text
def test_relay_text_round_trip_keeps_source_names(tmp_path: Path,
                                                  yolo_files: tuple[Path, Path]) -> None:
    mod, params = load_model(yolo_files[0], {"data": (1, 3, 64, 64)})
    bound = relay.build_module.bind_params_by_name(mod["main"], params)
    text_mod = relay.transform.InferType()(tvm.IRModule.from_expr(bound))
    path = tmp_path / "yolo.relay"
    path.write_text(text_mod.astext(show_meta_data=True))
    loaded, loaded_params = load_model(path)
    assert loaded_params == {}
    assert source_names(loaded) == source_names(text_mod)
    assert tvm.ir.structural_equal(loaded["main"], text_mod["main"])


def test_relay_text_without_spans_gets_op_rank_names(tmp_path: Path) -> None:
    path = tmp_path / "tiny.txt"
    path.write_text(
        '#[version = "0.0.5"]\n'
        "def @main(%x: Tensor[(?, 4), float32]) {\n"
        "  %0 = add(%x, 1f);\n  %1 = nn.relu(%0);\n  add(%1, %0)\n}\n"
    )
    with pytest.raises(InputShapeError, match="input 'x' dimension 0 is dynamic"):
        load_model(path)
    mod, params = load_model(path, {"x": (2, 4)})
    assert source_names(mod) == ["add_0", "nn.relu_0", "add_1"]
    assert mod["main"].ret_type == relay.TensorType((2, 4), "float32")


# ---------------------------------------------------------------------------- bad input
def _truncated_onnx(folder: Path) -> Path:
    data = conv_relu_onnx(folder / "ok.onnx").read_bytes()
    (folder / "ok.onnx").unlink()
    path = folder / "truncated.onnx"
    path.write_bytes(data[: len(data) // 2])
    return path


def _png_named_onnx(folder: Path) -> Path:
    path = folder / "picture.onnx"
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4)
    return path


def _random_bytes_onnx(folder: Path) -> Path:
    path = folder / "noise.onnx"
    path.write_bytes(np.random.default_rng(1).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    return path


def _empty_onnx(folder: Path) -> Path:
    path = folder / "empty.onnx"
    path.write_bytes(b"")
    return path


def _json_not_symbol(folder: Path) -> Path:
    path = folder / "config-symbol.json"
    path.write_text(json.dumps({"learning_rate": 0.1, "layers": [1, 2]}))
    return path


def _not_json(folder: Path) -> Path:
    path = folder / "model-symbol.json"
    path.write_text("nodes: [conv, relu]\n")
    return path


def _bad_relay_text(folder: Path) -> Path:
    path = folder / "model.relay"
    path.write_text("def @main(%x: Tensor[(1, 4), float32]) { nn.conv99(%x) }\n")
    return path


def _unknown_suffix(folder: Path) -> Path:
    path = folder / "model.pb"
    path.write_bytes(b"\x08\x01")
    return path


@pytest.mark.parametrize(
    ("make_file", "error", "words"),
    [
        (_truncated_onnx, ModelFormatError, ["truncated.onnx", "truncated"]),
        (_png_named_onnx, ModelFormatError, ["picture.onnx", "not a readable ONNX model"]),
        (_random_bytes_onnx, ModelFormatError, ["noise.onnx", "ONNX"]),
        (_empty_onnx, ModelFormatError, ["empty.onnx"]),
        (_json_not_symbol, ModelFormatError, ["not an MXNet symbol", "HybridBlock.export"]),
        (_not_json, ModelFormatError, ["is not JSON"]),
        (_bad_relay_text, ModelFormatError, ["not valid Relay text"]),
        (_unknown_suffix, ModelFormatError, ["'.pb'", "supported: .onnx, -symbol.json"]),
    ],
    ids=lambda value: getattr(value, "__name__", None),
)
def test_bad_files_raise_their_error_and_write_nothing(
    tmp_path: Path, make_file, error: type[Exception], words: list[str]
) -> None:
    path = make_file(tmp_path)
    before = files_under(tmp_path)
    with pytest.raises(error) as err:
        load_model(path, {"data": (1, 3, 8, 8)} if path.suffix == ".json" else None)
    assert type(err.value) is error  # the format's own error, not a subclass or a wrapper
    for word in words:
        assert word in str(err.value)
    assert files_under(tmp_path) == before


@pytest.mark.parametrize("name", ["absent.onnx", "absent-symbol.json", "absent.relay"])
def test_missing_file(tmp_path: Path, name: str) -> None:
    with pytest.raises(ModelNotFoundError, match="does not exist"):
        load_model(tmp_path / name)
    assert files_under(tmp_path) == set()


def test_not_a_model_object() -> None:
    with pytest.raises(ModelFormatError, match="got int"):
        load_model(42)
