"""Ctrl-C (SIGINT) stops a command cleanly: exit status 130, and the old output kept.

Two things made Ctrl-C unreliable before. A shell starts background jobs with SIGINT ignored,
and Python then never installs its handler, so the run went on and replaced its output. And an
interrupt that lands inside TVM or MXNet code can be lost when the library turns the exception
into one of its own, which a ``except Exception`` then handles. Here the command installs its
own handler whatever it inherited; the handler both raises :class:`KeyboardInterrupt` and
records the interrupt, and outputs are committed only after :func:`check` (see
:mod:`partition_lab._outputs`), so a swallowed interrupt still stops the command before it
writes anything.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

_state = {"interrupted": False, "deferring": False}


def install() -> Any:
    """Handle SIGINT with :func:`_on_sigint`; return what it replaces (for :func:`restore`).

    Also quiets Python's report of an interrupt that a C callback swallowed ("Exception
    ignored on calling ctypes callback function", with its traceback): TVM calls back into
    Python, and an interrupt raised there cannot propagate; it is recorded all the same.
    Only the main thread can install a handler; elsewhere this does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        return None
    _state["interrupted"] = False
    previous_hook = sys.unraisablehook

    def quiet_interrupts(report: Any) -> None:
        if not (isinstance(report.exc_type, type)
                and issubclass(report.exc_type, KeyboardInterrupt)):
            previous_hook(report)

    sys.unraisablehook = quiet_interrupts
    return signal.signal(signal.SIGINT, _on_sigint), previous_hook


def restore(previous: Any) -> None:
    """Put back what :func:`install` replaced (``main()`` called from a program)."""
    if previous is not None and threading.current_thread() is threading.main_thread():
        handler, hook = previous
        signal.signal(signal.SIGINT, handler)
        sys.unraisablehook = hook


def interrupted() -> bool:
    """Whether SIGINT arrived since :func:`install`."""
    return _state["interrupted"]


def check() -> None:
    """Raise :class:`KeyboardInterrupt` if SIGINT arrived, even if its exception was lost."""
    if _state["interrupted"]:
        raise KeyboardInterrupt


@contextmanager
def deferred() -> Iterator[None]:
    """Hold Ctrl-C back while the body runs (renaming outputs into place).

    An interrupt that came before raises here, before the body starts; one that comes during
    it is recorded and reported by the command's exit status once the body has finished.
    """
    check()
    _state["deferring"] = True
    try:
        yield
    finally:
        _state["deferring"] = False


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    _state["interrupted"] = True
    if not _state["deferring"]:
        raise KeyboardInterrupt
