"""The profile cache as objects: load, validate every field, merge, save under a lock.

The file format (schema ``partition_lab.profile_cache/1``), its reader and its writer live in
:mod:`partition_lab.cost_models.profile_cache`; here each device entry and op record becomes a
:class:`DeviceEntry` / :class:`OpStats`, checked field by field, with lookups and per-platform
device bindings.

Merging (:meth:`ProfileCache.merge`): an op signature measured again replaces the old entry only
if it has more runs or is newer, and the ``models`` lists are unioned either way; a copy curve
measured again replaces the old curve of that link; overheads are updated key by key; a
platform's bindings are replaced. :meth:`ProfileCache.save` merges into what is on disk under a
lock and replaces the file atomically, so profilers writing one cache at once lose nothing.

Why these checks are written out rather than validated with ``jsonschema`` at load (the
JSON Schema ships, ``partition_lab/schemas/profile_cache.schema.json``, and the tests
hold what we write to it): a schema error names the failed keyword (``'median_s' is not of type
'number'``) and stops there, while these say what was found, what is expected and the fix
(:data:`FIX`) in one line that ``tests/cli/test_bad_data_files.py`` asserts. Some checks are beyond a
schema: ``p10_s <= median_s <= p90_s``, dates that parse, bindings that name entries of the
same file. And ``jsonschema`` is a test dependency only, not one every user installs.
"""

from __future__ import annotations

import datetime
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import filelock

from .._cache_store import profile_path
from .._io import check_regular_file, write_json_atomic
from ..core.ops import OP_CLASSES
from ..errors import ProfileError

SCHEMA = "partition_lab.profile_cache/1"


def read_json_file(path: Path, what: str) -> Any:
    """The parsed JSON of ``path``; ProfileError naming ``what`` if it is missing or not JSON."""
    check_regular_file(path, what, ProfileError)  # a FIFO would block the read forever
    if not path.is_file():
        raise ProfileError(f"{what} {path} does not exist")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ProfileError(f"{what} {path} is not valid JSON: {err}") from None
    except RecursionError:  # the decoder recurses once per nested array or object
        raise ProfileError(f"{what} {path} nests arrays or objects too deeply to read; it is "
                           "not a file partition-lab wrote: profile again") from None
    except OSError as err:
        raise ProfileError(f"{what} {path} cannot be read: {err.strerror or err}") from None


def write_profile_cache(path: str | Path, cache: Mapping[str, Any]) -> Path:
    """Write ``cache`` as JSON atomically (a temporary file, then a rename)."""
    return write_json_atomic(path, cache)

RUNNERS = ("torch", "tvm-llvm", "tvm-rpc", "tvm-built")  # tvm-built: profiling/tvm_built.py
KINDS = ("cuda", "cpu")
OVERHEAD_KEYS = ("region_s", "per_op_s", "island_wakeup_s")

# Sane bounds of what a profiler can measure. They keep a hand-edited or corrupt cache from
# pricing a plan at NaN, infinity or below zero: no timer resolves under a picosecond, no op of a
# profiled model runs for hours, and 1e18 FLOPs or bytes is beyond any single op.
MIN_SECONDS = 1e-12
MAX_SECONDS = 1e4
MAX_AMOUNT = 1e18
#: What every field message ends with: how to make the cache right again.
FIX = "correct that field, or delete the entry and measure again with 'partition-lab profile'"


def now_iso() -> str:
    """The current UTC time as an ISO 8601 string (seconds), what ``measured_at`` holds."""
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def default_cache_path() -> Path:
    """``$PARTITION_LAB_CACHE/profile_cache.json`` (default: the user cache folder,
    ``~/.cache/partition_lab`` on Linux; see :func:`partition_lab._io.user_cache_dir`)."""
    return profile_path()  # PARTITION_LAB_CACHE="" means unset, as for the zoo


