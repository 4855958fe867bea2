"""The pipeline, written once over IR adapters: :func:`analyze`, :func:`partition`,
:func:`compare` and what they return.

:mod:`.adapters` says what an IR must provide and which adapter takes a module (Relay and Relax
today, peers under it); :mod:`.run` is the pipeline itself; :mod:`.options` the argument checks
every IR shares; :mod:`.results` the :class:`Analysis` and :class:`PartitionResult` returned.
"""

from __future__ import annotations

from .adapters import ADAPTERS, AdapterEntry, IRAdapter, adapter_for, register_adapter
from .results import Analysis, PartitionResult
from .run import analyze, compare, partition

__all__ = ["ADAPTERS", "AdapterEntry", "Analysis", "IRAdapter", "PartitionResult",
           "adapter_for", "analyze", "compare", "partition", "register_adapter"]
