"""Small ONNX models built with onnx.helper (no TVM, no torch): the Relax tests' zoo.

Both environments import this file: the Relax tests load the models through apache-tvm 0.27,
and ``relay_plans.py`` (run with the Relay stack) writes the Relay-side plans of the same models.
Shapes are chosen so that each model meets a different rule: batch 16 and channels that are
multiples of 16 pass the Tensor Core shape checks; batch 1, depthwise convolution, resize,
ConvTranspose and decomposed normalisation each fail some platform's rules.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
_RNG = np.random.default_rng(0)


def _w(name: str, *shape: int) -> onnx.TensorProto:
    return numpy_helper.from_array((_RNG.standard_normal(shape) * 0.1).astype("float32"), name)


def _model(name: str, nodes: list, inputs: dict, outputs: dict, weights: list) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, v) for k, v in inputs.items()],
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, v) for k, v in outputs.items()],
        weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def convnet(batch: int = 16) -> onnx.ModelProto:
    """conv-relu-maxpool-conv-relu-global pool-flatten-gemm (a small CNN classifier)."""
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        n("Relu", ["c1"], ["r1"], name="relu1"),
        n("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
        n("Conv", ["p1", "w2", "b2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        n("Relu", ["c2"], ["r2"], name="relu2"),
        n("GlobalAveragePool", ["r2"], ["g"], name="gap"),
        n("Flatten", ["g"], ["f"], name="flatten"),
        n("Gemm", ["f", "wf", "bf"], ["y"], name="fc", transB=1),
    ]
    weights = [_w("w1", 16, 16, 3, 3), _w("b1", 16), _w("w2", 32, 16, 3, 3), _w("b2", 32),
               _w("wf", 16, 32), _w("bf", 16)]
    return _model("convnet", nodes, {"x": [batch, 16, 16, 16]}, {"y": [batch, 16]}, weights)


def convnet_batch1() -> onnx.ModelProto:
    """The same CNN at batch 1 (no Tensor Core template takes it)."""
    return convnet(batch=1)


def mlp() -> onnx.ModelProto:
    """MatMul-Add-Relu-MatMul-Softmax."""
    n = helper.make_node
    nodes = [
        n("MatMul", ["x", "w1"], ["m1"], name="fc1"),
        n("Add", ["m1", "b1"], ["a1"], name="fc1_bias"),
        n("Relu", ["a1"], ["r1"], name="relu"),
        n("MatMul", ["r1", "w2"], ["m2"], name="fc2"),
        n("Softmax", ["m2"], ["y"], name="softmax", axis=-1),
    ]
    weights = [_w("w1", 64, 128), _w("b1", 128), _w("w2", 128, 32)]
    return _model("mlp", nodes, {"x": [16, 64]}, {"y": [16, 32]}, weights)


def resblock() -> onnx.ModelProto:
    """conv-bn-relu-conv-bn + identity, relu (a ResNet basic block)."""
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "w1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        n("BatchNormalization", ["c1", "s1", "o1", "m1", "v1"], ["bn1"], name="bn1"),
        n("Relu", ["bn1"], ["r1"], name="relu1"),
        n("Conv", ["r1", "w2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        n("BatchNormalization", ["c2", "s2", "o2", "m2", "v2"], ["bn2"], name="bn2"),
        n("Add", ["bn2", "x"], ["s"], name="skip"),
        n("Relu", ["s"], ["y"], name="relu2"),
    ]
    weights = [_w("w1", 32, 32, 3, 3), _w("w2", 32, 32, 3, 3)]
    for i in (1, 2):
        weights += [numpy_helper.from_array(np.ones(32, "float32"), f"s{i}"), _w(f"o{i}", 32),
                    _w(f"m{i}", 32), numpy_helper.from_array(np.ones(32, "float32"), f"v{i}")]
    return _model("resblock", nodes, {"x": [16, 32, 8, 8]}, {"y": [16, 32, 8, 8]}, weights)


def depthwise() -> onnx.ModelProto:
    """A depthwise-separable block: grouped conv (no Tensor Core template), then 1x1 conv."""
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "wd"], ["d"], name="depthwise", pads=[1, 1, 1, 1], group=32),
        n("Relu", ["d"], ["r"], name="relu_dw"),
        n("Conv", ["r", "wp"], ["p"], name="pointwise"),
        n("Sigmoid", ["p"], ["y"], name="sigmoid"),
    ]
    weights = [_w("wd", 32, 1, 3, 3), _w("wp", 64, 32, 1, 1)]
    return _model("depthwise", nodes, {"x": [16, 32, 8, 8]}, {"y": [16, 64, 8, 8]}, weights)


def upsample() -> onnx.ModelProto:
    """conv, nearest Resize x2 and a bilinear one, concatenated (FCN-style decoder)."""
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        n("Resize", ["c", "", "scales"], ["up_nearest"], name="resize_nearest", mode="nearest"),
        n("Resize", ["c", "", "scales"], ["up_linear"], name="resize_linear", mode="linear"),
        n("Concat", ["up_nearest", "up_linear"], ["y"], name="concat", axis=1),
    ]
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], "float32"), "scales")
    return _model("upsample", nodes, {"x": [16, 16, 8, 8]}, {"y": [16, 32, 16, 16]},
                  [_w("w", 16, 16, 3, 3), scales])


def deconv() -> onnx.ModelProto:
    """conv, ConvTranspose, BN, relu (SimplePose's head: a deconvolution between convs)."""
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "w1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        n("ConvTranspose", ["c1", "wt"], ["d"], name="deconv", strides=[2, 2], pads=[1, 1, 1, 1],
          output_padding=[1, 1]),
        n("BatchNormalization", ["d", "s", "o", "m", "v"], ["bn"], name="bn"),
        n("Relu", ["bn"], ["r"], name="relu"),
        n("Conv", ["r", "w2"], ["y"], name="conv2"),
    ]
    weights = [_w("w1", 16, 16, 3, 3), _w("wt", 16, 16, 3, 3), _w("w2", 16, 16, 1, 1),
               numpy_helper.from_array(np.ones(16, "float32"), "s"), _w("o", 16), _w("m", 16),
               numpy_helper.from_array(np.ones(16, "float32"), "v")]
    return _model("deconv", nodes, {"x": [16, 16, 8, 8]}, {"y": [16, 16, 16, 16]}, weights)


