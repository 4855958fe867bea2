"""Targets as data: verdicts and reasons per op, options, user target files and their errors.

Nodes are built by hand the way ``relay_graph`` builds them from Relay (args in call order,
Relay attr names), so these tests need no TVM, except the cross-checks against TVM's own
winograd and padding arithmetic at the end.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from partition_lab.core.graph import OpGraphBuilder, OpNode, TensorType
from partition_lab.core.support import Verdict
from partition_lab.errors import TargetSpecError, UnknownTargetError
from partition_lab.targets import (
    AnyOf,
    AttrIn,
    MultipleOf,
    Rule,
    TargetSpec,
    available_targets,
    get_target,
    load_target_file,
    predicate_rule,
    register_target,
    unregister_target,
)
from partition_lab.targets.shapes import dimension
from partition_lab.targets.tensorcore import pad_to_tensorcore
from repo_paths import REPO_ROOT

EXAMPLES = REPO_ROOT / "examples" / "targets"


# ------------------------------------------------------------------------------ node builders
def conv2d(n: int, cin: int, cout: int, *, hw: int = 56, k: int = 3, layout: str = "NHWC",
           dtype: str = "float16", groups: int = 1, stride: int = 1) -> OpNode:
    """An nn.conv2d node as relay_graph would build it (padding 'same' for odd kernels)."""
    b = OpGraphBuilder("conv")
    if layout == "NHWC":
        x = b.input("x", TensorType((n, hw, hw, cin), dtype))
        kernel, kernel_layout = TensorType((k, k, cin // groups, cout), dtype), "HWIO"
    else:
        x = b.input("x", TensorType((n, cin, hw, hw), dtype))
        kernel, kernel_layout = TensorType((cout, cin // groups, k, k), dtype), "OIHW"
    out_hw = (hw + 2 * (k // 2) - k) // stride + 1
    out = (n, out_hw, out_hw, cout) if layout == "NHWC" else (n, cout, out_hw, out_hw)
    b.op("nn.conv2d", [x], weights=[kernel], outputs=[TensorType(out, dtype)], attrs={
        "strides": (stride, stride), "padding": (k // 2,) * 4, "dilation": (1, 1),
        "groups": groups, "channels": cout, "kernel_size": (k, k), "data_layout": layout,
        "kernel_layout": kernel_layout, "out_layout": "", "out_dtype": ""})
    return b.build()[0]


def conv1d(n: int, cin: int, cout: int, *, width: int = 64, k: int = 3, dtype: str = "float32",
           groups: int = 1) -> OpNode:
    """An nn.conv1d node (NCW/OIW, 'same' padding) as relay_graph builds one from ONNX Conv."""
    b = OpGraphBuilder("conv1d")
    x = b.input("x", TensorType((n, cin, width), dtype))
    b.op("nn.conv1d", [x], weights=[TensorType((cout, cin // groups, k), dtype)],
         outputs=[TensorType((n, cout, width), dtype)], attrs={
             "strides": (1,), "padding": (k // 2, k // 2), "dilation": (1,), "groups": groups,
             "channels": cout, "kernel_size": (k,), "data_layout": "NCW", "kernel_layout": "OIW",
             "out_layout": "", "out_dtype": ""})
    return b.build()[0]


def dense(m: int, k: int, n: int, dtype: str = "float16") -> OpNode:
    b = OpGraphBuilder("dense")
    x = b.input("x", TensorType((m, k), dtype))
    b.op("nn.dense", [x], weights=[TensorType((n, k), dtype)],
         outputs=[TensorType((m, n), dtype)], attrs={"units": n, "out_dtype": ""})
    return b.build()[0]


def batch_matmul(b_: int, m: int, k: int, n: int, *, transpose_b: bool = True,
                 dtype: str = "float16") -> OpNode:
    b = OpGraphBuilder("bmm")
    x = b.input("x", TensorType((b_, m, k), dtype))
    y = b.input("y", TensorType((b_, n, k) if transpose_b else (b_, k, n), dtype))
    b.op("nn.batch_matmul", [x, y], outputs=[TensorType((b_, m, n), dtype)],
         attrs={"transpose_a": False, "transpose_b": transpose_b, "out_dtype": ""})
    return b.build()[0]


def simple(op: str, shape: tuple[int, ...] = (1, 64, 56, 56), dtype: str = "float32",
           attrs: dict | None = None, weights: tuple[TensorType, ...] = (),
           out_dtype: str | None = None) -> OpNode:
    b = OpGraphBuilder(op)
    x = b.input("x", TensorType(shape, dtype))
    b.op(op, [x], attrs=attrs or {}, weights=weights,
         outputs=[TensorType(shape, out_dtype or dtype)])
    return b.build()[0]


def verdict(target: str, node: OpNode, **options) -> Verdict:
    return get_target(target, **options).check(node)


# ------------------------------------------------------------------------------ tensorcore
CONV_TABLE = [
    # (options, node kwargs, supported, reason fragment)
    ({}, dict(n=1, cin=64, cout=64), False,
     "nn.conv2d: batch 1 is not a multiple of 8, 16 or 32 (Tensor Core needs (batch, cin, cout) "
     "multiples of (16,16,16), (8,16,32) or (32,16,8))"),
    ({}, dict(n=32, cin=64, cout=64), True, "conv2d_nhwc_tensorcore: (32, 64, 64) matches (16,16,16)"),
    ({}, dict(n=8, cin=64, cout=96), True, "conv2d_nhwc_tensorcore: (8, 64, 96) matches (8,16,32)"),
    ({}, dict(n=32, cin=64, cout=24), True, "(32, 64, 24) matches (32,16,8)"),
    ({}, dict(n=8, cin=64, cout=24), False, "(batch, cin, cout) = (8, 64, 24) matches none of"),
    ({}, dict(n=8, cin=16, cout=16, k=1), False,
     "matches none of (16,16,16) (fails on batch 8); (8,16,32) (fails on cout 16); "
     "(32,16,8) (fails on batch 8)"),
    ({}, dict(n=32, cin=3, cout=64, k=7, stride=2), False, "cin 3 is not a multiple of 16"),
    ({}, dict(n=32, cin=64, cout=64, layout="NCHW"), False,
     "data layout NCHW: Tensor Core templates need NHWC (the partitioner converts layout; "
     "this conv could not be converted)"),
    ({}, dict(n=32, cin=64, cout=64, groups=64), False, "no Tensor Core template for grouped/depthwise"),
    ({}, dict(n=32, cin=64, cout=64, dtype="float32"), False, "precision fp16 needs float16"),
    ({"precision": "fp32"}, dict(n=32, cin=64, cout=64, dtype="float32"), True,
     "float32 inputs are cast to float16 inside conv2d_nhwc_tensorcore"),
    ({"precision": "fp32"}, dict(n=1, cin=64, cout=64, dtype="float32"), False, "batch 1 is not"),
    ({"padding": True}, dict(n=3, cin=64, cout=64), True,
     "pad_to_tensorcore: padding (3, 64, 64) to (8, 64, 64) adds 1.67x the work"),
    ({"padding": True}, dict(n=1, cin=64, cout=64), False,
     "pad_to_tensorcore: padding (1, 64, 64) to (8, 64, 64) would add 7.00x the work"),
    ({"padding": True, "precision": "fp32"}, dict(n=3, cin=64, cout=64, dtype="float32"), False,
     "Legalize pads only float16, int8, uint8 nn.conv2d, this one is float32"),
    # ResNet-50's last stage at batch 1: 7x7 input, 3x3 conv: P = 1*4*4 winograd tiles.
    ({}, dict(n=1, cin=512, cout=512, hw=7), False,
     "conv2d_nhwc_winograd_tensorcore would apply: (P, cin, cout) = (16, 512, 512)"),
    ({"winograd": True}, dict(n=1, cin=512, cout=512, hw=7), True,
     "conv2d_nhwc_winograd_tensorcore: (P, cin, cout) = (16, 512, 512) with P = 1*4*4 tiles of "
     "2x2 matches (16,16,16)"),
    ({"winograd": True}, dict(n=1, cin=64, cout=64, k=1), False,
     "conv2d_nhwc_winograd_tensorcore: kernel 1x1"),
]


@pytest.mark.parametrize(("options", "shape", "supported", "reason"), CONV_TABLE)
def test_tensorcore_conv2d(options, shape, supported, reason):
    v = verdict("tensorcore", conv2d(**shape), **options)
    assert v.supported is supported, v.reason
    assert reason in v.reason
    assert v.anchor


MATMUL_TABLE = [
    (dense(32, 2048, 1000), {}, True, "dense_tensorcore: (32, 2048, 1000) matches (32,16,8)"),
    (dense(1, 2048, 1000), {}, False, "nn.dense: batch 1 is not a multiple of 8, 16 or 32"),
    (dense(16, 512, 512, "int8"), {}, True, "dense_tensorcore: (16, 512, 512) matches (16,16,16)"),
    (dense(8, 64, 8, "int4"), {}, True, "(8, 64, 8) matches (8,32,8)"),
    (dense(32, 2048, 1000, "float32"), {"precision": "fp32"}, False,
     "dtype float32: dense_tensorcore needs float16, int8, uint8, int4 or uint4 inputs"),
    (dense(4, 512, 1000), {"padding": True}, True, "padding (4, 512, 1000) to (8, 512, 1024) adds 1.05x"),
    (dense(1, 512, 1000), {"padding": True}, False, "would add 7.19x the work"),
    (batch_matmul(12, 128, 64, 128), {}, True, "batch_matmul_tensorcore: (128, 64, 128) matches (16,16,16)"),
    (batch_matmul(12, 128, 64, 128, transpose_b=False), {}, False,
     "transpose_b=False: batch_matmul_tensorcore needs transpose_b=True"),
    (batch_matmul(12, 128, 64, 128, dtype="float32"), {"precision": "fp32"}, False,
     "batch_matmul_tensorcore needs float16"),
    (batch_matmul(12, 1, 64, 128), {}, False, "m 1 is not a multiple of 8, 16 or 32"),
    # Relay allows dense on 3-D data; TVM 0.19's CUDA strategy and Legalize unpack a 2-D shape.
    (simple("nn.dense", (1, 128, 768), "float16", attrs={"units": 768},
            weights=(TensorType((768, 768), "float16"),)), {"padding": True}, False,
     "nn.dense: data is 3-D (1, 128, 768); TVM 0.19's CUDA dense strategy"),
]


@pytest.mark.parametrize(("node", "options", "supported", "reason"), MATMUL_TABLE)
def test_tensorcore_dense_and_batch_matmul(node, options, supported, reason):
    v = verdict("tensorcore", node, **options)
    assert (v.supported, v.anchor) == (supported, True), v.reason
    assert reason in v.reason


@pytest.mark.parametrize(("op", "supported", "reason"), [
    ("nn.relu", True, "rides along with a Tensor Core region (elementwise)"),
    ("nn.batch_norm", True, "rides along with a Tensor Core region (normalization)"),
    ("nn.max_pool2d", True, "rides along with a Tensor Core region (pooling)"),
    ("layout_transform", True, "rides along with a Tensor Core region (layout)"),
    ("nn.conv2d_transpose", False, "no Tensor Core template for conv2d_transpose"),
    ("nn.matmul", False, "no Tensor Core template for nn.matmul"),
    ("image.resize2d", False, "image.resize2d is not in tensorcore's operator list"),
])
def test_tensorcore_ops_that_ride_along_or_not(op, supported, reason):
    v = verdict("tensorcore", simple(op))
    assert (v.supported, v.anchor) == (supported, False)
    assert reason in v.reason


def test_tensorcore_options_change_preparation_and_are_recorded():
    fp16, fp32 = get_target("tensorcore"), get_target("tensorcore", precision="fp32")
    assert fp16.prepare_steps() == ("convert_layout:NHWC", "mixed_precision:float16")
    assert fp32.prepare_steps() == ("convert_layout:NHWC",)
    assert fp16.options == {"precision": "fp16", "padding": False, "winograd": False,
                            "keep_fp32_on_overflow": False}
    assert fp32.options["precision"] == "fp32"
    assert fp16.default_profile == "t4"
    assert fp16.anchors == {"nn.conv2d", "nn.dense", "nn.batch_matmul"}


def test_resnet_block_batch_1_vs_32_on_tensorcore():
    """conv -> bn -> relu -> conv -> add: at batch 1 no conv qualifies and each says why."""
    def block(batch: int) -> list[Verdict]:
        b = OpGraphBuilder(f"block{batch}")
        x = b.input("x", TensorType((batch, 56, 56, 64), "float16"))
        attrs = {"data_layout": "NHWC", "kernel_layout": "HWIO", "padding": (1, 1, 1, 1)}
        kernel = TensorType((3, 3, 64, 64), "float16")
        c1 = b.op("nn.conv2d", [x], weights=[kernel], attrs=attrs)
        bn = b.op("nn.batch_norm", [c1])
        r = b.op("nn.relu", [bn])
        c2 = b.op("nn.conv2d", [r], weights=[kernel], attrs=attrs)
        b.op("add", [c2, x])
        return get_target("tensorcore").check_graph(b.build())

    at1, at32 = block(1), block(32)
    assert [v.supported for v in at1] == [False, True, True, False, True]
    assert all("batch 1 is not a multiple of 8, 16 or 32" in at1[i].reason for i in (0, 3))
    assert all(v.supported for v in at32)
    assert [v.anchor for v in at32] == [True, False, False, True, False]


# ------------------------------------------------------------------------------ neuron
NEURON_TABLE = [
    ("neuron@2020", simple("image.resize2d", attrs={"method": "linear"}), False,
     ["image.resize2d: method linear is MXNet _contrib_BilinearResize2D (ONNX Resize mode "
      "linear), which is not on neuron-cc's list"]),
    ("neuron", simple("image.resize2d"), False, ["method linear", "_contrib_BilinearResize2D"]),
    ("neuron@2020", simple("nn.conv2d_transpose"), False,
     ["not in neuron@2020's operator list", "Deconvolution was added in neuron-cc 1.2.0.0"]),
    ("neuron", simple("nn.conv2d_transpose"), True, ["from MXNet Deconvolution; since neuron-cc 1.2.0.0"]),
    ("neuron@1.2.0.0", simple("nn.conv2d_transpose"), True, ["Deconvolution"]),
    ("neuron@1.0.24045.0", simple("nn.conv2d_transpose"), False, ["Deconvolution was added"]),
    ("neuron@1.0.24045.0", simple("broadcast_to"), True, ["broadcast_axis"]),
    ("neuron@2020", simple("broadcast_to"), False, ["broadcast_axis was added in neuron-cc 1.0.24045.0"]),
    ("neuron@2020", simple("nn.layer_norm"), False, ["LayerNorm was added in neuron-cc 1.2.0.0"]),
    ("neuron@2020", simple("nn.pad"), False, ["Pad and pad were added in neuron-cc 1.2.0.0"]),
    ("neuron", simple("nn.instance_norm"), False, ["it comes from InstanceNorm"]),
    ("neuron", simple("vision.multibox_prior"), False, ["_contrib_MultiBoxPrior", "object detection"]),
    ("neuron", simple("nn.matmul"), False, ["it comes from dot"]),
    # MXNet Convolution (1-D kernel included) is on every list, from the first (neuron@2019).
    ("neuron", conv1d(1, 80, 384), True,
     ["nn.conv1d is in neuron's operator list (from MXNet Convolution; since neuron-cc "
      "1.0.4680.0)", "MXNet Convolution with a 1-D kernel"]),
    ("neuron@2020", conv1d(1, 80, 384), True, ["from MXNet Convolution; since neuron-cc 1.0.4680.0"]),
    ("neuron@2019", conv1d(1, 80, 384), True, ["in neuron@2019's operator list"]),
    # Grouped and depthwise convolution came in 1.3.0.0, for 1-D as for 2-D (NCC 1.3.0.0).
    ("neuron@2020", conv1d(1, 32, 32, groups=32), False,
     ["nn.conv1d: grouped/depthwise conv (groups 32) was added in neuron-cc 1.3.0.0"]),
    ("neuron@1.2.7.0", conv1d(1, 32, 32, groups=4), False, ["groups 4"]),
    ("neuron@1.3.0.0", conv1d(1, 32, 32, groups=32), True, ["Convolution"]),
    ("neuron", conv1d(1, 32, 32, groups=32), True, ["Convolution"]),
    ("neuron", conv1d(1, 80, 384, dtype="float64"), False, ["dtype float64 is not supported"]),
    ("neuron@2020", conv2d(1, 64, 64, layout="NCHW", dtype="float32"), True,
     ["from MXNet Convolution, Convolution_v1; since neuron-cc 1.0.4680.0"]),
    ("neuron@2020", conv2d(1, 32, 32, layout="NCHW", dtype="float32", groups=32), False,
     ["grouped/depthwise conv (groups 32) was added in neuron-cc 1.3.0.0"]),
    ("neuron", conv2d(1, 32, 32, layout="NCHW", dtype="float32", groups=32), True, ["Convolution"]),
    ("neuron", simple("nn.relu", dtype="int8"), False, ["input 0 dtype int8 is not supported by neuron-cc"]),
    ("neuron", simple("cast", out_dtype="int64"), False, ["output 0 dtype int64"]),
    # Constant (weight) arguments may be int64, e.g. an ONNX Reshape's shape tensor.
    ("neuron", simple("reshape", weights=(TensorType((4,), "int64"),)), True, ["Reshape"]),
    ("neuron", simple("log"), True, ["disputed"]),
    # MXNet rsqrt is on the first list; TVM's MXNet converter writes it as power(x, -0.5).
    ("neuron@2020", simple("rsqrt"), True, ["from MXNet rsqrt; since neuron-cc 1.0.4680.0"]),
]


@pytest.mark.parametrize(("target", "node", "supported", "reasons"), NEURON_TABLE)
def test_neuron_versions(target, node, supported, reasons):
    v = verdict(target, node)
    assert v.supported is supported, v.reason
    for fragment in reasons:
        assert fragment in v.reason
    assert not v.anchor


def test_neuron_targets_describe_their_release():
    old, new = get_target("neuron@2020"), get_target("neuron")
    assert (old.name, old.version, new.name, new.version) == (
        "neuron@2020", "1.0.6801.0", "neuron", "1.6.13.0")
    assert old.anchors == new.anchors == frozenset()
    assert old.prepare_steps() == () and old.default_profile == "inferentia1"
    assert get_target("neuron", version="1.2.0.0").name == "neuron@1.2.0.0"
    # A release between two listed ones gets the older list.
    between = get_target("neuron@1.1.7.0")
    assert not between.supports_op("nn.layer_norm") and between.supports_op("broadcast_to")


def test_cpu_supports_everything():
    cpu = get_target("cpu")
    for node in (simple("image.resize2d"), conv2d(1, 3, 5), simple("some.unheard_of_op")):
        assert cpu.check(node) == Verdict(True, "runs on the host", "op-table", False)


# ------------------------------------------------------------------------------ lookup errors
def test_unknown_target_lists_known_ones():
    with pytest.raises(UnknownTargetError) as error:
        get_target("tensorcores")
    message = str(error.value)
    assert "'tensorcores'" in message
    for name in ("cpu", "neuron", "neuron@2020", "tensorcore", "neuron@<neuron-cc release>"):
        assert name in message


@pytest.mark.parametrize("name", ["neuron@banana", "neuron@0.9"])
def test_unknown_neuron_release(name):
    with pytest.raises(UnknownTargetError, match="1.0.6801.0"):
        get_target(name)


@pytest.mark.parametrize(("name", "options", "fragment"), [
    ("tensorcore", {"precision": "bf16"}, "precision 'bf16' is not one of fp16, fp32"),
    ("tensorcore", {"fp32": True}, "tensorcore has no option fp32; options: precision"),
    ("tensorcore", {"padding": "yes"}, "padding must be True or False"),
    ("neuron", {"precision": "fp16"}, "neuron has no option precision"),
    ("cpu", {"precision": "fp16"}, "cpu takes no options"),
])
def test_bad_options(name, options, fragment):
    with pytest.raises(TargetSpecError, match=fragment):
        get_target(name, **options)


def test_available_targets_and_spec_passthrough():
    assert available_targets() == ["cpu", "neuron", "neuron@2020", "tensorcore"]
    spec = get_target("tensorcore")
    assert get_target(spec) is spec
    rebuilt = get_target(spec, precision="fp32")
    assert rebuilt.options["precision"] == "fp32" and rebuilt.prepare_steps() == ("convert_layout:NHWC",)


def test_every_builtin_describes_itself_and_serializes():
    for name in available_targets():
        spec = get_target(name)
        text = spec.describe()
        assert text.startswith(name)
        json.dumps(spec.to_dict())
    assert "tensorcore-shape" in get_target("tensorcore").describe()
    assert "neuron-grouped-conv" in get_target("neuron@2020").describe()
    assert "neuron-grouped-conv" not in get_target("neuron").describe()


# ------------------------------------------------------------------------------ user targets
def test_example_npu_toml():
    npu = get_target(EXAMPLES / "npu.toml")
    assert npu.name == "npu" and npu.anchors == {"nn.conv2d"}
    assert npu.prepare_steps() == ("convert_layout:NHWC", "mixed_precision:float16")
    ok = npu.check(conv2d(1, 64, 96))
    assert ok.supported and ok.anchor and "npu-channels: (64, 96) matches (32,32)" in ok.reason
    narrow = npu.check(conv2d(1, 64, 48))
    assert not narrow.supported and narrow.rule == "npu-channels"
    assert narrow.reason == ("nn.conv2d: cout 48 is not a multiple of 32 "
                             "(the NPU's MAC array is 32 channels wide)")
    fp32 = npu.check(conv2d(1, 64, 64, dtype="float32"))
    assert (fp32.supported, fp32.rule) == (False, "npu-dtype")
    assert "data dtype float32 is not one of float16, int8" in fp32.reason
    assert npu.check(conv2d(1, 64, 64, groups=2)).rule == "npu-dense-conv"
    wide = npu.check(conv2d(1, 64, 64, hw=2048))
    assert "width 2048 exceeds 1024 (the line buffer holds 1024 pixels)" in wide.reason
    assert npu.check(simple("image.resize2d")).reason == "the NPU has no resize unit"
    relu = npu.check(simple("nn.relu", dtype="float16"))
    assert relu == Verdict(True, "fused into the conv's output stage", "op-table", False)
    assert "sigmoid is not in npu's operator list" in npu.check(simple("sigmoid")).reason


def test_example_json_extends_neuron_2020():
    target = get_target(str(EXAMPLES / "neuron_resize.json"))
    linear = target.check(simple("image.resize2d", attrs={"method": "linear"}))
    nearest = target.check(simple("image.resize2d", attrs={"method": "nearest_neighbor"}))
    assert linear.supported and "custom resize kernel" in linear.reason
    assert not nearest.supported and nearest.rule == "resize-linear-only"
    assert "method nearest_neighbor is not linear" in nearest.reason
    # Everything else is neuron@2020's: still no Deconvolution.
    assert "Deconvolution was added" in target.check(simple("nn.conv2d_transpose")).reason


def test_user_file_with_base_takes_base_options(tmp_path):
    path = tmp_path / "tc_small.toml"
    path.write_text('name = "tc-small"\nbase = "tensorcore"\n'
                    '[[rules]]\nkind = "max_size"\nname = "small"\nops = ["nn.conv2d"]\n'
                    'dims = ["cin", "cout"]\nmax = 256\n')
    fp16 = get_target(path)
    fp32 = get_target(str(path), precision="fp32")
    assert fp16.check(conv2d(32, 64, 64)).supported
    assert not fp16.check(conv2d(32, 64, 64, dtype="float32")).supported
    assert fp32.check(conv2d(32, 64, 64, dtype="float32")).supported
    assert fp32.with_options(precision="fp16").prepare_steps()[-1] == "mixed_precision:float16"
    big = fp16.check(conv2d(32, 512, 64))
    assert (big.supported, big.rule) == (False, "small") and "cin 512 exceeds 256" in big.reason


def test_user_toml_and_json_give_the_same_verdicts(tmp_path):
    table = {"name": "same", "supported": ["nn.conv2d", "nn.relu"], "anchors": ["nn.conv2d"],
             "rules": [{"kind": "multiple_of", "ops": ["nn.conv2d"], "dims": ["cout"],
                        "multiples": [16, 24]}]}
    (tmp_path / "same.json").write_text(json.dumps(table))
    (tmp_path / "same.toml").write_text(
        'name = "same"\nsupported = ["nn.conv2d", "nn.relu"]\nanchors = ["nn.conv2d"]\n'
        '[[rules]]\nkind = "multiple_of"\nops = ["nn.conv2d"]\ndims = ["cout"]\nmultiples = [16, 24]\n')
    nodes = [conv2d(1, 8, 48), conv2d(1, 8, 40), simple("nn.relu"), simple("tanh")]
    json_verdicts = [get_target(tmp_path / "same.json").check(n) for n in nodes]
    toml_verdicts = [get_target(tmp_path / "same.toml").check(n) for n in nodes]
    assert json_verdicts == toml_verdicts
    assert [v.supported for v in json_verdicts] == [True, False, True, False]
    assert "cout 40 is not a multiple of 16 or 24" in json_verdicts[1].reason


MALFORMED = [
    # (file name, content, fragments the error must contain)
    ("bad.toml", 'name = "x"\nsupported = ["nn.relu"\n', ["bad.toml", "not valid TOML"]),
    ("bad.json", '{"name": "x", "supported": [}', ["bad.json", "not valid JSON"]),
    ("typo.toml", 'name = "x"\nsuported = ["nn.relu"]\n',
     ["typo.toml", "unknown key 'suported'", "expected one of name, description"]),
    ("kind.toml", 'name = "x"\nsupported = ["nn.conv2d"]\n[[rules]]\nkind = "multiple"\n',
     ["kind.toml: rules[0].kind: 'multiple' is not a rule kind",
      "any_of, attr_in, dtype_in, max_size, multiple_of"]),
    ("type.json", '{"name": "x", "supported": 3}',
     ["type.json: supported: expected a list of op names or a table op -> reason, got int 3"]),
    ("name.toml", 'supported = ["nn.relu"]\n', ["name.toml: name is missing (required)"]),
    ("empty.toml", 'name = "x"\n', ["empty.toml", "supported is empty and there is no base"]),
    ("nodims.toml", 'name = "x"\nsupported = ["nn.conv2d"]\n[[rules]]\nkind = "multiple_of"\nmultiples = [8]\n',
     ["nodims.toml: rules[0].dims is missing"]),
    ("dim.toml", 'name = "x"\nsupported = ["nn.conv2d"]\n[[rules]]\nkind = "max_size"\n'
     'dims = ["chanels"]\nmax = 8\n', ["dim.toml: rules[0]", "'chanels' is not a dimension name", "cout"]),
    ("mult.toml", 'name = "x"\nsupported = ["nn.conv2d"]\n[[rules]]\nkind = "multiple_of"\n'
     'dims = ["cin", "cout"]\nmultiples = [[8]]\n', ["mult.toml: rules[0].multiples", "lists of 2 positive integers"]),
    ("rulekey.toml", 'name = "x"\nsupported = ["nn.conv2d"]\n[[rules]]\nkind = "attr_in"\nop = "nn.conv2d"\n'
     'attr = "groups"\nvalues = [1]\n', ["rulekey.toml: rules[0]: unknown key 'op'"]),
    ("values.toml", 'name = "x"\nsupported = ["nn.conv2d"]\n[[rules]]\nkind = "attr_in"\nattr = "groups"\n'
     'values = 1\n', ["values.toml: rules[0].values: expected a non-empty list"]),
    ("base.toml", 'name = "x"\nbase = "gpu"\n', ["base.toml: base", "unknown target 'gpu'", "tensorcore"]),
    ("anchor.toml", 'name = "x"\nsupported = ["nn.relu"]\nanchors = ["nn.conv2d"]\n',
     ["anchor.toml", "anchor nn.conv2d is not a supported op"]),
    ("step.toml", 'name = "x"\nsupported = ["nn.relu"]\nprepare_steps = ["fuse_everything"]\n',
     ["step.toml", "unknown prepare step 'fuse_everything'", "convert_layout:NHWC"]),
    ("msg.toml", 'name = "x"\nsupported = ["nn.relu"]\n[[rules]]\nkind = "dtype_in"\ndtypes = ["float16"]\n'
     'message = "{op} has {colour}"\n', ["msg.toml: rules[0]", "bad placeholder", "{value}"]),
    ("tensor.toml", 'name = "x"\nsupported = ["nn.relu"]\n[[rules]]\nkind = "dtype_in"\ndtypes = ["float16"]\n'
     'tensor = "weights"\n', ["tensor.toml: rules[0]", "tensor 'weights' is not one of data, args"]),
    ("list.json", '["nn.relu"]', ["list.json: expected a table, got list"]),
]


@pytest.mark.parametrize(("filename", "content", "fragments"), MALFORMED,
                         ids=[row[0] for row in MALFORMED])
def test_malformed_target_files(tmp_path, filename, content, fragments):
    path = tmp_path / filename
    path.write_text(content)
    with pytest.raises(TargetSpecError) as error:
        get_target(path)
    for fragment in fragments:
        assert fragment in str(error.value)


def test_missing_or_misnamed_target_file(tmp_path):
    with pytest.raises(TargetSpecError, match="no such target file"):
        get_target(str(tmp_path / "nowhere.toml"))
    (tmp_path / "t.yaml").write_text("name: x\n")
    with pytest.raises(TargetSpecError, match=r"must end in \.toml or \.json"):
        load_target_file(tmp_path / "t.yaml")
    with pytest.raises(TargetSpecError, match="takes no options"):
        get_target(EXAMPLES / "npu.toml", precision="fp32")


# ------------------------------------------------------------------------------ Python targets
class KernelAtMost(Rule):
    """A user's own rule object: conv kernels no larger than ``limit``."""

    def __init__(self, limit: int) -> None:
        self.name, self.ops, self.limit = "kernel-at-most", frozenset({"nn.conv2d"}), limit

    def check(self, node: OpNode) -> Verdict | None:
        size = dimension(node, "kernel_h")
        if size > self.limit:
            return self.reject(f"{node.op}: kernel {size} is larger than {self.limit}")
        return self.accept(f"kernel {size} fits")


