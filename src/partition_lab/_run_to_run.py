"""What differs between two runs of the same command, and only that: masked by the plan
snapshots (docs/evidence/performance.md, *plan snapshots*) and by the tests that want a plan's JSON byte-identical
across runs (``tests/relay/frontends/test_cache_identity.py``)."""

from __future__ import annotations

import re

#: The solver's wall time at the end of optimal's note ("...; 0.03 s"): the one part of a plan
#: that differs from run to run.
SOLVE_TIME = re.compile(r"; \d+(\.\d+)? s(?=\")")


def mask_solve_times(text: str) -> str:
    """``text`` (a plan's JSON) with each solve time written ``<time>``."""
    return SOLVE_TIME.sub("; <time> s", text)
