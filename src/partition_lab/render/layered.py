"""A layered (Sugiyama-style) layout of a DAG, without coordinates: ranks and the order of the
nodes within each rank, with a dummy slot wherever an edge crosses a rank.

The interactive view (:mod:`.html`) lays out the region graph and each region's ops with this,
and the page turns ranks and orders into coordinates once it knows each box's size (a region
grows when it is expanded). ``dot`` is not used here: its cluster layout takes hours on plans
of 1,000 regions (:data:`.graphviz.MAX_CLUSTERS`), while this is linear per sweep: a 5,000-op
graph takes a fraction of a second.

>>> layout = layered_layout([0, 1, 2], [(0, 1), (0, 2), (1, 2)])
>>> layout.ranks
[[0], [1, -1], [2]]
>>> layout.edges
[(0, 1, []), (0, 2, [1]), (1, 2, [])]
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise

DUMMY = -1
"""The slot of an edge passing through a rank (a bend point, not a node)."""

SWEEPS = 8
"""Barycenter sweeps (down and up count one each); the order with the fewest crossings wins."""


@dataclass
class Layered:
    """Ranks top to bottom, each a list of node ids or :data:`DUMMY` in left-to-right order;
    edges ``(u, v, path)`` where ``path`` holds the position of the edge's dummy in each rank
    strictly between ``u``'s and ``v``'s."""

    ranks: list[list[int]]
    edges: list[tuple[int, int, list[int]]]

    def to_data(self) -> dict[str, list]:
        """JSON-ready form: ``{"ranks": [[...]], "edges": [[u, v, [positions]]]}``."""
        return {"ranks": self.ranks, "edges": [[u, v, path] for u, v, path in self.edges]}


def layered_layout(nodes: Sequence[int], edges: Iterable[tuple[int, int]],
                   sweeps: int = SWEEPS) -> Layered:
    """Ranks and orders for the DAG of ``nodes`` and ``edges`` (both ends among ``nodes``).

    Deterministic: the same input gives the same layout. Duplicate edges and self-loops are
    dropped; a cycle raises ValueError (plans' region graphs are acyclic).
    """
    succ: dict[int, list[int]] = {n: [] for n in nodes}
    pred: dict[int, list[int]] = {n: [] for n in nodes}
    unique: list[tuple[int, int]] = []
    for u, v in dict.fromkeys(edges):
        if u != v:
            succ[u].append(v)
            pred[v].append(u)
            unique.append((u, v))
    order = _topological(nodes, succ, pred)
    rank = _ranks(order, succ, pred)
    slots, chains = _with_dummies(order, rank, unique)
    ranks = _ordered(slots, chains, sweeps)
    position = {slot: (r, i) for r, row in enumerate(ranks) for i, slot in enumerate(row)}
    out_ranks = [[order[s] if s < len(order) else DUMMY for s in row] for row in ranks]
    out_edges = [(order[chain[0]], order[chain[-1]], [position[d][1] for d in chain[1:-1]])
                 for chain in chains]
    return Layered(out_ranks, out_edges)


def _topological(nodes: Sequence[int], succ: dict[int, list[int]],
                 pred: dict[int, list[int]]) -> list[int]:
    """Kahn's order, ties broken by the nodes' given order (so it is stable)."""
    index = {n: i for i, n in enumerate(nodes)}
    waiting = {n: len(pred[n]) for n in nodes}
    ready = [index[n] for n in nodes if not waiting[n]]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        node = nodes[heapq.heappop(ready)]
        order.append(node)
        for s in succ[node]:
            waiting[s] -= 1
            if not waiting[s]:
                heapq.heappush(ready, index[s])
    if len(order) != len(nodes):
        raise ValueError("layered_layout: the graph has a cycle")
    return order


def _ranks(order: list[int], succ: dict[int, list[int]],
           pred: dict[int, list[int]]) -> dict[int, int]:
    """Longest path from the sources; then each source moves down to just above its first
    consumer, so that a graph input used deep in the network (BERT's attention mask) does not
    drag an edge through every rank above it."""
    rank: dict[int, int] = {}
    for node in order:
        rank[node] = max((rank[p] + 1 for p in pred[node]), default=0)
    for node in order:
        if not pred[node] and succ[node]:
            rank[node] = min(rank[s] for s in succ[node]) - 1
    return rank


def _with_dummies(order: list[int], rank: dict[int, int], edges: list[tuple[int, int]]
                  ) -> tuple[list[list[int]], list[list[int]]]:
    """Slots per rank (nodes as their index in ``order``, dummies numbered after them) in a
    first order, and each edge as its chain of slots from tail to head."""
    index = {n: i for i, n in enumerate(order)}
    height = max(rank.values(), default=-1) + 1
    slots: list[list[int]] = [[] for _ in range(height)]
    for node in order:
        slots[rank[node]].append(index[node])
    next_slot = len(order)
    chains = []
    for u, v in edges:
        chain = [index[u]]
        for r in range(rank[u] + 1, rank[v]):
            slots[r].append(next_slot)
            chain.append(next_slot)
            next_slot += 1
        chain.append(index[v])
        chains.append(chain)
    return slots, chains


def _ordered(slots: list[list[int]], chains: list[list[int]], sweeps: int) -> list[list[int]]:
    """Barycenter sweeps down and up; keeps the order with the fewest edge crossings."""
    up: dict[int, list[int]] = {}
    down: dict[int, list[int]] = {}
    for chain in chains:
        for a, b in pairwise(chain):
            down.setdefault(a, []).append(b)
            up.setdefault(b, []).append(a)
    ranks = [list(row) for row in slots]
    best, best_crossings = [list(row) for row in ranks], _crossings(ranks, down)
    for sweep in range(sweeps):
        if best_crossings == 0:
            break
        if sweep % 2 == 0:
            for r in range(1, len(ranks)):
                ranks[r] = _by_barycenter(ranks[r], ranks[r - 1], up)
        else:
            for r in range(len(ranks) - 2, -1, -1):
                ranks[r] = _by_barycenter(ranks[r], ranks[r + 1], down)
        crossings = _crossings(ranks, down)
        if crossings < best_crossings:
            best, best_crossings = [list(row) for row in ranks], crossings
    return best


def _by_barycenter(row: list[int], fixed: list[int], neighbours: dict[int, list[int]]
                   ) -> list[int]:
    """``row`` sorted by the mean position of each slot's neighbours in ``fixed``; a slot
    without neighbours there keeps its place."""
    at = {slot: i for i, slot in enumerate(fixed)}
    keys = []
    for i, slot in enumerate(row):
        near = [at[n] for n in neighbours.get(slot, ()) if n in at]
        # Scaled into fixed's range so slots without neighbours stay roughly where they were.
        own = i * max(len(fixed), 1) / max(len(row), 1)
        keys.append((sum(near) / len(near) if near else own, i))
    return [row[i] for _, i in sorted(keys)]


def _crossings(ranks: list[list[int]], down: dict[int, list[int]]) -> int:
    """Edge crossings between adjacent ranks: inversions of the lower ends, counted with a
    Fenwick tree (O(E log V) in all)."""
    total = 0
    for upper, lower in pairwise(ranks):
        at = {slot: i for i, slot in enumerate(lower)}
        # Every down-neighbour of a slot is in the next rank (edges are chained through dummies).
        ends = [end for a in upper for end in sorted(at[b] for b in down.get(a, ()))]
        tree = [0] * (len(lower) + 1)
        for seen, end in enumerate(ends):
            i, smaller_or_equal = end + 1, 0
            while i > 0:
                smaller_or_equal += tree[i]
                i -= i & -i
            total += seen - smaller_or_equal
            i = end + 1
            while i <= len(lower):
                tree[i] += 1
                i += i & -i
    return total
