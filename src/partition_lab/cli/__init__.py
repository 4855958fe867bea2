"""The ``partition-lab`` command line: viz, partition, compare, profile, targets, zoo,
cache.

Every command exits 0 on success and 2 on any error, which it reports as one line
``partition-lab: error: <message>`` on stderr (``--debug`` adds the traceback), 130 on Ctrl-C
and 143 on SIGTERM; ``viz`` and ``partition`` exit 3 when ``--fail-on-fallback`` /
``--max-host-ops`` find more ops on the host than allowed. TVM's C++ log lines are dropped unless
``--debug``. Outputs are checked before the model loads (writable, not one of the inputs) and
written as one unit: a failed command, or one interrupted before the renames, leaves the old
files as they were. Progress goes to stderr, only when stderr is a terminal or with
``--progress``. ``main(argv)`` returns the exit status instead of exiting,
so tests and other programs can call it.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Sequence

from .. import _signals, _stages
from .._audience import command_line
from .._tvm_logs import tvm_logs_shown
from ..errors import PartitionLabError
from .jobs import (
    DEFAULT_MODEL,
    DEFAULT_MODEL_WITHOUT_MXNET,
    EXIT_FALLBACK,
    PROG,
    UsageError,
    default_model_name,
    parse_input_shapes,
    parse_options,
    resolve_job,
    run_partition_job,
)
from .parser import COMPARE_JSON_DOC, PLAN_JSON_DOC, build_parser

__all__ = [
    "COMPARE_JSON_DOC", "DEFAULT_MODEL", "DEFAULT_MODEL_WITHOUT_MXNET", "EXIT_FALLBACK",
    "PLAN_JSON_DOC", "PROG", "UsageError", "build_parser", "default_model_name", "main",
    "one_line", "parse_input_shapes", "parse_options", "resolve_job", "run_partition_job",
]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    os.environ.setdefault("TOPHUB_LOCATION", "NONE")  # TVM would otherwise retry a download
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    previous = _signals.install()  # Ctrl-C stops the run even when started ignoring SIGINT
    try:
        args = build_parser().parse_args(argv)
        _stages.reset()
        # --debug shows TVM's log lines, also from the API calls that quiet them by default
        with command_line(), tvm_logs_shown(debug):  # hints name the CLI's flags
            status = args.handler(args)
        if debug and _stages.stages_line():  # where the time went: load, convert, prepare...
            print(f"{PROG}: {_stages.stages_line()}", file=sys.stderr)
        _signals.check()  # an interrupt that a library caught and swallowed still counts
        return status
    except SystemExit as exc:  # --help and --version exit through argparse
        return exc.code if isinstance(exc.code, int) else 0
    except BrokenPipeError:  # output piped into head or less that exited early: not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        return _report_interrupt()
    except Exception as exc:  # every error becomes one line; the traceback only with --debug
        if _signals.interrupted():  # a library turned the interrupt into an error of its own
            return _report_interrupt()
        if debug:
            traceback.print_exc()
        print(f"{PROG}: error: {one_line(exc)}", file=sys.stderr)
        return 2
    finally:
        _signals.restore(previous)


def _report_interrupt() -> int:
    """Say that the command was stopped, and which outputs it had already replaced (an
    interrupt after the renames cannot bring the old files back); return 130, or 143 for
    SIGTERM."""
    how = "terminated" if _signals.terminated() else "interrupted"
    written = _signals.committed()
    if written:
        how += f" after {' and '.join(written)} had been replaced by this run's results"
    print(f"{PROG}: {how}", file=sys.stderr)
    return 143 if _signals.terminated() else 130


def one_line(exc: BaseException) -> str:
    """The message of an exception as a single line.

    Our own errors are already written for users. Anything else (a TVM or MXNet failure) is
    prefixed with its type and pointed at ``--debug``; a message that embeds a traceback is
    reduced to its last line, where TVM puts the actual error.
    """
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if lines and lines[0].startswith("Traceback"):
        lines = lines[-1:]
    text = " ".join(lines[:3]) if isinstance(exc, PartitionLabError) else (lines or [""])[0]
    if isinstance(exc, PartitionLabError):
        return text
    return f"{type(exc).__name__}: {text} (rerun with --debug for the traceback)"
