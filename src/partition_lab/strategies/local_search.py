"""Cost-driven local search over device assignments (used by ``cost`` and ``optimal``).

Moves over the devices of a platform, each priced with :class:`~.costing.CostTables` before it
is tried:

* exclude a region off the host (each op to its fallback: the next device that supports it):
  saves its launch and maybe its copies;
* absorb a region into a neighbouring region's device when that device supports all its ops;
* move one boundary op to a neighbour's device that supports it.

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

from ..core.reasons import Reason, ReasonCode
from .base import Assignment, describe_region, legalize, ms, offload_regions
from .costing import CostTables

EPS = 1e-12


@dataclass(frozen=True)
class Move:
    """Put each of ``nodes`` on its device in ``targets``, predicted to save ``gain``.

    ``launches`` is the region-launch time the move is expected to save (positive) or add.
    """

    nodes: tuple[int, ...]
    targets: tuple[int, ...]
    gain: float
    launches: float = 0.0
    reason: Reason | None = None

    @property
    def key(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        return self.nodes, self.targets


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
    total = tables.total(state.device, regions)
    result = SearchResult(regions, total, total)
    tabu: set[tuple[tuple[int, ...], tuple[int, ...]]] = set()
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
    trial = list(state.device)
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
            compute, transfer = tables.move_delta(move.nodes, trial, move.targets)
            gain = move.launches - compute - transfer
        if gain <= threshold:
            for n in move.nodes:
                waiting.setdefault(n, []).append(index)
            continue
        for n, to in zip(move.nodes, move.targets, strict=True):
            trial[n] = to
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
    total = tables.total(trial.device, regions)
    if total < result.total - EPS * max(1.0, result.total):
        state.device, state.reasons = trial.device, trial.reasons
        result.regions, result.total = regions, total
        result.accepted += len(batch)
        return True
    return False


def apply_move(state: Assignment, move: Move) -> None:
    for n, to in zip(move.nodes, move.targets, strict=True):
        state.move((n,), to, move.reason)


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
             for index, members in offload_regions(state, regions)]
    moves += _absorptions(state, regions, region_of, tables)
    nodes = range(len(state.graph)) if near is None else sorted(near)
    moves += _boundary_moves(state, region_of, tables, nodes)
    return moves


def _widen(nodes: set[int], tables: CostTables) -> set[int]:
    return nodes.union(*(tables.neighbours[n] for n in nodes)) if nodes else set()


def _exclusion(state: Assignment, index: int, members: list[int], tables: CostTables) -> Move:
    """The region's ops each to their fallback device."""
    dev = state.device
    device = dev[members[0]]
    targets = tuple(state.support.fallback(n, device) for n in members)
    copies_now = tables.copies_of(members, dev)
    compute, transfer = tables.move_delta(members, dev, targets)
    here_ops = sum(tables.time[device][n] for n in members)
    launch = tables.overhead[device]
    here_cost = here_ops + launch + copies_now
    there_cost = here_ops + compute + copies_now + transfer
    copies_after = copies_now + transfer
    where = _names(state, set(targets))
    there_text = ms(there_cost) + (f" incl. {ms(copies_after)} of copies" if copies_after > 0 else "")
    reason = Reason(
        ReasonCode.REGION_EXCLUDED,
        f"{describe_region(state, index, members)} excluded: predicted {ms(here_cost)} on "
        f"{state.name(device)} incl. {ms(copies_now)} of copies and {ms(launch)} launch vs "
        f"{there_text} on {where}", "cost", state.name(device),
        {"there_s": here_cost, "fallback_s": there_cost, "copies_s": copies_now,
         "launch_s": launch})
    return Move(tuple(members), targets, here_cost - there_cost, launch, reason)


def _names(state: Assignment, devices: set[int]) -> str:
    names = ["CPU" if d == state.host else state.name(d) for d in sorted(devices)]
    return " and ".join(names)


def _absorptions(state: Assignment, regions: Sequence[Sequence[int]],
                 region_of: list[int], tables: CostTables) -> list[Move]:
    """Regions whose ops a neighbouring region's device supports: move them all there."""
    dev, neighbours, support = state.device, tables.neighbours, state.support
    moves = []
    for members in regions:
        here = dev[members[0]]
        around = {dev[m] for n in members for m in neighbours[n]} - {here}
        for device in sorted(around):
            if device == state.host or not all(device in support.allowed(n) for n in members):
                continue
            targets = (device,) * len(members)
            compute, transfer = tables.move_delta(members, dev, targets)
            # Merging into the touching regions would save launches, but a cycle may forbid
            # it: count none, so that the prediction never promises more than the move gives.
            moves.append(Move(tuple(members), targets, -(compute + transfer), 0.0))
    return moves


