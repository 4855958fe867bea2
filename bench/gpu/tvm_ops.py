"""Op signatures built by TVM, timed one by one: a profile of TVM's kernels.

``build`` (here, Relax venv: apache-tvm 0.27 + partition_lab) collects every distinct op
signature of the models' platform devices (``partition_lab.profiling.relax_ops``), builds them in
a few libraries per role (GPU devices: cuda sm_90; host: llvm; ``--cpu``: all llvm) and writes
a bundle: ``manifest.json``, ``libs/*.so``, copies of this file and of ``tvm_plans.py`` (whose
``setup_tvm``/``random_array`` the timing uses) and, with ``--site``, a runtime-only TVM.

``time`` (this file + tvm_plans.py + runtime-only TVM + numpy; no compiler, no partition_lab)
times every function with the VM's ``time_evaluator`` within a budget, the host<->GPU copies
per size and the per-call floor; a failing function is recorded, not fatal.

``to-cache`` (partition_lab, no TVM) turns manifest + timings into a profile cache with runner
``tvm-built`` (``partition_lab.profiling.tvm_built``).

    PYTHONPATH=src .venv-relax/bin/python bench/gpu/tvm_ops.py build --out /tmp/ops --cpu \\
        --models tests:convnet,attention
    PYTHONPATH=src .venv-relax/bin/python /tmp/ops/tvm_ops.py time --bundle /tmp/ops \\
        --out /tmp/ops/timings.json --budget-s 30
    PYTHONPATH=src .venv-relax/bin/python bench/gpu/tvm_ops.py to-cache \\
        --bundle /tmp/ops --timings /tmp/ops/timings.json --out /tmp/ops/cache.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform as _platform
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tvm_plans.py sits beside this file
import tvm_plans  # noqa: E402

COPY_SIZES = (1 << 12, 1 << 16, 1 << 20, 1 << 24, 1 << 26)  # bytes: 4 KiB .. 64 MiB


# ---------------------------------------------------------------------------- build (here)
def build(args: argparse.Namespace) -> None:
    from partition_lab.profiling import relax_build
    from partition_lab.profiling import relax_ops as op_profile

    relax_build.env_compile_mode()
    relax_build.LibraryCache.tensor_cores_crashed = args.tensor_cores == "off"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for source in (Path(__file__), Path(tvm_plans.__file__)):
        shutil.copy2(source, out / source.name)
    if args.site:
        tvm_plans.copy_runtime(out / "site")
    start = time.perf_counter()
    collector = op_profile.OpCollector(units=not args.no_units)
    for name, loader in tvm_plans.model_list(args.models):
        print(f"{name}:", flush=True)
        try:
            collector.add_model(loader(), name, args.platforms, log=print)
        except Exception as exc:  # noqa: BLE001 - report and go on with the next model
            collector.errors.append(f"{name}: {type(exc).__name__}: {str(exc).strip()[-400:]}")
            print(f"  {name}: FAILED {collector.errors[-1]}", flush=True)
    counts = {role: len(fns) for role, fns in collector.by_role().items()}
    print(f"signatures per role: {counts} ({time.perf_counter() - start:.1f} s)", flush=True)
    path = op_profile.build_ops(collector, out, cpu=args.cpu, chunk=args.chunk, log=print,
                                extra={"collect_s": round(time.perf_counter() - start, 1)})
    manifest = json.loads(path.read_text())
    failed = [f["signature"] for lib in manifest["libraries"] for f in lib["functions"]
              if "build_error" in f]
    size = sum(lib["size_bytes"] for lib in manifest["libraries"])
    print(f"built {len(manifest['libraries'])} libraries, {size / 1e6:.1f} MB, "
          f"{len(failed)} functions failed, {time.perf_counter() - start:.1f} s", flush=True)


# ---------------------------------------------------------------------------- time (device)
def time_ops(args: argparse.Namespace) -> dict[str, Any]:
    """Time every function of the bundle's libraries; the timings JSON (also to ``--out``)."""
    bundle = Path(args.bundle)
    manifest = json.loads((bundle / "manifest.json").read_text())
    cuda = manifest["mode"] == "cuda"
    site = args.site or (str(bundle / "site") if (bundle / "site").is_dir() else None)
    start = time.perf_counter()
    cache = str(Path(args.cubin_cache or bundle / "cubin_cache"))
    precompiled = None
    if cuda and args.workers > 0:  # NVRTC for every GPU library in parallel, before timing
        precompiled = tvm_plans.precompile(
            [str(bundle / lib["lib"]) for lib in manifest["libraries"]
             if lib["role"] == "gpu" and lib["built"]], site, cache, args.workers)
    tvm = tvm_plans.setup_tvm(site, cuda, cache)
    start = time.perf_counter()  # the budget is for timing, not compiling
    from tvm.runtime.vm import VirtualMachine  # not tvm.relax: that needs the compiler

    devices = {"gpu": tvm.cuda(0) if cuda else tvm.cpu(0), "host": tvm.cpu(0)}
    results: dict[str, Any] = {
        "format": manifest["format"] + "/timings", "mode": manifest["mode"],
        "tvm": tvm.__version__, "host": _platform.node(), "cpu": _cpu_name(),
        "gpu": tvm_plans._gpu_name() if cuda else None, "measured_at": _now(),
        "budget_s": args.budget_s, "floors": {}, "copies": {}, "libraries": [],
        "precompiled": precompiled}
    deadline = start + args.budget_s

    def save() -> None:
        if args.out:
            tvm_plans._write(args.out, results | {"total_s": round(time.perf_counter() - start,
                                                                    1)})

    for lib in manifest["libraries"]:
        if lib["floor"] and lib["built"]:
            vm = VirtualMachine(tvm.runtime.load_module(str(bundle / lib["lib"])),
                                devices[lib["role"]])
            results["floors"][lib["role"]] = time_floor(tvm, vm, devices[lib["role"]])
    results["copies"] = time_copies(tvm, devices["host"], devices["gpu"])
    save()
    done = _timed_before(args.resume)
    if args.resume:
        results["resumed_from"] = args.resume
    for lib in manifest["libraries"]:
        if lib["floor"] or not lib["built"]:
            continue
        dev = devices[lib["role"]]
        before = done.get(lib["lib"], {})
        record: dict[str, Any] = {"lib": lib["lib"], "role": lib["role"],
                                  "functions": dict(before)}
        results["libraries"].append(record)
        if all(fn["name"] in before for fn in lib["functions"]):
            continue  # every function timed by the run resumed: the library is not loaded
        try:
            vm = VirtualMachine(tvm.runtime.load_module(str(bundle / lib["lib"])), dev)
        except Exception as exc:  # noqa: BLE001 - the other libraries still load
            record["error"] = _error(exc)
            continue
        for fn in lib["functions"]:
            if fn["name"] in before:
                continue
            if time.perf_counter() > deadline:
                record["functions"][fn["name"]] = {"skipped": "time budget spent"}
                continue
            try:
                record["functions"][fn["name"]] = time_function(
                    tvm, vm, dev, fn, args.seed, args.repeat, args.min_repeat_ms)
            except Exception as exc:  # noqa: BLE001 - recorded, the next function goes on
                record["functions"][fn["name"]] = {"error": _error(exc)}
        _print_library(record)
        save()
    results["total_s"] = round(time.perf_counter() - start, 1)
    save()
    return results


