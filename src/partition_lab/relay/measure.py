"""Measure per-op CPU times on this machine with TVM, for the measured CPU cost model.

Each distinct op signature (op, argument shapes and dtypes, attributes) is built alone as a
one-call Relay function with TVM's ``llvm`` backend (the same code generator the CPU islands use)
and timed with the graph executor's ``time_evaluator`` (median of repeats). Results are cached
on disk keyed by signature and by this machine's CPU model, so a model is measured once.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
import tvm
from tvm import relay
from tvm.contrib import graph_executor

from .._io import cpu_name
from .relay_graph import RelayGraph
from .runtime import build_for_cpu

ProgressFn = Callable[[int, int, str], None]


def cache_path() -> Path:
    """Where measurements are cached: ``$PARTITION_LAB_CACHE/measurements/<cpu>.json``."""
    root = Path(os.environ.get("PARTITION_LAB_CACHE", Path.home() / ".cache" / "partition_lab"))
    cpu = cpu_name().replace(" ", "_").replace("/", "_")[:60] or "cpu"
    return root / "measurements" / f"{cpu}.json"


def measure_cpu_ops(
    rg: RelayGraph,
    nodes: Iterable[int] | None = None,
    *,
    cache: Path | None = None,
    number: int = 5,
    repeat: int = 3,
    progress: ProgressFn | None = None,
) -> dict[str, float]:
    """Seconds per op signature for ``nodes`` of ``rg`` (all nodes by default), measured here.

    Signatures already in the cache are not measured again; new ones are added to it.
    """
    from ..cost_models.measured import load_measurements, op_signature, save_measurements
    from ..errors import ProfileError

    cache = cache or cache_path()
    try:
        table = dict(load_measurements(cache).times_s)
    except ProfileError:
        table = {}  # no cache yet (or an unreadable one, which is rebuilt)
    wanted: dict[str, int] = {}
    for node in (range(len(rg.graph)) if nodes is None else nodes):
        wanted.setdefault(op_signature(rg.graph[node]), node)
    todo = [(sig, node) for sig, node in wanted.items() if sig not in table]
    for done, (sig, node) in enumerate(todo):
        if progress:
            progress(done, len(todo), rg.graph[node].op)
        table[sig] = time_single_op(rg.calls[node], number=number, repeat=repeat)
    if todo:
        save_measurements(cache, table, {"cpu": cpu_name(), "tvm": tvm.__version__,
                                         "method": "relay.build(llvm) per op, time_evaluator median"})
    return {sig: table[sig] for sig in wanted}


def time_single_op(call: relay.Call, *, number: int = 5, repeat: int = 3) -> float:
    """Median seconds of one Relay call built alone for llvm, on random inputs."""
    params: list[relay.Var] = []

    def fresh(expr: relay.Expr) -> relay.Expr:
        if isinstance(expr, relay.Tuple):
            return relay.Tuple([fresh(f) for f in expr.fields])
        var = relay.Var(f"a{len(params)}", expr.checked_type)
        params.append(var)
        return var

    body = relay.Call(call.op, [fresh(a) for a in call.args], call.attrs, call.type_args)
    mod = relay.transform.InferType()(tvm.IRModule.from_expr(relay.Function(params, body)))
    lib = build_for_cpu(mod)
    dev = tvm.cpu()
    module = graph_executor.GraphModule(lib["default"](dev))
    rng = np.random.default_rng(0)
    for var in params:
        ty = var.type_annotation
        shape = [int(d) for d in ty.shape]
        if "float" in ty.dtype:
            value = rng.standard_normal(shape).astype(ty.dtype)
        else:
            value = np.zeros(shape, dtype=ty.dtype)
        module.set_input(var.name_hint, value)
    timer = module.module.time_evaluator("run", dev, number=number, repeat=repeat, min_repeat_ms=5)
    return float(np.median(timer().results))


