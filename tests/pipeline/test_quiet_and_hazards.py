"""The Python API is quiet (TVM's C++ warnings, the exporters' loggers and
numpy's overflow warning stay off stderr unless ``debug=True``), and a constant that
overflows float16 on tensorcore is named with its op, value and device."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import jsonschema
import numpy as np
import pytest
import tvm

import partition_lab
from partition_lab.schemas import load_schema
from repo_paths import REPO_ROOT, TESTS_DIR

SRC = str(REPO_ROOT / "src")

# A conv -> BatchNorm -> ReLU -> max_pool model whose BatchNorm moving variance (9.8e7) does not
# fit float16; tensorcore's ConvertLayout warns about the max_pool and ToMixedPrecision about
# its layout_transforms, on descriptor 2.
MODEL = textwrap.dedent("""
    import numpy as np, tvm
    from tvm import relay

    def span(name):
        return tvm.ir.Span(tvm.ir.SourceName(name), 0, 0, 0, 0)

    def overflow_module(variance=9.8e7):
        x = relay.var("data", shape=(16, 16, 8, 8))
        rng = np.random.default_rng(0)
        weight = relay.const(rng.standard_normal((16, 16, 3, 3)).astype("float32"))
        conv_attrs = tvm.ir.make_node(
            "relay.attrs.Conv2DAttrs", padding=[1, 1, 1, 1], channels=16, kernel_size=[3, 3],
            strides=[1, 1], dilation=[1, 1], groups=1, data_layout="NCHW",
            kernel_layout="OIHW", out_layout="", out_dtype="")
        conv = relay.Call(relay.op.get("nn.conv2d"), [x, weight], conv_attrs, None,
                          span("conv1"))
        var = np.ones(16, "float32")
        var[3] = variance
        stats = [relay.const(v) for v in (np.ones(16, "float32"), np.zeros(16, "float32"),
                                          np.zeros(16, "float32"), var)]
        bn_attrs = tvm.ir.make_node("relay.attrs.BatchNormAttrs", axis=1, epsilon=1e-5,
                                    center=True, scale=True)
        bn = relay.Call(relay.op.get("nn.batch_norm"), [conv, *stats], bn_attrs, None,
                        span("bn1"))
        relu = relay.Call(relay.op.get("nn.relu"), [relay.TupleGetItem(bn, 0)], None, None,
                          span("relu1"))
        pool = relay.nn.max_pool2d(relu, pool_size=(2, 2), strides=(2, 2))
        pool = relay.Call(pool.op, pool.args, pool.attrs, None, span("pool1"))
        func = relay.Function([x], pool)
        return relay.transform.InferType()(tvm.IRModule.from_expr(func))
""")

_QUIET_SCRIPT = MODEL + textwrap.dedent("""
    import sys
    import partition_lab
    debug = sys.argv[1] == "debug"
    result = partition_lab.partition(overflow_module(), "tensorcore", debug=debug)
    print(result.summary())
