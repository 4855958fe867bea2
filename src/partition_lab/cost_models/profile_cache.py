"""The profile cache file: its schema name, reader and writer.

One JSON file of measured op times, copy curves and overheads per device, schema
``partition_lab.profile_cache/1``::

    {"schema": "partition_lab.profile_cache/1",
     "devices": {
       "<device_key>": {                 # e.g. "torch-cuda|NVIDIA H200|torch 2.11.0+cu130|cudnn 91900"
         "runner": "torch" | "tvm-llvm" | "tvm-rpc" | "tvm-built",
         "kind": "cuda" | "cpu",         # what executes
         "name": str,                    # GPU/CPU model name (the RPC key for remote boards)
         "software": {str: str},         # versions that change timings (torch, cuda, tvm, ...)
         "ops": {"<op_signature>": {
             "median_s", "p10_s", "p90_s": float, "runs": int,
             "op": str, "class": "matrix"|"vector"|"data", "flops": float, "bytes": float,
             "dtype": str, "models": [str], "measured_at": str}},   # ISO date-time (UTC)
         "copies": {"<src_memory>-><dst_memory>": [[nbytes, seconds], ...]},
         "overheads": {"region_s": float, "per_op_s": float, "island_wakeup_s": float}}},
     "bindings": {"<platform name>": {"<platform device>": "<device_key>"}}}

Op keys are :func:`~.signatures.op_signature` texts. Whole-graph runs (``profile(...,
graphs=True)``, the default for runners that can run graphs): each op record may hold
``"in_graph_s": {model: seconds}``, the op's median slot inside that model's graph run on this
device (:class:`~partition_lab.profiling.runners.GraphTiming`), and the entry ``"graphs":
{"<model>|<platform>": {"model", "platform", "device", "total_s", "outside_s", "ops", "runs",
"measured_at", "inputs_bytes", "outputs_bytes"}}``, the runs themselves (``outside_s``: the
part outside the ops, mostly the copies of the graph's inputs and outputs, whose sizes follow).
Kept per model, so that a model can be left out of a fit (leave-one-model-out).

Beyond the spec, written where measured (readers use the keys they know): ``overheads.op_floor_s``
(the host time per op of a chain of tiny ops, a floor for queued GPU launches), and copy curves
keyed by domain, ``"<memory>:<precision>-><memory>:<precision>"``, for crossings between
precisions (the float32 host of ``tensorcore``): the copy+cast as the executor makes it.

One validation for every way a cache comes in: :func:`read_profile_cache` (what pricing reads:
``--profile-cache``, ``profile_cache=`` of the API, a dict included) checks the data with
:meth:`~.cache_records.ProfileCache.from_dict`, the same rules ``partition-lab
profile`` loads its cache with (every field typed, every number finite and in a sane range),
which also merges and saves under a lock through :func:`read_json_file` and
:func:`write_profile_cache`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import ProfileError
from .cache_records import SCHEMA, ProfileCache, read_json_file, write_profile_cache


class ValidatedCache(dict):  # type: ignore[type-arg]
    """A decoded profile cache that :func:`read_profile_cache` checked already (the shipped
    profile, read once per process): reading it again returns it as it is."""


def read_profile_cache(source: str | Path | Mapping[str, Any] | Any) -> dict[str, Any]:
    """The decoded cache: from a path, a mapping, or an object with ``to_dict()``/``data``.

    Raises
    ------
    ProfileError
        If the file is missing or not JSON, or any field is malformed or out of range (the
        message names the file, the field and the fix).
    """
    if isinstance(source, ValidatedCache):  # checked when it was read (the shipped profile)
        return source
    if isinstance(source, (str, Path)):
        data = read_json_file(Path(source), "profile cache")
        where = str(source)
    elif isinstance(source, Mapping):
        data, where = source, "(a mapping)"
    elif hasattr(source, "to_dict"):
        data, where = source.to_dict(), f"({type(source).__name__})"
    elif isinstance(getattr(source, "data", None), Mapping):
        data, where = source.data, f"({type(source).__name__}.data)"
    else:
        raise ProfileError(f"a profile cache must be a path or a mapping, got "
                           f"{type(source).__name__}")
    ProfileCache.from_dict(data, where)  # raises ProfileError naming the field and the fix
    return dict(data)


__all__ = ["SCHEMA", "ValidatedCache", "read_json_file", "read_profile_cache",
           "write_profile_cache"]