def _timed_before(path: str | None) -> dict[str, dict[str, Any]]:
    """``{library: {function: record}}`` of the functions an earlier run (``--resume``) timed."""
    if not path:
        return {}
    earlier = json.loads(Path(path).read_text())
    return {lib["lib"]: {name: rec for name, rec in lib["functions"].items() if "median_s" in rec}
            for lib in earlier.get("libraries", [])}


def _arguments(tvm: Any, fn: dict[str, Any], dev: Any, seed: int) -> list[Any]:
    """Random float inputs (weights scaled as tvm_plans does), zeros for integer and boolean
    ones (indices stay in range: an out-of-range index on the GPU would poison the context)."""
    args = []
    for spec, scale in [(s, 1.0) for s in fn["inputs"]] + [(s, 0.05) for s in fn["weights"]]:
        if spec["dtype"].startswith(("float", "bfloat")):
            value = tvm_plans.random_array(f"{fn['name']}:{spec['name']}", spec["shape"],
                                           spec["dtype"], seed, scale)
        else:
            value = np.zeros(spec["shape"], spec["dtype"])
        args.append(tvm.runtime.tensor(value, dev))
    return args


def time_function(tvm: Any, vm: Any, dev: Any, fn: dict[str, Any], seed: int, repeat: int,
                  min_repeat_ms: float) -> dict[str, Any]:
    """One function timed by the VM's ``time_evaluator`` (a warm-up call, then ``repeat``
    repeats of as many calls as fill ``min_repeat_ms``; each result is a mean per call)."""
    args = _arguments(tvm, fn, dev, seed)
    timer = vm.time_evaluator(fn["name"], dev, number=1, repeat=repeat,
                              min_repeat_ms=int(min_repeat_ms))
    times = np.array(timer(*args).results, dtype="float64")
    return {"median_s": float(np.median(times)), "p10_s": float(np.percentile(times, 10)),
            "p90_s": float(np.percentile(times, 90)), "runs": int(times.size)}


def time_floor(tvm: Any, vm: Any, dev: Any, calls: int = 50) -> dict[str, float]:
    """The per-call floor: ``empty`` (a VM call, no kernel) and ``tiny`` (one small kernel)
    per call in a stream, and ``tiny`` called and waited for (``tiny_synced_s``)."""
    x = tvm.runtime.tensor(np.ones(1, "float32"), dev)
    out = {}
    for name in ("empty", "tiny"):
        timer = vm.time_evaluator(name, dev, number=1, repeat=10, min_repeat_ms=5)
        out[f"{name}_s"] = float(np.median(timer(x).results))
    tiny = vm["tiny"]
    samples = []
    for _ in range(calls):
        t0 = time.perf_counter()
        tiny(x)
        dev.sync()
        samples.append(time.perf_counter() - t0)
    out["tiny_synced_s"] = float(np.median(samples))
    return out