def test_python_rule_subclass_and_registration():
    spec = get_target("neuron").extend("neuron-small-kernels", rules=[KernelAtMost(3)])
    register_target(spec)
    try:
        assert "neuron-small-kernels" in available_targets()
        found = get_target("neuron-small-kernels")
        assert found is spec
        big = found.check(conv2d(1, 64, 64, k=7, layout="NCHW", dtype="float32"))
        assert (big.supported, big.rule) == (False, "kernel-at-most")
        assert big.reason == "nn.conv2d: kernel 7 is larger than 3"
        small = found.check(conv2d(1, 64, 64, k=3, layout="NCHW", dtype="float32"))
        assert small.supported and small.reason == "kernel 3 fits"
        # The base's rules still apply, before the new one.
        assert found.check(conv2d(1, 32, 32, layout="NCHW", dtype="float32", groups=32)).supported
        assert not found.check(simple("image.resize2d")).supported
        with pytest.raises(TargetSpecError, match="exists"):
            register_target(spec)
    finally:
        unregister_target("neuron-small-kernels")
    with pytest.raises(UnknownTargetError):
        get_target("neuron-small-kernels")


def test_rules_compose_from_python():
    """A TargetSpec from scratch: alternatives with AnyOf, a predicate rule, an attribute rule."""
    conv = frozenset({"nn.conv2d"})
    spec = TargetSpec(
        "systolic", supported={"nn.conv2d": "", "nn.relu": "vector unit"}, anchors=["nn.conv2d"],
        rules=[
            AttrIn("ungrouped", conv, "groups", (1,)),
            AnyOf("array-shape", (
                MultipleOf("square-array", conv, ("cin", "cout"), ((64, 64),)),
                MultipleOf("tall-array", conv, ("cin", "cout"), ((16, 128),)),
            )),
            predicate_rule("stride-1", ["nn.conv2d"], lambda n: None if n.attrs["strides"] == (1, 1)
                           else f"strides {n.attrs['strides']}"),
        ])
    assert spec.check(conv2d(1, 64, 128)).reason == "square-array: (64, 128) matches (64,64)"
    assert spec.check(conv2d(1, 16, 128)).rule == "tall-array"
    both = spec.check(conv2d(1, 16, 64))
    assert (both.supported, both.rule) == (False, "array-shape")
    assert "cout 64 is not a multiple of 128" in both.reason and "cin 16 is not a multiple of 64" in both.reason
    strided = spec.check(conv2d(1, 64, 64, stride=2))
    assert (strided.supported, strided.reason) == (False, "strides (2, 2)")
    assert spec.check(conv2d(1, 64, 64, groups=2)).reason == "nn.conv2d: groups 2 is not 1"
    assert spec.check(simple("nn.relu")).reason == "vector unit"
    assert spec.with_options() is spec
    with pytest.raises(TargetSpecError, match="takes no options"):
        spec.with_options(precision="fp16")


