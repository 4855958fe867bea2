"""Ctrl-C (SIGINT) stops a command cleanly: exit status 130, and the old output kept.

Two things made Ctrl-C unreliable before. A shell starts background jobs with SIGINT ignored,
and Python then never installs its handler, so the run went on and replaced its output. And an
interrupt that lands inside TVM or MXNet code can be lost when the library turns the exception
into one of its own, which a ``except Exception`` then handles. Here the command installs its
own handler whatever it inherited; the handler both raises :class:`KeyboardInterrupt` and
records the interrupt, and outputs are committed only after :func:`check` (see
:mod:`partition_lab._outputs`), so a swallowed interrupt still stops the command before it
writes anything.

SIGTERM (``kill``, a batch system's time limit) is handled the same way when it was not
ignored: it raises :class:`Terminated`, a :class:`KeyboardInterrupt`, so every ``finally``
runs on the way out. That removes staged outputs, and ``subprocess.run`` kills a ``dot`` it
is waiting on instead of leaving it running without its parent (before, the 120 s timeout lived
in the process SIGTERM had just ended). The command then exits 143.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

_state: dict[str, Any] = {"signal": 0, "deferring": False, "committed": [],
                          "installed": False}


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived: the command stops as on Ctrl-C (a KeyboardInterrupt, so code that
    cleans up on an interrupt does so here too) and exits 143."""


def install() -> Any:
    """Handle SIGINT (and SIGTERM, unless ignored) with :func:`_on_signal`; return what it
    replaces (for :func:`restore`).

    Also quiets Python's report of an interrupt that a C callback swallowed ("Exception
    ignored on calling ctypes callback function", with its traceback): TVM calls back into
    Python, and an interrupt raised there cannot propagate; it is recorded all the same.
    Only the main thread can install a handler; elsewhere this does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        return None
    _state["signal"] = 0
    _state["committed"] = []
    _state["installed"] = True
    previous_hook = sys.unraisablehook

    def quiet_interrupts(report: Any) -> None:
        if not (isinstance(report.exc_type, type)
                and issubclass(report.exc_type, KeyboardInterrupt)):
            previous_hook(report)

    sys.unraisablehook = quiet_interrupts
    previous_term = signal.getsignal(signal.SIGTERM)
    if previous_term is signal.SIG_DFL:  # one that was ignored on purpose stays ignored
        signal.signal(signal.SIGTERM, _on_signal)
    return signal.signal(signal.SIGINT, _on_signal), previous_hook, previous_term


def restore(previous: Any) -> None:
    """Put back what :func:`install` replaced (``main()`` called from a program)."""
    if previous is not None and threading.current_thread() is threading.main_thread():
        _state["installed"] = False
        handler, hook, term = previous
        signal.signal(signal.SIGINT, handler)
        if term is not None:  # None: set outside Python, and then never replaced by install
            signal.signal(signal.SIGTERM, term)
        sys.unraisablehook = hook


def interrupted() -> bool:
    """Whether SIGINT or SIGTERM arrived since :func:`install`."""
    return bool(_state["signal"])


def terminated() -> bool:
    """Whether the signal that arrived was SIGTERM (exit 143, not 130)."""
    return _state["signal"] == signal.SIGTERM


def committed() -> list[str]:
    """The outputs renamed into place since :func:`install` (an interrupt after that point
    cannot bring their old contents back; the command says so)."""
    return list(_state["committed"])


def record_committed(paths: list[str]) -> None:
    """Note outputs that :mod:`partition_lab._outputs` has just renamed into place (only
    while a command runs: the API has no interrupt to report them to)."""
    if _state["installed"]:
        _state["committed"].extend(paths)


def check() -> None:
    """Raise :class:`KeyboardInterrupt` (:class:`Terminated` for SIGTERM) if a signal
    arrived, even if its exception was lost."""
    if _state["signal"]:
        raise Terminated if terminated() else KeyboardInterrupt


@contextmanager
def deferred() -> Iterator[None]:
    """Hold Ctrl-C and SIGTERM back while the body runs (renaming outputs into place).

    An interrupt that came before raises here, before the body starts; one that comes during
    it is recorded and reported by the command's exit status once the body has finished.
    """
    check()
    _state["deferring"] = True
    try:
        yield
    finally:
        _state["deferring"] = False


def _on_signal(signum: int, frame: FrameType | None) -> None:
    if _state["signal"] != signal.SIGTERM:  # SIGTERM after Ctrl-C still means "terminated"
        _state["signal"] = signum
    if not _state["deferring"]:
        check()
