"""The one way seconds, bytes and counts are written for a reader: the summary, the comparison
table and the drawings all use these, so a number reads the same wherever it is shown.

>>> format_time(0.0321), format_bytes(802816), counted(1, "region"), counted(0, "CPU island")
('32.1 ms', '803 kB', '1 region', '0 CPU islands')
"""

from __future__ import annotations

__all__ = ["counted", "format_bytes", "format_time"]


def format_time(seconds: float) -> str:
    """A duration with three significant digits: ``12.3 ms``, ``45.6 us``, ``1.50 s``, ``0``."""
    if seconds == 0:
        return "0"
    if seconds >= 1.0:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    if seconds >= 1e-6:
        return f"{seconds * 1e6:.3g} us"
    return f"{seconds * 1e9:.3g} ns"


def format_bytes(nbytes: float) -> str:
    """A size in decimal units (as copy bandwidths are quoted): ``512 B``, ``3.2 kB``,
    ``25.7 MB``."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{nbytes:.0f} B"


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` with its noun in the right number: ``1 region``, ``2 regions``, ``0 CPU islands``
    (``plural`` for a noun that does not take an ``s``)."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"
