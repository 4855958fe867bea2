"""Measure this machine's CPU for the ``local_cpu`` profile.

Run ``python -m partition_lab.cost_models.measure_host`` and copy the two figures into
``profiles/local_cpu.toml`` (the file records the command, the date and the result). Peak FP32
throughput is a numpy (BLAS) matmul; memory bandwidth is a large array copy, counting the bytes
read and written. Both are best-of-``repeats`` to damp noise from other processes.
"""

from __future__ import annotations

import datetime
import os
import platform
import time
from collections.abc import Callable

import numpy as np


def measure_matmul_flops(n: int = 2048, repeats: int = 5) -> float:
    """Best FP32 FLOP/s of an ``n x n`` numpy matmul."""
    rng = np.random.default_rng(0)
    a = rng.random((n, n), dtype=np.float32)
    b = rng.random((n, n), dtype=np.float32)
    a @ b  # warm-up: thread pool, page faults
    best = min(_timed(lambda: a @ b) for _ in range(repeats))
    return 2.0 * n ** 3 / best


def measure_copy_bandwidth(mib: int = 256, repeats: int = 5) -> float:
    """Best bytes/s of copying a ``mib`` MiB array (read + write counted)."""
    src = np.ones(mib * 2 ** 20 // 8, dtype=np.float64)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    best = min(_timed(lambda: np.copyto(dst, src)) for _ in range(repeats))
    return 2.0 * src.nbytes / best


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    flops = measure_matmul_flops()
    bandwidth = measure_copy_bandwidth()
    print(f"date: {datetime.date.today().isoformat()}  cpu: {platform.processor() or '?'} "
          f"x {os.cpu_count()}  load average: {os.getloadavg()[0]:.2f}")
    print(f"matrix_flops     = {flops:.3g} FLOP/s  (numpy fp32 2048x2048 matmul, best of 5)")
    print(f"memory_bandwidth = {bandwidth:.3g} B/s  (256 MiB copy, read+write, best of 5)")


if __name__ == "__main__":
    main()