def attention() -> onnx.ModelProto:
    """One attention head with LayerNorm and an erf GELU: batched MatMuls, Softmax, Erf."""
    n = helper.make_node
    c = numpy_helper.from_array
    nodes = [
        n("LayerNormalization", ["x", "ln_s", "ln_b"], ["h"], name="ln", axis=-1),
        n("MatMul", ["h", "wq"], ["q"], name="q_proj"),
        n("MatMul", ["h", "wk"], ["k"], name="k_proj"),
        n("MatMul", ["h", "wv"], ["v"], name="v_proj"),
        n("Transpose", ["k"], ["kt"], name="k_t", perm=[0, 2, 1]),
        n("MatMul", ["q", "kt"], ["s"], name="scores"),
        n("Mul", ["s", "scale"], ["ss"], name="scale"),
        n("Softmax", ["ss"], ["p"], name="softmax", axis=-1),
        n("MatMul", ["p", "v"], ["a"], name="context"),
        n("Div", ["a", "sqrt2"], ["g0"], name="gelu_div"),
        n("Erf", ["g0"], ["g1"], name="gelu_erf"),
        n("Add", ["g1", "one"], ["g2"], name="gelu_add"),
        n("Mul", ["a", "g2"], ["g3"], name="gelu_mul"),
        n("Mul", ["g3", "half"], ["y"], name="gelu_half"),
    ]
    weights = [c(np.ones(64, "float32"), "ln_s"), c(np.zeros(64, "float32"), "ln_b"),
               _w("wq", 64, 64), _w("wk", 64, 64), _w("wv", 64, 64),
               c(np.array(0.125, "float32"), "scale"), c(np.array(1.4142135, "float32"), "sqrt2"),
               c(np.array(1.0, "float32"), "one"), c(np.array(0.5, "float32"), "half")]
    return _model("attention", nodes, {"x": [16, 32, 64]}, {"y": [16, 32, 64]}, weights)