def time_copies(tvm: Any, host: Any, gpu: Any, min_s: float = 0.02) -> dict[str, list]:
    """``{"host->gpu": [[nbytes, s], ...], "gpu->host": ...}``: ``Tensor.copyto`` of float32
    tensors, synchronised, the median of at least 5 copies and ``min_s`` per size."""
    curves: dict[str, list] = {"host->gpu": [], "gpu->host": []}
    for nbytes in COPY_SIZES:
        src = tvm.runtime.tensor(np.ones(nbytes // 4, "float32"), host)
        on_gpu = src.copyto(gpu)
        for link, tensor, dest in (("host->gpu", src, gpu), ("gpu->host", on_gpu, host)):
            samples: list[float] = []
            while len(samples) < 5 or (sum(samples) < min_s and len(samples) < 200):
                t0 = time.perf_counter()
                tensor.copyto(dest)
                gpu.sync()
                samples.append(time.perf_counter() - t0)
            curves[link].append([nbytes, float(np.median(samples))])
    return curves


def _error(exc: Exception) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[-1][:300] if lines else ''}"


def _now() -> str:
    """UTC now in ISO 8601 (time.gmtime: the device's Python may predate datetime.UTC)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return _platform.processor() or "cpu"


def _print_library(record: dict[str, Any]) -> None:
    fns = record["functions"].values()
    timed = [f for f in fns if "median_s" in f]
    errors = [f for f in fns if "error" in f]
    total = sum(f["median_s"] for f in timed)
    print(f"{record['lib']}: {len(timed)} timed ({total * 1e3:.3f} ms in all), "
          f"{len(errors)} errors, {len(record['functions']) - len(timed) - len(errors)} "
          "skipped", flush=True)


# ---------------------------------------------------------------------------- to-cache (here)
def to_cache(args: argparse.Namespace) -> dict[str, Any]:
    from partition_lab.profiling import tvm_built

    manifest = args.manifest or str(Path(args.bundle) / "manifest.json")
    summary = tvm_built.convert(manifest, args.timings, args.out)
    for key, count in summary["entries"].items():
        print(f"{key}: {count} ops")
    for role, failed in summary["failed"].items():
        if failed:
            print(f"{role}: {len(failed)} signatures without a time, e.g. "
                  f"{next(iter(failed.items()))}")
    if args.report:
        Path(args.report).write_text(json.dumps(summary, indent=1))
    return summary


def main(argv: list[str] | None = None) -> Any:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="collect and build the op functions (apache-tvm here)")
    b.add_argument("--out", required=True)
    b.add_argument("--models", nargs="+", default=["tests"],
                   help="as tvm_plans.py build: tests[:a,b], zoo or ONNX paths")
    b.add_argument("--platforms", nargs="+", default=["tensorcore", "neuron"])
    b.add_argument("--cpu", action="store_true", help="every role for llvm")
    b.add_argument("--chunk", type=int, default=64, help="functions per library")
    b.add_argument("--no-units", action="store_true", help="ops only, no pattern units")
    b.add_argument("--site", action="store_true", help="copy a runtime-only TVM to OUT/site")
    b.add_argument("--tensor-cores", choices=("try", "off"), default="try")
    t = sub.add_parser("time", help="time the bundle's functions (runtime-only TVM)")
    t.add_argument("--bundle", required=True)
    t.add_argument("--out", help="timings JSON")
    t.add_argument("--site", help="runtime-only TVM folder (default: BUNDLE/site if present)")
    t.add_argument("--budget-s", type=float, default=300.0, help="for the functions")
    t.add_argument("--repeat", type=int, default=10)
    t.add_argument("--min-repeat-ms", type=float, default=5.0)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--resume", help="an earlier run's timings: its timed functions are kept, "
                                    "the rest timed")
    t.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                   help="processes compiling the CUDA kernels before timing (0: at load)")
    t.add_argument("--cubin-cache", help="compiled kernels (default: BUNDLE/cubin_cache)")
    c = sub.add_parser("to-cache", help="manifest + timings -> profile cache (no TVM)")
    c.add_argument("--bundle", help="the bundle (its manifest.json)")
    c.add_argument("--manifest", help="the manifest, if not BUNDLE/manifest.json")
    c.add_argument("--timings", required=True)
    c.add_argument("--out", required=True, help="the cache file (replaced)")
    c.add_argument("--report", help="also write the summary (failures included) as JSON")
    args = parser.parse_args(argv)
    if args.command == "to-cache" and not (args.bundle or args.manifest):
        parser.error("to-cache needs --bundle or --manifest")
    return {"build": build, "time": time_ops, "to-cache": to_cache}[args.command](args)


if __name__ == "__main__":
    main()
