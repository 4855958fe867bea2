"""partition_lab: split a TVM Relay model into accelerator subgraphs and CPU islands.

Public API (TVM is imported only when a name that needs it is first used)::

    mod, params = partition_lab.load_model("model.onnx")
    result = partition_lab.partition(mod, "neuron", params=params, strategy="cost")
    print(result.plan.summary())
    print(partition_lab.compare(mod, "neuron", params=params))

TVM is an extra (``pip install '.[relax]'`` for current TVM, ``'.[relay]'`` for TVM 0.19): without
either the package imports and its TVM-free parts (targets, the core, bundles) work, and a name
that needs TVM raises a one-line :class:`~partition_lab._optional.MissingDependencyError` saying
what to install.
"""

from __future__ import annotations

import importlib
from typing import Any

from ._optional import relax_only as _relax_only
from ._optional import require_tvm as _require_tvm
from ._version import __version__ as __version__
from .core.graph import OpGraph, OpGraphBuilder, TensorType
from .core.plan import PartitionPlan, Region
from .core.platform import HOST
from .core.support import Verdict
from .errors import PartitionLabError

_LAZY = {
    "load_model": ("partition_lab.relay.frontends", "load_model"),
    "partition": ("partition_lab.api", "partition"),
    "analyze": ("partition_lab.api", "analyze"),
    "PartitionResult": ("partition_lab.api", "PartitionResult"),
    "compare": ("partition_lab.api", "compare"),
    "profile": ("partition_lab.profiling", "profile"),
    "Comparison": ("partition_lab.comparison", "Comparison"),
    "graph_from_relay": ("partition_lab.relay.relay_graph", "graph_from_relay"),
    "get_target": ("partition_lab.targets", "get_target"),
    "get_platform": ("partition_lab.targets", "get_platform"),
    "TargetSpec": ("partition_lab.targets", "TargetSpec"),
}

#: The lazy names whose modules import TVM (the others are TVM-free).
_NEED_TVM = frozenset({"load_model", "partition", "analyze", "PartitionResult", "compare",
                       "graph_from_relay"})

__all__ = [
    "HOST", "OpGraph", "OpGraphBuilder", "PartitionLabError", "PartitionPlan", "Region",
    "TensorType", "Verdict", *_LAZY,
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module, attr = _LAZY[name]
        if name in _NEED_TVM:
            _require_tvm(f"partition_lab.{name}")
        if name == "load_model" and _relax_only():  # apache-tvm >= 0.20: the Relax loader
            module = "partition_lab.relax.frontends"
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'partition_lab' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public names, the lazily imported ones included (``dir(partition_lab)``)."""
    return sorted({*globals(), *__all__})
