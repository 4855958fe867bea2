"""relay_graph: the batched reader gives what reading every field through TVM's API gives.

The reader fetches types, attributes and spans in one ``save_json`` and decodes them itself
(for speed); these tests read the same fields the slow, obvious way and compare, on small zoo
models of both targets (NCHW/fp32 and NHWC/fp16 attributes) and on hand-made corner cases.
"""

from __future__ import annotations

import pytest
import tvm
from tvm import relay

from partition_lab import zoo
from partition_lab.api import analyze
from partition_lab.core.graph import TensorType
from partition_lab.errors import PartitionLabError
from partition_lab.relay.relay_graph import attrs_to_dict, relay_graph, source_name


def direct_types(ty) -> tuple[TensorType, ...]:
    """A call's output types read field by field through TVM's Python API."""
    if isinstance(ty, relay.TupleType):
        return tuple(t for field in ty.fields for t in direct_types(field))
    return (TensorType(tuple(int(d) for d in ty.shape), str(ty.dtype)),)


def assert_matches_direct_reading(rg) -> None:
    assert len(rg.graph) == len(rg.calls)
    for node, call in zip(rg.graph, rg.calls, strict=True):
        assert node.op == call.op.name
        assert node.attrs == attrs_to_dict(call.attrs), node.name
        assert node.outputs == direct_types(call.checked_type), node.name
        assert node.source_name == source_name(call), node.name
        assert rg.node_of(call) == node.id
        assert rg.parts[node.id].op.same_as(call.op)
        assert len(rg.parts[node.id].args) == len(call.args)


@pytest.mark.parametrize("target", ["neuron@2020", "tensorcore"])
@pytest.mark.parametrize("name", ["simple_pose_resnet152_v1b", "fcn_resnet101_ade",
                                  "bert_encoder", "tiny_yolo_v2", "mobilenetv2_1.0"])
def test_reader_matches_tvm_api_on_zoo_models(name: str, target: str) -> None:
    mod, params = zoo.load(name, small=True)
    analysis = analyze(mod, target, params=params)
    assert_matches_direct_reading(relay_graph(analysis.prepared_mod))


def corner_case_function() -> relay.Function:
    """Tuples in and out, a parameter used as a weight, an unused input, many attribute kinds."""
    x = relay.var("x", shape=(1, 4, 6, 6))
    unused = relay.var("unused", shape=(2,), dtype="int32")
    w = relay.var("w", shape=(4, 1, 3, 3))
    conv = relay.nn.conv2d(x, w, padding=(1, 1), groups=4, channels=4, kernel_size=(3, 3))
    parts = relay.split(conv, 2, axis=1)  # a tuple-producing call
    joined = relay.concatenate([parts[1], parts[0]], axis=1)  # a Tuple argument
    pooled = relay.nn.max_pool2d(joined, pool_size=(2, 2), ceil_mode=True)  # bool attribute
    lrn = relay.nn.lrn(pooled, size=3, alpha=1e-4, beta=0.75)  # float attributes
    resized = relay.image.resize2d(lrn, (5, 5), method="linear")  # string attributes
    casted = relay.cast(resized, "float16")  # a DataType attribute
    out = relay.Tuple([casted, relay.sum(x, axis=[1], keepdims=True)])
    return relay.Function([x, unused, w], out)


def test_reader_matches_tvm_api_on_corner_cases() -> None:
    mod = tvm.IRModule.from_expr(corner_case_function())  # untyped: relay_graph infers types
    rg = relay_graph(mod, params={"w": None})
    assert_matches_direct_reading(rg)
    graph = rg.graph
    assert list(graph.graph_inputs) == ["x", "unused"]  # the parameters' order, weights left out
    assert graph.graph_inputs["unused"].consumers == ()
    conv = graph.node_by_name("nn.conv2d_0")
    assert conv.weights == (TensorType((4, 1, 3, 3), "float32"),)
    assert graph.node_by_name("split_1").outputs == (TensorType((1, 2, 6, 6), "float32"),) * 2
    concat = graph.node_by_name("concatenate_2")
    assert sorted(graph.nx.edges[1, concat.id]["indices"]) == [0, 1]
    assert graph.node_by_name("nn.max_pool2d_3").attrs["ceil_mode"] == 1  # TVM reads bools as 0/1
    assert [graph[i].op for i, _ in graph.outputs] == ["cast", "sum"]


def test_dynamic_dimension_is_a_clear_error() -> None:
    x = relay.var("x", shape=(relay.Any(), 4))
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.nn.relu(x)))
    with pytest.raises(PartitionLabError, match=r"input 'x' has a dynamic shape \(\?, 4\)"):
        relay_graph(mod)
