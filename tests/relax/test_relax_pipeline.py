"""The Relax path runs the same pipeline as Relay (partition_lab.pipeline): the same module and
argument checks, the same quiet-log block, and a weight that overflows float16 on tensorcore
named in the plan. ``tests/pipeline/test_quiet_and_hazards.py`` runs the same ONNX model through Relay."""

from __future__ import annotations

import contextlib
import json

import models
import onnx
import pytest
import tvm

import partition_lab
from partition_lab.errors import ArgumentError, PartitionLabError
from partition_lab.pipeline import run


def _load(model: onnx.ModelProto) -> tvm.IRModule:
    mod, _ = partition_lab.load_model(model)
    return mod


def test_an_overflowing_conv_weight_is_named_on_relax() -> None:
    result = partition_lab.partition(_load(models.overflow(weight=1e6)), "tensorcore")
    [hazard] = result.plan.hazards
    assert (hazard.op, hazard.name, hazard.dtype, hazard.device) == (
        "nn.conv2d", "conv1", "float16", "tensorcore")
    assert hazard.value == pytest.approx(1e6) and not hazard.kept_fp32
    assert result.graph[hazard.node].op == "nn.conv2d"
    assert ("numeric hazard: conv1 (nn.conv2d): a constant of 1e+06 overflows float16 on "
            "tensorcore") in result.summary()
    assert "precision='fp32'" in result.summary()  # no keep_fp32_on_overflow advice here
    [record] = json.loads(result.to_json())["numeric_hazards"]
    assert record["remedy"] and record["node"] == hazard.node


def test_a_batchnorm_variance_past_float16_stays_float32_on_relax() -> None:
    """Relax's ToMixedPrecision keeps batch_norm in float32 (Relay's casts its constants), so
    the BatchNorm case that Relay names is no overflow here: the variance stays float32."""
    result = partition_lab.partition(_load(models.overflow(variance=9.8e7)), "tensorcore")
    assert not result.plan.hazards and "hazard" not in result.summary()
    [bn] = [n for n in result.graph if n.op == "nn.batch_norm"]
    assert bn.inputs[0].dtype == "float32"
    assert {w.dtype for w in bn.weights} == {"float32"}


def test_fp32_precision_has_no_hazard_on_relax() -> None:
    result = partition_lab.partition(_load(models.overflow(weight=1e6)), "tensorcore",
                                     precision="fp32")
    assert not result.plan.hazards


def test_keep_fp32_on_overflow_is_refused_in_one_line_on_relax() -> None:
    with pytest.raises(PartitionLabError, match="keep_fp32_on_overflow is not implemented for "
                                                "Relax") as caught:
        partition_lab.partition(_load(models.overflow(weight=1e6)), "tensorcore",
                                keep_fp32_on_overflow=True)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("kwargs, message", [
    ({"excl_node_names": "conv1"}, "not the string 'conv1'"),
    ({"exclude_ops": [1]}, "must hold names"),
    ({"params": [1, 2]}, "params must map parameter names"),
    ({"params": {"nope": 1}}, "'nope' are not parameters of main"),
])
def test_relax_arguments_are_checked_as_on_relay(kwargs: dict, message: str) -> None:
    with pytest.raises(ArgumentError, match=message):
        partition_lab.partition(_load(models.convnet()), "neuron", **kwargs)


def test_a_module_without_main_is_refused_on_relax() -> None:
    mod = _load(models.convnet())
    other = tvm.IRModule({tvm.ir.GlobalVar("other"): mod["main"]})
    with pytest.raises(ArgumentError, match="no 'main' function"):
        partition_lab.partition(other, "neuron")


def test_relax_runs_inside_the_quiet_log_block(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []

    @contextlib.contextmanager
    def recording(quiet: bool = True):  # noqa: ANN202
        seen.append(quiet)
        yield

    monkeypatch.setattr(run, "quiet_tvm_logs", recording)
    result = partition_lab.partition(_load(models.convnet()), "neuron")
    assert result.ir_name == "relax" and seen and all(seen)
    partition_lab.partition(_load(models.convnet()), "neuron", debug=True)
    assert seen[-1] is False
