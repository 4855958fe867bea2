"""Cycle-safe region formation with the semantics of TVM's ``MergeCompilerRegions``.

:func:`form_regions` groups the nodes of an :class:`~partition_lab.core.graph.OpGraph` into regions of
one device each, the way TVM v0.19's ``AnnotateTarget -> MergeCompilerRegions -> PartitionGraph``
does with a plain per-op support predicate (``src/relay/transforms/annotate_target.cc``,
``merge_compiler_regions.cc``, ``src/relay/analysis/annotated_region_set.cc``):

* ``AnnotateTarget`` gives every call its own region: its device, or ``"default"`` (our ``"cpu"``).
  ``Tuple`` and ``TupleGetItem`` get regions too: a ``TupleGetItem`` takes its producer's target
  (so it is transparent here), a ``Tuple`` takes its fields' common target, or ``"default"`` when
  they differ or a field is a graph input or a constant. Calls without arguments (``zeros``) get
  no region at all: consumers neither merge with them nor count them as a restriction.
* ``MergeCompilerRegions`` visits the regions in post-order (depth first from the function body,
  arguments left to right). The visited region inherits the *restrictions* of all its parent
  regions, adds every parent of another target to them, then absorbs every parent region of its
  own target that is not restricted. Default (CPU) regions merge by the same rule.

The restriction set of a region is the set of regions that reach it through a region of another
target (or through a restricted one), so absorbing a restricted parent would close a cycle.

Known difference from TVM (documented; a test shows it): TVM never updates the restrictions of an
already-visited region when one of its ancestors is absorbed into a new region later (the new
region's other parents become its ancestors too). On some graphs, with several outputs or several
branches into one op, that lets TVM build a cyclic region graph, which ``PartitionGraph`` cannot
outline correctly. :func:`form_regions` first runs TVM's rule as is; when the result has a cycle
it runs again with the restrictions propagated to the visited descendants (the exact rule:
absorb a parent unless another path leads from it to the node), and so never returns a cycle.
Where TVM's result is acyclic the two agree.

Then, unlike TVM, regions of one device with an edge between them and no other path from one
to the other merge (:func:`_merge_adjacent`): TVM keeps them apart where a ``Tuple`` with a
constant field stands between them (a ViT's CLS-token concatenate), which it treats as a
"default" region of its own although it computes nothing; two such regions are one launch.
``merge_adjacent=False`` gives TVM's regions as they are.

Cost: union-find over regions, restriction sets as Python-int bitsets over "tokens" (one bit per
region that ever restricts another), freed when a region has no unvisited consumers: near-linear.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .graph import OpGraph
from .ops import TUPLE_ARG_OPS
from .platform import HOST


@dataclass
class _Expanded:
    """The graph as TVM's merger sees it: real nodes ``0..n-1`` plus virtual tuple nodes."""

    parents: list[list[int]]  # region-bearing parents, unique, in argument order
    device: list[str]
    regionless: list[bool]  # zero-argument calls: no region (see module docstring)
    order: list[int]  # visiting order of MergeCompilerRegions
    n_real: int


def form_regions(graph: OpGraph, devices: Sequence[str],
                 default_device: str = HOST, merge_adjacent: bool = True) -> list[list[int]]:
    """Partition the nodes into cycle-free regions; each region holds nodes of one device.

    Parameters
    ----------
    graph:
        The operator graph.
    devices:
        ``devices[node]`` is a device name; one entry per node.
    default_device:
        TVM's ``"default"`` target: the device that inline (non-outlined) code runs on, the
        module's main target (``cuda`` on a GPU platform, the host ``"cpu"`` otherwise). Tuples
        whose fields are on different devices take it, and its regions are the ones
        ``PartitionGraph`` leaves inline.
    merge_adjacent:
        Merge regions of one device that an edge joins and no other path does
        (:func:`_merge_adjacent`); False: TVM's regions.

    Returns
    -------
    list[list[int]]
        The regions as sorted lists of node ids, in order of their first node. Together they
        cover every node exactly once, and the graph of regions is acyclic.

    Raises
    ------
    ValueError
        If ``devices`` does not have one entry per node.

    Example
    -------
    >>> from partition_lab.core.graph import OpGraphBuilder, TensorType
    >>> b = OpGraphBuilder()
    >>> x = b.input("x", TensorType((1, 4), "float32"))
    >>> a = b.op("nn.relu", [x]); c = b.op("tanh", [a]); d = b.op("nn.relu", [c])
    >>> form_regions(b.build(), ["acc", "cpu", "acc"])
    [[0], [1], [2]]
    """
    if len(devices) != len(graph):
        raise ValueError(f"devices has {len(devices)} entries for a graph of {len(graph)} nodes")
    expanded = _expand(graph, devices, default_device)
    root: list[int] | None = _merge(expanded, propagate=False)
    if _has_cycle(graph, root):
        root = _regroup_cpu_islands(graph, devices, root, expanded.regionless, default_device)
    if root is None or _has_cycle(graph, root):
        root = _merge(expanded, propagate=True)
    if _has_cycle(graph, root):  # pragma: no cover - would be a bug in the exact rule
        raise AssertionError("form_regions produced a cyclic region graph")
    if merge_adjacent:
        root = _merge_adjacent(graph, devices, root, expanded.regionless)
    return _group(root, len(graph))