def _boundary_moves(state: Assignment, region_of: list[int], tables: CostTables,
                    nodes: Iterable[int]) -> list[Move]:
    """One op to a neighbour's device; a pattern unit moves whole, as its output node."""
    dev, support, neighbours = state.device, state.support, tables.neighbours
    unit_of = {n: unit for unit in support.units for n in unit.nodes}
    moves = []
    for n in nodes:
        unit = unit_of.get(n)
        if unit is not None:
            if n == unit.output and len({dev[m] for m in unit.nodes}) == 1:
                moves += _unit_moves(state, unit.nodes, region_of, tables)
            continue
        allowed = support.allowed(n)
        if len(allowed) < 2:
            continue
        here = dev[n]
        options = {dev[m] for m in neighbours[n]}
        edge = _at_graph_edge(n, tables)
        if options == {here} and not edge:
            continue  # inside a region: moving it alone would only add copies
        options.add(support.fallback(n, here))
        if edge:
            options.add(state.host)
        for to in sorted(options):
            if to == here or to not in allowed:
                continue
            compute, transfer = tables.move_delta((n,), dev, (to,))
            launches = _launch_change(n, to, dev, region_of, tables)
            gain = launches - (compute + transfer)
            if gain <= 0:
                continue
            reason = _boundary_reason(state, n, region_of[n], to, tables, compute, transfer)
            moves.append(Move((n,), (to,), gain, launches, reason))
    return moves


def _unit_moves(state: Assignment, members: Sequence[int], region_of: list[int],
                tables: CostTables) -> list[Move]:
    """A whole unit to a neighbouring device that supports it (or to its fallback)."""
    dev, support = state.device, state.support
    here = dev[members[0]]
    inside = set(members)
    options = {dev[m] for n in members for m in tables.neighbours[n] if m not in inside}
    options.add(support.fallback(members[0], here))
    moves = []
    for to in sorted(options - {here}):
        if not all(to in support.allowed(n) for n in members):
            continue
        targets = (to,) * len(members)
        compute, transfer = tables.move_delta(members, dev, targets)
        launches = _launch_change(members[-1], to, dev, region_of, tables)
        gain = launches - (compute + transfer)
        if gain > 0:
            reason = _boundary_reason(state, members[-1], region_of[members[-1]], to, tables,
                                      compute, transfer)
            moves.append(Move(tuple(members), targets, gain, launches, reason))
    return moves


def _at_graph_edge(n: int, tables: CostTables) -> bool:
    return any(tables.producer[i] < 0 or tables.is_output[i] for i in tables.touching[n])


def _launch_change(n: int, to: int, dev: Sequence[int], region_of: list[int],
                   tables: CostTables) -> float:
    """Launch time a one-op move saves (+) or adds (-), pessimistically.

    Leaving a region through two or more of its ops may split it (one more launch). Joining
    another device may open a region of its own: the merge rule (TVM's, cycle-safe) often
    refuses the join, and re-forming the regions is what tells, so a join must pay a launch.
    """
    here = dev[n]
    mine = region_of[n]
    inside = sum(1 for m in tables.neighbours[n] if dev[m] == here and region_of[m] == mine)
    split = tables.overhead[here] if inside >= 2 else 0.0
    return -split - tables.overhead[to]


def _boundary_reason(state: Assignment, n: int, region: int, to: int, tables: CostTables,
                     compute: float, transfer: float) -> Reason:
    node = state.graph[n]
    here = state.device[n]
    where = "the CPU" if to == state.host else state.name(to)
    return Reason(
        ReasonCode.MOVED, f"{node.name} moved from {state.name(here)} to {where}: predicted "
        f"{ms(-(compute + transfer))} saved ({node.op} {ms(tables.time[here][n])} on "
        f"{state.name(here)} vs {ms(tables.time[to][n])} on {state.name(to)}; copies change "
        f"by {ms(transfer)})", "cost", state.name(here),
        {"saved_s": -(compute + transfer), "copies_s": transfer})


def _region_index(regions: Sequence[Sequence[int]], n: int) -> list[int]:
    region_of = [0] * n
    for index, members in enumerate(regions):
        for m in members:
            region_of[m] = index
    return region_of
