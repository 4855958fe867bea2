"""Convert a measured profile of the old two-kind format to a profile cache.

The first GPU measurements (``partition_lab.gpu_profile/1``: op times per ``"accel"`` / ``"cpu"``
kind, one copy curve per direction, region and per-op overheads;
``experiments/data/h200_measured.json.xz``) predate the profile cache. The model that read that format is retired;
this script turns such a file into a ``partition_lab.profile_cache/1`` cache that
:class:`~partition_lab.cost_models.profiled.ProfiledCostModel` prices from
(``experiments/profile_cv.py`` uses it to cross-validate the old profile).

    PYTHONPATH=src python3 experiments/gpu_profile_to_cache.py --out /tmp/h200_cache.json
    PYTHONPATH=src python3 experiments/gpu_profile_to_cache.py --bundles .gpu_bundle/platforms \\
        --out /tmp/h200_cache.json     # model names from the profiled models' bundles
"""

from __future__ import annotations

import argparse
import json
import lzma
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from partition_lab.core.graph import OpGraph, OpNode
from partition_lab.core.ops import op_class
from partition_lab.core.platform import Platform
from partition_lab.cost_models.profile_cache import SCHEMA, read_json_file, write_profile_cache
from partition_lab.cost_models.signatures import node_from_signature, op_signature
from partition_lab.errors import ProfileError
from partition_lab.targets import get_platform

OLD_SCHEMA = "partition_lab.gpu_profile/1"
#: The H200 profile of the first GPU run (driver 580.159.04, torch 2.11+cu130, cuDNN 91900).
DEFAULT_PROFILE = Path(__file__).resolve().parent / "data" / "h200_measured.json.xz"


def read_profile(path: str | Path) -> Any:
    """The parsed JSON of an old-format profile file, plain or xz-compressed (``.xz``)."""
    path = Path(path)
    if path.suffix != ".xz":
        return read_json_file(path, "measured GPU profile")
    with lzma.open(path, "rt", encoding="utf-8") as raw:
        return json.load(raw)