# ------------------------------------------------------------------------------ dimensions
def test_dimensions_follow_layouts_and_transposes():
    for layout in ("NCHW", "NHWC"):
        node = conv2d(2, 3, 5, hw=7, k=3, layout=layout)
        assert [dimension(node, d) for d in ("batch", "cin", "cout", "height", "kernel_w")] == [2, 3, 5, 7, 3]
    assert [dimension(dense(4, 6, 10), d) for d in ("batch", "in_features", "units")] == [4, 6, 10]
    for transpose_b in (True, False):
        node = batch_matmul(2, 3, 5, 7, transpose_b=transpose_b)
        assert [dimension(node, d) for d in ("batch", "m", "k", "n")] == [2, 3, 5, 7]
    assert dimension(simple("nn.relu", (1, 8, 4, 4)), "arg0[1]") == 8
    assert dimension(simple("nn.relu"), "cin") is None


# ------------------------------------------------------------------------------ cross-checks with TVM
PAD_TABLE = [  # targets-reference §2.4, worked ratios
    ((1, 64, 64), (7, 0, 0), 7.0), ((2, 64, 64), (6, 0, 0), 3.0), ((3, 64, 64), (5, 0, 0), 1.67),
    ((4, 64, 64), (4, 0, 0), 1.0), ((8, 3, 64), (0, 13, 0), 4.33), ((16, 24, 64), (0, 8, 0), 0.33),
    ((1, 512, 1000), (7, 0, 24), 7.19), ((4, 512, 1000), (4, 0, 24), 1.05),
    ((8, 2048, 1000), (0, 0, 24), 0.024),
]