# ---------------------------------------------------------------------------- the TVM view
@dataclass
class _Structure:
    """The device-independent part of the TVM view of a graph (cached per graph)."""

    parents: list[list[int]]
    regionless: list[bool]
    order: list[int]
    n_real: int
    # virtual tuple id -> (its fields' producers, forced to "default" by an input/constant)
    tuples: list[tuple[int, list[int], bool]]
    output_tuple: tuple[int, list[int]] | None
    edges: tuple[np.ndarray, np.ndarray] | None = None  # real edges (sources, targets)


_STRUCTURES: weakref.WeakKeyDictionary[OpGraph, _Structure] = weakref.WeakKeyDictionary()


def _structure(graph: OpGraph) -> _Structure:
    cached = _STRUCTURES.get(graph)
    if cached is not None:
        return cached
    n = len(graph)
    # networkx keeps each node's predecessors in edge insertion order, i.e. argument order.
    pred = graph.nx.pred
    preds = [list(pred[v]) for v in range(n)]
    regionless = [not graph[v].args and not graph[v].inputs and not preds[v] for v in range(n)]
    takes_input = {c for t in graph.graph_inputs.values() for c in t.consumers}
    parents = [[p for p in preds[v] if not regionless[p]] for v in range(n)]
    tuples = []
    for v in range(n):
        if graph[v].op in TUPLE_ARG_OPS and preds[v]:
            forced = v in takes_input or bool(graph[v].weights)
            tuples.append((len(parents), preds[v], forced))
            parents.append(parents[v])
            regionless.append(False)
            parents[v] = [len(parents) - 1]
    out_nodes = list(dict.fromkeys(node for node, _ in graph.outputs))
    output_tuple = None
    roots = out_nodes
    if len(out_nodes) > 1:
        output_tuple = (len(parents), out_nodes)
        parents.append([v for v in out_nodes if not regionless[v]])
        regionless.append(False)
        roots = [len(parents) - 1]
    structure = _Structure(parents, regionless, _post_order(parents, roots, n), n, tuples,
                           output_tuple)
    _STRUCTURES[graph] = structure
    return structure


def _expand(graph: OpGraph, devices: Sequence[str],
            default_device: str = HOST) -> _Expanded:
    s = _structure(graph)
    device = list(devices)
    for _, fields, forced in s.tuples:
        field_devices = {devices[p] for p in fields}
        common = len(field_devices) == 1 and not forced
        device.append(field_devices.pop() if common else default_device)
    if s.output_tuple is not None:
        field_devices = {devices[v] for v in s.output_tuple[1]}
        device.append(field_devices.pop() if len(field_devices) == 1 else default_device)
    return _Expanded(s.parents, device, s.regionless, s.order, s.n_real)


def _post_order(parents: list[list[int]], roots: list[int], n_real: int) -> list[int]:
    """Depth-first post-order from ``roots``, parents in argument order; unreached nodes last."""
    seen = [False] * len(parents)
    order: list[int] = []
    for start in [*roots, *range(n_real)]:
        if seen[start]:
            continue
        seen[start] = True
        stack = [(start, iter(parents[start]))]
        while stack:
            node, todo = stack[-1]
            for p in todo:
                if not seen[p]:
                    seen[p] = True
                    stack.append((p, iter(parents[p])))
                    break
            else:
                stack.pop()
                order.append(node)
    return order


