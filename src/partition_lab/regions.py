"""Cycle-safe region formation: group nodes of one device into regions.

Reference implementation (correct, not yet fast): nodes are visited in topological order and a
node joins the region of a same-device producer when that adds no cycle to the region graph.
"""

from __future__ import annotations

from collections.abc import Sequence

import networkx as nx

from .graph import OpGraph


def form_regions(graph: OpGraph, devices: Sequence[str]) -> list[list[int]]:
    """Partition the nodes into regions; each region holds nodes of one device.

    Returns the regions as lists of node ids, in order of their first node.
    """
    region_of: list[int] = [-1] * len(graph)
    regions: list[list[int]] = []
    quotient = nx.DiGraph()
    for v in range(len(graph)):
        pred_regions = [region_of[p] for p in graph.predecessors(v)]
        chosen = -1
        for r in dict.fromkeys(pred_regions):
            if devices[regions[r][0]] != devices[v]:
                continue
            if all(q == r or not nx.has_path(quotient, r, q) for q in pred_regions):
                chosen = r
                break
        if chosen < 0:
            chosen = len(regions)
            regions.append([])
            quotient.add_node(chosen)
        regions[chosen].append(v)
        region_of[v] = chosen
        for q in pred_regions:
            if q != chosen:
                quotient.add_edge(q, chosen)
    return regions
