"""The profile cache's records (measured ops, copies, overheads, bindings, kept choices) and
their one validation: they live in :mod:`partition_lab.cost_models.cache_records`, under the
cost models that read them; this module keeps the profiler's import path."""

from ..cost_models.cache_records import (  # noqa: F401 - re-exported
    CHOICE_FIX,
    FIX,
    KINDS,
    MAX_AMOUNT,
    MAX_SECONDS,
    MIN_SECONDS,
    OVERHEAD_KEYS,
    RUNNERS,
    SCHEMA,
    DeviceEntry,
    OpStats,
    ProfileCache,
    default_cache_path,
    now_iso,
    read_json_file,
    write_profile_cache,
)

__all__ = ["OVERHEAD_KEYS", "SCHEMA", "DeviceEntry", "OpStats", "ProfileCache",
           "default_cache_path", "now_iso"]
