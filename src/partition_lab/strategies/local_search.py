"""Cost-driven local search over device assignments (used by ``cost`` and ``optimal``).

Moves, each priced with :class:`~.costing.CostTables` before it is tried:

* exclude an accelerator region (all its ops to the CPU): saves its launch and its copies;
* absorb a CPU island of supported ops into the accelerator (merging its neighbour regions);
* move one boundary op to the other device.

Every round prices all candidate moves, applies the best non-overlapping ones at once (moves
that touch no common tensor, so their predictions add up), re-forms and legalises the regions,
and keeps the result only if the exact total went down; otherwise it retries the single best
move and then gives that move up. It stops when no move is predicted to help, so each round
costs one region formation: linear in the graph, with few rounds in practice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from .base import Assignment, accel_regions, describe_region, legalize, ms
from .costing import CostTables

EPS = 1e-12


@dataclass(frozen=True)
class Move:
    """Switch ``nodes`` to the accelerator (``to_accel``) or to the CPU, predicted to save ``gain``."""

    nodes: tuple[int, ...]
    to_accel: bool
    gain: float
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
            max_rounds: int = 50) -> SearchResult:
    """Apply cost-reducing moves to ``state`` (in place) until none helps; returns the regions."""
    total = tables.total(state.on_accel, regions)
    result = SearchResult(regions, total, total)
    tabu: set[tuple[tuple[int, ...], bool]] = set()
    while result.rounds < max_rounds:
        moves = [m for m in candidate_moves(state, result.regions, tables)
                 if m.gain > EPS * max(1.0, result.total) and m.key not in tabu]
        if not moves:
            break
        moves.sort(key=lambda m: -m.gain)
        batch = independent(moves, tables)
        result.rounds += 1
        if _try(state, batch, tables, result):
            continue
        if len(batch) > 1:
            result.rounds += 1
            if _try(state, batch[:1], tables, result):
                continue
        tabu.add(batch[0].key)
        result.rejected.append(batch[0])
    return result


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


def independent(moves: Sequence[Move], tables: CostTables) -> list[Move]:
    """The best moves that share no node and no tensor (so their predicted gains add up)."""
    taken_nodes: set[int] = set()
    taken_tensors: set[int] = set()
    batch = []
    for move in moves:
        tensors = {i for n in move.nodes for i in tables.touching[n]}
        if taken_nodes.isdisjoint(move.nodes) and taken_tensors.isdisjoint(tensors):
            batch.append(move)
            taken_nodes.update(move.nodes)
            taken_tensors.update(tensors)
    return batch


# ---------------------------------------------------------------------------- candidates
def candidate_moves(state: Assignment, regions: Sequence[Sequence[int]],
                    tables: CostTables) -> list[Move]:
    moves = [_exclusion(state, index, members, tables)
             for index, members in accel_regions(state, regions)]
    region_of = _region_index(regions, len(state.graph))
    moves += _island_absorptions(state, regions, region_of, tables)
    moves += _boundary_moves(state, region_of, tables)
    return moves


def _exclusion(state: Assignment, index: int, members: list[int], tables: CostTables) -> Move:
    on = state.on_accel
    copies_now = tables.copies_of(members, on)
    compute, transfer = tables.move_delta(members, on)
    accel_ops = sum(tables.accel[n] for n in members)
    cpu_ops = accel_ops + compute
    on_accel_cost = accel_ops + tables.overhead_accel + copies_now
    on_cpu_cost = cpu_ops + copies_now + transfer
    gain = on_accel_cost - on_cpu_cost
    copies_after = copies_now + transfer
    cpu_text = ms(on_cpu_cost) + (f" incl. {ms(copies_after)} of copies" if copies_after > 0 else "")
    reason = (f"{describe_region(state.graph, index, members)} excluded: predicted "
              f"{ms(on_accel_cost)} on {state.target} incl. {ms(copies_now)} of copies and "
              f"{ms(tables.overhead_accel)} launch vs {cpu_text} on CPU")
    return Move(tuple(members), False, gain, reason)


def _island_absorptions(state: Assignment, regions: Sequence[Sequence[int]],
                        region_of: list[int], tables: CostTables) -> list[Move]:
    """CPU islands of supported ops that touch accelerator regions: merge them in."""
    graph, on = state.graph, state.on_accel
    moves = []
    for members in regions:
        if on[members[0]] or not all(state.verdicts[n].supported for n in members):
            continue
        neighbours = {region_of[m] for n in members
                      for m in (*graph.nx.pred[n], *graph.nx.succ[n]) if on[m]}
        if not neighbours:
            continue
        compute, transfer = tables.move_delta(members, on)
        launches = (len(neighbours) - 1) * tables.overhead_accel
        moves.append(Move(tuple(members), True, launches - compute - transfer))
    return moves


def _boundary_moves(state: Assignment, region_of: list[int], tables: CostTables) -> list[Move]:
    graph, on, verdicts = state.graph, state.on_accel, state.verdicts
    moves = []
    for n in range(len(graph)):
        if not verdicts[n].supported:
            continue
        neighbours = (*graph.nx.pred[n], *graph.nx.succ[n])
        if on[n] and not _on_boundary(n, neighbours, on, tables):
            continue
        if not on[n] and not any(on[m] for m in neighbours):
            continue
        compute, transfer = tables.move_delta((n,), on)
        gain = -(compute + transfer)
        reason = "" if not on[n] else _boundary_reason(state, n, region_of[n], tables,
                                                       compute, transfer)
        moves.append(Move((n,), not on[n], gain, reason))
    return moves


def _on_boundary(n: int, neighbours: Sequence[int], on: Sequence[bool],
                 tables: CostTables) -> bool:
    if any(not on[m] for m in neighbours):
        return True
    return any(tables.tensors[i].producer < 0 or tables.tensors[i].is_output
               for i in tables.touching[n])


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

