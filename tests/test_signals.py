"""The Ctrl-C handler: a signal during a commit waits for it; the console entry point."""


from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from partition_lab import _signals


def test_the_handler_raises_and_remembers(monkeypatch):
    previous = signal.getsignal(signal.SIGINT)
    try:
        _signals.install()
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
        assert _signals.interrupted()
        with pytest.raises(KeyboardInterrupt):
            _signals.check()
    finally:
        signal.signal(signal.SIGINT, previous)


def test_an_interrupt_during_a_commit_waits_for_it():
    previous = signal.getsignal(signal.SIGINT)
    try:
        _signals.install()
        with _signals.deferred():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.2)  # the handler ran, and raised nothing
            finished = True
        assert finished and _signals.interrupted()
        with pytest.raises(KeyboardInterrupt), _signals.deferred():
            pass  # an interrupt that came before a commit stops it from starting
    finally:
        signal.signal(signal.SIGINT, previous)


def test_the_console_entry_point_imports_nothing_before_its_handler():
    """The entry module must install its SIGINT handler before any slow import: loading it
    adds only itself to what the interpreter has loaded at start."""
    code = ("import sys; before = set(sys.modules); import _partition_lab_entry; "
            "print(sorted(set(sys.modules) - before))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert out.stdout.strip() == "['_partition_lab_entry']"


@pytest.mark.parametrize("argv, status", [(["--version"], 0), (["no-such-command"], 2)])
def test_the_console_entry_point_returns_the_status_and_leaves_sigint_default(
        monkeypatch, capsys, argv, status):
    import _partition_lab_entry

    previous = signal.getsignal(signal.SIGINT)
    monkeypatch.setattr(sys, "argv", ["partition-lab", *argv])
    try:
        assert _partition_lab_entry.main() == status
        # Python's shutdown comes next: a Ctrl-C there ends the process, with no traceback
        assert signal.getsignal(signal.SIGINT) is signal.SIG_DFL
    finally:
        signal.signal(signal.SIGINT, previous)
    assert "interrupted" not in capsys.readouterr().err


