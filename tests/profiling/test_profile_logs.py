"""``partition-lab profile`` keeps TVM's C++ log lines off the terminal unless ``--debug``,
and its own stderr output (the progress bar) stays live meanwhile."""

from __future__ import annotations

import importlib.util
import os
import select
import subprocess
import sys
from pathlib import Path

import pytest

from partition_lab.cli import main

ZOO_SMALL = "zoo:tiny_yolo_v2:small"
needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                 reason="the torch runner needs PyTorch")


@needs_torch
@pytest.mark.parametrize("debug", [False, True])
def test_profile_prints_tvm_log_lines_only_with_debug(
        debug: bool, tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    # tensorcore's layout and precision passes log C++ warnings straight to descriptor 2
    argv = ["profile", ZOO_SMALL, "--platform", "tensorcore", "--device", "cpu",
            "--cache", str(tmp_path / "cache.json"), *(["--debug"] if debug else [])]
    assert main(argv) == 0
    captured = capfd.readouterr()
    assert "op signatures" in captured.out
    assert ("convert_layout.cc" in captured.err or "to_mixed_precision.cc" in captured.err) \
        is debug, captured.err[-2000:]


# A stand-in for the profiler: a TVM log line on descriptor 2, then a line on Python's stderr
# (where the progress bar draws), then it waits until the parent has read that line.
_SCRIPT = """
import os, sys
import partition_lab.profiling as profiling
from partition_lab.cli import main

class Result:
    def summary(self):
        return "profiled"

def fake_profile(*args, **kwargs):
    os.write(2, b"[12:00:00] /p/convert_layout.cc:99: Warning: noise\\n")
    print("measuring now", file=sys.stderr, flush=True)
    sys.stdin.readline()
    return Result()

profiling.profile = fake_profile
sys.exit(main(["profile", "zoo:tiny_yolo_v2:small", "--platform", "tensorcore",
               "--device", "cpu", "--cache", sys.argv[1]]))
"""


def test_profile_stderr_stays_live_while_tvm_lines_are_dropped(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-c", _SCRIPT, str(tmp_path / "cache.json")],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    assert proc.stdin is not None and proc.stderr is not None
    seen = b""
    try:
        while b"measuring now" not in seen:
            ready, _, _ = select.select([proc.stderr], [], [], 120)
            assert ready, f"stderr was held back while profiling: {seen!r}"
            chunk = os.read(proc.stderr.fileno(), 4096)
            assert chunk, f"the profiler ended early: {seen!r}"
            seen += chunk
        out, err = proc.communicate(b"\n", timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, (seen + err).decode()[-2000:]
    assert b"profiled" in out
    assert b"convert_layout.cc" not in seen + err


@pytest.mark.parametrize("enabled", [True, False])
def test_tvm_python_loggers_are_held_to_errors_inside_the_block(
        enabled: bool, caplog: pytest.LogCaptureFixture) -> None:
    import logging

    from partition_lab._tvm_logs import quiet_tvm_logs

    strategy, autotvm = logging.getLogger("strategy"), logging.getLogger("autotvm")
    with quiet_tvm_logs(enabled):
        strategy.warning("conv2d NHWC layout is not optimized for x86 with autotvm.")
        autotvm.error("a real failure")
    strategy.warning("after the block")
    said = [r.getMessage() for r in caplog.records]
    assert said == ([] if enabled else ["conv2d NHWC layout is not optimized for x86 with "
                                        "autotvm."]) + ["a real failure", "after the block"]
