"""Checks of what the optimal strategy's note claims, against the totals of the other plans.

"optimal <= every strategy" proves nothing (optimal takes the minimum over their plans); the
note's claims can be wrong: a lower bound above a legal plan, a gap that does not match the
plan it reports, a "best plan" whose total is not the plan's.
"""

from __future__ import annotations

import re

import pytest

_MS = r"([0-9.]+(?:e[-+]?\d+)?) ms"
_BEST = re.compile(rf"best plan from (.+?): {_MS}")
_WITHIN = re.compile(rf"within ([0-9.]+|inf)% of the lower bound {_MS}")


def check_optimal_note(notes: list[str], optimal_total: float, totals: dict[str, float]) -> None:
    """``notes`` are optimal's notes; ``totals`` every applicable strategy's predicted total.

    The reported best plan's total is optimal's (to the note's rounding: 3 digits, or whole ms above 100 ms), unless a later note
    says optimal kept greedy's plan (the gain was within the model's error). A proven optimum
    is no worse than any plan; otherwise the lower bound is below every legal plan and the gap
    is what separates the best plan's total from it.
    """
    note = notes[0]
    assert note.startswith("optimal: "), note
    best = _BEST.search(note)
    assert best, note
    best_total = float(best.group(2)) * 1e-3
    if any("kept greedy's plan" in n for n in notes[1:]):
        assert optimal_total == pytest.approx(totals["greedy"], rel=1e-9)
    else:
        assert best_total == pytest.approx(optimal_total, rel=1e-2, abs=1e-9)
    if "proven optimal" in note and "not proven" not in note:
        assert all(best_total <= t * (1 + 1e-2) + 1e-12 for t in totals.values()), totals
        return
    within = _WITHIN.search(note)
    assert within, note
    lower = float(within.group(2)) * 1e-3
    assert all(t >= lower * (1 - 1e-2) for t in totals.values()), (lower, totals)
    if within.group(1) != "inf":
        gap = float(within.group(1)) / 100
        assert best_total == pytest.approx(lower * (1 + gap), rel=2e-2, abs=1e-9)
