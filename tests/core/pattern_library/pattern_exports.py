"""Small PyTorch modules through ``load_model`` (``torch.export`` -> ONNX -> Relay), for the
pattern library's tests: partitioned and validated, their ``Composite`` functions counted,
computed region by region against PyTorch, and their units profiled whole."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import numpy as np
import pytest

from partition_lab.errors import PartitionLabError

try:  # hides Triton from torch first: importing it after TVM crashes the process
    from partition_lab.relay.frontends._torch import require_torch

    torch = require_torch("the pattern library's export tests")
except PartitionLabError as missing:
    pytest.skip(str(missing), allow_module_level=True)

import partition_lab  # noqa: E402
from partition_lab.relay.frontends import load_model  # noqa: E402

RTOL, ATOL = 1e-4, 1e-5


def exported(module: Any, example: Any) -> tuple[Any, dict]:
    """``module`` (seeded, in eval mode) as ``load_model`` gives it."""
    return load_model(module.eval(), example)


def partitioned(mod: Any, params: dict, platform: Any) -> Any:
    result = partition_lab.partition(mod, platform, params=params)
    result.plan.validate()
    return result


def composites(mod: Any) -> Counter:
    """Composite function names inside the module's Compiler functions, with their counts."""
    import tvm
    from tvm import relay

    found: Counter = Counter()

    def visit(expr: Any) -> None:
        if isinstance(expr, relay.Function) and expr.attrs is not None and \
                "Composite" in expr.attrs:
            found[str(expr.attrs["Composite"])] += 1

    for gvar in mod.get_global_vars():
        func = mod[gvar]
        if func.attrs is not None and "Compiler" in func.attrs:
            tvm.relay.analysis.post_order_visit(func.body, visit)
    return found


def assert_matches_torch(result: Any, module: Any, x: Any, name: str = "x") -> None:
    """The partitioned program, run region by region on TVM's llvm, computes what PyTorch does."""
    from partition_lab.relay.runtime import RegionExecutor

    got = RegionExecutor(result, opt_level=0).run({name: x.numpy()})
    with torch.no_grad():
        expected = module(x).numpy()
    np.testing.assert_allclose(got[0], expected, rtol=RTOL, atol=ATOL * np.abs(expected).max())


def assert_profiled_whole(mod: Any, params: dict, platform: Any, pattern: str) -> int:
    """Each unit of ``pattern`` on ``platform``'s accelerator is timed as one unit by the
    PyTorch runner (its ops in one timed call), and the profiled cost model prices it at that
    time, not as its ops' sum. Returns how many units were checked."""
    from partition_lab.api import analyze
    from partition_lab.core.patterns import composite_node
    from partition_lab.cost_models.base import node_times
    from partition_lab.cost_models.profiled import ProfiledCostModel
    from partition_lab.cost_models.signatures import op_signature
    from partition_lab.profiling import profile
    from partition_lab.profiling.cache import ProfileCache

    analysis = analyze(mod, platform, params=params)
    graph = analysis.graph
    units = [u for u in analysis.support.units if u.name == pattern]
    assert units, f"no {pattern} unit"
    device = analysis.platform.accelerators[0].name
    cache = ProfileCache({})
    profile((mod, params), analysis.platform, cache=cache, strategies=["greedy"],
            runner="torch", runner_options={"repeats": 3, "batch_s": 0.001}, graphs=False)
    (entry,) = cache.devices.values()
    model = ProfiledCostModel(cache.to_dict(), analysis.platform)
    whole = node_times(model, graph, analysis.platform, device, analysis.support.units)
    by_op = node_times(model, graph, analysis.platform, device)
    for unit in units:
        composite = composite_node(graph, unit)
        stats = entry.ops[op_signature(composite)]
        assert stats.op == f"composite:{pattern}"
        assert math.isfinite(stats.median_s) and stats.median_s > 0
        priced = sum(whole[n] for n in unit.nodes)
        assert priced == pytest.approx(model.op_time(composite, device), rel=1e-9)
        assert priced != pytest.approx(sum(by_op[n] for n in unit.nodes), rel=1e-6)
    return len(units)