def cache_from_measured_gpu(data: Mapping[str, Any] | str | Path | None = None, *,
                            graphs: Mapping[str, OpGraph] | Iterable[OpGraph] | None = None,
                            platform: Any = "tensorcore", group: str = "op") -> dict[str, Any]:
    """A profile cache (schema ``partition_lab.profile_cache/1``) from an old two-kind profile
    (``partition_lab.gpu_profile/1``; default :data:`DEFAULT_PROFILE`, the H200 one).

    The ``accel`` table becomes a ``cuda`` entry bound to every non-host device of
    ``platform``, ``cpu`` a ``cpu`` entry bound to the host. That format does not record which
    models a signature came from, nor FLOPs and bytes: ``graphs`` (the profiled models' graphs)
    supply both for the signatures they contain; other signatures get FLOPs and bytes from
    :func:`node_from_signature` and, as their ``models``, a group named by ``group``: ``"op"``
    (``"op:nn.conv2d"``: cross-validation then leaves one op name out, which is not leaving one
    model out) or ``"signature"`` (each its own group). Copies ``h2d``/``d2h`` as the executor
    made them (they include the host's float32 conversion) are stored under memory keys and
    the host-domain keys; per-op overheads: ``overhead_per_op_s`` is ``per_op_s``,
    ``host_per_op_s`` is ``op_floor_s``; the old CPU region overhead (a wake-up after waiting
    on the GPU) is the host's ``island_wakeup_s``. Op, copy and region prices of measured
    signatures then equal those of the retired two-kind model (``MeasuredGpuCostModel``).
    """
    if data is None or isinstance(data, (str, Path)):
        path = DEFAULT_PROFILE if data is None else Path(data)
        data = read_profile(path)
    if data.get("schema") != OLD_SCHEMA:
        raise ProfileError(f"not a {OLD_SCHEMA!r} profile")
    plat = platform if isinstance(platform, Platform) else get_platform(platform)
    meta = dict(data.get("meta", {}))
    info = dict(data.get("op_info", {}))
    nodes: dict[str, OpNode] = {}
    models: dict[str, list[str]] = {}
    if graphs is not None:
        items = graphs.items() if isinstance(graphs, Mapping) else ((g.name, g) for g in graphs)
        for name, graph in items:
            for node in graph:
                sig = op_signature(node)
                nodes.setdefault(sig, node)
                if name not in models.setdefault(sig, []):
                    models[sig].append(name)
    date = str(meta.get("date", ""))[:10]

    def record(sig: str, seconds: float) -> dict[str, Any]:
        node = nodes.get(sig) or node_from_signature(sig)
        args = node.args or node.inputs + node.weights
        named = models.get(sig) or [f"op:{node.op}" if group == "op" else f"sig:{sig}"]
        return {"median_s": float(seconds), "p10_s": float(seconds), "p90_s": float(seconds),
                "runs": 3, "op": node.op,
                "class": info.get(sig, {}).get("class") or op_class(node),
                "flops": float(node.flops), "bytes": float(node.bytes_moved),
                "dtype": args[0].dtype if args else "float32", "models": named,
                "measured_at": date}

    gpu, cpu = str(meta.get("gpu", "GPU")), str(meta.get("host_cpu", "host CPU"))
    torch = str(meta.get("torch", "?"))
    gpu_key = f"torch-cuda|{gpu}|torch {torch}|cudnn {meta.get('cudnn', '?')}"
    cpu_key = f"torch-cpu|{cpu}|torch {torch}|{meta.get('cpu_threads', '?')} threads"
    transfers = dict(data.get("transfers", {}))
    suffix = "" if data.get("executor_transfers", "pageable") == "pageable" else (
        "_" + str(data["executor_transfers"]))
    host = plat.host
    accel_memories = list(dict.fromkeys(d.memory for d in plat.accelerators)) or ["gpu"]
    copies: dict[str, list[list[float]]] = {}
    for memory in accel_memories:
        for name, (a, b) in {"h2d": (host.memory, memory), "d2h": (memory, host.memory)}.items():
            points = transfers.get(name + suffix)
            if points:
                copies[f"{a}->{b}"] = [list(map(float, p)) for p in points]
        domains = {d.domain for d in plat.accelerators if d.memory == memory}
        for mem, precision in domains:
            if precision == host.precision:
                continue
            for name, (a, b) in {"h2d": ((host.memory, host.precision), (mem, precision)),
                                 "d2h": ((mem, precision), (host.memory, host.precision))
                                 }.items():
                points = transfers.get(name + suffix)
                if points:
                    copies[f"{a[0]}:{a[1]}->{b[0]}:{b[1]}"] = [list(map(float, p))
                                                               for p in points]
    region = dict(data.get("region_overhead_s", {}))
    per_op = dict(data.get("executor_op_overhead", {}))
    software = {k: str(meta[k]) for k in ("torch", "cuda", "cudnn", "driver", "python")
                if k in meta}
    ops = dict(data.get("ops", {}))
    devices = {
        gpu_key: {"runner": "torch", "kind": "cuda", "name": gpu, "software": software,
                  "ops": {s: record(s, t) for s, t in ops.get("accel", {}).items()},
                  "copies": copies,
                  "overheads": {"region_s": float(region.get("accel", 0.0)),
                                "per_op_s": float(per_op.get("accel", {}).get(
                                    "overhead_per_op_s", 0.0)),
                                "op_floor_s": float(per_op.get("accel", {}).get(
                                    "host_per_op_s", 0.0))}},
        cpu_key: {"runner": "torch", "kind": "cpu", "name": cpu, "software": software,
                  "ops": {s: record(s, t) for s, t in ops.get("cpu", {}).items()},
                  "copies": {},
                  "overheads": {"region_s": 0.0,
                                "per_op_s": float(per_op.get("cpu", {}).get(
                                    "overhead_per_op_s", 0.0)),
                                "op_floor_s": float(per_op.get("cpu", {}).get(
                                    "host_per_op_s", 0.0)),
                                "island_wakeup_s": float(region.get("cpu", 0.0))}},
    }
    binding = {d.name: (cpu_key if d.is_host else gpu_key) for d in plat.devices}
    return {"schema": SCHEMA, "devices": devices, "bindings": {plat.name: binding},
            "converted_from": {"schema": OLD_SCHEMA, "date": meta.get("date"),
                               "models": "from graphs" if graphs is not None else
                               f"grouped by {group} (no model names in the old format)"}}


def bundle_graphs(folder: Path) -> dict[str, OpGraph]:
    """The graphs of the bundles (``*.json.gz``) in ``folder``, by model name."""
    from partition_lab.executors.graph_io import read_bundle

    graphs = {}
    for path in sorted(folder.glob("*.json.gz")):
        graph = read_bundle(path).graph
        graphs[graph.name or path.name[:-8]] = graph
    if not graphs:
        raise SystemExit(f"no bundles (*.json.gz) in {folder}")
    return graphs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", type=Path, default=DEFAULT_PROFILE,
                        help=f"a {OLD_SCHEMA} file (default: {DEFAULT_PROFILE.name})")
    parser.add_argument("--bundles", type=Path, help="bundles of the profiled models: model "
                                                     "names per signature")
    parser.add_argument("--group", choices=("op", "signature"), default="op",
                        help="pseudo-models of signatures no bundle names (default: op)")
    parser.add_argument("--platform", default="tensorcore")
    parser.add_argument("--out", type=Path, required=True, help="the profile cache to write")
    args = parser.parse_args(argv)
    graphs = bundle_graphs(args.bundles) if args.bundles else None
    cache = cache_from_measured_gpu(args.profile, graphs=graphs, platform=args.platform,
                                    group=args.group)
    write_profile_cache(args.out, cache)
    counts = ", ".join(f"{key}: {len(entry['ops'])} signatures"
                       for key, entry in cache["devices"].items())
    print(f"{args.profile} -> {args.out} ({counts})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
