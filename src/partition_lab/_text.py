"""Words of our messages: other libraries' messages quoted in one bounded line, and the
did-you-mean of a name that is not known."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

#: The longest piece of another library's message that goes into one of ours: torch's can be
#: thousands of characters on one line (a symbolic expression, the graph traced so far).
MAX_QUOTED = 200


def first_line(error: BaseException | str, limit: int = MAX_QUOTED) -> str:
    """The first non-empty line of an exception's message (its type name if it has none), cut
    to ``limit`` characters."""
    text = str(error).strip()
    if not text:
        return type(error).__name__ if isinstance(error, BaseException) else ""
    line = text.splitlines()[0].strip()
    return line if len(line) <= limit else line[:limit - 3].rstrip() + "..."


def closest(name: str, known: Iterable[str]) -> str | None:
    """The one of ``known`` names closest to ``name`` where it is close (a typo), else None."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.75)
    return close[0] if close else None


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``known`` names, or nothing."""
    close = closest(name, known)
    return f" (did you mean {close!r}?)" if close else ""
