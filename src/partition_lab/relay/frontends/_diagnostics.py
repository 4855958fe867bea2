"""TVM's C++ diagnostics, caught: one line in the error instead of several on stderr.

When Relay's type checker rejects a model (an input shape that does not fit a weight, say), TVM
prints a multi-line report straight to file descriptor 2 and then raises a ``TVMError``. While a
model loads, :func:`captured` sends descriptor 2 to a temporary file: on success what was
written there is passed on unchanged; on a TVM failure (a ``TVMError``, or a Python error from
TVM's frontend code) it is dropped and the failure becomes a
:class:`~partition_lab.errors.ModelFormatError` whose message is the report's key line.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import tvm

from ..._audience import shapes_option
from ..._tvm_logs import stderr_captured
from ...errors import ModelFormatError, PartitionLabError


@contextmanager
def captured(what: str, shapes_given: bool) -> Iterator[None]:
    """Run the body with fd 2 captured; ``what`` names the model in the error message.

    The capture is the process-wide one of :mod:`partition_lab._tvm_logs`: models loaded from
    several threads at once share it, and none loses the others' stderr."""
    with stderr_captured() as block:
        failed = False
        try:
            yield
        except PartitionLabError:
            failed = True
            raise
        except tvm.error.TVMError as exc:
            failed = True
            hint = f"; check {shapes_option()}" if shapes_given else ""
            raise ModelFormatError(
                f"TVM cannot convert {what}: {key_line(str(exc)).rstrip('.')}{hint}") from exc
        except (IndexError, KeyError, AssertionError, ValueError, TypeError) as exc:
            # TVM's Python frontends fail this way on inputs they do not expect.
            failed = True
            raise ModelFormatError(f"TVM cannot convert {what}: {type(exc).__name__}: "
                                   f"{key_line(str(exc))} (rerun with --debug for the "
                                   "traceback)") from exc
        finally:
            if failed:
                block.discard()


def key_line(report: str) -> str:
    """The line of a TVM error report that says what is wrong (the last line that is not
    traceback or banner), shortened to 200 characters."""
    lines = [line.strip() for line in report.splitlines() if line.strip()]
    lines = [line for line in lines if not line.startswith(("File ", "Traceback", "---", "0:",
                                                             "1:", "2:", "3:"))]
    text = (lines or ["unknown error"])[-1]
    return text if len(text) <= 200 else text[:197] + "..."