@dataclass
class OpStats:
    """One op signature measured on one device: its time distribution and what it is."""

    median_s: float
    p10_s: float
    p90_s: float
    runs: int
    op: str
    op_class: str
    flops: float
    bytes: float
    dtype: str
    models: list[str] = field(default_factory=list)
    measured_at: str = ""
    in_graph: dict[str, float] = field(default_factory=dict)  # model -> seconds in its graph

    def to_dict(self) -> dict[str, Any]:
        out = {"median_s": self.median_s, "p10_s": self.p10_s, "p90_s": self.p90_s,
               "runs": self.runs, "op": self.op, "class": self.op_class, "flops": self.flops,
               "bytes": self.bytes, "dtype": self.dtype, "models": sorted(self.models),
               "measured_at": self.measured_at}
        if self.in_graph:
            out["in_graph_s"] = {m: self.in_graph[m] for m in sorted(self.in_graph)}
        return out

    @classmethod
    def from_dict(cls, data: Any, where: str) -> OpStats:
        if not isinstance(data, Mapping):
            raise ProfileError(f"{where} must be an object; {FIX}")
        times = {k: _positive(data, k, where) for k in ("median_s", "p10_s", "p90_s")}
        if not times["p10_s"] <= times["median_s"] <= times["p90_s"]:
            raise ProfileError(f"{where}: needs p10_s <= median_s <= p90_s, got "
                               f"{times['p10_s']}, {times['median_s']}, {times['p90_s']}; {FIX}")
        runs = _count(data, "runs", where)
        op_class = data.get("class")
        if not isinstance(op_class, str) or op_class not in OP_CLASSES:
            _bad(where, "class", f"one of {OP_CLASSES}", op_class)
        models = data.get("models", [])
        if not isinstance(models, list) or not all(isinstance(m, str) for m in models):
            _bad(where, "models", "a list of model names", models)
        measured_at = data.get("measured_at", "")
        if not isinstance(measured_at, str) or (measured_at and _parse_time(measured_at) is None):
            _bad(where, "measured_at", "an ISO date", measured_at)
        return cls(times["median_s"], times["p10_s"], times["p90_s"], runs,
                   _text(data, "op", where), op_class, _number(data, "flops", where),
                   _number(data, "bytes", where), _text(data, "dtype", where),
                   list(dict.fromkeys(models)), measured_at,
                   _seconds_by_model(data.get("in_graph_s", {}), f"{where}.in_graph_s"))

    def replaces(self, old: OpStats) -> bool:
        """Whether this measurement replaces ``old``: more runs, or measured later."""
        if self.runs > old.runs:
            return True
        new_at, old_at = _parse_time(self.measured_at), _parse_time(old.measured_at)
        return new_at is not None and (old_at is None or new_at > old_at)


