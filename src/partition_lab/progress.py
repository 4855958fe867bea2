"""Progress display for slow steps (loading, partitioning, searching, rendering), on stderr.

Shown only when asked: the command line enables it when stderr is a terminal or with
``--progress``, so pipes, logs and tests see no control characters.

>>> progress = Progress(enabled=False)
>>> with progress.step("loading model"):
...     pass
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager


class Progress:
    """Shows each step as a spinner with its elapsed time, then a finished line.

    The steps wrapped here are single calls whose progress cannot be measured (a frontend
    conversion, a solver run), so an indeterminate bar with elapsed time is the honest display.
    """

    def __init__(self, enabled: bool | None = None) -> None:
        """``enabled=None`` shows progress only when stderr is a terminal."""
        self.enabled = sys.stderr.isatty() if enabled is None else enabled

    @contextmanager
    def step(self, description: str) -> Iterator[None]:
        """Display ``description`` while the body runs."""
        if not self.enabled:
            yield
            return
        from rich.console import Console  # rich is only needed when progress is shown
        from rich.progress import BarColumn, SpinnerColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as RichProgress

        columns = (SpinnerColumn(finished_text="[green]done"), TextColumn("{task.description}"),
                   BarColumn(bar_width=24), TimeElapsedColumn())
        with RichProgress(*columns, console=Console(stderr=True), transient=False) as bar:
            task = bar.add_task(description, total=None)
            yield
            bar.update(task, total=1, completed=1)
