"""The embedding lookup as ``torch.export`` writes ``nn.Embedding`` (the ids' negative-index
normalisation ``less``, ``add``, ``where``, then ``take``): one unit whose reason names the lookup
and its ids' dtype, on hand-built graphs (the node list of a real import) and from a real export.
"""

from __future__ import annotations

import pytest

from partition_lab.core.graph import OpGraph, OpGraphBuilder, TensorType
from partition_lab.core.pattern_library import PATTERNS
from partition_lab.core.patterns import find_units
from partition_lab.strategies import get_strategy
from partition_lab.targets import get_platform
from partition_lab.targets.devices import without_patterns
from transformer_graphs import support_of

TABLE = TensorType((1024, 64), "float32")
INT64_REJECTED = ("its take: take: input 0 dtype int64 is not supported by neuron-cc (NCC known "
                  "issues: no INT8; FP64/INT64 must be cast to FP32/INT32 first)")


def lookup_graph(dtype: str = "int64") -> OpGraph:
    """ids -> where(ids < 0, ids + 1024, ids) -> take(table, .) -> dense."""
    ids_type = TensorType((1, 16), dtype)
    b = OpGraphBuilder(f"lookup_{dtype}")
    ids = b.input("input_ids", ids_type)
    negative = b.op("less", [ids], weights=[TensorType((), dtype)],
                    outputs=[TensorType((1, 16), "bool")], name="embed/less")
    wrapped = b.op("add", [ids], weights=[TensorType((), dtype)], name="embed/add")
    index = b.op("where", [negative, wrapped, ids], outputs=[ids_type], name="embed/where")
    rows = b.op("take", [index], weights=[TABLE], outputs=[TensorType((1, 16, 64), "float32")],
                name="embed/take")
    out = b.op("nn.dense", [rows], weights=[TensorType((64, 64), "float32")], name="fc")
    return b.build(outputs=[out])


def test_the_lookup_is_one_unit() -> None:
    graph = lookup_graph()
    (unit,) = find_units(graph, PATTERNS)
    assert unit.name == "embedding"
    assert [graph[n].name for n in unit.nodes] == ["embed/less", "embed/add", "embed/where",
                                                   "embed/take"]


def test_with_int64_ids_every_host_op_of_the_lookup_names_it() -> None:
    graph = lookup_graph()
    platform = get_platform("neuron")
    plan = get_strategy("greedy").run(graph, support_of(platform, graph))
    host = [d for d in plan.decisions if d.device == "cpu"]
    assert [graph[d.node].op for d in host] == ["less", "add", "where", "take"]
    assert len(plan.cpu_regions) == 1 and plan.device_of(len(graph) - 1) == "neuron"
    for decision in host:
        assert decision.reason == ("embedding lookup with int64 ids (4 ops: less, add, where, "
                                   f"take): {INT64_REJECTED}")
    # Op by op, the same island reads as its pieces.
    plain = get_strategy("greedy").run(graph, support_of(without_patterns(platform), graph))
    assert plain.decisions[0].reason.startswith("less: input 0 dtype int64")


def test_with_int32_ids_the_lookup_is_take_as_one_op() -> None:
    graph = lookup_graph("int32")
    support = support_of(get_platform("neuron"), graph)
    verdicts = {support.verdict(n, 0) for n in range(4)}
    assert len(verdicts) == 1
    (verdict,) = verdicts
    assert verdict.supported and verdict.rule == "pattern:embedding"
    assert verdict.reason.startswith("embedding lookup with int32 ids (4 ops: less, add, where, "
                                     "take) is take as one op: take is in neuron's operator list")


# ------------------------------------------------------------------------------ a real export
def test_nn_embedding_from_torch_export_is_one_unit_named_in_every_reason() -> None:
    import pattern_exports as exports

    torch = pytest.importorskip("torch")

    class Lookup(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed, self.fc = torch.nn.Embedding(1024, 64), torch.nn.Linear(64, 64)

        def forward(self, x):  # noqa: ANN001, ANN202
            return self.fc(self.embed(x))

    torch.manual_seed(0)
    module, ids = Lookup().eval(), torch.randint(0, 1024, (1, 16))
    mod, params = exports.exported(module, ids)
    result = exports.partitioned(mod, params, "neuron")
    assert [u.name for u in result.plan.support.units] == ["embedding"]
    host = [d for d in result.plan.decisions if d.device == "cpu"]
    assert len(host) == 4 and len(result.plan.cpu_regions) == 1
    assert all(d.reason.startswith("embedding lookup with int64 ids (4 ops") for d in host)
    exports.assert_matches_torch(result, module, ids)
    # int32 ids: the lookup goes to the NeuronCore whole and is profiled whole there.
    ids32 = ids.to(torch.int32)
    mod32, params32 = exports.exported(module, ids32)
    on_neuron = exports.partitioned(mod32, params32, "neuron")
    assert exports.composites(on_neuron.mod) == {"embedding": 1}
    assert not on_neuron.plan.cpu_regions
    exports.assert_matches_torch(on_neuron, module, ids32)
    assert exports.assert_profiled_whole(mod32, params32, get_platform("neuron"),
                                         "embedding") == 1