@pytest.mark.parametrize(("mkn", "pad", "ratio"), PAD_TABLE)
def test_pad_to_tensorcore_worked_examples(mkn, pad, ratio):
    got_pad, got_ratio = pad_to_tensorcore(*mkn)
    assert got_pad == pad and got_ratio == pytest.approx(ratio, abs=0.005)


@pytest.fixture(scope="module")
def tvm_cuda():
    """TVM's CUDA strategy and Legalize modules (imported once: TVM raises the recursion limit
    on import, which hypothesis warns about when it happens inside an example)."""
    strategy = pytest.importorskip("tvm.relay.op.strategy.cuda")
    alter = pytest.importorskip("tvm.topi.cuda.tensorcore_alter_op")
    return strategy, alter


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 70), st.integers(1, 300), st.integers(1, 300))
def test_pad_to_tensorcore_matches_tvm(tvm_cuda, m, k, n):
    expected = tvm_cuda[1].pad_to_tensorcore(m, k, n, [(16, 16, 16), (32, 16, 8), (8, 16, 32)])
    pad, ratio = pad_to_tensorcore(m, k, n)
    assert (pad, ratio) == (expected[0], pytest.approx(expected[1]))


@settings(max_examples=150, deadline=None)
@given(n=st.sampled_from([1, 2, 4, 8, 16, 32]), hw=st.integers(3, 60),
       cin=st.sampled_from([16, 32, 48, 64, 512]), cout=st.sampled_from([8, 24, 32, 64, 512]),
       k=st.sampled_from([1, 3, 5, 7]), stride=st.sampled_from([1, 2]))
