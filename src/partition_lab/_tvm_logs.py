"""Keep TVM's C++ log lines off the terminal unless the user asked for them.

TVM's C++ passes write warnings straight to file descriptor 2 (``[12:00:00]
/project/tvm/src/relay/transforms/convert_layout.cc:99: Warning: ...``), dozens per model on
tensorcore; Python's ``warnings`` and ``logging`` cannot filter them. :func:`quiet_tvm_logs`
sends descriptor 2 to a temporary file for the duration and writes back every line that is not
a TVM log line. Python's own ``sys.stderr`` keeps writing to the terminal meanwhile, so a
progress spinner stays live. TVM's Python loggers say the same kind of thing when it builds
(``conv2d NHWC layout is not optimized for x86 with autotvm.``, once per conv, and "One or more
operators have not been tuned"): they are held to errors for the duration.

Descriptor 2 belongs to the whole process, so the capture does too: the first block to enter
(in any thread) redirects it, later and concurrent ones join, and the last to leave puts it
back. Each block that leaves writes back the lines captured so far. If each block saved and
restored descriptor 2 by itself, two threads loading models at once could leave it pointing
into a deleted temporary file, and every later stderr line would be lost.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import re
import sys
import tempfile
import threading
from collections.abc import Iterator
from typing import Any, TextIO

#: A TVM C++ log line: "[hh:mm:ss] <file>.cc:<line>: ..." (DMLC's LOG format).
TVM_LOG_LINE = re.compile(r"^\[\d\d:\d\d:\d\d\] \S+\.(cc|h):\d+: ")
#: The Python loggers of TVM's op strategies, schedules and compiler (``tvm.relay.op.strategy``,
#: ``tvm.topi``, ``tvm.relay.backend.te_compiler``, ``tvm.autotvm``).
TVM_LOGGERS = ("strategy", "topi", "te_compiler", "autotvm")
#: Loggers of the PyTorch export path that warn about what they handle themselves: onnxscript's
#: constant folding logs "Evaluation failed: cannot reshape ..." for each node it leaves as it
#: is (the node stays, the model is right); torch.onnx reports its export steps.
EXPORT_LOGGERS = ("onnxscript", "torch.onnx")


@contextlib.contextmanager
def quiet_tvm_logs(enabled: bool = True) -> Iterator[None]:
    """Drop TVM's C++ log lines written to stderr inside the block, and hold TVM's (and the
    ONNX exporters', :data:`EXPORT_LOGGERS`) Python loggers to errors (a no-op when not
    ``enabled``). The API (``load_model``, ``partition``, ``analyze``, ``compare``) runs in
    this unless called with ``debug=True``; the CLI unless ``--debug``."""
    if not enabled or _shown["depth"]:
        yield
        return
    with _tvm_loggers_at(logging.ERROR), _drop_log_lines():
        yield


_shown = {"depth": 0}


@contextlib.contextmanager
def tvm_logs_shown(shown: bool = True) -> Iterator[None]:
    """Inside the block, :func:`quiet_tvm_logs` drops nothing, wherever it is entered: the
    CLI's ``--debug`` shows TVM's log lines from code that quiets them by default (the API's
    ``partition`` inside ``partition-lab profile``, say)."""
    _shown["depth"] += shown
    try:
        yield
    finally:
        _shown["depth"] -= shown


#: The one hold on the loggers' levels: how many blocks are inside, and the levels to put back.
#: Like the capture of descriptor 2 it is process-wide: if each block saved and restored the
#: levels by itself, two threads whose blocks overlap (A enters, B enters, A leaves, B leaves)
#: would leave the loggers at ERROR for good, and every later warning of theirs would be lost.
_levels_lock = threading.Lock()
_levels: dict[str, Any] = {"depth": 0, "saved": []}


@contextlib.contextmanager
def _tvm_loggers_at(level: int) -> Iterator[None]:
    """TVM's Python loggers at ``level`` or above inside the block; the first block in raises
    them, the last one out restores their levels."""
    with _levels_lock:
        if _levels["depth"] == 0:
            loggers = [logging.getLogger(name) for name in TVM_LOGGERS + EXPORT_LOGGERS]
            _levels["saved"] = [(logger, logger.level) for logger in loggers]
            for logger in loggers:
                logger.setLevel(max(level, logger.getEffectiveLevel()))
        _levels["depth"] += 1
    try:
        yield
    finally:
        with _levels_lock:
            _levels["depth"] -= 1
            if _levels["depth"] == 0:
                for logger, old in _levels["saved"]:
                    logger.setLevel(old)
                _levels["saved"] = []


_capture_lock = threading.Lock()
#: The one capture of descriptor 2: how many blocks are inside (and how many of them drop
#: TVM's log lines), the capture file, how much of it is written back, and what to put back.
_capture: dict[str, Any] = {"depth": 0, "filters": 0, "threads": collections.Counter()}


class CaptureBlock:
    """One block inside the shared capture of descriptor 2 (see :func:`stderr_captured`)."""

    def __init__(self, drop_tvm_logs: bool, start: int) -> None:
        self.drop_tvm_logs = drop_tvm_logs
        self.thread = threading.get_ident()
        self.start = start  # where the capture file ended when the block began
        self.discarded = False

    def discard(self) -> None:
        """Drop what was written inside this block (a TVM report that an error replaces),
        unless a block of another thread is inside at the time: its lines must not be lost,
        so then the report is shown as well."""
        self.discarded = True


@contextlib.contextmanager
def stderr_captured(drop_tvm_logs: bool = False) -> Iterator[CaptureBlock]:
    """Descriptor 2 into the process-wide capture inside the block, written back when it
    leaves (without TVM's C++ log lines while any block that asked so is inside)."""
    block = _enter_capture(drop_tvm_logs)
    try:
        yield block
    finally:
        _leave_capture(block)


@contextlib.contextmanager
def _drop_log_lines() -> Iterator[None]:
    """Descriptor 2 captured, written back without TVM's C++ log lines."""
    with stderr_captured(drop_tvm_logs=True):
        yield


def _enter_capture(drop_tvm_logs: bool) -> CaptureBlock:
    with _capture_lock:
        if _capture["depth"] == 0:
            sys.stderr.flush()
            saved = os.dup(2)
            python_stderr = sys.stderr
            direct = _on_descriptor_2(python_stderr)
            captured = tempfile.TemporaryFile()  # noqa: SIM115 (closed by the last block out)
            real = python_stderr
            if direct:  # Python's writes go to the real stderr, not into the capture
                real = sys.stderr = os.fdopen(os.dup(saved), "w", buffering=1,
                                              errors="replace")
            os.dup2(captured.fileno(), 2)
            _capture.update(saved=saved, python_stderr=python_stderr, direct=direct,
                            real=real, file=captured, offset=0, holes=[])
        block = CaptureBlock(drop_tvm_logs, _size())
        _capture["depth"] += 1
        _capture["filters"] += drop_tvm_logs
        _capture["threads"][block.thread] += 1
        return block


def _leave_capture(block: CaptureBlock) -> None:
    with _capture_lock:
        last = _capture["depth"] == 1  # this block is the only one inside
        if last:
            if _capture["direct"]:
                _capture["real"].close()
                if sys.stderr is _capture["real"]:  # not if someone replaced it meanwhile
                    sys.stderr = _capture["python_stderr"]
            os.dup2(_capture["saved"], 2)
            os.close(_capture["saved"])
        if block.discarded and set(_capture["threads"]) == {block.thread}:
            _capture["holes"].append((block.start, _size()))  # written by this thread alone
        _write_back(upto=_size(), whole=last)
        _capture["depth"] -= 1
        _capture["filters"] -= block.drop_tvm_logs
        _capture["threads"][block.thread] -= 1
        if not _capture["threads"][block.thread]:
            del _capture["threads"][block.thread]
        if last:
            _capture["file"].close()


def _size() -> int:
    return os.fstat(_capture["file"].fileno()).st_size


def _write_back(upto: int, whole: bool) -> None:
    """Write back the captured bytes from what is written back so far to ``upto``, without
    TVM's log lines while a block that drops them is inside; a line still being written (no
    newline yet) waits, unless this is the capture's end (``whole``)."""
    # pread, not seek and read: descriptor 2 shares this file's offset, and other threads
    # may be writing through it right now.
    start = _capture["offset"]
    text = os.pread(_capture["file"].fileno(), max(0, upto - start), start)
    if not whole:
        text = text[:text.rfind(b"\n") + 1]
    _capture["offset"] += len(text)
    for hole_start, hole_end in sorted(_capture["holes"], reverse=True):  # dropped reports
        cut_start, cut_end = max(hole_start - start, 0), max(hole_end - start, 0)
        text = text[:cut_start] + text[cut_end:]
    lines = text.decode("utf-8", "replace").splitlines(True)
    if _capture["filters"]:
        lines = [line for line in lines if not TVM_LOG_LINE.match(line)]
    # Until the last block leaves, descriptor 2 is the capture: write to the real stderr.
    stream = _capture["python_stderr"] if whole else _capture["real"]
    if lines:
        stream.write("".join(lines))
        stream.flush()


def _on_descriptor_2(stream: TextIO) -> bool:
    """Whether ``stream`` writes to file descriptor 2 (not a test's capture, say)."""
    try:
        return stream.fileno() == 2
    except (AttributeError, OSError, ValueError):
        return False
