"""Wall time of a run's stages (load, convert, prepare, partition, render), for ``--debug``.

Each stage adds its seconds to a process-wide tally under its name; the CLI prints the tally
on stderr after a command with ``--debug`` and clears it first. A stage entered again (two
models compared, say) adds up.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

_lock = threading.Lock()
_times: dict[str, float] = {}


@contextlib.contextmanager
def stage(name: str) -> Iterator[None]:
    """Add the block's wall time to the tally of ``name`` (even when it raises)."""
    start = time.perf_counter()
    try:
        yield
    finally:
        elapsed = time.perf_counter() - start
        with _lock:
            _times[name] = _times.get(name, 0.0) + elapsed


def stage_times() -> dict[str, float]:
    """Seconds per stage so far, in the order the stages first ran."""
    with _lock:
        return dict(_times)


def reset() -> None:
    """Forget the tally (the CLI does, before a command)."""
    with _lock:
        _times.clear()


def stages_line() -> str:
    """``stages: load 0.91 s, convert 25.3 s, ...`` (empty when nothing was timed)."""
    times = stage_times()
    if not times:
        return ""
    return "stages: " + ", ".join(f"{name} {seconds:.2f} s" for name, seconds in times.items())
