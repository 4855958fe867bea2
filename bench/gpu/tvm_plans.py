"""Partition plans built by TVM, timed in turns: ``build`` here, ``run`` anywhere.

``build`` (here, in the Relax venv: apache-tvm 0.27 + partition_lab) plans each model on each
platform, builds every region of every plan with ``tvm.compile`` for its device (regions on GPU
devices for ``cuda`` sm_90, host islands for ``llvm``; ``--cpu``: all for llvm) and writes a
bundle: ``manifest.json``, ``libs/*.so``, a copy of this file as ``driver.py`` and, with
``--site``, a runtime-only TVM (``site/``: the recipe ``shared/recipes/tvm-cuda-on-device.md``).

``run`` (this file alone + runtime-only TVM + numpy; no compiler, no partition_lab) loads the
libraries, runs each plan's regions in order (``Tensor.copyto`` where a tensor crosses between
the GPU and the host) and times whole-plan runs end to end (inputs on the host -> outputs back
on the host) in turns: every round runs every plan of a model/platform, the order rotated each
round; the median per plan is reported, beside ``tvm_unpartitioned`` (the whole unprepared
model built by TVM for the GPU, one region). With ``build --vdevice`` each plan is also built
as one library with VDevices (``partition_lab.relax.vdevice``: GPU regions for cuda, host
islands for llvm, one ``tvm.compile``), the plan ``<name>@vdevice``, which ``run`` calls as one
VM over ``[gpu, host]`` in the same turns.

    # here: the CPU bundle the tests use, and the GPU bundle
    PYTHONPATH=src .venv-relax/bin/python bench/gpu/tvm_plans.py build --out /tmp/b --cpu
    PYTHONPATH=src .venv-relax/bin/python bench/gpu/tvm_plans.py build \\
        --out .gpu_bundle/tvm_plans --weights random --site --models zoo
    # there (or here with --cpu bundles):
    python3 .gpu_bundle/tvm_plans/driver.py run --bundle .gpu_bundle/tvm_plans --out $OUT/tvm_plans.json
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import os
import platform as _platform
import statistics
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np

HOST = "cpu"  # the host device's name in every platform
SLOW_S = 0.2  # a plan whose warm run takes longer runs once per turn, not --repeat times
SINGLE_S = 1.0  # a plan whose first run takes longer is timed by that run alone


# ---------------------------------------------------------------------------- runtime
def setup_tvm(site: str | None, cuda: bool, cubin_cache: str | None = None) -> Any:
    """Import TVM (a runtime-only copy from ``site`` if given) and make CUDA modules loadable.

    apache-tvm 0.27 keeps a library's kernels as CUDA source (``fmt == "cuda"``), compiled by
    the ``tvm_callback_cuda_compile`` callback when the library loads (about 3 s a library with
    NVRTC). With ``cubin_cache`` (a folder) each compiled kernel source is kept there by its
    hash, so :func:`precompile` can compile every library of a bundle in parallel processes
    first and the timing process only reads the results.
    """
    if site:
        sys.path.insert(0, str(Path(site).resolve()))
    import tvm
    import tvm_ffi

    lib_dir = Path(tvm.__file__).parent / "lib"
    runtime_only = not (lib_dir / "libtvm_compiler.so").exists()
    if runtime_only:
        names = ["libtvm_runtime_extra.so"] + (["libtvm_runtime_cuda.so"] if cuda else [])
        for name in names:
            ctypes.CDLL(str(lib_dir / name), ctypes.RTLD_GLOBAL)
    if cuda:
        # The default callback asks the compiler library for the current target, which
        # runtime-only mode lacks: name the arch.
        from tvm.support import nvcc

        cache = Path(cubin_cache) if cubin_cache else None

        @tvm_ffi.register_global_func("tvm_callback_cuda_compile", override=True)
        def _compile(code: str) -> bytes:
            path = cache / (hashlib.sha1(code.encode()).hexdigest() + ".cubin") if cache else None
            if path is not None and path.is_file():
                return path.read_bytes()
            binary = nvcc.compile_cuda(code, target_format="cubin", arch="sm_90",
                                       compiler="nvrtc")
            if path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
                staging = path.with_suffix(f".{os.getpid()}.tmp")
                staging.write_bytes(bytes(binary))
                staging.replace(path)  # atomic: parallel compilers of one source agree
            return binary
    return tvm


def _precompile_one(job: tuple[str | None, str, str]) -> str | None:
    """Load one library in a worker process, which compiles its kernels into the cache."""
    site, cache, lib = job
    try:
        tvm = setup_tvm(site, True, cache)
        tvm.runtime.load_module(lib)
        return None
    except Exception as exc:  # noqa: BLE001 - the timing process reports it when it loads
        return f"{Path(lib).name}: {type(exc).__name__}: {str(exc).strip()[-200:]}"


def precompile(libs: list[str], site: str | None, cache: str, workers: int) -> dict[str, Any]:
    """Compile the CUDA kernels of ``libs`` into ``cache`` with ``workers`` processes (spawned:
    no CUDA state is forked); what it took and the libraries that failed."""
    import concurrent.futures
    import multiprocessing

    start = time.perf_counter()
    cuda_libs = sorted(set(libs))
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max(1, workers), mp_context=ctx) as pool:
        errors = [e for e in pool.map(_precompile_one, [(site, cache, lib) for lib in cuda_libs])
                  if e]
    took = round(time.perf_counter() - start, 1)
    print(f"precompiled {len(cuda_libs)} CUDA libraries with {workers} processes in {took} s"
          + (f", {len(errors)} failed" if errors else ""), flush=True)
    return {"libraries": len(cuda_libs), "workers": workers, "seconds": took, "errors": errors}


def random_array(name: str, shape: list[int], dtype: str, seed: int, scale: float) -> np.ndarray:
    rng = np.random.default_rng(seed + zlib.crc32(name.encode()))
    return (rng.standard_normal(shape) * scale).astype(dtype)


class Entry:
    """One model on one platform: its libraries, weights and inputs loaded, its plans ready."""

    def __init__(self, tvm: Any, bundle: Path, entry: dict[str, Any], cuda: bool, seed: int,
                 modules: dict[str, Any]) -> None:
        from tvm.runtime.vm import VirtualMachine  # not tvm.relax: that needs the compiler

        self.tvm, self.entry = tvm, entry
        self.host = tvm.cpu(0)
        # the GPU's tensors: cuda(0), or a second handle on the CPU in --cpu bundles (the
        # plan's copies still happen where a tensor crosses between GPU and host regions)
        self.gpu = tvm.cuda(0) if cuda else tvm.cpu(0)
        self.cuda = cuda
        values: dict[str, np.ndarray] = {}
        if entry.get("weights_file"):
            with np.load(bundle / entry["weights_file"]) as data:
                values = {k: data[k] for k in data.files}
        self.weight_arrays = {
            name: values[name] if name in values else random_array(name, spec["shape"],
                                                                   spec["dtype"], seed, 0.05)
            for name, spec in entry["weights"].items()}
        self.inputs = {i["name"]: random_array("input:" + i["name"], i["shape"], i["dtype"],
                                               seed, 1.0) for i in entry["inputs"]}
        self.on_device: dict[tuple[str, str], Any] = {}
        self.plans: dict[str, list[dict[str, Any]]] = {}
        self.vdevice: dict[str, dict[str, Any]] = {}
        for plan in entry["plans"]:
            if plan.get("vdevice"):
                self.vdevice[plan["name"]] = self._vdevice(plan["vdevice"], bundle, modules)
                self.plans[plan["name"]] = []
                continue
            regions = []
            for region in plan["regions"]:
                where = "host" if region["device"] == HOST else "gpu"
                dev = self.host if where == "host" else self.gpu
                lib = region["lib"]
                if lib not in modules:
                    modules[lib] = tvm.runtime.load_module(str(bundle / lib))
                vm = VirtualMachine(modules[lib], dev)
                weights = [self._weight(name, where, dev) for name in region["weights"]]
                regions.append({"fn": vm["main"], "where": where, "dev": dev,
                                "inputs": region["inputs"], "outputs": region["outputs"],
                                "weights": weights})
            self.plans[plan["name"]] = regions
        self.host_inputs = {k: tvm.runtime.tensor(v, self.host) for k, v in self.inputs.items()}
        self.copies: dict[str, int] = {}

    def _vdevice(self, record: dict[str, Any], bundle: Path, modules: dict[str, Any]
                 ) -> dict[str, Any]:
        """A plan built as one library with VDevices (GPU regions on cuda, host islands on
        llvm): one VM over ``[gpu, host]``, in the library's vdevice order. A ``--cpu`` bundle's
        two llvm vdevices are ``cpu(0)`` and ``cpu(1)``."""
        from tvm.runtime.vm import VirtualMachine

        lib = record["lib"]
        if lib not in modules:
            modules[lib] = self.tvm.runtime.load_module(str(bundle / lib))
        host = self.host if self.cuda else self.tvm.cpu(1)
        devs = {"gpu": self.gpu, "host": host}
        vm = VirtualMachine(modules[lib], [self.gpu, host])
        consts = {n: np.asarray(c["data"], dtype=c["dtype"]).reshape(c["shape"])
                  for n, c in record["constants"].items()}
        params = []
        for name, where in record["params"]:
            if name in consts:
                params.append(self.tvm.runtime.tensor(consts[name], devs[where]))
            else:
                params.append(self._weight(name, "vd-" + where, devs[where]))
        inputs = [self.tvm.runtime.tensor(self.inputs[n], host) for n in record["inputs"]]
        return {"fn": vm["main"], "args": inputs + params, "copies": record["copies"]}

    def _weight(self, name: str, where: str, dev: Any) -> Any:
        key = (name, where)
        if key not in self.on_device:
            self.on_device[key] = self.tvm.runtime.tensor(self.weight_arrays[name], dev)
        return self.on_device[key]

    def run(self, name: str) -> list[Any]:
        """One end-to-end run of plan ``name``: host inputs -> regions -> outputs on the host
        (a VDevice plan: one call of its ``main``, which copies where tensors cross)."""
        if name in self.vdevice:
            vd = self.vdevice[name]
            result = vd["fn"](*vd["args"])
            if self.cuda:
                self.gpu.sync()
            self.copies[name] = vd["copies"]
            return list(result) if not hasattr(result, "numpy") else [result]
        env = {k: (t, "host") for k, t in self.host_inputs.items()}
        copies = 0
        for region in self.plans[name]:
            args = []
            for tensor_name in region["inputs"]:
                tensor, where = env[tensor_name]
                if where != region["where"]:
                    tensor = tensor.copyto(region["dev"])
                    env[tensor_name] = (tensor, region["where"])
                    copies += 1
                args.append(tensor)
            result = region["fn"](*args, *region["weights"])
            outs = list(result) if not hasattr(result, "numpy") else [result]
            for tensor_name, tensor in zip(region["outputs"], outs, strict=True):
                env[tensor_name] = (tensor, region["where"])
        outputs = []
        for plan in self.entry["plans"]:
            if plan["name"] == name:
                for tensor_name in plan["outputs"]:
                    tensor, where = env[tensor_name]
                    if where != "host":
                        tensor = tensor.copyto(self.host)
                        copies += 1
                    outputs.append(tensor)
        if self.cuda:
            self.gpu.sync()
        self.copies[name] = copies
        return outputs

    def outputs(self, name: str) -> list[np.ndarray]:
        return [t.numpy() for t in self.run(name)]


def time_entry(entry: Entry, budget_s: float, repeat: int, min_rounds: int, max_rounds: int,
               warmup: int, single_s: float = SINGLE_S) -> dict[str, Any]:
    """Time every plan of ``entry`` in turns (order rotated each round) within ``budget_s``.

    Each plan's first run gives its outputs (compared with the first plan's) and its first
    time; a plan whose first run takes longer than ``single_s`` (host islands of untuned TVM
    code: seconds to tens of seconds) keeps that one run as its sample and leaves the rounds,
    whose budget it would spend alone (its error, a first run's, is small beside the orders of
    magnitude between it and the GPU plans)."""
    names = list(entry.plans)
    reps: dict[str, int] = {}
    outputs: dict[str, list[np.ndarray]] = {}
    times: dict[str, list[float]] = {n: [] for n in names}
    single = []
    for name in names:
        t0 = time.perf_counter()
        outputs[name] = [t.numpy() for t in entry.run(name)]
        took = time.perf_counter() - t0
        if took > single_s:
            times[name].append(took)
            single.append(name)
            continue
        for _ in range(warmup - 1):
            t0 = time.perf_counter()
            entry.run(name)
            took = time.perf_counter() - t0
        reps[name] = repeat if took < SLOW_S else 1  # slow plans: once a turn
    turns = [n for n in names if n not in single]
    start = time.perf_counter()
    rounds = 0
    while turns and rounds < max_rounds:
        elapsed = time.perf_counter() - start
        if elapsed >= budget_s and (rounds >= min_rounds or elapsed >= 2 * budget_s):
            break
        k = rounds % len(turns)
        for name in turns[k:] + turns[:k]:
            for _ in range(reps[name]):
                t0 = time.perf_counter()
                entry.run(name)
                times[name].append(time.perf_counter() - t0)
        rounds += 1
    reference = names[0]
    ref_out = outputs[reference]
    plans = []
    for plan in entry.entry["plans"]:
        name = plan["name"]
        ms = [t * 1e3 for t in times[name]]
        got = outputs[name]
        diff = max((_max_rel(a, b) for a, b in zip(ref_out, got, strict=True)), default=0.0)
        plans.append({
            "name": name, "also": plan.get("also", []), "strategy": plan.get("strategy"),
            "predicted_ms": plan.get("predicted_ms"), "devices": plan.get("devices"),
            "regions": len(regions_of(plan)), "vdevice": bool(plan.get("vdevice")),
            "gpu_regions": sum(r["device"] != HOST for r in regions_of(plan)),
            "copies": entry.copies.get(name), "repeat": reps.get(name, 1),
            "single_run": name in single,
            "median_ms": statistics.median(ms),
            "min_ms": min(ms), "mean_ms": statistics.fmean(ms), "n": len(ms),
            "max_rel_diff_vs_" + reference: diff})
    return {"rounds": rounds, "repeat": repeat, "timing_s": round(time.perf_counter() - start, 2),
            "plans": plans}


def regions_of(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """A plan's regions: its libraries', or (a VDevice plan) those its one library holds."""
    return plan["regions"] or plan.get("vdevice", {}).get("regions", [])


def _max_rel(a: np.ndarray, b: np.ndarray) -> float | None:
    a, b = a.astype("float64"), b.astype("float64")
    if a.shape != b.shape:
        return None
    scale = float(np.nanmax(np.abs(a))) if a.size else 0.0
    diff = float(np.nanmax(np.abs(a - b))) if a.size else 0.0
    if not np.isfinite(scale) or not np.isfinite(diff):
        return None
    return diff / scale if scale > 0 else diff


def run(args: argparse.Namespace) -> dict[str, Any]:
    bundle = Path(args.bundle)
    manifest = json.loads((bundle / "manifest.json").read_text())
    cuda = manifest["mode"] == "cuda"
    if args.cpu and cuda:
        raise SystemExit(f"{bundle} was built for cuda; build with --cpu to run on the CPU")
    site = args.site or (str(bundle / "site") if (bundle / "site").is_dir() else None)
    start_all = time.perf_counter()
    entries = [e for e in manifest["models"]
               if not args.only or any(s in e["key"] for s in args.only)]
    cache = str(Path(args.cubin_cache or bundle / "cubin_cache"))
    precompiled = None
    if cuda and args.workers > 0:
        precompiled = precompile([str(bundle / r["lib"]) for e in entries for p in e["plans"]
                                  for r in p["regions"] if r["target"] == "cuda"]
                                 + [str(bundle / p["vdevice"]["lib"]) for e in entries
                                    for p in e["plans"] if p.get("vdevice")],
                                 site, cache, args.workers)
    tvm = setup_tvm(site, cuda, cache)
    start_timing = time.perf_counter()  # the budget is for loading and timing, not compiling
    results: dict[str, Any] = {
        "format": manifest["format"] + "/results", "mode": manifest["mode"],
        "host": _platform.node(), "python": sys.version.split()[0], "tvm": tvm.__version__,
        "budget_s": args.budget_s, "entries": [], "precompiled": precompiled}
    if cuda:
        results["gpu"] = _gpu_name()
    modules: dict[str, Any] = {}
    for k, raw in enumerate(entries):
        left = args.budget_s - (time.perf_counter() - start_timing)
        share = max(left / (len(entries) - k) - 4.0, 1.0)  # ~4 s for loading each entry
        t0 = time.perf_counter()
        record: dict[str, Any] = {"key": raw["key"], "model": raw["model"],
                                  "platform": raw["platform"]}
        try:
            entry = Entry(tvm, bundle, raw, cuda, manifest.get("seed", 0), modules)
            record["load_s"] = round(time.perf_counter() - t0, 2)
            record |= time_entry(entry, share, args.repeat, args.min_rounds, args.max_rounds,
                                 args.warmup, args.single_s)
            del entry
        except Exception as exc:  # noqa: BLE001 - one failing entry must not lose the others
            record["error"] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1:]}"
        results["entries"].append(record)
        _print_entry(record)
        if args.out:
            _write(args.out, results | {"total_s": round(time.perf_counter() - start_all, 1)})
    results["total_s"] = round(time.perf_counter() - start_all, 1)
    if args.out:
        _write(args.out, results)
    return results


def _write(path: str, data: dict[str, Any]) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(data, indent=1))


def _gpu_name() -> str:
    try:
        import subprocess

        return subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception:  # noqa: BLE001
        return ""


def _print_entry(record: dict[str, Any]) -> None:
    if "error" in record:
        print(f"{record['key']}: ERROR {record['error']}", flush=True)
        return
    print(f"{record['key']}: load {record['load_s']} s, {record['rounds']} rounds", flush=True)
    for p in sorted(record["plans"], key=lambda p: p["median_ms"]):
        pred = "" if p["predicted_ms"] is None else f" predicted {p['predicted_ms']:.3f} ms"
        print(f"  {p['name']:<18} {p['median_ms']:9.3f} ms  regions {p['regions']:>3} "
              f"copies {p['copies']:>3}{pred}", flush=True)


# ---------------------------------------------------------------------------- build (here)
def build(args: argparse.Namespace) -> None:
    from partition_lab.profiling import relax_build

    relax_build.env_compile_mode()
    relax_build.LibraryCache.tensor_cores_crashed = args.tensor_cores == "off"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "driver.py").write_text(Path(__file__).read_text())
    if args.site:
        copy_runtime(out / "site")
    entries = []
    timings = {}
    for name, loader in model_list(args.models):
        start = time.perf_counter()
        print(f"{name}:", flush=True)
        try:
            mod = loader()
            entries += relax_build.build_model(
                mod, name, args.platforms, out, cpu=args.cpu, weights=args.weights,
                strategies=args.strategies, max_plans=args.max_plans, log=print,
                vdevice=args.vdevice)
        except Exception as exc:  # noqa: BLE001 - report and go on with the next model
            print(f"  {name}: FAILED {type(exc).__name__}: {str(exc).strip()[-400:]}")
            timings[name] = {"error": f"{type(exc).__name__}: {str(exc).strip()[-400:]}"}
            continue
        timings[name] = {"build_s": round(time.perf_counter() - start, 1)}
        print(f"  {name}: {timings[name]['build_s']} s", flush=True)
        relax_build.write_manifest(out, entries, cpu=args.cpu, extra={"build": timings})
    relax_build.write_manifest(out, entries, cpu=args.cpu, extra={"build": timings})


def model_list(spec: list[str]) -> list[tuple[str, Any]]:
    """``tests`` (tests/relax/models.py), ``zoo`` (cached ONNX files) or ONNX paths."""
    import partition_lab

    found = []
    for item in spec:
        if item == "tests" or item.startswith("tests:"):
            sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "relax"))
            import models

            names = item.split(":", 1)[1].split(",") if ":" in item else ["convnet", "mlp"]
            for n in names:
                found.append((n, lambda n=n: partition_lab.load_model(models.MODELS[n]())[0]))
        elif item == "zoo":
            for n, path in ZOO.items():
                found.append((n, lambda p=path: partition_lab.load_model(str(ZOO_DIR / p))[0]))
        else:
            found.append((Path(item).stem,
                          lambda p=item: partition_lab.load_model(p)[0]))
    return found


ZOO_DIR = Path(os.environ.get("PARTITION_LAB_ZOO", Path.home() / ".cache/partition_lab/zoo"))
ZOO: dict[str, str] = {}  # filled below: name -> path under ZOO_DIR


def copy_runtime(dest: Path) -> None:
    """A runtime-only TVM (the recipe's step 2) under ``dest``."""
    import shutil

    import tvm

    site = Path(tvm.__file__).parent.parent
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    skip = shutil.ignore_patterns("__pycache__", "libtvm_compiler.so", "3rdparty", "src")
    shutil.copytree(site / "tvm", dest / "tvm", ignore=skip)
    for extra in ("tvm_ffi", "ml_dtypes"):
        shutil.copytree(site / extra, dest / extra, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(site / "typing_extensions.py", dest / "typing_extensions.py")


def main(argv: list[str] | None = None) -> Any:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="plan and build (here: apache-tvm + partition_lab)")
    b.add_argument("--out", required=True)
    b.add_argument("--models", nargs="+", default=["tests"])
    b.add_argument("--platforms", nargs="+", default=["tensorcore", "neuron"])
    b.add_argument("--strategies", nargs="+", default=["greedy", "cost", "min_size", "no_mac"])
    b.add_argument("--max-plans", type=int, default=5)
    b.add_argument("--weights", choices=("file", "random"), default="file")
    b.add_argument("--cpu", action="store_true", help="every region for llvm")
    b.add_argument("--site", action="store_true", help="copy a runtime-only TVM to OUT/site")
    b.add_argument("--vdevice", action="store_true",
                   help="each plan also as one library with VDevices (GPU regions cuda, host "
                        "islands llvm, one tvm.compile): plan '<name>@vdevice', timed beside it")
    b.add_argument("--tensor-cores", choices=("try", "off"), default="try",
                   help="dlight's Tensor Core matmul rule: try it (in a child; off for the rest "
                        "of the build after a crash) or off")
    r = sub.add_parser("run", help="load a bundle and time its plans (runtime-only TVM)")
    r.add_argument("--bundle", required=True)
    r.add_argument("--out", help="results JSON")
    r.add_argument("--site", help="runtime-only TVM folder (default: BUNDLE/site if present)")
    r.add_argument("--cpu", action="store_true", help="insist on a --cpu bundle")
    r.add_argument("--budget-s", type=float, default=400.0, help="timing budget, all entries")
    r.add_argument("--repeat", type=int, default=3, help="runs per plan per turn")
    r.add_argument("--min-rounds", type=int, default=3)
    r.add_argument("--max-rounds", type=int, default=200)
    r.add_argument("--warmup", type=int, default=2)
    r.add_argument("--single-s", type=float, default=SINGLE_S,
                   help="a plan whose first run takes longer is timed by that run alone")
    r.add_argument("--only", nargs="*", help="entries whose key contains one of these")
    r.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                   help="processes compiling the CUDA kernels before timing (0: at load)")
    r.add_argument("--cubin-cache", help="compiled kernels (default: BUNDLE/cubin_cache)")
    args = parser.parse_args(argv)
    return build(args) if args.command == "build" else run(args)


if __name__ == "__main__":
    main()
