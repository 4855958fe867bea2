"""The Relay adapter (TVM 0.19): what :mod:`partition_lab.pipeline` asks of an IR, for Relay.

Checks and binding (:func:`check_module`, :func:`bind_params`), preparation through the
prepared-module cache (:func:`~.frontends._cache.cached_prepare`, numeric hazards found while
folding), the OpGraph (:mod:`.relay_graph`), outlining (:mod:`.passes.outline`) and the measured
choice's runner (the PyTorch executor on the plan's graph).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import tvm
from tvm import relay

from ..core.hazards import NumericHazard
from ..core.plan import PartitionPlan
from ..errors import ArgumentError
from .frontends._cache import Deferred, cached_prepare
from .passes.outline import outline
from .passes.prepare import prepare
from .relay_graph import RelayGraph, relay_graph


def check_module(mod: object) -> None:
    """:class:`ArgumentError` unless ``mod`` is an IRModule with a ``main`` function."""
    if isinstance(mod, Deferred):  # the command line's cached model, checked when written
        return
    if not isinstance(mod, tvm.IRModule):
        raise ArgumentError(
            f"mod must be a tvm.IRModule (as load_model returns it), not {type(mod).__name__}; "
            "load the model first: mod, params = partition_lab.load_model(path)")
    if "main" not in [gvar.name_hint for gvar in mod.get_global_vars()]:
        raise ArgumentError("mod has no 'main' function; partition_lab partitions main")


def bind_params(mod: tvm.IRModule, params: Mapping[str, Any] | None) -> tvm.IRModule:
    """``mod`` with ``params`` bound as constants (weights become part of the graph).

    Raises :class:`ArgumentError` when ``params`` is not a mapping or names a parameter
    ``main`` does not have (a misspelled weight would otherwise stay an unbound input).
    """
    mod = relay.transform.InferType()(mod)
    if not params:
        return mod
    if not isinstance(params, Mapping):
        raise ArgumentError(f"params must map parameter names to arrays (as load_model returns "
                            f"them), not {type(params).__name__}")
    known = [param.name_hint for param in mod["main"].params]
    unknown = sorted(set(params) - set(known), key=str)
    if unknown:
        raise ArgumentError(
            f"params names {unknown[:5]}{' and more' if len(unknown) > 5 else ''}, which main "
            f"does not have as parameters (it has {known[:8]}{'...' if len(known) > 8 else ''}); "
            "check the names, or pass the params load_model returned with this module")
    func = relay.build_module.bind_params_by_name(mod["main"], dict(params))
    return relay.transform.InferType()(tvm.IRModule.from_expr(func))


class RelayAdapter:
    """:class:`~partition_lab.pipeline.adapters.IRAdapter` for Relay modules."""

    name = "relay"

    def check(self, mod: Any) -> None:
        check_module(mod)

    def module_name(self, mod: Any) -> str:
        if isinstance(mod, Deferred):
            return mod.name
        attrs = mod.attrs
        if attrs is not None and "partition_lab.name" in attrs.keys():
            return str(attrs["partition_lab.name"])
        return ""

    def bind_params(self, mod: Any, params: Mapping[str, Any] | None) -> tvm.IRModule:
        return bind_params(mod, params)

    def prepare(self, mod: Any, params: Mapping[str, Any] | None, steps: Sequence[str],
                keep_fp32: bool, hazards: list[NumericHazard]) -> tuple[tvm.IRModule, None]:
        # From the prepared-module cache when mod and params came from the converted-model
        # cache (load_model(cache=True), the command line) unchanged.
        prepared = cached_prepare(
            mod, params, steps, keep_fp32, hazards,
            lambda mod, params, found: prepare(bind_params(mod, params), steps, found, keep_fp32))
        return prepared, None

    def read_graph(self, prepared: tvm.IRModule, context: None, name: str) -> RelayGraph:
        return relay_graph(prepared, name=name)

    def outline(self, ir: RelayGraph, plan: PartitionPlan) -> tuple[tvm.IRModule, dict[str, Any]]:
        return outline(ir, plan), {}

    def choice_runner(self, ir: RelayGraph, device: str, seconds: float,
                      shares: tuple[float, float]) -> tuple[str, Callable[[], dict[str, Any]]]:
        from ..executors.benchmark import torch_device_key
        from ..executors.graph_io import bindings_from_relay

        key = torch_device_key(device)
        return key, lambda: {"bindings": bindings_from_relay(ir), "device": device,
                             "max_seconds": seconds, "runner": f"torch executor ({key})"}


ADAPTER = RelayAdapter()
