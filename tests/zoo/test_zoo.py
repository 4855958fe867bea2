"""The model zoo: every model through both frontends, op counts, names, numerics, the cache.

Every model loads through both frontends, full size and small. The full-size ONNX files take
about 2.5 minutes cold on 2 cores (export + import, see bench/load_times.py).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tvm
from tvm import relay
from tvm.contrib import graph_executor
from tvm.relay.backend import te_compiler

from partition_lab import zoo
from partition_lab.errors import UnknownModelError, UnsupportedOperatorError
from partition_lab.relay.frontends import calls_without_source_name, source_name
from partition_lab.relay.frontends._spans import calls_in_order
from partition_lab.relay.runtime import build_for_cpu
from relay_ops import op_counts

ALL = zoo.names()
EVALUATION = zoo.evaluation_names()
# Tolerances of the numerics checks: TVM (llvm) against MXNet / onnxruntime on the same weights.
# float32: both sides sum in float32 in different orders. float16 (the matmul chain): TVM
# accumulates in float16, MXNet in float32 rounded once, onnxruntime in float16 with its own
# blocking; 4 chained 64-long dot products differ by a few float16 ulps (~1e-3 relative).
TOLERANCE = {"float32": {"rtol": 1e-4, "atol": 1e-4}, "float16": {"rtol": 2e-2, "atol": 2e-2}}


def test_names_and_info() -> None:
    assert ALL == [
        "resnet152_v1", "resnet50_v1", "resnet50_v1_b32", "fcn_resnet101_ade",
        "simple_pose_resnet152_v1b", "tiny_yolo_v2", "matmul_fp16_x100", "mobilenetv2_1.0",
        "densenet201", "bert_encoder",
    ]
    fcn = zoo.info("fcn_resnet101_ade")
    assert fcn.input_shapes == {"data": (1, 3, 200, 200)}
    assert fcn.source == "gluoncv model_zoo" and "227.8 ms" in fcn.story
    assert zoo.info("resnet50_v1_b32").input_shapes == {"data": (32, 3, 224, 224)}
    assert zoo.info("tiny_yolo_v2").source == "written here"
    assert zoo.info("matmul_fp16_x100").dtype == "float16"


def test_unknown_model_names_the_close_one_or_the_listed_ones_of_its_kind() -> None:
    with pytest.raises(UnknownModelError) as err:
        zoo.info("resnet51")
    assert str(err.value) == ("no zoo model named 'resnet51' (did you mean 'resnet50_v1'?); "
                              "partition_lab.zoo.names(), torchvision_names() and "
                              "transformers_names() list the bundled models")
    with pytest.raises(UnknownModelError) as err:
        zoo.load("tv:resnet_fifty")
    text = str(err.value)
    # Nothing close: the tv: models the listing shows, and only those.
    assert f"the tv: models are {', '.join(zoo.torchvision_names())};" in text
    assert not any(name in text for name in ALL + EVALUATION + zoo.transformers_names())
    with pytest.raises(UnknownModelError, match=r"did you mean 'ssd_512_resnet50_v1_voc'\?"):
        zoo.info("ssd_512_resnet50_v1_vco")  # an evaluation model loads, so it is suggested


def test_missing_packages_are_found_without_importing_them(monkeypatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "transformers", None)  # blocked: as if not installed
    assert zoo.missing_packages("hf:bert_base") == ["transformers"]
    assert "transformers" not in zoo.missing_packages("tv:resnet50")
    assert zoo.missing_packages("resnet50_v1") == []  # MXNet is mxnet_installed()'s question


def check_module(name: str, small: bool, frontend: str) -> tvm.IRModule:
    """Load the model, check its op counts and that every call carries a source name."""
    mod, params = zoo.load(name, frontend=frontend, small=small)
    entry = zoo.info(name)
    counts = op_counts(mod)
    expected = entry.op_counts(small, frontend)
    assert {op: counts.get(op, 0) for op in expected} == expected
    assert calls_without_source_name(mod) == []
    shapes = entry.shapes(small)
    main_inputs = {p.name_hint: p.checked_type for p in mod["main"].params}
    for input_name, shape in shapes.items():
        assert main_inputs[input_name] == relay.TensorType(shape, entry.dtype)
    assert set(main_inputs) == set(shapes) | set(params)
    return mod


@pytest.mark.slow
@pytest.mark.parametrize("name", ALL)
def test_full_size_through_mxnet(name: str) -> None:
    check_module(name, small=False, frontend="mxnet")


@pytest.mark.slow
@pytest.mark.parametrize("name", ALL)
def test_full_size_through_onnx(name: str) -> None:
    check_module(name, small=False, frontend="onnx")


@pytest.mark.parametrize("frontend", ["mxnet", "onnx"])
@pytest.mark.parametrize("name", ALL)
def test_small_variant_loads(name: str, frontend: str) -> None:
    check_module(name, small=True, frontend=frontend)


@pytest.mark.slow
def test_simple_pose_has_the_reports_node_names() -> None:
    mod = check_module("simple_pose_resnet152_v1b", small=False, frontend="mxnet")
    names = [(call.op.name, source_name(call)) for call in calls_in_order(mod["main"])]
    deconvs = [i for i, (op, _) in enumerate(names) if op == "nn.conv2d_transpose"]
    # Each deconvolution is followed by BatchNorm + ReLU with the names the report excluded
    # (excl_node_names = ['batchnormcudnnoff0_fwd', 'relu0_fwd', 'batchnormcudnnoff1_fwd', ...]).
    for k, index in enumerate(deconvs):
        assert names[index + 1] == ("nn.batch_norm", f"batchnormcudnnoff{k}_fwd")
        assert names[index + 2] == ("nn.relu", f"relu{k}_fwd")


def test_evaluation_models_are_gluoncv_models_kept_out_of_names() -> None:
    assert EVALUATION == ["ssd_512_resnet50_v1_voc", "yolo3_darknet53_voc",
                          "center_net_resnet18_v1b_voc",
                          "deeplab_resnet50_ade", "alpha_pose_resnet101_v1b_coco",
                          "danet_resnet50_citys"]
    assert not set(EVALUATION) & set(ALL)
    for name in EVALUATION:
        entry = zoo.info(name)
        assert entry.evaluation and entry.source == "gluoncv model_zoo"
        assert entry.small_input_shapes == {"data": (1, 3, 64, 64)}
    assert not any(zoo.info(name).evaluation for name in ALL)
    assert zoo.info("alpha_pose_resnet101_v1b_coco").input_shapes == {"data": (1, 3, 320, 256)}


def test_a_frontend_that_cannot_convert_the_model_says_why() -> None:
    assert zoo.info("ssd_512_resnet50_v1_voc").frontends == ("mxnet",)
    assert zoo.info("yolo3_darknet53_voc").frontends == ("mxnet",)
    with pytest.raises(UnsupportedOperatorError, match="NonMaxSuppression.*frontend='mxnet'"):
        zoo.load("ssd_512_resnet50_v1_voc", frontend="onnx", small=True)


@pytest.mark.parametrize("name, frontend", [(name, frontend) for name in EVALUATION
                                            for frontend in zoo.info(name).frontends])
def test_small_evaluation_variant_loads(name: str, frontend: str) -> None:
    check_module(name, small=True, frontend=frontend)


@pytest.mark.parametrize("frontend", ["mxnet", "onnx"])
def test_danet_attention_is_batch_matmul_through_both_frontends(frontend: str) -> None:
    """gluoncv's position attention writes batch_dot(transpose_a=True), which TVM's MXNet
    frontend rejects; the zoo's equivalent form gives the same four batch matmuls either way."""
    mod, _ = zoo.load("danet_resnet50_citys", frontend=frontend, small=True)
    matmuls = [c for c in calls_in_order(mod["main"]) if c.op.name == "nn.batch_matmul"]
    # PAM: attention (1, 64, 64) over the 8x8 positions and its (1, 16, 64) product; CAM:
    # attention (1, 16, 16) over the 16 channels and its (1, 16, 64) product.
    shapes = sorted(tuple(int(d) for d in c.checked_type.shape) for c in matmuls)
    assert shapes == [(1, 16, 16), (1, 16, 64), (1, 16, 64), (1, 64, 64)]


