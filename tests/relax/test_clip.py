"""ReLU6 (ONNX Clip with constant bounds) and HardSwish load as ``relax.clip`` and survive the
tensorcore preparation (ToMixedPrecision rejects clip's PrimValue bounds and call_tir)."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from models import _model, _w
from onnx import helper, numpy_helper

import partition_lab
from partition_lab.relax.runtime import run_llvm


def relu6_model():
    n = helper.make_node
    nodes = [n("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             n("Clip", ["c", "lo", "hi"], ["r"], name="relu6"),
             n("HardSwish", ["r"], ["y"], name="hswish")]
    bounds = [numpy_helper.from_array(np.array(v, "float32"), k)
              for k, v in (("lo", 0.0), ("hi", 6.0))]
    return _model("relu6", nodes, {"x": [16, 16, 8, 8]}, {"y": [16, 16, 8, 8]},
                  [_w("w", 16, 16, 3, 3), *bounds])


def _ops(mod):
    found = []
    tvm.relax.analysis.post_order_visit(
        mod["main"].body, lambda e: isinstance(e, tvm.relax.Call) and found.append(getattr(e.op, "name", "")))
    return found


def test_constant_clip_loads_as_one_clip_op():
    model = relu6_model()  # one instance: each call draws new weights
    mod, _ = partition_lab.load_model(model)
    ops = _ops(mod)
    assert "relax.call_tir" not in ops and ops.count("relax.clip") == 2  # ReLU6 and HardSwish
    x = np.random.default_rng(0).standard_normal((16, 16, 8, 8)).astype("float32") * 10
    (got,) = run_llvm(mod, {"x": x})
    w = numpy_helper.to_array(model.graph.initializer[0])
    conv = _conv3x3(x, w)
    r = np.clip(conv, 0, 6)
    np.testing.assert_allclose(got, r * np.clip(r + 3, 0, 6) / 6, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("platform", ["tensorcore", "neuron"])
def test_clip_survives_the_platforms_preparation(platform):
    mod, _ = partition_lab.load_model(relu6_model())
    analysis = partition_lab.analyze(mod, platform)
    # conv, ReLU6, HardSwish (x * clip(x + 3, 0, 6) / 6); tensorcore adds transposes and casts
    core = [n.op for n in analysis.graph.nodes if n.op not in ("transpose", "cast")]
    assert core == ["nn.conv2d", "clip", "add", "clip", "divide", "multiply"]
    ops = _ops(analysis.prepared_mod)
    # one clip op each (ReLU6, HardSwish), no opaque call_tir: mixed precision let them follow
    assert ops.count("relax.clip") == 2 and "relax.call_tir" not in ops
    if platform == "tensorcore":
        clips = [n for n in analysis.graph.nodes if n.op == "clip"]
        assert clips and all(n.outputs[0].dtype == "float16" for n in clips)


def _conv3x3(x, w):
    pad = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((x.shape[0], w.shape[0], *x.shape[2:]), "float64")
    for i in range(3):
        for j in range(3):
            out += np.einsum("nchw,oc->nohw", pad[:, :, i:i + x.shape[2], j:j + x.shape[3]],
                             w[:, :, i, j])
    return out