@dataclass
class DeviceEntry:
    """Everything measured on one device (a device key: hardware plus software versions)."""

    key: str
    runner: str
    kind: str
    name: str
    software: dict[str, str] = field(default_factory=dict)
    ops: dict[str, OpStats] = field(default_factory=dict)
    copies: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    overheads: dict[str, float] = field(default_factory=dict)
    graphs: dict[str, dict[str, Any]] = field(default_factory=dict)  # model -> whole-graph run

    def to_dict(self) -> dict[str, Any]:
        out = self._to_dict()
        if self.graphs:
            out["graphs"] = {m: dict(self.graphs[m]) for m in sorted(self.graphs)}
        return out

    def _to_dict(self) -> dict[str, Any]:
        return {"runner": self.runner, "kind": self.kind, "name": self.name,
                "software": dict(sorted(self.software.items())),
                "ops": {sig: self.ops[sig].to_dict() for sig in sorted(self.ops)},
                "copies": {link: [[float(n), float(t)] for n, t in curve]
                           for link, curve in sorted(self.copies.items())},
                "overheads": {k: float(v) for k, v in sorted(self.overheads.items())}}

    @classmethod
    def from_dict(cls, key: str, data: Any, where: str) -> DeviceEntry:
        if not isinstance(data, Mapping):
            raise ProfileError(f"{where} must be an object; {FIX}")
        runner = data.get("runner")
        if not isinstance(runner, str) or runner not in RUNNERS:
            _bad(where, "runner", f"one of {RUNNERS}", runner)
        kind = data.get("kind")
        if not isinstance(kind, str) or kind not in KINDS:
            _bad(where, "kind", f"one of {KINDS}", kind)
        software = _object(data, "software", where, "an object of version strings")
        entry = cls(key, runner, kind, _text(data, "name", where),
                    {str(k): str(v) for k, v in software.items()})
        ops = _object(data, "ops", where, "an object keyed by op signature")
        for sig, raw in ops.items():
            entry.ops[sig] = OpStats.from_dict(raw, f"{where}.ops[{sig!r}]")
        copies = _object(data, "copies", where, "an object keyed by 'src->dst'")
        for link, curve in copies.items():
            entry.copies[link] = _curve(curve, f"{where}.copies[{link!r}]")
        overheads = _object(data, "overheads", where, "an object of seconds")
        for name in overheads:
            entry.overheads[name] = _seconds(overheads, name, f"{where}.overheads", zero=True)
        graphs = _object(data, "graphs", where, "an object keyed by model")
        for model, run in graphs.items():
            entry.graphs[model] = _graph_run(run, f"{where}.graphs[{model!r}]")
        return entry

    def merge(self, new: DeviceEntry) -> None:
        """Fold ``new`` (a later profile of this device) into this entry."""
        self.runner, self.kind, self.name = new.runner, new.kind, new.name
        self.software.update(new.software)
        for sig, stats in new.ops.items():
            old = self.ops.get(sig)
            if old is None:
                self.ops[sig] = _copy_stats(stats)
                continue
            models = list(dict.fromkeys(old.models + stats.models))
            in_graph = {**old.in_graph, **stats.in_graph}
            if stats.replaces(old):
                self.ops[sig] = _copy_stats(stats)
            self.ops[sig].models = models
            self.ops[sig].in_graph = in_graph
        self.copies.update({link: list(curve) for link, curve in new.copies.items()})
        self.overheads.update(new.overheads)
        self.graphs.update({m: dict(run) for m, run in new.graphs.items()})


