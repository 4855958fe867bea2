"""Measure the H200 profile on the GPU machine: per-op times on the GPU and on the host CPU, copy
times by size, per-region overhead (runs THERE; also runs here with --device cpu for a check).

Every op signature of the bundles' graphs (``bench/gpu/export_bundles.py``) is timed alone with
the executor's own kernels (:func:`partition_lab.executors.benchmark.op_callable`): back-to-back calls,
then one synchronisation, divided by the count, which is what an op costs inside an eagerly
launched region (the larger of its launch and its kernel). Copies (``h2d``/``d2h``, what the
cost model uses) are timed inside executor runs of a two-region plan, as the executor copies
(pageable host memory); each copy alone (``*_raw``) and from pinned memory are kept for
comparison.

    PYTHONPATH=src python3 bench/gpu/measure_profile.py --bundles .gpu_bundle/roofline \\
        --out $OUT/h200_measured.json --budget 240
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from partition_lab.core.ops import op_class
from partition_lab.cost_models import get_cost_model
from partition_lab.cost_models.measured import op_signature
from partition_lab.cost_models.measured_gpu import SCHEMA
from partition_lab.executors.benchmark import op_callable
from partition_lab.executors.graph_io import read_bundle
from partition_lab.executors.placement import transfer
from partition_lab.executors.torch_exec import PlanExecutor
from partition_lab.profiling.runners import TorchRunner, relu_chain
from partition_lab.targets import get_platform

SIZES = [2 ** k for k in range(8, 29, 2)]  # 256 B .. 256 MiB


def environment(device: str) -> dict[str, Any]:
    """Date, GPU, driver and software versions, host CPU."""
    meta: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "torch": torch.__version__, "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "python": platform.python_version(), "cpu_threads": torch.get_num_threads(),
        "host_cpu": _cpu_name(), "device": device,
        "executor": "partition_lab.executors.torch_exec: PyTorch eager ops; GPU in the graph's dtype "
                    "(fp16, channels-last convs through cuDNN/cuBLAS), CPU with PyTorch CPU "
                    "kernels (float16 computed as float32), pageable copies",
        "method": "each op signature alone: warm-up, then n back-to-back calls and one "
                  "synchronisation, time / n; median of 3 such batches",
    }
    if device.startswith("cuda"):
        meta["gpu"] = torch.cuda.get_device_name()
        meta["driver"] = _nvidia_smi("driver_version")
        meta["gpu_clocks"] = _nvidia_smi("clocks.sm,clocks.max.sm,power.limit")
    return meta


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return f"{line.split(':', 1)[1].strip()} ({os.cpu_count()} logical CPUs)"
    except OSError:
        pass
    return platform.processor()


def _nvidia_smi(fields: str) -> str:
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30, check=False)
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def collect_signatures(bundle_dir: Path) -> dict[str, tuple[Any, Any]]:
    """Unique op signatures over all bundles, model order kept: ``{sig: (node, refs)}``."""
    order = json.loads((bundle_dir / "order.json").read_text()) if (
        bundle_dir / "order.json").is_file() else sorted(p.name[:-8] for p in bundle_dir.glob(
            "*.json.gz"))
    found: dict[str, tuple[Any, Any]] = {}
    for name in order:
        if not (bundle_dir / f"{name}.json.gz").is_file():
            print(f"  no bundle for {name}", flush=True)
            continue
        bundle = read_bundle(bundle_dir / f"{name}.json.gz")
        for node, refs in zip(bundle.graph.nodes, bundle.bindings, strict=True):
            found.setdefault(op_signature(node), (node, refs))
    return found


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def time_calls(fn: Any, device: str, target_s: float, max_calls: int) -> float:
    """Seconds per call of ``fn`` in a back-to-back batch (median of three batches)."""
    fn()
    sync(device)
    start = time.perf_counter()
    fn()
    sync(device)
    single = max(time.perf_counter() - start, 1e-7)
    calls = int(min(max(target_s / single, 1), max_calls))
    batches = []
    for _ in range(3):
        sync(device)
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        sync(device)
        batches.append((time.perf_counter() - start) / calls)
    return statistics.median(batches)


def measure_ops(signatures: dict[str, tuple[Any, Any]], device: str, kind: str,
                deadline: float, target_s: float) -> dict[str, float]:
    times: dict[str, float] = {}
    for i, (sig, (node, refs)) in enumerate(signatures.items()):
        if time.perf_counter() > deadline:
            print(f"  {kind}: budget reached after {i}/{len(signatures)} signatures", flush=True)
            break
        try:
            fn = op_callable(node, refs, device=device)
            times[sig] = time_calls(fn, device, target_s, 200)
        except Exception as err:  # noqa: BLE001 - one odd op must not lose the whole profile
            print(f"  {kind}: {node.op} failed: {err}", flush=True)
        del fn
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return times


def measure_executor_copies(device: str) -> dict[str, list[list[float]]]:
    """Copy times by size as the executor's runs see them, float16 payloads: the profiler's own
    probe (:meth:`partition_lab.profiling.runners.TorchRunner.measure_copies`)."""
    curves = TorchRunner(device).measure_copies("host", "gpu", dtype="float16", sizes=SIZES)
    out = {"h2d": [list(p) for p in curves["host->gpu"]],
           "d2h": [list(p) for p in curves["gpu->host"]]}
    for (n, up), (_, down) in zip(out["h2d"], out["d2h"], strict=True):
        print(f"  executor copy {int(n):>10} B: h2d {up * 1e6:.1f} us, d2h {down * 1e6:.1f} us",
              flush=True)
    return out


def measure_transfers(device: str) -> dict[str, list[list[float]]]:
    """Copy times by size, float16 payloads, each copy alone: pageable (``h2d_raw``: what
    :func:`transfer` does, conversion to the CPU's float32 included) and pinned."""
    curves: dict[str, list[list[float]]] = {k: [] for k in ("h2d", "d2h", "h2d_pinned",
                                                            "d2h_pinned")}
    for nbytes in SIZES:
        host = torch.randn(nbytes // 2).to(torch.float16)
        gpu = host.to(device)
        host32 = host.float()
        pinned = host.pin_memory()
        pinned_out = torch.empty_like(pinned)
        cases = {
            # The executor's CPU side computes float16 tensors as float32: it converts on copy.
            "h2d": lambda h=host32: transfer(h, device, "float16", torch.float16),
            "d2h": lambda g=gpu: transfer(g, "cpu", "float16", torch.float32),
            "h2d_pinned": lambda p=pinned: p.to(device, non_blocking=True),
            "d2h_pinned": lambda g=gpu, o=pinned_out: o.copy_(g, non_blocking=True),
        }
        for name, fn in cases.items():
            samples = []
            for _ in range(7 if nbytes < 2 ** 24 else 3):
                sync(device)
                start = time.perf_counter()
                fn()
                sync(device)
                samples.append(time.perf_counter() - start)
            curves[name].append([float(nbytes), statistics.median(samples)])
        print(f"  copy {nbytes:>10} B: " + ", ".join(
            f"{k} {v[-1][1] * 1e6:.1f} us" for k, v in curves.items()), flush=True)
    return curves


def measure_region_overhead(device: str) -> dict[str, float]:
    """A region's fixed cost.

    GPU: a one-op region (a tiny relu) ended by a synchronisation, minus the relu alone.
    CPU: a CPU island starts after the host waited for the GPU (a copy to the host), and by
    then PyTorch's CPU thread pool may have gone to sleep: a multi-threaded op (layer norm of
    128 x 768) right after such a wait, minus the same op run back to back; the mean over 40
    trials, since the wake-ups come and go.
    """
    x = torch.randn(16, device=device)
    op_alone = time_calls(lambda: torch.relu(x), device, 0.01, 2000)
    region = time_calls(lambda: (torch.relu(x), sync(device)), device, 0.01, 2000)
    data, ones, zeros = torch.randn(1, 128, 768), torch.ones(768), torch.zeros(768)

    def layer_norm() -> Any:
        return F.layer_norm(data, (768,), ones, zeros)

    hot = time_calls(layer_norm, "cpu", 0.01, 2000)
    after_wait = []
    for _ in range(40):
        if device.startswith("cuda"):
            torch.cuda._sleep(2_000_000)  # about 1 ms of GPU work for the host to wait on
            torch.cuda.synchronize()
        else:
            time.sleep(0.001)
        start = time.perf_counter()
        layer_norm()
        after_wait.append(time.perf_counter() - start)
    return {"accel": max(region - op_alone, 0.0),
            "cpu": max(statistics.mean(after_wait) - hot, 0.0)}


def measure_executor_overhead(device: str, length: int = 200) -> dict[str, dict[str, float]]:
    """What the executor adds per op: a chain of ``length`` tiny relus run by
    :class:`PlanExecutor`, per op, against the same relu called alone.

    ``host_per_op_s`` is the time per op of that chain (the executor's bookkeeping plus a trivial
    launch): on the GPU no op in a region can take less, since launches are issued one by one.
    ``overhead_per_op_s`` is what the chain adds to the relu alone: on the CPU, where an op runs
    while it is issued, every op pays it on top of its measured time.
    """
    result = {}
    for kind, dev in (("accel", device), ("cpu", "cpu")):
        graph, bindings = relu_chain(length)
        executor = PlanExecutor(graph, None, bindings, {}, device=dev)
        inputs = {"x": np.ones(16, dtype="float32")}
        per_op = time_calls(lambda e=executor, i=inputs: e.run(i), dev, 0.05, 200) / length
        x = torch.ones(16, device=dev)
        alone = time_calls(lambda x=x: torch.relu(x), dev, 0.01, 2000)
        result[kind] = {"host_per_op_s": per_op, "overhead_per_op_s": max(per_op - alone, 0.0)}
    return result


def roofline_info(signatures: dict[str, tuple[Any, Any]]) -> dict[str, dict[str, Any]]:
    """Per signature: op, op class and the H200 roofline's estimates (for fallback scaling)."""
    roofline = get_cost_model(get_platform("tensorcore"), accel_profile="h200")
    return {sig: {"op": node.op, "class": op_class(node),
                  "roofline_accel_s": roofline.op_time(node, "tensorcore"),
                  "roofline_cpu_s": roofline.op_time(node, "cpu")}
            for sig, (node, _) in signatures.items()}


def write(path: Path, profile: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(profile, indent=1, sort_keys=False))
    tmp.replace(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundles", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--budget", type=float, default=240.0, help="seconds for op timing")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    signatures = collect_signatures(args.bundles)
    print(f"{len(signatures)} op signatures", flush=True)
    profile: dict[str, Any] = {
        "schema": SCHEMA, "meta": environment(args.device) | {"command": " ".join(sys.argv)},
        "ops": {"accel": {}, "cpu": {}}, "op_info": roofline_info(signatures),
        "transfers": {}, "executor_transfers": "pageable", "region_overhead_s": {},
    }
    if args.device.startswith("cuda"):
        alone = measure_transfers(args.device)
        profile["transfers"] = {"h2d_raw": alone.pop("h2d"), "d2h_raw": alone.pop("d2h"),
                                **alone, **measure_executor_copies(args.device)}
    profile["region_overhead_s"] = measure_region_overhead(args.device)
    profile["executor_op_overhead"] = measure_executor_overhead(args.device)
    print(f"region overhead {profile['region_overhead_s']}, per op "
          f"{profile['executor_op_overhead']}", flush=True)
    write(args.out, profile)
    gpu_share = 0.3 if args.device.startswith("cuda") else 0.0
    profile["ops"]["accel"] = measure_ops(signatures, args.device, "accel",
                                          start + args.budget * gpu_share, 0.02)
    print(f"accel ops: {len(profile['ops']['accel'])} in {time.perf_counter() - start:.0f} s",
          flush=True)
    write(args.out, profile)
    profile["ops"]["cpu"] = measure_ops(signatures, "cpu", "cpu", start + args.budget, 0.05)
    print(f"cpu ops: {len(profile['ops']['cpu'])} in {time.perf_counter() - start:.0f} s",
          flush=True)
    profile["meta"]["elapsed_s"] = time.perf_counter() - start
    write(args.out, profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
