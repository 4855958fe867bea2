"""The ``partition-lab`` console script: Ctrl-C ends it cleanly from its first line.

This module sits outside the ``partition_lab`` package on purpose. Importing the package and
its command line takes a few tenths of a second (networkx, numpy), and a Ctrl-C in that time
would end in Python's traceback, because the command's own handler
(:mod:`partition_lab._signals`) is installed only once :func:`partition_lab.cli.main` runs.
This module imports nothing that the interpreter has not loaded already, so its handler is in
place about 10 ms after the process starts, before the package starts to load; an interrupt
then ends like one during a command: ``partition-lab: interrupted`` and exit status 130.
``main()`` of the CLI installs its own handler for the command and puts this one back when it
returns.
"""

# _signal is the C module under ``signal``, loaded with the interpreter: ``import signal``
# would first import enum, collections and functools, and a Ctrl-C during those would still
# end in a traceback.
import _signal
import sys

PROG = "partition-lab"
_state = {"interrupted": False}


def _on_sigint(signum: int, frame: object) -> None:
    _state["interrupted"] = True  # kept: an import may catch the exception and go on
    raise KeyboardInterrupt


def main() -> int:
    """Run ``partition-lab`` with ``sys.argv``; return its exit status (130 on Ctrl-C).

    The handler goes in whatever SIGINT's disposition was, as the command's own does: a shell
    starts background jobs with SIGINT ignored.
    """
    _signal.signal(_signal.SIGINT, _on_sigint)
    interrupted = False
    try:
        from partition_lab.cli import main as run_command

        if _state["interrupted"]:  # an import caught the interrupt and went on
            raise KeyboardInterrupt
        status = run_command()
    except KeyboardInterrupt:
        interrupted = True
    except Exception:
        if not _state["interrupted"]:
            raise  # not an interrupt: a broken installation is reported with its traceback
        interrupted = True  # a library turned the interrupt into an error of its own
    finally:
        # Python shuts down next; a Ctrl-C then ends the process by the signal itself (which a
        # shell reports as 130 too) instead of a traceback from an exit handler.
        _signal.signal(_signal.SIGINT, _signal.SIG_DFL)
    if interrupted:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    return status
