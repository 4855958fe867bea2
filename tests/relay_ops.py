"""Counting the ops of a Relay module, for the zoo tests' expected op counts."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from partition_lab.relay.frontends._spans import calls_in_order


def op_counts(mod: Any) -> Counter[str]:
    """How many calls of each op ``mod["main"]`` makes."""
    return Counter(call.op.name for call in calls_in_order(mod["main"]))


def counts_of(mod: Any, ops: Iterable[str]) -> dict[str, int]:
    """``{op: number of its calls}`` for ``ops`` (0 for an op the module does not call)."""
    counts = op_counts(mod)
    return {op: counts[op] for op in ops}