def branches() -> onnx.ModelProto:
    """Split into two branches (sigmoid-gated and tanh), concatenated, reduced by ReduceMean."""
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        n("Split", ["c", "sizes"], ["a", "b"], name="split", axis=1),
        n("Sigmoid", ["a"], ["sa"], name="gate"),
        n("Mul", ["a", "sa"], ["ga"], name="silu"),
        n("Tanh", ["b"], ["tb"], name="tanh"),
        n("Concat", ["ga", "tb"], ["cat"], name="concat", axis=1),
        n("ReduceMean", ["cat"], ["y"], name="mean", axes=[2, 3], keepdims=1),
    ]
    sizes = numpy_helper.from_array(np.array([16, 16], "int64"), "sizes")
    return _model("branches", nodes, {"x": [16, 16, 8, 8]}, {"y": [16, 32, 1, 1]},
                  [_w("w", 32, 16, 3, 3), sizes])


def relu6() -> onnx.ModelProto:
    """conv, Clip(0, 6) with its bounds as initializers (MobileNet's ReLU6), conv."""
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "w1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        n("Clip", ["c1", "lo", "hi"], ["r"], name="relu6"),
        n("Conv", ["r", "w2"], ["y"], name="conv2", pads=[1, 1, 1, 1]),
    ]
    bounds = [numpy_helper.from_array(np.array(v, "float32"), k) for k, v in (("lo", 0), ("hi", 6))]
    return _model("relu6", nodes, {"x": [16, 16, 8, 8]}, {"y": [16, 16, 8, 8]},
                  [_w("w1", 16, 16, 3, 3), _w("w2", 16, 16, 3, 3), *bounds])


def resize_sizes() -> onnx.ModelProto:
    """conv, a bilinear Resize to ``sizes`` with empty roi and scales tensors (mxnet.onnx's
    BilinearResize2D: the zoo's FCN and DeepLab), conv."""
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "w1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        n("Resize", ["c1", "roi", "scales", "sizes"], ["up"], name="resize", mode="linear",
          coordinate_transformation_mode="align_corners"),
        n("Conv", ["up", "w2"], ["y"], name="conv2", pads=[1, 1, 1, 1]),
    ]
    empty = [numpy_helper.from_array(np.zeros(0, "float32"), k) for k in ("roi", "scales")]
    sizes = numpy_helper.from_array(np.array([16, 16, 16, 16], "int64"), "sizes")
    return _model("resize_sizes", nodes, {"x": [16, 16, 8, 8]}, {"y": [16, 16, 16, 16]},
                  [_w("w1", 16, 16, 3, 3), _w("w2", 16, 16, 3, 3), *empty, sizes])


def shape_reshape() -> onnx.ModelProto:
    """A dense layer over the last axis as mxnet.onnx writes ``FullyConnected(flatten=False)``:
    flatten, MatMul, then a reshape to ``Shape(x)[:rank - 1] + [units]``, computed in the graph
    with Shape, Sub, Slice and Concat (the zoo's BERT encoder)."""
    n = helper.make_node
    nodes = [
        n("Reshape", ["x", "flat_shape"], ["flat"], name="flatten"),
        n("MatMul", ["flat", "w"], ["mm"], name="matmul"),
        n("Shape", ["x"], ["dims"], name="dims"),
        n("Shape", ["dims"], ["rank"], name="rank"),
        n("Sub", ["rank", "one"], ["last"], name="dim_minus_1"),
        n("Slice", ["dims", "zero", "last"], ["head"], name="head"),
        n("Concat", ["head", "units"], ["target"], name="target", axis=0),
        n("Reshape", ["mm", "target"], ["y"], name="unflatten"),
    ]
    ints = [numpy_helper.from_array(np.array(v, "int64"), k) for k, v in (
        ("flat_shape", [-1, 32]), ("one", [1]), ("zero", [0]), ("units", [16]))]
    return _model("shape_reshape", nodes, {"x": [16, 8, 32]}, {"y": [16, 8, 16]},
                  [_w("w", 32, 16), *ints])


def symbolic_batch() -> onnx.ModelProto:
    """convnet's first layers with a symbolic batch dimension ``N``."""
    model = convnet()
    dim = model.graph.input[0].type.tensor_type.shape.dim[0]
    dim.dim_param = "N"
    out = model.graph.output[0].type.tensor_type.shape.dim[0]
    out.dim_param = "N"
    return model


