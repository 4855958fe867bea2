"""Quoting other libraries' messages in ours: one bounded line."""

from __future__ import annotations

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