""")


def _run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": SRC, "TOPHUB_LOCATION": "NONE",
           "PYTHONWARNINGS": "default"}  # a warning printed anywhere shows
    return subprocess.run([sys.executable, "-c", script, *args], capture_output=True,
                          text=True, env=env, timeout=300, check=False)


def test_partition_prints_nothing_on_stderr() -> None:
    quiet = _run(_QUIET_SCRIPT, "quiet")
    assert quiet.returncode == 0, quiet.stderr[-3000:]
    assert quiet.stderr == ""  # no TVM C++ lines, no numpy "overflow encountered in cast"
    assert "numeric hazard: bn1 (nn.batch_norm)" in quiet.stdout


def test_debug_shows_tvm_log_lines() -> None:
    loud = _run(_QUIET_SCRIPT, "debug")
    assert loud.returncode == 0, loud.stderr[-3000:]
    assert "convert_layout.cc" in loud.stderr or "to_mixed_precision.cc" in loud.stderr
    assert "overflow encountered" not in loud.stderr  # named in the summary instead


@pytest.mark.parametrize("debug", [False, True])
def test_exporter_loggers_are_held_to_errors_unless_debug(
        debug: bool, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    from partition_lab._tvm_logs import quiet_tvm_logs

    log = logging.getLogger("onnxscript.optimizer._constant_folding")
    parent = logging.getLogger("onnxscript")  # the name quiet_tvm_logs holds (EXPORT_LOGGERS)
    # Libraries imported earlier in this process may have disabled this logger (dictConfig's
    # disable_existing_loggers), raised the root's level, or stopped propagation on the way up;
    # what is tested here is the block alone, so the logger gets caplog's handler itself, it
    # inherits its level (as onnxscript's module loggers do) and the parent starts at WARNING.
    monkeypatch.setattr(log, "disabled", False)
    monkeypatch.setattr(log, "propagate", False)
    monkeypatch.setattr(log, "handlers", [caplog.handler])
    saved = log.level, parent.level
    log.setLevel(logging.NOTSET)  # setLevel, not setattr: it clears the loggers' level cache
    parent.setLevel(logging.WARNING)
    try:
        with quiet_tvm_logs(not debug):
            log.warning("Evaluation failed: cannot reshape array of size 6 into shape (4,)")
        assert parent.level == logging.WARNING  # the block put the level back
    finally:
        log.setLevel(saved[0])
        parent.setLevel(saved[1])
    assert ("Evaluation failed" in caplog.text) is debug


def _overflow_module(variance: float = 9.8e7) -> tvm.IRModule:
    namespace: dict[str, object] = {}
    exec(MODEL, namespace)  # noqa: S102  (the same model the subprocess builds)
    return namespace["overflow_module"](variance)  # type: ignore[operator]


def test_overflow_is_named_in_the_summary_and_the_plan_json() -> None:
    result = partition_lab.partition(_overflow_module(), "tensorcore")
    summary = result.summary()
    assert ("numeric hazard: bn1 (nn.batch_norm): a constant of 9.8e+07 overflows float16 on "
            "tensorcore") in summary
    data = json.loads(result.to_json())
    jsonschema.Draft202012Validator(load_schema("plan")).validate(data)
    [hazard] = data["numeric_hazards"]
    assert hazard["op"] == "nn.batch_norm" and hazard["name"] == "bn1"
    assert hazard["value"] == pytest.approx(9.8e7) and hazard["dtype"] == "float16"
    assert hazard["device"] == "tensorcore" and hazard["kept_fp32"] is False
    node = result.graph[hazard["node"]]
    assert node.op == "nn.batch_norm" and node.source_name == "bn1"
    reloaded = partition_lab.PartitionPlan.from_dict(result.graph, data)
    assert reloaded.hazards == result.plan.hazards


def test_values_that_fit_float16_are_no_hazard() -> None:
    result = partition_lab.partition(_overflow_module(variance=6e4), "tensorcore")
    assert "numeric_hazards" not in result.to_dict() and "hazard" not in result.summary()


def test_fp32_precision_has_no_hazard() -> None:
    result = partition_lab.partition(_overflow_module(), "tensorcore", precision="fp32")
    assert not result.plan.hazards


def test_keep_fp32_on_overflow_computes_the_op_in_float32() -> None:
    from partition_lab.relay.runtime import run_module

    inputs = {"data": np.random.default_rng(1).standard_normal((16, 16, 8, 8)).astype("float32")}
    plain = partition_lab.partition(_overflow_module(), "tensorcore")
    kept = partition_lab.partition(_overflow_module(), "tensorcore", keep_fp32_on_overflow=True)
    [hazard] = kept.plan.hazards
    assert hazard.kept_fp32 and "kept in float32" in kept.summary()
    node = kept.graph[hazard.node]
    assert node.op == "nn.batch_norm" and node.outputs[0].dtype == "float32"
    assert {w.dtype for w in node.weights} == {"float32"}
    # channel 3's output is 0 in float16 (x / sqrt(inf)), and finite elsewhere either way;
    # in float32 it is x / sqrt(9.8e7): small but not all zero.
    [out_plain] = run_module(plain.prepared_mod, inputs)
    [out_kept] = run_module(kept.prepared_mod, inputs)
    assert not out_plain[:, 3].any() and out_kept[:, 3].any()
    assert np.isfinite(out_kept).all()


def test_keep_fp32_on_overflow_is_a_checked_tensorcore_option() -> None:
    from partition_lab.errors import TargetSpecError

    with pytest.raises(TargetSpecError, match="keep_fp32_on_overflow must be True or False"):
        partition_lab.get_platform("tensorcore", keep_fp32_on_overflow="yes")


def test_overlapping_quiet_blocks_put_the_loggers_levels_back() -> None:
    """Two threads' blocks that overlap without nesting (A in, B in, A out, B out) leave every
    held logger at the level it had; each block restoring by itself would leave them at ERROR."""
    from partition_lab._tvm_logs import EXPORT_LOGGERS, TVM_LOGGERS, _tvm_loggers_at

    loggers = [logging.getLogger(name) for name in TVM_LOGGERS + EXPORT_LOGGERS]
    before = [logger.level for logger in loggers]
    first, second = _tvm_loggers_at(logging.ERROR), _tvm_loggers_at(logging.ERROR)
    first.__enter__()
    second.__enter__()
    assert all(logger.getEffectiveLevel() >= logging.ERROR for logger in loggers)
    first.__exit__(None, None, None)
    assert all(logger.getEffectiveLevel() >= logging.ERROR for logger in loggers)  # B still in
    second.__exit__(None, None, None)
    assert [logger.level for logger in loggers] == before


def _relax_test_model(folder: Path, **values: float) -> tvm.IRModule:
    """The ONNX model tests/relax/test_relax_pipeline.py partitions through Relax."""
    import onnx

    sys.path.insert(0, str(TESTS_DIR / "relax"))
    try:
        import models
    finally:
        sys.path.pop(0)
    onnx.save(models.overflow(**values), str(folder / "overflow.onnx"))
    mod, params = partition_lab.load_model(folder / "overflow.onnx")
    return partition_lab.api.bind_params(mod, params)


@pytest.mark.parametrize("values, op, name, value", [
    ({"weight": 1e6}, "nn.conv2d", "conv1", 1e6),
    ({"variance": 9.8e7}, "nn.batch_norm", "bn1", 9.8e7),
])
def test_the_relax_tests_overflow_model_is_named_on_relay(values, op, name, value,
                                                          tmp_path) -> None:
    """The conv weight is named on both IRs; the BatchNorm variance on Relay only, whose
    ToMixedPrecision casts batch_norm's constants (Relax's keeps batch_norm in float32)."""
    result = partition_lab.partition(_relax_test_model(tmp_path, **values), "tensorcore")
    [hazard] = result.plan.hazards
    assert (hazard.op, hazard.name, hazard.device) == (op, name, "tensorcore")
    assert hazard.value == pytest.approx(value)
    assert result.graph[hazard.node].op == op
