"""Where greedy fragments on a ``tvm:<backend>`` platform (one supported op between host ops),
``cost`` keeps the op on the host and is predicted faster, with the reason: for the two backends
without CUDA cores beside them (on the CUDA backends every op the backend leaves runs on the GPU's
CUDA cores, so nothing is fragmented onto the host). The prices are the roofline's with the
stand-in profile these two get (inferentia1: no phone NPU or Apple GPU profile ships)."""

from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto, helper

import partition_lab


def fragmenting() -> onnx.ModelProto:
    """Sin -> Relu -> Cos on 1x32x64x64: NNAPI and Core ML have a Relu pattern, no Sin or Cos."""
    node = helper.make_node
    nodes = [node("Sin", ["x"], ["s"], name="sin"), node("Relu", ["s"], ["r"], name="relu"),
             node("Cos", ["r"], ["y"], name="cos")]
    shape = [1, 32, 64, 64]
    graph = helper.make_graph(nodes, "fragmenting",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("backend", ["nnapi", "coreml"])
def test_cost_keeps_an_isolated_op_on_the_host_and_is_predicted_faster(backend) -> None:
    mod, _ = partition_lab.load_model(fragmenting())
    greedy = partition_lab.partition(mod, f"tvm:{backend}", strategy="greedy")
    cost = partition_lab.partition(mod, f"tvm:{backend}", strategy="cost")
    relu = next(n.id for n in greedy.graph if n.op == "nn.relu")
    assert [greedy.plan.device_of(n) for n in range(3)] == ["cpu", backend, "cpu"]
    assert [cost.plan.device_of(n) for n in range(3)] == ["cpu", "cpu", "cpu"]
    assert cost.cost.total < greedy.cost.total
    reason = cost.plan.decisions[relu].reason
    assert reason.startswith(f"its region of 1 op on {backend} (nn.relu) excluded: predicted")
    assert "of copies" in reason and "on CPU" in reason
    taken = greedy.plan.decisions[relu].reason
    assert f"pattern {backend}." in taken and "relu takes it (1 op: nn.relu)" in taken