def test_winograd_eligibility_matches_tvm_judge_winograd(tvm_cuda, n, hw, cin, cout, k, stride):
    """winograd=True accepts a conv that fails the direct template iff TVM's judge says so."""
    cuda = tvm_cuda[0]
    node = conv2d(n, cin, cout, hw=hw, k=k, stride=stride)
    pad = k // 2
    tensorcore_ok, autotvm_ok, _ = cuda.judge_winograd(
        n, hw, hw, k, k, cin, cout, (pad, pad, pad, pad), stride, stride, 1, 1,
        "float16", "float16", False)
    direct = any(n % a == 0 and cin % b == 0 and cout % c == 0
                 for a, b, c in ((16, 16, 16), (8, 16, 32), (32, 16, 8)))
    v = verdict("tensorcore", node, winograd=True)
    assert v.supported == (direct or (tensorcore_ok and autotvm_ok)), v.reason
    if v.supported and not direct:
        assert v.rule == "conv2d_nhwc_winograd_tensorcore"
    assert verdict("tensorcore", node).supported == direct


def test_builtin_tables_name_registered_relay_ops(tvm_cuda):
    """A misspelt op name (reverse_reshape for contrib_reverse_reshape) would never match."""
    import tvm

    unknown = set()
    for name in ("tensorcore", "neuron@2020", "neuron"):
        spec = get_target(name)
        rule_ops = {op for rule in spec.rules for op in rule.ops}
        for op in {*spec.supported, *spec.unsupported, *spec.anchors, *rule_ops}:
            try:
                tvm.ir.Op.get(op)
            except tvm.TVMError:
                unknown.add(op)
    assert not unknown