@dataclass
class ProfileCache:
    """A loaded profile cache: device entries by key and device bindings by platform."""

    devices: dict[str, DeviceEntry] = field(default_factory=dict)
    bindings: dict[str, dict[str, str]] = field(default_factory=dict)
    #: Measured choices (:mod:`partition_lab.choice`) by decision key (model, support, platform,
    #: runner): the chosen plan's devices and the choice record, reused without timing.
    choices: dict[str, dict[str, Any]] = field(default_factory=dict)

    # ------------------------------------------------------------------ files
    @classmethod
    def load(cls, path: str | Path, *, missing_ok: bool = False) -> ProfileCache:
        """Read a cache file; an empty cache if it does not exist and ``missing_ok``.

        Raises
        ------
        ProfileError
            If the file is missing (unless ``missing_ok``), not JSON, of another schema, or any
            entry is malformed (the message names the entry and the field).
        """
        path = Path(path)
        if missing_ok and not path.exists():
            return cls()
        return cls.from_dict(read_json_file(path, "profile cache"), str(path))

    @classmethod
    def from_dict(cls, data: Any, where: str = "profile cache") -> ProfileCache:
        if not isinstance(data, Mapping) or data.get("schema") != SCHEMA:
            found = data.get("schema") if isinstance(data, Mapping) else type(data).__name__
            raise ProfileError(f"profile cache {where}: 'schema' must be {SCHEMA!r}, "
                               f"got {found!r}")
        devices = data.get("devices", {})
        if not isinstance(devices, Mapping):
            raise ProfileError(f"profile cache {where}: 'devices' must be an object; {FIX}")
        _string_keys(devices, f"profile cache {where}: devices")
        cache = cls({key: DeviceEntry.from_dict(key, raw, f"profile cache {where}: "
                                                f"devices[{key!r}]")
                     for key, raw in devices.items()})
        bindings = data.get("bindings", {})
        if not isinstance(bindings, Mapping):
            raise ProfileError(f"profile cache {where}: 'bindings' must be an object; {FIX}")
        _string_keys(bindings, f"profile cache {where}: bindings")
        for platform, mapping in bindings.items():
            if not isinstance(mapping, Mapping) or not all(
                    isinstance(d, str) and isinstance(k, str) for d, k in mapping.items()):
                raise ProfileError(f"profile cache {where}: bindings[{platform!r}] must map "
                                   f"platform devices to device keys (strings); {FIX}")
            for device, key in mapping.items():
                if key not in cache.devices:
                    raise ProfileError(f"profile cache {where}: bindings[{platform!r}] binds "
                                       f"{device!r} to {key!r}, which has no entry; {FIX}")
            cache.bindings[str(platform)] = {str(d): str(k) for d, k in mapping.items()}
        choices = data.get("choices", {})
        if not isinstance(choices, Mapping):
            raise ProfileError(f"profile cache {where}: 'choices' must be an object; {FIX}")
        _string_keys(choices, f"profile cache {where}: choices")
        for key, record in choices.items():
            cache.choices[key] = _choice_record(record, f"profile cache {where}: "
                                                        f"choices[{key[:16]!r}...]")
        return cache

    def to_dict(self) -> dict[str, Any]:
        data = {"schema": SCHEMA,
                "devices": {key: self.devices[key].to_dict() for key in sorted(self.devices)},
                "bindings": {p: dict(sorted(m.items())) for p, m in sorted(self.bindings.items())}}
        if self.choices:  # only where a choice was made: other caches read as before
            data["choices"] = {key: self.choices[key] for key in sorted(self.choices)}
        return data

    def save(self, path: str | Path, *, merge: bool = True) -> Path:
        """Write the cache to ``path`` atomically (a temporary file, then a rename).

        With ``merge`` (the default) the file's current content is read under a lock and this
        cache merged into it first, so entries another profiler wrote meanwhile are kept; this
        object then holds the merged content. A corrupt file on disk is an error, not
        overwritten.
        """
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with _locked(path):
            if merge and path.exists():
                on_disk = ProfileCache.load(path)
                on_disk.merge(self)
                self._adopt(on_disk)
            write_profile_cache(path, self.to_dict())
        return path

    def _adopt(self, merged: ProfileCache) -> None:
        """Take ``merged``'s content, keeping this cache's entry objects (callers hold them)."""
        for key, entry in merged.devices.items():
            if key in self.devices:
                self.devices[key].__dict__.update(entry.__dict__)
            else:
                self.devices[key] = entry
        self.bindings.clear()
        self.bindings.update(merged.bindings)
        self.choices.clear()
        self.choices.update(merged.choices)

    # ------------------------------------------------------------------ merging
    def merge(self, other: ProfileCache) -> ProfileCache:
        """Fold ``other`` (a later profile) into this cache (see the module docstring)."""
        for key, entry in other.devices.items():
            if key in self.devices:
                self.devices[key].merge(entry)
            else:
                fresh = DeviceEntry(key, entry.runner, entry.kind, entry.name)
                fresh.merge(entry)
                self.devices[key] = fresh
        for platform, mapping in other.bindings.items():
            self.bindings[platform] = dict(mapping)
        self.choices.update(other.choices)  # a later decision replaces an earlier one
        return self

    # ------------------------------------------------------------------ lookups
    def entry(self, device_key: str) -> DeviceEntry | None:
        return self.devices.get(device_key)

    def lookup(self, device_key: str, signature: str) -> OpStats | None:
        """The stats of ``signature`` on ``device_key``, or None if not measured there."""
        entry = self.devices.get(device_key)
        return entry.ops.get(signature) if entry is not None else None

    def bind(self, platform: str, mapping: Mapping[str, str]) -> None:
        """Bind ``platform``'s devices to device keys (replacing its earlier binding)."""
        unknown = sorted(set(mapping.values()) - set(self.devices))
        if unknown:
            raise ProfileError(f"cannot bind platform {platform!r} to device keys without an "
                               f"entry: {unknown}")
        self.bindings[platform] = dict(mapping)

    def binding(self, platform: str) -> dict[str, str]:
        """``{platform device: device key}`` for ``platform``; ProfileError if never profiled."""
        try:
            return dict(self.bindings[platform])
        except KeyError:
            known = ", ".join(sorted(self.bindings)) or "none"
            raise ProfileError(f"the profile cache has no binding for platform {platform!r} "
                               f"(profiled platforms: {known}); run 'partition-lab profile "
                               f"MODEL --platform {platform}' first") from None

    def entries_for(self, platform: str) -> dict[str, DeviceEntry]:
        """``{platform device: its DeviceEntry}`` for a profiled platform."""
        return {device: self.devices[key] for device, key in self.binding(platform).items()}

    def op_stats(self, platform: str, device: str, signature: str) -> OpStats | None:
        """The stats of ``signature`` on ``platform``'s ``device``, or None if not measured."""
        key = self.binding(platform).get(device)
        return self.lookup(key, signature) if key is not None else None