@pytest.mark.parametrize("frontend", ["mxnet", "onnx"])
def test_matmul_is_nt_batch_matmul(frontend: str) -> None:
    mod, _ = zoo.load("matmul_fp16_x100", frontend=frontend, small=True)
    matmuls = [c for c in calls_in_order(mod["main"]) if c.op.name == "nn.batch_matmul"]
    assert len(matmuls) == 4
    assert all(c.attrs.transpose_b and not c.attrs.transpose_a for c in matmuls)
    assert all(c.checked_type == relay.TensorType((1, 64, 64), "float16") for c in matmuls)
    names = [source_name(c) for c in matmuls]
    assert names == [f"matmulchain0_batch_dot{k}" for k in range(4)]


def test_fcn_resizes_both_heads_to_the_input_size() -> None:
    mod, _ = zoo.load("fcn_resnet101_ade", small=True)
    resizes = [c for c in calls_in_order(mod["main"]) if c.op.name == "image.resize2d"]
    assert [tuple(c.checked_type.shape) for c in resizes] == [(1, 8, 64, 64)] * 2
    assert [c.args[0].op.name for c in resizes] == ["nn.conv2d", "nn.conv2d"] or all(
        c.args[0].op.name == "nn.bias_add" for c in resizes
    )


# ---------------------------------------------------------------------------- numerics
@pytest.fixture(autouse=True, scope="module")
def _cached_libinfo() -> Iterator[None]:
    """TVM's lowering re-reads its build info (a 300-entry map) for every op: a fifth of the
    compile time of these small models. It is constant, so read it once."""
    original = te_compiler.libinfo
    te_compiler.libinfo = functools.cache(original)
    yield
    te_compiler.libinfo = original


