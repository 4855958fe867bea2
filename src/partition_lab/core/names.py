"""Source names carried across a pass that rebuilds calls without them (no TVM here).

A model's node names ride on its calls' spans (``source_name``): what ``excl_node_names`` matches
and what plans and drawings show. TVM's ConvertLayout and ToMixedPrecision (Relay's and Relax's)
rebuild every call they change without its span (a converted conv2d, the bias add or the
BatchNorm after it, a split of a converted tensor) and keep the others'. :func:`carried_names`
says, from the calls before and after such a pass, which unnamed call after it gets which name;
the IR preparations (``relay/passes/prepare.py``, ``relax/prepare.py``) put the names back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

#: Ops a pass rewrites into another op, ``{before: after}``: Relay's ConvertLayout makes a
#: ``nn.bias_add`` whose bias it transposes an ``add``.
REWRITTEN: Mapping[str, str] = {"nn.bias_add": "add"}

Call = tuple[str, "str | None"]  # (op, source name or None)


def carried_names(before: Sequence[Call], after: Sequence[Call],
                  rewritten: Mapping[str, str] = REWRITTEN) -> dict[int, str]:
    """``{index in after: source name}`` for the unnamed calls of ``after`` that a pass rebuilt
    from named calls of ``before`` (both in program order).

    Per op, the names no longer on any call of that op go to its unnamed calls, in order,
    where there are exactly as many of each: a pass keeps the order of the calls it rebuilds,
    and where it also inserts calls of that op (layout transposes, casts), the counts differ
    and nothing is guessed. Then the names of an op that has no call left go, the same way, to
    the op it is rewritten to (:data:`REWRITTEN`).
    """
    lost: dict[str, list[str | None]] = {}
    for op, name in before:
        lost.setdefault(op, []).append(name)
    unnamed: dict[str, list[int]] = {}
    present: set[str] = set()
    for index, (op, name) in enumerate(after):
        present.add(op)
        if name is None:
            unnamed.setdefault(op, []).append(index)
        elif name in lost.get(op, ()):
            lost[op].remove(name)
    found: dict[int, str] = {}
    for op, indices in unnamed.items():
        found.update(_matched(indices, lost.get(op, [])))
    for old, new in rewritten.items():
        if old in present or not lost.get(old):
            continue
        left = [i for i in unnamed.get(new, ()) if i not in found]
        found.update(_matched(left, lost[old]))
    return found


def _matched(indices: Sequence[int], names: Sequence[str | None]) -> dict[int, str]:
    if len(indices) != len(names):
        return {}
    return {i: name for i, name in zip(indices, names, strict=True) if name is not None}