# ---------------------------------------------------------------------------- the merger
class _Merger:
    """Union-find of regions with bitset restriction sets (see the module docstring).

    A region is named by its root: the last node that absorbed it. ``members[root]`` holds the
    tokens (bits) of every region absorbed into it, so "region R is in restriction set S" is
    ``S & members[R] != 0``, which is exactly TVM's renaming of absorbed regions' ids.
    """

    def __init__(self, expanded: _Expanded, propagate: bool) -> None:
        size = len(expanded.parents)
        self.parents = expanded.parents
        self.device = expanded.device
        self.propagate = propagate
        self.uf = list(range(size))
        self.members = [0] * size
        self.restr: dict[int, int] = {}
        self.next_bit = 0
        self.free_bits: list[int] = []
        # The exact rule keeps every region's set (they stop its propagation early), so each
        # collection costs more there: collect less often.
        self.collect_floor = 4096 if propagate else 256
        self.collect_at = self.collect_floor
        self.pending = [0] * size  # consumer links not yet visited, per root
        for ps in expanded.parents:
            for p in ps:
                self.pending[p] += 1
        self.external: dict[int, list[int]] = {}  # root -> visited consumers outside it

    def find(self, x: int) -> int:
        uf = self.uf
        while uf[x] != x:
            uf[x] = uf[uf[x]]
            x = uf[x]
        return x

    def token(self, root: int) -> int:
        bits = self.members[root]
        if not bits:
            if self.free_bits:
                bits = 1 << self.free_bits.pop()
            else:
                bits = 1 << self.next_bit
                self.next_bit += 1
            self.members[root] = bits
        return bits & -bits

    def collect(self) -> None:
        """Free the bits of dead regions (no consumer left), so the bitsets stay narrow.

        A dead region is never a parent again, so its bits answer no future query: clear them
        from every restriction set (dead regions' too, so a reused bit is nowhere stale) and
        reuse their positions for new tokens.
        """
        live = 0
        for root in self.restr:
            if self.uf[root] == root and self.pending[root] > 0:
                live |= self.members[root]
        for root in self.restr:
            self.restr[root] &= live
        self.free_bits = [b for b in range(self.next_bit - 1, -1, -1) if not live >> b & 1]
        self.collect_at = max(self.collect_floor, 2 * (self.next_bit - len(self.free_bits)))

    def absorb_external(self, absorbed: list[int], stale: list[int], into: int) -> None:
        """Move the absorbed regions' visited consumers to ``into``; push it restrictions.

        Invariant: every visited consumer outside a region has all of the region's
        restrictions. Consumers of an absorbed region whose own set was already as large as
        the new region's still satisfy it; the others (``stale``) get the missing bits.
        """
        external = self.external
        queue = [c for r in stale for c in external.get(r, ())]
        lists = [external.pop(r) for r in absorbed if r in external]
        if lists:
            lists.sort(key=len)
            merged = lists.pop()  # extend the longest: linear in total over all merges
            for other in lists:
                merged.extend(other)
            external[into] = merged
        if queue:
            self.push_restrictions(into, queue)

    def push_restrictions(self, into: int, queue: list[int]) -> None:
        """Give region ``into``'s restrictions to the consumers in ``queue`` and onwards."""
        bits = self.restr[into]
        seen = {into}
        while queue:
            region = self.find(queue.pop())
            if region in seen:
                continue
            seen.add(region)
            missing = bits & ~self.restr.get(region, 0)
            if not missing:
                continue  # its consumers inherited these bits already
            self.restr[region] = self.restr.get(region, 0) | missing
            queue.extend(self.external.get(region, ()))