# ---------------------------------------------------------------------------- helpers
def _locked(path: Path) -> filelock.FileLock:
    """An exclusive lock for saving ``path``: the kernel's ``flock`` on ``.<name>.lock`` beside
    it (``filelock.FileLock``).

    Why FileLock and not SoftFileLock: a soft lock is the lock file's existence, so it removes
    its file on release, but a profiler killed while saving (SIGKILL, a lost machine) leaves the
    file and every later save waits on a lock nobody holds. The kernel drops an ``flock`` when
    its holder dies, so the cache can never stay locked; the price is that the (empty) lock file
    stays, which is why it is a hidden dotfile, out of ``ls``. It may be deleted whenever no
    profiler is saving.
    """
    return filelock.FileLock(path.with_name(f".{path.name}.lock"))


def _copy_stats(stats: OpStats) -> OpStats:
    return OpStats(**{**stats.__dict__, "models": list(stats.models),
                      "in_graph": dict(stats.in_graph)})


def _parse_time(text: str) -> datetime.datetime | None:
    try:
        moment = datetime.datetime.fromisoformat(text)
    except (TypeError, ValueError):
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=datetime.UTC)


def _bad(where: str, key: str, expected: str, value: Any) -> NoReturn:
    """Raise the one message of a malformed field: where, what it must be, what it is."""
    shown = repr(value)
    shown = shown if len(shown) <= 80 else shown[:77] + "..."  # one line, however big the value
    raise ProfileError(f"{where}.{key} must be {expected}, got {shown}; {FIX}")


def _choice_record(record: Any, where: str) -> dict[str, Any]:
    """A kept measured choice: the chosen plan's strategy, one device name per node, the
    choice record (its times non-negative and finite), when it was made."""
    if not isinstance(record, Mapping):
        raise ProfileError(f"{where} must be an object; {CHOICE_FIX}")
    devices = record.get("devices")
    if not isinstance(devices, list) or not devices or not all(
            isinstance(d, str) and d for d in devices):
        raise ProfileError(f"{where}.devices must be a non-empty list of device names; "
                           f"{CHOICE_FIX}")
    for key in ("strategy", "measured_at"):
        if not isinstance(record.get(key), str):
            raise ProfileError(f"{where}.{key} must be a string; {CHOICE_FIX}")
    choice = record.get("choice")
    if not isinstance(choice, Mapping) or not isinstance(choice.get("candidates"), list):
        raise ProfileError(f"{where}.choice must be an object with candidates; {CHOICE_FIX}")
    for candidate in choice["candidates"]:
        times = candidate.get("measured_s") if isinstance(candidate, Mapping) else None
        if not isinstance(times, list) or not all(
                isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t)
                and t >= 0 for t in times):
            raise ProfileError(f"{where}.choice: every candidate's measured_s must be a list "
                               f"of finite non-negative seconds; {CHOICE_FIX}")
    return dict(record)


CHOICE_FIX = "delete the entry under 'choices' and choose again (partition --choose)"


def _string_keys(data: Mapping[Any, Any], where: str) -> None:
    """JSON keys are strings; a mapping from Python with other keys is refused here."""
    for key in data:
        if not isinstance(key, str):
            raise ProfileError(f"{where}: keys must be strings, got {key!r}; {FIX}")