# ------------------------------------------------------------------------------ a conv1d encoder
def _conv1d_encoder(path, groups: int) -> None:
    """An audio-encoder stem as ONNX (Whisper's shape, small): Conv1d -> GELU (erf form) ->
    Conv1d with stride 2, its second conv grouped by ``groups``."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    channels = 16
    consts = {"w1": rng.standard_normal((channels, 8, 3)), "b1": rng.standard_normal(channels),
              "w2": rng.standard_normal((channels, channels // groups, 3)) * 0.3,
              "b2": rng.standard_normal(channels), "sqrt2": np.sqrt(2.0), "one": 1.0, "half": 0.5}
    init = [numpy_helper.from_array(np.asarray(v, "float32"), k) for k, v in consts.items()]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1]),
        helper.make_node("Div", ["c1", "sqrt2"], ["d"], name="gelu_div"),
        helper.make_node("Erf", ["d"], ["e"], name="gelu_erf"),
        helper.make_node("Add", ["e", "one"], ["a"], name="gelu_add"),
        helper.make_node("Mul", ["c1", "a"], ["m"], name="gelu_mul"),
        helper.make_node("Mul", ["m", "half"], ["g"], name="gelu_half"),
        helper.make_node("Conv", ["g", "w2", "b2"], ["y"], name="conv2", pads=[1, 1],
                         strides=[2], group=groups),
    ]
    graph = helper.make_graph(
        nodes, "conv1d_encoder",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 8, 32))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, channels, 16))], init)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


@pytest.mark.parametrize(("target", "groups", "host_convs"), [
    ("neuron", 1, 0), ("neuron@2020", 1, 0), ("neuron", 16, 0), ("neuron@2020", 16, 1)])
def test_a_conv1d_encoder_partitions_and_computes_as_unpartitioned(tmp_path, target, groups,
                                                                   host_convs):
    """Relay nn.conv1d (ONNX Conv on 3-D data) stays on neuron with GELU between, no host
    island; a depthwise conv1d is a host island only before neuron-cc 1.3.0.0. Region by region
    on llvm the plan computes what the unpartitioned module does."""
    import numpy as np

    import partition_lab
    from partition_lab.relay.runtime import RegionExecutor, run_module

    path = tmp_path / "encoder.onnx"
    _conv1d_encoder(path, groups)
    mod, params = partition_lab.load_model(path)
    result = partition_lab.partition(mod, target, params=params, strategy="greedy")
    plan = result.plan
    plan.validate()
    convs = [n for n in result.graph if n.op == "nn.conv1d"]
    assert len(convs) == 2
    on_host = {n.id for n in convs if plan.device_of(n.id) == "cpu"}
    assert len(on_host) == host_convs
    for node in on_host:
        assert "was added in neuron-cc 1.3.0.0" in plan.decisions[node].reason
    assert len(plan.cpu_regions) == host_convs
    for node in result.graph:
        if node.id not in on_host:
            assert plan.device_of(node.id) != "cpu", (node.op, plan.decisions[node.id].reason)
    assert "from MXNet Convolution" in plan.decisions[convs[0].id].reason
    inputs = {"x": np.random.default_rng(1).standard_normal((1, 8, 32)).astype("float32")}
    got = RegionExecutor(result, opt_level=0).run(inputs)
    (expected,) = run_module(result.prepared_mod, inputs, opt_level=0)
    np.testing.assert_allclose(got[0], expected, rtol=1e-4, atol=1e-5 * np.abs(expected).max())
