"""The pipeline is written once over IR adapters: a made-up IR (a list of op records, no TVM)
gets the same checks, verdicts, strategies, validation and hazards as Relay and Relax by
registering one adapter, and Relay and Relax modules go to their own adapters."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

import partition_lab
from partition_lab.core.graph import OpGraph, OpGraphBuilder, TensorType
from partition_lab.core.hazards import NumericHazard
from partition_lab.core.plan import PartitionPlan
from partition_lab.errors import ArgumentError, PartitionLabError
from partition_lab.pipeline import adapters
from partition_lab.pipeline.adapters import AdapterEntry, IRAdapter

T = TensorType((1, 16, 32, 32), "float32")


@dataclass
class ListModule:
    """The made-up IR: ops in order, each reading the previous one (or the input)."""

    ops: list[tuple[str, str]]  # (op, source name)
    name: str = "toy"
    #: (op index, value): a constant past float16 that a float16 step would overflow.
    large_constants: list[tuple[int, float]] = field(default_factory=list)


@dataclass
class ListGraph:
    graph: OpGraph


class ListAdapter:
    """An IRAdapter for :class:`ListModule`: the whole of what a new IR needs."""

    name = "list"

    def __init__(self) -> None:
        self.prepared_steps: list[tuple[str, ...]] = []

    def check(self, mod: Any) -> None:
        if not mod.ops:
            raise ArgumentError("the list module has no ops")

    def module_name(self, mod: Any) -> str:
        return mod.name

    def bind_params(self, mod: Any, params: Mapping[str, Any] | None) -> Any:
        return mod

    def prepare(self, mod: Any, params: Mapping[str, Any] | None, steps: Sequence[str],
                keep_fp32: bool, hazards: list[NumericHazard]) -> tuple[Any, None]:
        self.prepared_steps.append(tuple(steps))
        if any(step.endswith(":float16") for step in steps):
            hazards += [NumericHazard(mod.ops[i][0], mod.ops[i][1], value, "float16")
                        for i, value in mod.large_constants]
        return mod, None

    def read_graph(self, prepared: Any, context: None, name: str) -> ListGraph:
        b = OpGraphBuilder(name)
        handle = b.input("x", T)
        for op, source in prepared.ops:
            weights = [TensorType((16, 16, 3, 3), "float32")] if op == "nn.conv2d" else []
            attrs = {"channels": 16, "kernel_size": (3, 3), "groups": 1,
                     "data_layout": "NCHW", "kernel_layout": "OIHW"} if op == "nn.conv2d" else {}
            handle = b.op(op, [handle], source_name=source, weights=weights, attrs=attrs,
                          flops=1e6)
        return ListGraph(b.build(outputs=[handle]))

    def outline(self, ir: Any, plan: PartitionPlan) -> tuple[Any, dict[str, Any]]:
        return [r.device for r in plan.regions], {}

    def choice_runner(self, ir: Any, device: str, seconds: float, shares: tuple[float, float]
                      ) -> tuple[str, Callable[[], dict[str, Any]]]:
        raise PartitionLabError("the list IR has no runner to time plans with")


@pytest.fixture
def list_adapter() -> ListAdapter:
    adapter = ListAdapter()
    assert isinstance(adapter, IRAdapter)
    # The one registry line a new IR adds; its object is handed over here instead of imported.
    adapters.register_adapter(AdapterEntry("list", "tests.test_adapters:unused",
                                           lambda mod: isinstance(mod, ListModule)))
    adapters._loaded["list"] = adapter
    yield adapter
    adapters.unregister_adapter("list")


MODEL = ListModule([("nn.conv2d", "conv0"), ("nn.relu", "relu0"), ("nn.conv2d", "conv1"),
                    ("argwhere", "odd0"), ("nn.conv2d", "conv2"), ("nn.relu", "relu2")])


def test_a_made_up_ir_runs_the_whole_pipeline(list_adapter: ListAdapter) -> None:
    result = partition_lab.partition(MODEL, "neuron@2020", strategy="greedy")
    assert result.ir_name == "list" and result.graph.name == "toy"
    devices = [d.device for d in result.plan.decisions]
    assert devices[3] == "cpu"  # argwhere: on no accelerator's list
    assert result.plan.decisions[3].why.code.value == "rejected"
    assert set(devices) - {"cpu"} == {"neuron@2020"}
    assert result.mod == [r.device for r in result.plan.regions]
    assert result.cost is not None and result.cost.total > 0


def test_the_pipeline_checks_a_made_up_ir_as_it_checks_relay(list_adapter: ListAdapter) -> None:
    with pytest.raises(ArgumentError, match="no ops"):
        partition_lab.partition(ListModule([]), "neuron")
    with pytest.raises(ArgumentError, match="not the string 'conv0'"):
        partition_lab.partition(MODEL, "neuron", excl_node_names="conv0")
    excluded = partition_lab.partition(MODEL, "neuron", strategy="greedy",
                                       excl_node_names=["conv0"])
    assert excluded.plan.decisions[0].device == "cpu"


def test_hazards_from_any_adapter_are_placed_and_reported(list_adapter: ListAdapter) -> None:
    model = ListModule(MODEL.ops, large_constants=[(2, 1e6)])
    result = partition_lab.partition(model, "tensorcore", strategy="greedy")
    assert ("convert_layout:NHWC", "mixed_precision:float16") in list_adapter.prepared_steps
    [hazard] = result.plan.hazards
    assert (hazard.name, hazard.device, hazard.node) == ("conv1", "tensorcore", 2)
    assert "numeric hazard: conv1 (nn.conv2d)" in result.summary()


def test_a_runner_the_adapter_lacks_is_its_error(list_adapter: ListAdapter) -> None:
    with pytest.raises(PartitionLabError, match="no runner"):
        partition_lab.partition(MODEL, "neuron", choose=1)


@pytest.mark.parametrize("mod, message", [
    (42, "mod must be a tvm.IRModule"),
    ({"main": 1}, "mod must be a tvm.IRModule"),
])
def test_what_no_adapter_takes_is_one_error(mod: object, message: str) -> None:
    with pytest.raises(ArgumentError, match=message):
        partition_lab.partition(mod, "neuron")