def _object(data: Mapping[str, Any], key: str, where: str, expected: str) -> Mapping[str, Any]:
    """An optional object field (empty if absent) whose keys are strings."""
    value = data.get(key, {})
    if not isinstance(value, Mapping):
        _bad(where, key, expected, value)
    _string_keys(value, f"{where}.{key}")
    return value


def _graph_run(run: Any, where: str) -> dict[str, Any]:
    """One whole-graph run: every field pricing reads is checked (``total_s``, ``outside_s``,
    the sizes of the copies, where it ran), the rest kept as written."""
    if not isinstance(run, Mapping):
        raise ProfileError(f"{where} must be an object; {FIX}")
    _string_keys(run, where)
    _positive(run, "total_s", where)
    if "outside_s" in run:
        _seconds(run, "outside_s", where, zero=True)
    for key in ("inputs_bytes", "outputs_bytes"):
        sizes = run.get(key, [])
        if not isinstance(sizes, list) or not all(_in_range(n, 0, MAX_AMOUNT) for n in sizes):
            _bad(where, key, f"a list of byte counts in [0, {MAX_AMOUNT:g}]", sizes)
    for key in ("model", "platform", "device", "measured_at"):
        if key in run:
            _text(run, key, where)
    for key in ("runs", "ops"):
        if key in run:
            _count(run, key, where, least=0 if key == "ops" else 1)
    return dict(run)


def _seconds_by_model(data: Any, where: str) -> dict[str, float]:
    """``{model: seconds}``, each a positive finite number."""
    if not isinstance(data, Mapping):
        raise ProfileError(f"{where} must be an object of seconds keyed by model; {FIX}")
    _string_keys(data, where)
    return {m: _positive(data, m, where) for m in data}


def _in_range(value: Any, low: float, high: float) -> bool:
    """A real number (not a bool, not NaN) within [low, high]."""
    return (not isinstance(value, bool) and isinstance(value, (int, float))
            and low <= value <= high)


def _positive(data: Mapping[str, Any], key: str, where: str) -> float:
    """A measured time: finite, at least a picosecond, at most :data:`MAX_SECONDS`."""
    return _seconds(data, key, where, zero=False)


def _seconds(data: Mapping[str, Any], key: str, where: str, *, zero: bool) -> float:
    value = data.get(key)
    low = 0.0 if zero else MIN_SECONDS
    if not _in_range(value, low, MAX_SECONDS) or (not zero and value <= 0):
        what = "a non-negative" if zero else "a positive"
        _bad(where, key, f"{what} number of seconds in [{low:g}, {MAX_SECONDS:g}]", value)
    return float(value)


def _number(data: Mapping[str, Any], key: str, where: str) -> float:
    value = data.get(key)
    if not _in_range(value, 0, MAX_AMOUNT):
        _bad(where, key, f"a non-negative number in [0, {MAX_AMOUNT:g}]", value)
    return float(value)


def _count(data: Mapping[str, Any], key: str, where: str, *, least: int = 1) -> int:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        _bad(where, key, "a positive integer" if least == 1 else "a non-negative integer", value)
    return value


def _text(data: Mapping[str, Any], key: str, where: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        _bad(where, key, "a string", value)
    return value


def _curve(points: Any, where: str) -> list[tuple[float, float]]:
    if not isinstance(points, list) or not points:
        raise ProfileError(f"{where} must be a non-empty list of [nbytes, seconds] pairs; {FIX}")
    curve = []
    for point in points:
        if (not isinstance(point, (list, tuple)) or len(point) != 2
                or not _in_range(point[0], 0, MAX_AMOUNT) or point[0] <= 0
                or not _in_range(point[1], MIN_SECONDS, MAX_SECONDS)):
            raise ProfileError(f"{where}: every point must be [nbytes, seconds] with 0 < nbytes "
                               f"<= {MAX_AMOUNT:g} and {MIN_SECONDS:g} <= seconds <= "
                               f"{MAX_SECONDS:g}, got {point!r}; {FIX}")
        curve.append((float(point[0]), float(point[1])))
    return sorted(curve)
