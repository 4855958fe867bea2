"""Keep TVM's C++ log lines off the terminal unless the user asked for them.

TVM's C++ passes write warnings straight to file descriptor 2 (``[12:00:00]
/project/tvm/src/relay/transforms/convert_layout.cc:99: Warning: ...``), dozens per model on
tensorcore; Python's ``warnings`` and ``logging`` cannot filter them. :func:`quiet_tvm_logs`
sends descriptor 2 to a temporary file for the duration and writes back every line that is not
a TVM log line. Python's own ``sys.stderr`` keeps writing to the terminal meanwhile, so a
progress spinner stays live. TVM's Python loggers say the same kind of thing when it builds
(``conv2d NHWC layout is not optimized for x86 with autotvm.``, once per conv, and "One or more
operators have not been tuned"): they are held to errors for the duration.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from typing import TextIO

#: A TVM C++ log line: "[hh:mm:ss] <file>.cc:<line>: ..." (DMLC's LOG format).
TVM_LOG_LINE = re.compile(r"^\[\d\d:\d\d:\d\d\] \S+\.(cc|h):\d+: ")
#: The Python loggers of TVM's op strategies, schedules and compiler (``tvm.relay.op.strategy``,
#: ``tvm.topi``, ``tvm.relay.backend.te_compiler``, ``tvm.autotvm``).
TVM_LOGGERS = ("strategy", "topi", "te_compiler", "autotvm")


@contextlib.contextmanager
def quiet_tvm_logs(enabled: bool = True) -> Iterator[None]:
    """Drop TVM's C++ log lines written to stderr inside the block, and hold TVM's Python
    loggers to errors (a no-op when not ``enabled``)."""
    if not enabled:
        yield
        return
    with _tvm_loggers_at(logging.ERROR), _drop_log_lines():
        yield


@contextlib.contextmanager
def _tvm_loggers_at(level: int) -> Iterator[None]:
    """TVM's Python loggers at ``level`` or above inside the block (their levels restored)."""
    loggers = [logging.getLogger(name) for name in TVM_LOGGERS]
    saved = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(max(level, logger.getEffectiveLevel()))
    try:
        yield
    finally:
        for logger, old in zip(loggers, saved, strict=True):
            logger.setLevel(old)


@contextlib.contextmanager
def _drop_log_lines() -> Iterator[None]:
    """Descriptor 2 into a temporary file, written back without TVM's C++ log lines."""
    sys.stderr.flush()
    saved = os.dup(2)
    python_stderr = sys.stderr
    direct = _on_descriptor_2(python_stderr)
    with tempfile.TemporaryFile() as captured:
        if direct:  # Python's writes go to the real stderr, not into the capture
            sys.stderr = os.fdopen(os.dup(saved), "w", buffering=1, errors="replace")
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            if direct:
                sys.stderr.close()
                sys.stderr = python_stderr
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            kept = [line for line in captured.read().decode("utf-8", "replace").splitlines(True)
                    if not TVM_LOG_LINE.match(line)]
            if kept:
                python_stderr.write("".join(kept))
                python_stderr.flush()


def _on_descriptor_2(stream: TextIO) -> bool:
    """Whether ``stream`` writes to file descriptor 2 (not a test's capture, say)."""
    try:
        return stream.fileno() == 2
    except (AttributeError, OSError, ValueError):
        return False