#: The models every Relax test runs, by name.
def overflow(weight: float = 1.0, variance: float = 1.0) -> onnx.ModelProto:
    """conv1 (one weight set to ``weight``), BatchNormalization bn1 (one moving variance set to
    ``variance``), relu, max pool: past 65504, either overflows float16 on tensorcore."""
    n = helper.make_node
    w = (_RNG.standard_normal((16, 16, 3, 3)) * 0.1).astype("float32")
    w[0, 0, 0, 0] = weight
    var = np.ones(16, "float32")
    var[3] = variance
    nodes = [
        n("Conv", ["x", "w"], ["c"], name="conv1", pads=[1, 1, 1, 1]),
        n("BatchNormalization", ["c", "s", "o", "m", "v"], ["bn"], name="bn1"),
        n("Relu", ["bn"], ["r"], name="relu1"),
        n("MaxPool", ["r"], ["y"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
    ]
    weights = [numpy_helper.from_array(w, "w"),
               numpy_helper.from_array(np.ones(16, "float32"), "s"),
               numpy_helper.from_array(np.zeros(16, "float32"), "o"),
               numpy_helper.from_array(np.zeros(16, "float32"), "m"),
               numpy_helper.from_array(var, "v")]
    return _model("overflow", nodes, {"x": [16, 16, 8, 8]}, {"y": [16, 16, 4, 4]}, weights)


MODELS: dict[str, Callable[[], onnx.ModelProto]] = {
    "convnet": convnet, "convnet_batch1": convnet_batch1, "mlp": mlp, "resblock": resblock,
    "depthwise": depthwise, "upsample": upsample, "deconv": deconv, "attention": attention,
    "branches": branches, "relu6": relu6, "resize_sizes": resize_sizes,
    "shape_reshape": shape_reshape,
}


# ---------------------------------------------------------------- graphs like the zoo's ONNX models
def _c(name: str, *shape: int, value: float | None = None) -> onnx.TensorProto:
    data = (np.full(shape, value, "float32") if value is not None
            else np.random.default_rng(len(name)).standard_normal(shape).astype("float32") * 0.1)
    return numpy_helper.from_array(data, name)


def _bn(n, x: str, out: str, channels: int, weights: list) -> object:
    names = [f"{out}_{k}" for k in ("s", "o", "m", "v")]
    weights += [_c(names[0], channels, value=1.0), _c(names[1], channels),
                _c(names[2], channels), _c(names[3], channels, value=1.0)]
    return n("BatchNormalization", [x, *names], [out], name=out)


def bert_layer() -> onnx.ModelProto:
    """An encoder layer as the mxnet.onnx BERT export writes it: Gemm-like MatMul+Add
    projections, heads by Reshape/Transpose, scaled Softmax attention, a LayerNorm decomposed
    (ReduceMean, Sub, Pow, Sqrt, Div), an Erf GELU."""
    n, w = helper.make_node, []
    seq, hidden, heads = 16, 64, 4
    shape = numpy_helper.from_array(np.array([1, seq, heads, hidden // heads], "int64"), "heads")
    merged = numpy_helper.from_array(np.array([1, seq, hidden], "int64"), "merged")
    nodes = []
    for p in "qkv":
        w += [_c(f"w{p}", hidden, hidden), _c(f"b{p}", hidden)]
        nodes += [n("MatMul", ["x", f"w{p}"], [f"{p}m"]), n("Add", [f"{p}m", f"b{p}"], [f"{p}a"]),
                  n("Reshape", [f"{p}a", "heads"], [f"{p}r"]),
                  n("Transpose", [f"{p}r"], [f"{p}t"], perm=[0, 2, 3, 1] if p == "k" else
                    [0, 2, 1, 3])]
    w += [_c("scale", 1, value=0.25), _c("eps", 1, value=1e-5), _c("two", 1, value=2.0),
          _c("wo", hidden, hidden), _c("bo", hidden), _c("g", hidden, value=1.0), _c("b", hidden),
          _c("w1", hidden, 128), _c("b1", 128), _c("half", 1, value=0.5), _c("one", 1, value=1.0),
          _c("sqrt2", 1, value=1.4142135), shape, merged]
    nodes += [
        n("MatMul", ["qt", "kt"], ["s"]), n("Mul", ["s", "scale"], ["ss"]),
        n("Softmax", ["ss"], ["p"], axis=-1), n("MatMul", ["p", "vt"], ["c"]),
        n("Transpose", ["c"], ["ct"], perm=[0, 2, 1, 3]), n("Reshape", ["ct", "merged"], ["cm"]),
        n("MatMul", ["cm", "wo"], ["o"]), n("Add", ["o", "bo"], ["ob"]),
        n("Add", ["ob", "x"], ["r"]),
        n("ReduceMean", ["r"], ["mu"], axes=[-1]), n("Sub", ["r", "mu"], ["d"]),
        n("Pow", ["d", "two"], ["d2"]), n("ReduceMean", ["d2"], ["var"], axes=[-1]),
        n("Add", ["var", "eps"], ["ve"]), n("Sqrt", ["ve"], ["sd"]), n("Div", ["d", "sd"], ["nz"]),
        n("Mul", ["nz", "g"], ["ng"]), n("Add", ["ng", "b"], ["ln"]),
        n("MatMul", ["ln", "w1"], ["f"]), n("Add", ["f", "b1"], ["fb"]),
        n("Div", ["fb", "sqrt2"], ["fd"]), n("Erf", ["fd"], ["fe"]), n("Add", ["fe", "one"], ["f1"]),
        n("Mul", ["fb", "f1"], ["fm"]), n("Mul", ["fm", "half"], ["y"]),
    ]
    return _model("bert_layer", nodes, {"x": [1, seq, hidden]}, {"y": [1, seq, 128]}, w)


def mobilenet_block() -> onnx.ModelProto:
    """MobileNetV2's inverted residual: 1x1 expand, BN, ReLU6 (Clip), depthwise 3x3, BN, ReLU6,
    1x1 project, BN, the residual Add; then global pool, Flatten, Gemm."""
    n, w = helper.make_node, []
    w += [_c("we", 64, 16, 1, 1), _c("wd", 64, 1, 3, 3), _c("wp", 16, 64, 1, 1),
          _c("lo", value=0.0), _c("hi", value=6.0), _c("wf", 10, 16), _c("bf", 10)]
    nodes = [n("Conv", ["x", "we"], ["e"]), _bn(n, "e", "eb", 64, w),
             n("Clip", ["eb", "lo", "hi"], ["er"]),
             n("Conv", ["er", "wd"], ["d"], group=64, pads=[1, 1, 1, 1]), _bn(n, "d", "db", 64, w),
             n("Clip", ["db", "lo", "hi"], ["dr"]), n("Conv", ["dr", "wp"], ["p"]),
             _bn(n, "p", "pb", 16, w), n("Add", ["pb", "x"], ["s"]),
             n("GlobalAveragePool", ["s"], ["g"]), n("Flatten", ["g"], ["f"]),
             n("Gemm", ["f", "wf", "bf"], ["y"], transB=1)]
    return _model("mobilenet_block", nodes, {"x": [1, 16, 16, 16]}, {"y": [1, 10]}, w)


def yolo_block() -> onnx.ModelProto:
    """tiny-YOLOv2's stages: Conv (with bias), BN, LeakyReLU, MaxPool, twice, a 1x1 head conv."""
    n, w = helper.make_node, []
    w += [_c("w1", 16, 3, 3, 3), _c("b1", 16), _c("w2", 32, 16, 3, 3), _c("w3", 8, 32, 1, 1),
          _c("b3", 8)]
    nodes = [n("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]), _bn(n, "c1", "n1", 16, w),
             n("LeakyRelu", ["n1"], ["l1"], alpha=0.1),
             n("MaxPool", ["l1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
             n("Conv", ["p1", "w2"], ["c2"], pads=[1, 1, 1, 1]), _bn(n, "c2", "n2", 32, w),
             n("LeakyRelu", ["n2"], ["l2"], alpha=0.1),
             n("MaxPool", ["l2"], ["p2"], kernel_shape=[2, 2], strides=[2, 2]),
             n("Conv", ["p2", "w3", "b3"], ["y"])]
    return _model("yolo_block", nodes, {"x": [1, 3, 32, 32]}, {"y": [1, 8, 8, 8]}, w)


#: Small graphs with the zoo's ONNX structures (bert_encoder, mobilenetv2_1.0, tiny_yolo_v2;
#: resnet50_v1's conv-BN-ReLU and residual add are resblock's, above).
ZOO_LIKE = {"bert_layer": bert_layer, "mobilenet_block": mobilenet_block,
            "yolo_block": yolo_block}