def _merge(expanded: _Expanded, propagate: bool) -> list[int]:
    """Visit the regions in TVM's order; returns the root (region name) of every real node.

    The loop is TVM's ``RegionMerger::VisitExpr_`` with ``find`` and the token lookup inlined,
    because it runs once per node: inherit the parents' restrictions, add the parents of
    another device, absorb every same-device parent that is not restricted.
    """
    m = _Merger(expanded, propagate)
    uf, members, restr_of, pending = m.uf, m.members, m.restr, m.pending
    device, parents, regionless, external = (expanded.device, expanded.parents,
                                             expanded.regionless, m.external)
    for v in expanded.order:
        if regionless[v]:
            continue
        ps = parents[v]
        if len(ps) == 1:
            # One parent (half the nodes of a CNN): inherit its set; absorb it if same device.
            # Same steps as the general case below, without the loops.
            r = ps[0]
            while uf[r] != r:
                uf[r] = uf[uf[r]]
                r = uf[r]
            if device[r] == device[v]:
                pending[r] -= 1
                uf[r] = v
                members[v] = members[r]
                pending[v] += pending[r]
                inherited = restr_of.pop(r, 0)
                restr_of[v] = inherited
                if propagate and r in external:
                    external[v] = external.pop(r)  # its consumers already have these bits
                elif not propagate and not pending[v]:
                    restr_of.pop(v, None)
                continue
        roots: list[int] = []
        for p in ps:
            while uf[p] != p:
                uf[p] = uf[uf[p]]
                p = uf[p]
            pending[p] -= 1
            if p not in roots:
                roots.append(p)
        dv = device[v]
        restr = 0
        for r in roots:
            inherited = restr_of.get(r)
            if inherited:
                restr |= inherited
            if device[r] != dv:
                restr |= m.token(r)
        restr_of[v] = restr
        absorbed: list[int] = []
        stale: list[int] = []  # absorbed regions whose visited consumers miss some of restr
        for r in roots:
            if device[r] == dv and not restr & members[r]:
                uf[r] = v
                members[v] |= members[r]
                pending[v] += pending[r]
                if restr & ~restr_of.pop(r, 0):
                    stale.append(r)
                absorbed.append(r)
            elif propagate:
                external.setdefault(r, []).append(v)
            elif not pending[r]:
                restr_of.pop(r, None)  # no consumer left to read it
        if propagate:
            if absorbed:
                m.absorb_external(absorbed, stale, v)
        elif not pending[v]:
            restr_of.pop(v, None)
        if m.next_bit >= m.collect_at and not m.free_bits:
            m.collect()
    return [m.find(v) for v in range(expanded.n_real)]


def _regroup_cpu_islands(graph: OpGraph, devices: Sequence[str], root: list[int],
                         regionless: Sequence[bool], default_device: str) -> list[int] | None:
    """Keep TVM's accelerator regions and regroup only the CPU nodes, by the exact rule.

    TVM's cycles go through CPU ("default") regions, which ``PartitionGraph`` does not outline,
    so its accelerator regions are usually still sound. Contract each one to a single node and
    merge the CPU nodes again with exact restrictions. None when the contracted graph itself has
    a cycle (then TVM's accelerator regions could not be outlined either).
    """
    n = len(graph)
    accel_only = [root[v] if devices[v] != default_device else -1 - v for v in range(n)]
    if _has_cycle(graph, accel_only):
        return None
    node_of: dict[int, int] = {}  # real node -> contracted node
    device: list[str] = []
    for v in range(n):
        key = v if devices[v] == default_device else n + root[v]
        if key not in node_of:
            node_of[key] = len(device)
            device.append(devices[v] if key == v else f"{devices[v]}\0{root[v]}")
        node_of[v] = node_of[key]
    parent_sets: list[dict[int, None]] = [{} for _ in device]
    alone = [False] * len(device)  # zero-argument calls stay alone, as in TVM
    for v in range(n):
        mine = node_of[v]
        alone[mine] = regionless[v]
        for p in graph.nx.predecessors(v):
            if node_of[p] != mine and not regionless[p]:
                parent_sets[mine][node_of[p]] = None
    parents = [list(ps) for ps in parent_sets]
    order = _post_order(parents, [], len(device))
    contracted = _Expanded(parents, device, alone, order, len(device))
    merged = _merge(contracted, propagate=True)
    return [merged[node_of[v]] for v in range(n)]