# Compiled modules by structure: small variants that share an architecture and input shape
# (resnet50_v1 and resnet152_v1) compile once, with their weights fed as inputs.
_COMPILED: dict[int, list[tuple[tvm.IRModule, graph_executor.GraphModule]]] = {}


def compile_for_llvm(mod: tvm.IRModule) -> graph_executor.GraphModule:
    key = tvm.ir.structural_hash(mod)
    for seen, module in _COMPILED.get(key, []):
        if tvm.ir.structural_equal(seen, mod):
            return module
    # opt_level 0 (no fusion, no layout change) and LLVM -O0 compile several times faster than
    # the defaults here and still check what these tests are about: that the frontends' Relay
    # computes the model. build_for_cpu adds the configuration every llvm build here needs.
    lib = build_for_cpu(mod, opt_level=0, target="llvm -opt-level=0")
    module = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    _COMPILED.setdefault(key, []).append((mod, module))
    return module


def run_relay(mod: tvm.IRModule, params: dict, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    module = compile_for_llvm(mod)
    module.set_input(**inputs, **params)
    module.run()
    return [module.get_output(i).numpy() for i in range(module.get_num_outputs())]


@pytest.mark.slow
@pytest.mark.parametrize("frontend", ["mxnet", "onnx"])
@pytest.mark.parametrize("name", ALL)
def test_small_variant_numerics_match_the_reference(name: str, frontend: str) -> None:
    inputs = zoo.sample_inputs(name, small=True, seed=1)
    mod, params = zoo.load(name, frontend=frontend, small=True)
    expected = zoo.reference_outputs(name, inputs, small=True, frontend=frontend)
    actual = run_relay(mod, params, inputs)
    assert len(actual) == len(expected)
    for got, want in zip(actual, expected, strict=True):
        assert got.shape == want.shape and got.dtype == want.dtype
        assert np.abs(want).max() > 1e-2  # the model computes something
        np.testing.assert_allclose(got, want, **TOLERANCE[zoo.info(name).dtype])


def test_mxnet_and_onnx_references_agree() -> None:
    # The ONNX file is an export of the MXNet files: same weights, same function.
    inputs = zoo.sample_inputs("simple_pose_resnet152_v1b", small=True)
    via_mxnet = zoo.reference_outputs("simple_pose_resnet152_v1b", inputs, frontend="mxnet")
    via_onnx = zoo.reference_outputs("simple_pose_resnet152_v1b", inputs, frontend="onnx")
    np.testing.assert_allclose(via_onnx[0], via_mxnet[0], rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------------------- cache
def test_sample_inputs_are_reproducible() -> None:
    first = zoo.sample_inputs("matmul_fp16_x100", small=True, seed=3)
    assert first["data"].shape == (1, 64, 64) and first["data"].dtype == np.float16
    np.testing.assert_array_equal(first["data"],
                                  zoo.sample_inputs("matmul_fp16_x100", small=True, seed=3)["data"])
    assert not np.array_equal(first["data"],
                              zoo.sample_inputs("matmul_fp16_x100", small=True, seed=4)["data"])


def test_files_are_cached_and_reused(zoo_cache: Path) -> None:
    symbol_path, params_path = zoo.mxnet_paths("tiny_yolo_v2", small=True)
    onnx_file = zoo.onnx_path("tiny_yolo_v2", small=True)
    assert zoo.cache_dir().parent == zoo_cache
    for path in (symbol_path, params_path, onnx_file):
        assert path.is_file() and zoo.cache_dir() in path.parents
    stamps = [os.stat(p).st_mtime_ns for p in (symbol_path, params_path, onnx_file)]
    assert zoo.onnx_path("tiny_yolo_v2", small=True) == onnx_file
    assert [os.stat(p).st_mtime_ns for p in (symbol_path, params_path, onnx_file)] == stamps
    assert not [p for p in symbol_path.parent.iterdir() if p.name.endswith(".part")]


def test_builds_are_reproducible(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reference = zoo.mxnet_paths("tiny_yolo_v2", small=True)
    monkeypatch.setenv("PARTITION_LAB_CACHE", str(tmp_path))
    rebuilt = zoo.mxnet_paths("tiny_yolo_v2", small=True)
    assert tmp_path in rebuilt[0].parents
    assert rebuilt[0].read_bytes() == reference[0].read_bytes()
    assert rebuilt[1].read_bytes() == reference[1].read_bytes()
    # Only the finished files and their hashes are left behind.
    assert sorted(p.name for p in rebuilt[0].parent.iterdir()) == [
        "tiny_yolo_v2-0000.params", "tiny_yolo_v2-0000.params.sha256",
        "tiny_yolo_v2-symbol.json", "tiny_yolo_v2-symbol.json.sha256"]


def test_load_returns_modules_callers_can_change() -> None:
    mod, params = zoo.load("tiny_yolo_v2", small=True)
    mod["main"] = relay.build_module.bind_params_by_name(mod["main"], params)
    params.clear()
    again, again_params = zoo.load("tiny_yolo_v2", small=True)
    assert len(again["main"].params) == 1 + len(again_params) > 1


def test_every_gluoncv_twin_is_a_torchvision_build_with_the_same_inputs() -> None:
    from partition_lab.zoo._catalog import TORCHVISION_TWINS

    assert TORCHVISION_TWINS["resnet50_v1"] == "tv:resnet50"
    for gluoncv, twin in TORCHVISION_TWINS.items():
        assert zoo.info(gluoncv).built_with == "mxnet" and zoo.info(twin).built_with == "torch"
        assert set(zoo.info(twin).input_shapes) == set(zoo.info(gluoncv).input_shapes)
    assert zoo.torchvision_twin("resnet50_v1", small=True) == "tv:resnet50:small"
    assert zoo.torchvision_twin("resnet50_v1_b32") == \
        "tv:resnet50 with input_shapes={'data': (32, 3, 224, 224)}"
    assert zoo.torchvision_twin("tiny_yolo_v2") is None


def test_without_mxnet_the_defaults_and_examples_are_what_works(monkeypatch) -> None:
    monkeypatch.setattr(zoo, "mxnet_installed", lambda: False)
    assert zoo.default_frontend("resnet50_v1") == "onnx"
    assert zoo.example_spec("resnet50_v1_b32") == "tv:resnet50 --input-shape data=32,3,224,224"
    assert zoo.example_spec("fcn_resnet101_ade:small") == "tv:fcn_resnet101:small"
    monkeypatch.setattr(zoo, "mxnet_installed", lambda: True)
    assert zoo.default_frontend("resnet50_v1") == "mxnet"
    assert zoo.example_spec("resnet50_v1_b32") == "zoo:resnet50_v1_b32"
    assert zoo.default_frontend("tv:resnet50") == "onnx"


def test_a_gluoncv_model_without_mxnet_names_its_twin(tmp_path, monkeypatch) -> None:
    from partition_lab._optional import MissingDependencyError

    def missing(what: str, **_: object) -> None:
        raise MissingDependencyError(f"{what} needs MXNet, which is not installed", name="mxnet")

    monkeypatch.setenv("PARTITION_LAB_CACHE", str(tmp_path))  # nothing cached: it must build
    monkeypatch.setattr(zoo, "require_mxnet", missing)
    with pytest.raises(MissingDependencyError, match=r"use its torchvision build, "
                       r"tv:simple_pose_resnet152:small, which needs no MXNet$") as error:
        zoo.mxnet_paths("simple_pose_resnet152_v1b", small=True)
    assert "\n" not in str(error.value)
    with pytest.raises(MissingDependencyError, match="not installed$"):
        zoo.mxnet_paths("tiny_yolo_v2", small=True)  # no twin: the message as it was
