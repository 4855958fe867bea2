"""Cost-driven local search over device assignments (used by ``cost`` and ``optimal``).

Moves, each priced with :class:`~.costing.CostTables` before it is tried:

* exclude an accelerator region (all its ops to the CPU): saves its launch and its copies;
* absorb a CPU island of supported ops into the accelerator (merging its neighbour regions);
* move one boundary op to the other device.

Launch savings are predicted pessimistically (a region may split, a merge may be forbidden by a
cycle), so predictions rarely promise too much. A round prices every candidate, then walks them
from the best down, re-pricing each against the moves already taken in this round and taking it
while it still gains (a move never touches a node an earlier one moved); a move that did not
gain gets another look once a neighbouring move was taken, so cascades take one round. Then the regions are
formed again (anchors legalised) and the batch is kept if the exact total went down; otherwise
its better half is tried, and so on, and a single move that does not help is given up. The
search stops when no move is predicted to help; each try costs one region formation, linear in
the graph.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from .base import Assignment, accel_regions, describe_region, legalize, ms
from .costing import CostTables

EPS = 1e-12


@dataclass(frozen=True)
class Move:
    """Switch ``nodes`` to the accelerator (``to_accel``) or to the CPU, predicted to save ``gain``.

    ``launches`` is the region-launch time the move is expected to save (positive) or add.
    """

    nodes: tuple[int, ...]
    to_accel: bool
    gain: float
    launches: float = 0.0
    reason: str = ""

    @property
    def key(self) -> tuple[tuple[int, ...], bool]:
        return self.nodes, self.to_accel


@dataclass
class SearchResult:
    regions: list[list[int]]
    total: float
    start_total: float
    rounds: int = 0
    accepted: int = 0
    rejected: list[Move] = field(default_factory=list)


def improve(state: Assignment, regions: list[list[int]], tables: CostTables, *,
            max_rounds: int = 50, tolerance: float = 0.0) -> SearchResult:
    """Apply cost-reducing moves to ``state`` (in place) until none helps.

    ``tolerance``: also stop after a round that saved less than this fraction of the total.
    """
    total = tables.total(state.on_accel, regions)
    result = SearchResult(regions, total, total)
    tabu: set[tuple[tuple[int, ...], bool]] = set()
    near: set[int] | None = None  # nodes changed by the last round; None: look everywhere
    while result.rounds < max_rounds:
        threshold = EPS * max(1.0, result.total)
        moves = [m for m in candidate_moves(state, result.regions, tables, near)
                 if m.key not in tabu]
        moves.sort(key=lambda m: -m.gain)
        batch = _still_gaining(state, moves, tables, threshold)
        if not batch:
            break
        before = result.total
        # Keep the longest prefix of the batch that lowers the exact total, halving on failure:
        # one move whose region effect was mispredicted costs log(batch) formations, not all.
        while batch:
            result.rounds += 1
            if _try(state, batch, tables, result):
                near = {n for move in batch for n in move.nodes}
                break
            if len(batch) == 1 or result.rounds >= max_rounds:
                tabu.add(batch[0].key)
                result.rejected.append(batch[0])
                near = set(batch[0].nodes)
                break
            batch = batch[:len(batch) // 2]
        if before - result.total < tolerance * result.total and result.total < before:
            break
    return result


def _still_gaining(state: Assignment, moves: list[Move], tables: CostTables,
                   threshold: float) -> list[Move]:
    """Take moves best first while they gain, re-pricing each against those already taken.

    A move that did not gain is looked at again once a move next to it was taken: excluding
    one region often makes its neighbour's copies, and so its exclusion, worth it (a cascade
    that would otherwise cost one region formation per step).
    """
    trial = list(state.on_accel)
    moved: set[int] = set()
    dirty: set[int] = set()  # nodes whose move price may differ from the candidate's
    taken: list[Move] = []
    waiting: dict[int, list[int]] = {}  # node -> moves touching it that did not gain yet
    queue = list(range(len(moves)))
    queue.reverse()  # pop() from the end: best first
    seen_again: set[int] = set()
    while queue:
        index = queue.pop()
        move = moves[index]
        if not moved.isdisjoint(move.nodes):
            continue
        gain = move.gain
        if not dirty.isdisjoint(move.nodes):
            compute, transfer = tables.move_delta(move.nodes, trial)
            gain = move.launches - compute - transfer
        if gain <= threshold:
            for n in move.nodes:
                waiting.setdefault(n, []).append(index)
            continue
        for n in move.nodes:
            trial[n] = move.to_accel
        moved.update(move.nodes)
        dirty |= _widen(_widen(set(move.nodes), tables), tables)
        taken.append(move)
        for n in move.nodes:
            for m in tables.neighbours[n]:
                for again in waiting.pop(m, ()):
                    if again not in seen_again:  # each move gets one more look
                        seen_again.add(again)
                        queue.append(again)
    return taken


def _try(state: Assignment, batch: list[Move], tables: CostTables, result: SearchResult) -> bool:
    trial = state.copy()
    for move in batch:
        apply_move(trial, move)
    regions = legalize(trial)
    total = tables.total(trial.on_accel, regions)
    if total < result.total - EPS * max(1.0, result.total):
        state.on_accel, state.reasons = trial.on_accel, trial.reasons
        result.regions, result.total = regions, total
        result.accepted += len(batch)
        return True
    return False


def apply_move(state: Assignment, move: Move) -> None:
    for n in move.nodes:
        state.on_accel[n] = move.to_accel
        if move.to_accel:
            state.reasons.pop(n, None)
        else:
            state.reasons[n] = move.reason


# ---------------------------------------------------------------------------- candidates
def candidate_moves(state: Assignment, regions: Sequence[Sequence[int]], tables: CostTables,
                    near: set[int] | None = None) -> list[Move]:
    """Every move worth pricing; with ``near``, only those whose price can have changed.

    A move's price depends on the devices of its nodes, their neighbours and their tensors'
    other ends, so after a round only moves within two edges of a changed node are new.
    """
    region_of = _region_index(regions, len(state.graph))
    if near is not None:
        near = _widen(_widen(near, tables), tables)
        regions = [r for r in regions if not near.isdisjoint(r)]
    moves = [_exclusion(state, index, members, tables)
             for index, members in accel_regions(state, regions)]
    moves += _island_absorptions(state, regions, region_of, tables)
    nodes = range(len(state.graph)) if near is None else sorted(near)
    moves += _boundary_moves(state, region_of, tables, nodes)
    return moves


def _widen(nodes: set[int], tables: CostTables) -> set[int]:
    return nodes.union(*(tables.neighbours[n] for n in nodes)) if nodes else set()


def _exclusion(state: Assignment, index: int, members: list[int], tables: CostTables) -> Move:
    on = state.on_accel
    copies_now = tables.copies_of(members, on)
    compute, transfer = tables.move_delta(members, on)
    accel_ops = sum(tables.accel[n] for n in members)
    on_accel_cost = accel_ops + tables.overhead_accel + copies_now
    on_cpu_cost = accel_ops + compute + copies_now + transfer
    copies_after = copies_now + transfer
    cpu_text = ms(on_cpu_cost) + (f" incl. {ms(copies_after)} of copies" if copies_after > 0 else "")
    reason = (f"{describe_region(state.graph, index, members)} excluded: predicted "
              f"{ms(on_accel_cost)} on {state.target} incl. {ms(copies_now)} of copies and "
              f"{ms(tables.overhead_accel)} launch vs {cpu_text} on CPU")
    return Move(tuple(members), False, on_accel_cost - on_cpu_cost, tables.overhead_accel, reason)


def _island_absorptions(state: Assignment, regions: Sequence[Sequence[int]],
                        region_of: list[int], tables: CostTables) -> list[Move]:
    """CPU islands of supported ops that touch accelerator regions: merge them in."""
    on, neighbours, verdicts = state.on_accel, tables.neighbours, state.verdicts
    moves = []
    for members in regions:
        if on[members[0]] or not all(verdicts[n].supported for n in members):
            continue
        touching = {region_of[m] for n in members for m in neighbours[n] if on[m]}
        if not touching:
            continue
        compute, transfer = tables.move_delta(members, on)
        # Merging the touching regions would save launches, but a cycle may forbid it: count
        # none, so that the prediction never promises more than the move can give.
        moves.append(Move(tuple(members), True, -(compute + transfer), 0.0))
    return moves


def _boundary_moves(state: Assignment, region_of: list[int], tables: CostTables,
                    nodes: Iterable[int]) -> list[Move]:
    on, verdicts, neighbours = state.on_accel, state.verdicts, tables.neighbours
    moves = []
    for n in nodes:
        if not verdicts[n].supported:
            continue
        if on[n]:
            if not _on_boundary(n, neighbours[n], on, tables):
                continue
        elif not any(on[m] for m in neighbours[n]):
            continue
        compute, transfer = tables.move_delta((n,), on)
        launches = _launch_change(n, on, region_of, tables)
        gain = launches - (compute + transfer)
        if gain <= 0:
            continue
        reason = _boundary_reason(state, n, region_of[n], tables, compute, transfer) \
            if on[n] else ""
        moves.append(Move((n,), not on[n], gain, launches, reason))
    return moves


def _launch_change(n: int, on: Sequence[bool], region_of: list[int], tables: CostTables) -> float:
    """Launch time a one-op move saves (+) or adds (-), pessimistically.

    Leaving a region through two or more of its ops may split it (one more launch). Joining the
    accelerator may open a region of its own: the merge rule (TVM's, cycle-safe) often refuses
    the join, and re-forming the regions is what tells, so a join must pay for a launch.
    """
    if on[n]:
        mine = region_of[n]
        inside = sum(1 for m in tables.neighbours[n] if on[m] and region_of[m] == mine)
        return -tables.overhead_accel if inside >= 2 else 0.0
    return -tables.overhead_accel


def _on_boundary(n: int, neighbours: Sequence[int], on: Sequence[bool],
                 tables: CostTables) -> bool:
    if any(not on[m] for m in neighbours):
        return True
    return any(tables.producer[i] < 0 or tables.is_output[i] for i in tables.touching[n])


def _boundary_reason(state: Assignment, n: int, region: int, tables: CostTables,
                     compute: float, transfer: float) -> str:
    node = state.graph[n]
    return (f"{node.name} moved from region accel{region} to the CPU: predicted "
            f"{ms(-(compute + transfer))} saved ({node.op} {ms(tables.accel[n])} on "
            f"{state.target} vs {ms(tables.cpu[n])} on CPU; copies change by {ms(transfer)})")


def _region_index(regions: Sequence[Sequence[int]], n: int) -> list[int]:
    region_of = [0] * n
    for index, members in enumerate(regions):
        for m in members:
            region_of[m] = index
    return region_of
