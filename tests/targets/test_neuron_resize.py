"""neuron's resize rule: decided by method and attributes, naming the neuron-cc operator."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from tvm import relay

from partition_lab.core.graph import OpGraphBuilder, TensorType
from partition_lab.targets import get_target
from partition_lab.targets.rules import NEAREST_AS_UPSAMPLING


def resize(size: tuple[int, int], method: str = "nearest_neighbor", mode: str = "half_pixel",
           rounding: str = "round_prefer_floor", layout: str = "NCHW", hw: int = 8):
    b = OpGraphBuilder("resize")
    x = b.input("x", TensorType((1, 4, hw, hw), "float32"))
    b.op("image.resize2d", [x], attrs={"method": method, "layout": layout, "size": size,
                                       "coordinate_transformation_mode": mode,
                                       "rounding_method": rounding},
         outputs=[TensorType((1, 4, *size), "float32")])
    return b.build()[0]


RESIZE_TABLE = [
    # ONNX Resize nearest (opset 11+ defaults) by 2: neuron-cc runs it as UpSampling.
    (resize((16, 16)), True, "MXNet UpSampling(sample_type=nearest, scale=2)"),
    (resize((24, 24), mode="asymmetric", rounding="floor"), True, "scale=3"),
    (resize((16, 16), mode="asymmetric", rounding=""), True, "UpSampling"),
    (resize((16, 16), method="linear"), False, "MXNet _contrib_BilinearResize2D"),
    (resize((16, 16), method="cubic"), False, "method cubic is not on neuron-cc's list"),
    (resize((12, 12)), False, "8x8 -> 12x12 is not an integer scale"),
    (resize((16, 24)), False, "height x2 and width x3 differ"),
    (resize((16, 16), mode="asymmetric", rounding="round"), False,
     "coordinate mode asymmetric with rounding round"),
    (resize((16, 16), mode="align_corners", rounding=""), False, "align_corners"),
    (resize((16, 16), layout="NHWC"), False, "layout NHWC is not NCHW"),
]


@pytest.mark.parametrize("target", ["neuron", "neuron@2020"])
@pytest.mark.parametrize(("node", "supported", "fragment"), RESIZE_TABLE)
def test_neuron_resize_by_method_and_attributes(target, node, supported, fragment) -> None:
    verdict = get_target(target).check(node)
    assert verdict.supported is supported, verdict.reason
    assert fragment in verdict.reason
    assert verdict.rule == "neuron-resize"


def _run(expr: relay.Expr, x: relay.Var, data: np.ndarray) -> np.ndarray:
    mod = tvm.IRModule.from_expr(relay.Function([x], expr))
    return relay.create_executor("graph", mod=mod, target="llvm").evaluate()(data).numpy()


@pytest.mark.parametrize("scale", [2, 3])
@pytest.mark.parametrize(("mode", "rounding"), sorted(
    (mode, rounding) for mode, roundings in NEAREST_AS_UPSAMPLING.items() for rounding in roundings))
def test_accepted_resizes_compute_what_upsampling_computes(scale, mode, rounding) -> None:
    """The oracle is TVM: every accepted (mode, rounding) pair equals nn.upsampling (MXNet
    UpSampling's Relay op), so accepting it as UpSampling does not change the numbers."""
    x = relay.var("x", shape=(1, 2, 5, 5))
    data = np.random.default_rng(0).standard_normal((1, 2, 5, 5)).astype("float32")
    resized = relay.image.resize2d(x, (5 * scale, 5 * scale), None, "NCHW", "nearest_neighbor",
                                   mode, rounding)
    upsampled = relay.nn.upsampling(x, scale, scale)
    np.testing.assert_array_equal(_run(resized, x, data), _run(upsampled, x, data))


def test_a_rejected_mode_really_differs_from_upsampling() -> None:
    """The rule is not merely strict: align_corners reads other pixels than UpSampling (output
    pixel 2 of 12 maps to 6/11 of an input of 4, which rounds to 1, where UpSampling reads 0)."""
    x = relay.var("x", shape=(1, 1, 4, 4))
    data = np.arange(16, dtype="float32").reshape(1, 1, 4, 4)
    resized = relay.image.resize2d(x, (12, 12), None, "NCHW", "nearest_neighbor", "align_corners")
    assert not get_target("neuron").check(resize((12, 12), mode="align_corners", rounding="",
                                                 hw=4)).supported
    assert not np.array_equal(_run(resized, x, data),
                              _run(relay.nn.upsampling(x, 3, 3), x, data))


def test_targets_cite_only_what_a_user_can_open() -> None:
    """Sources name public repositories and URLs, not a file that is not shipped."""
    for name in ("neuron", "neuron@2020", "tensorcore"):
        for source in get_target(name).sources:
            assert source.startswith("https://") or "@" in source.split()[0], source


def test_an_onnx_nearest_resize_stays_on_neuron(tmp_path) -> None:
    """End to end: ONNX Resize (nearest, opset 13 defaults) between two convs is one region on
    neuron, not a CPU island that splits the model in two."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    import partition_lab

    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype("float32"), "w1")
    w2 = numpy_helper.from_array(rng.standard_normal((4, 4, 3, 3)).astype("float32"), "w2")
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], dtype="float32"), "scales")
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Resize", ["c1", "", "scales"], ["up"], name="up", mode="nearest"),
        helper.make_node("Conv", ["up", "w2"], ["y"], name="conv2", pads=[1, 1, 1, 1]),
    ]
    graph = helper.make_graph(
        nodes, "resize_between_convs",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 3, 8, 8))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, 4, 16, 16))],
        [w1, w2, scales])
    path = tmp_path / "resize.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    mod, params = partition_lab.load_model(path)
    result = partition_lab.partition(mod, "neuron", params=params)
    resize = next(n for n in result.graph if n.op == "image.resize2d")
    assert result.plan.device_of(resize.id) == "neuron"
    assert "UpSampling" in result.plan.decisions[resize.id].reason
    assert len(result.plan.regions) == 1


def test_a_resize_of_a_constant_is_judged_by_the_constant_s_shape() -> None:
    """A 4-D constant (a model's default all-ones mask) resized: the operand is a weight, not an
    input from another op, and the rule reads its shape all the same."""
    b = OpGraphBuilder("resize_of_constant")
    b.op("image.resize2d", [], weights=[TensorType((1, 1, 128, 128), "float32")],
         attrs={"method": "nearest_neighbor", "layout": "NCHW", "size": (4, 4),
                "coordinate_transformation_mode": "asymmetric", "rounding_method": "floor"},
         outputs=[TensorType((1, 1, 4, 4), "float32")])
    verdict = get_target("neuron").check(b.build()[0])
    assert "4-D" not in verdict.reason, verdict.reason
    assert "128x128 -> 4x4 is not an integer scale" in verdict.reason