def _merge_adjacent(graph: OpGraph, devices: Sequence[str], root: list[int],
                    regionless: Sequence[bool]) -> list[int]:
    """``root`` with every two regions of one device merged where an edge joins them and no
    other path leads from one to the other (so the merge closes no cycle), until none is left.

    Zero-argument calls keep their own regions, as in TVM. The region graph is small (tens
    of regions, thousands at most), so each candidate edge is checked by a search from the
    producer's other consumers.
    """
    us, vs = _edges(graph)
    n = len(graph)
    key = list(root)
    succ: dict[int, set[int]] = {r: set() for r in key}
    pred: dict[int, set[int]] = {r: set() for r in key}
    alone = {key[v] for v in range(n) if regionless[v]}
    for u, v in zip(us.tolist(), vs.tolist(), strict=True):
        ru, rv = key[u], key[v]
        if ru != rv:
            succ[ru].add(rv)
            pred[rv].add(ru)
    device = {key[v]: devices[v] for v in range(n)}
    uf = {r: r for r in succ}

    def find(r: int) -> int:
        while uf[r] != r:
            uf[r] = uf[uf[r]]
            r = uf[r]
        return r

    def joinable(a: int, b: int) -> bool:
        return a != b and device[a] == device[b] and a not in alone and b not in alone

    todo = [(a, b) for a in succ for b in succ[a] if joinable(a, b)]
    merged = False
    while todo:
        a, b = todo.pop()
        a, b = find(a), find(b)
        if not joinable(a, b) or b not in succ[a] or _reaches_around(succ, a, b):
            continue
        uf[b] = a  # b's edges become a's
        merged = True
        for c in succ.pop(b):
            pred[c].discard(b)
            if c != a:
                pred[c].add(a)
                succ[a].add(c)
        for c in pred.pop(b):
            succ[c].discard(b)
            if c != a:
                succ[c].add(a)
                pred[a].add(c)
        succ[a].discard(b)
        todo += [(a, c) for c in succ[a] if joinable(a, c)]
        todo += [(c, a) for c in pred[a] if joinable(c, a)]
    return [find(r) for r in key] if merged else root


def _reaches_around(succ: dict[int, set[int]], a: int, b: int) -> bool:
    """Whether a path of two or more edges leads from region ``a`` to region ``b``."""
    stack = [c for c in succ[a] if c != b]
    seen = set(stack)
    while stack:
        c = stack.pop()
        if c == b:
            return True
        for d in succ[c]:
            if d not in seen:
                seen.add(d)
                stack.append(d)
    return False


# ---------------------------------------------------------------------------- results
def _has_cycle(graph: OpGraph, root: Sequence[int]) -> bool:
    """Whether the region graph over the real edges has a cycle.

    Kahn's algorithm over the distinct edges between regions (a few per region): what is left
    after peeling off the regions without incoming edges is a cycle. (scipy.sparse.csgraph's
    strongly connected components would do the same in C, but importing it takes 0.2 s of
    every command.)
    """
    us, vs = _edges(graph)
    if len(us) == 0:
        return False
    names, dense = np.unique(np.asarray(root, dtype=np.int64), return_inverse=True)
    ru, rv = dense[us], dense[vs]
    crossing = ru != rv
    count = len(names)
    pairs = np.unique(ru[crossing] * count + rv[crossing])
    sources, targets = (pairs // count).tolist(), (pairs % count).tolist()
    indegree = [0] * count
    children: list[list[int]] = [[] for _ in range(count)]
    for u, v in zip(sources, targets, strict=True):
        children[u].append(v)
        indegree[v] += 1
    ready = [r for r in range(count) if indegree[r] == 0]
    peeled = 0
    while ready:
        region = ready.pop()
        peeled += 1
        for child in children[region]:
            indegree[child] -= 1
            if indegree[child] == 0:
                ready.append(child)
    return peeled != count


def _edges(graph: OpGraph) -> tuple[np.ndarray, np.ndarray]:
    s = _structure(graph)
    if s.edges is None:
        pairs = np.array(list(graph.nx.edges), dtype=np.int64).reshape(-1, 2)
        s.edges = (pairs[:, 0], pairs[:, 1])
    return s.edges


def _group(root: list[int], n: int) -> list[list[int]]:
    index: dict[int, int] = {}
    regions: list[list[int]] = []
    for v in range(n):
        r = root[v]
        if r not in index:
            index[r] = len(regions)
            regions.append([])
        regions[index[r]].append(v)
    return regions
