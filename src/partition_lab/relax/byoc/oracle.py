"""What a backend's own ``partition_for_*`` offloads, per node: the oracle ``greedy`` matches.

The module a graph was read from is tagged (each op call spanned with its node id, see
:mod:`.matching`) and handed to the backend's ``partition_for_*``; a node is offloaded when its
call is no longer in ``main`` (it moved into a ``Composite``/``Codegen`` function). Read from
``main`` rather than from the functions because TVM adds a function equal to one it has (the same
op on the same shapes) once, so a composite's calls name only its first use.
"""

from __future__ import annotations

from typing import Any

from tvm import relax

from ..graph import RelaxGraph
from .backends import backend, partition_for
from .matching import node_of, tagged_module


def offloaded_by_backend(rg: RelaxGraph, name: str, **options: Any) -> set[int]:
    """The nodes of ``rg`` that ``partition_for_<name>(**options)`` takes off ``main``."""
    partitioned = partition_for(backend(name), **options)(tagged_module(rg))
    kept: set[int] = set()
    for block in partitioned["main"].body.blocks:
        for binding in block.bindings:
            value = binding.value
            if isinstance(value, relax.Call):
                node = node_of(value)
                if node is not None:
                    kept.add(node)
    return set(range(len(rg.graph))) - kept
