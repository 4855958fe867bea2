"""Timings of TVM-built kernels -> a profile cache. Needs no TVM.

:mod:`partition_lab.profiling.relax_ops` builds every op signature of some models' platforms with
TVM (``manifest.json``, format ``partition_lab.tvm_ops/1``); the benchmark suite's op timer times
each function on the device (runtime-only TVM; docs/guide/relax.md). :func:`timings_to_cache` turns both into a
profile cache (``partition_lab.profile_cache/1``) whose entries have the runner ``tvm-built``:
one entry per role, ``tvm-built-gpu|<GPU>|tvm <version>|<target>`` (every non-host device of
every platform: GPU code stands in for the accelerator) and ``tvm-built-host|<CPU>|...``, so
they are never confused with the torch runner's; ``bindings`` map each platform's host to the
host entry and its other devices to the GPU entry. Each op record lists the models it came
from (leave-one-model-out works as for torch profiles).

Copies and overheads come from the driver's probes: ``Tensor.copyto`` host<->GPU per size, and
the per-call floor of an empty and a one-kernel VM function (see :func:`overheads`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..cost_models.cache_records import SCHEMA, ProfileCache, now_iso

RUNNER = "tvm-built"
MANIFEST_FORMAT = "partition_lab.tvm_ops/1"
TIMINGS_FORMAT = MANIFEST_FORMAT + "/timings"


def entry_key(role: str, name: str, tvm_version: str, target: Mapping[str, Any]) -> str:
    """The device key of a role's entry: runner and role, device name, TVM, target."""
    target_text = " ".join(f"{k}={v}" for k, v in sorted(target.items()))
    return "|".join([f"{RUNNER}-{role}", name, f"tvm {tvm_version}", target_text])


def overheads(role: str, kind: str, floors: Mapping[str, float]) -> dict[str, float]:
    """The entry's overheads from the floor probes of its role.

    Each op was timed as a VM function of its own, so its time holds one VM call already:
    ``per_op_s`` is 0. On the GPU the calls of a region queue behind each other, and the
    one-kernel function's time per call in a stream (``tiny_s``) is the least an op costs
    (``op_floor_s``); a region pays what a call made and waited for costs beyond that
    (``tiny_synced_s - tiny_s``). On the host ops run as they are called and a region pays
    the empty function's call (``empty_s``).
    """
    if not floors:
        return {}
    if kind == "cuda":
        return {"region_s": max(floors["tiny_synced_s"] - floors["tiny_s"], 0.0),
                "per_op_s": 0.0, "op_floor_s": floors["tiny_s"]}
    return {"region_s": floors["empty_s"], "per_op_s": 0.0}


def _copy_curves(manifest: Mapping[str, Any], copies: Mapping[str, Any]) -> dict[str, Any]:
    """The GPU entry's copy curves under every link name a platform's devices use.

    Every non-host memory (``gpu``, neuron's ``accel``) is the GPU here. Where the device's
    precision differs from the host's (``tensorcore``'s float32 host), the domain curve is the
    plain copy too: TVM's build keeps the prepared module's dtype on the host, it does not
    cast at the crossing (docs/guide/relax.md, "Not yet").
    """
    h2d, d2h = copies.get("host->gpu"), copies.get("gpu->host")
    if not h2d or not d2h:
        return {}
    curves: dict[str, Any] = {}
    for devices in manifest["platforms"].values():
        host = next(d for d in devices if d["host"])
        for d in devices:
            if d["host"]:
                continue
            curves[f"{host['memory']}->{d['memory']}"] = h2d
            curves[f"{d['memory']}->{host['memory']}"] = d2h
            if d["precision"] != host["precision"]:
                curves[f"{host['memory']}:{host['precision']}->{d['memory']}:{d['precision']}"] \
                    = h2d
                curves[f"{d['memory']}:{d['precision']}->{host['memory']}:{host['precision']}"] \
                    = d2h
    return curves


