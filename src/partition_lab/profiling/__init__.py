"""Profiling as a step of its own: measure op signatures, copies and overheads on real devices
into a versioned profile cache that later profiles merge into.

    from partition_lab.profiling import profile
    result = profile("bundles/resnet50.json.gz", device="cuda:0", cache="profile.json")
    print(result.summary())

* :mod:`.cache`: the cache format (schema ``partition_lab.profile_cache/1``), load, merge,
  atomic save, lookups and per-platform device bindings;
* :mod:`.runners`: the :class:`Runner` interface and :class:`TorchRunner` (no TVM needed);
* :mod:`.tvm_runners`: :class:`TvmLlvmRunner` (TVM's llvm backend here) and
  :class:`TvmRpcRunner` (boards behind a TVM RPC tracker);
* :mod:`.profile`: :func:`profile`, which picks what to measure and binds devices to runners.

Nothing here imports TVM until a TVM runner or a Relay model is used.
"""

from __future__ import annotations

import importlib
from typing import Any

from .cache import SCHEMA, DeviceEntry, OpStats, ProfileCache, default_cache_path
from .profile import EntryReport, ProfileResult, profile, signatures_per_device
from .runners import Runner, Timing, TorchRunner

_LAZY = {
    "TvmLlvmRunner": "partition_lab.profiling.tvm_runners",
    "TvmRpcRunner": "partition_lab.profiling.tvm_runners",
}

__all__ = [
    "SCHEMA", "DeviceEntry", "EntryReport", "OpStats", "ProfileCache", "ProfileResult", "Runner",
    "Timing", "TorchRunner", "default_cache_path", "profile", "signatures_per_device", *_LAZY,
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'partition_lab.profiling' has no attribute {name!r}")