def timings_to_cache(manifest: Mapping[str, Any], timings: Mapping[str, Any]
                     ) -> tuple[ProfileCache, dict[str, dict[str, str]]]:
    """The profile cache of ``timings`` (the driver's) of ``manifest``'s functions, validated,
    and ``{role: {signature: why}}`` for every function with no time (not built, failed,
    or left for lack of time)."""
    if manifest.get("format") != MANIFEST_FORMAT or timings.get("format") != TIMINGS_FORMAT:
        raise ValueError(f"expected a {MANIFEST_FORMAT} manifest and its timings, got "
                         f"{manifest.get('format')!r} and {timings.get('format')!r}")
    cuda = manifest["mode"] == "cuda"
    tvm_version = timings.get("tvm") or manifest["tvm"]
    measured_at = timings.get("measured_at") or now_iso()
    timed = {lib["lib"]: lib for lib in timings.get("libraries", [])}
    devices: dict[str, Any] = {}
    keys: dict[str, str] = {}
    failed: dict[str, dict[str, str]] = {}
    for role, target in manifest["targets"].items():
        libs = [lib for lib in manifest["libraries"] if lib["role"] == role]
        if not libs:
            continue
        kind = "cuda" if role == "gpu" and cuda else "cpu"
        cpu_name = timings.get("cpu") or "cpu"
        name = (timings.get("gpu") or "GPU") if kind == "cuda" else (
            cpu_name if role == "host" else f"{cpu_name} (llvm, standing in for the GPU)")
        key = keys[role] = entry_key(role, name, tvm_version, target)
        ops, failed[role] = _op_records(libs, timed, measured_at)
        devices[key] = {
            "runner": RUNNER, "kind": kind, "name": name,
            "software": {"tvm": tvm_version, "target": json.dumps(target, sort_keys=True),
                         "mode": manifest["mode"]},
            "ops": ops,
            "copies": _copy_curves(manifest, timings.get("copies", {})) if role == "gpu" else {},
            "overheads": overheads(role, kind, timings.get("floors", {}).get(role, {}))}
    bindings = {platform: {d["name"]: keys["host" if d["host"] else "gpu"] for d in devs
                           if ("host" if d["host"] else "gpu") in keys}
                for platform, devs in manifest["platforms"].items()}
    data = {"schema": SCHEMA, "devices": devices, "bindings": bindings}
    return ProfileCache.from_dict(data, "tvm-built timings"), failed


def _op_records(libs: list[Mapping[str, Any]], timed: Mapping[str, Any], measured_at: str
                ) -> tuple[dict[str, Any], dict[str, str]]:
    ops: dict[str, Any] = {}
    failed: dict[str, str] = {}
    for lib in libs:
        got = timed.get(lib["lib"], {}) if lib["lib"] else {}
        for fn in lib["functions"]:
            sig = fn["signature"]
            if sig in ops:
                continue
            t = got.get("functions", {}).get(fn["name"], {})
            why = fn.get("build_error") or t.get("error") or t.get("skipped") or (
                None if "median_s" in t else got.get("error") or "not timed")
            if why:
                failed[sig] = str(why)
                continue
            ops[sig] = {"median_s": t["median_s"], "p10_s": t["p10_s"], "p90_s": t["p90_s"],
                        "runs": t["runs"], "op": fn["op"], "class": fn["class"],
                        "flops": fn["flops"], "bytes": fn["bytes"], "dtype": fn["dtype"],
                        "models": list(fn["models"]), "measured_at": measured_at}
    return ops, failed


def convert(manifest: str | Path, timings: str | Path, out: str | Path) -> dict[str, Any]:
    """Read the two files, write the cache to ``out`` (replacing it); a summary."""
    data = json.loads(Path(manifest).read_text())
    times = json.loads(Path(timings).read_text())
    cache, failed = timings_to_cache(data, times)
    cache.save(out, merge=False)
    return {"cache": str(out),
            "entries": {k: len(e.ops) for k, e in cache.devices.items()},
            "bindings": cache.bindings,
            "failed": failed}
