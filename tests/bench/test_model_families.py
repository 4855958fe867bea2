"""bench/model_families.py without transformers: the false-island rule (constants, rewrites,
pieces of units the target accepts whole), adjacent regions, and the generated page (tuned and
held-out apart, held-out sealed until an after run, ``before -> after`` cells), on hand-built
OpGraphs and plans."""

from __future__ import annotations

import importlib.util
import json
import sys
from dataclasses import replace

from partition_lab.core.graph import OpGraph, OpGraphBuilder, OpNode, TensorType
from partition_lab.core.patterns import Pattern, Step
from partition_lab.core.plan import PartitionPlan
from partition_lab.core.support import Support, Verdict
from partition_lab.targets import get_platform
from repo_paths import REPO_ROOT


def _module():  # noqa: ANN202
    path = REPO_ROOT / "bench" / "model_families.py"
    spec = importlib.util.spec_from_file_location("bench_model_families", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


families = _module()
F32, I64 = TensorType((1, 4, 8), "float32"), TensorType((1, 4), "int64")


class Table:
    """A target that lists ``ops`` (what the rule asks of one)."""

    def __init__(self, *ops: str) -> None:
        self.ops = set(ops)

    def supports_op(self, op: str) -> bool:
        return op in self.ops


def graph_and_plan(host_ops: set[str], groups: list[list[int]] | None = None):  # noqa: ANN201
    """x -> mask (from constants only) ; x -> einsum(x, x) -> take(int64) -> conv2d -> dense.

    Ops in ``host_ops`` are rejected by neuron; ``groups`` forces the regions."""
    b = OpGraphBuilder("hand")
    x = b.input("x", F32)
    const = b.op("ones", [], outputs=[F32], name="mask_source")  # no inputs: a constant
    mask = b.op("cumsum", [const], name="mask")
    e = b.op("einsum", [x, x], name="qk")
    ids = b.op("take", [e], outputs=[I64], name="lookup")
    conv = b.op("nn.conv2d", [ids, mask], outputs=[F32], name="conv")
    dense = b.op("nn.dense", [conv], name="dense")
    graph = b.build(outputs=[dense])
    platform = get_platform("neuron")
    verdicts = {d: [Verdict(d == "cpu" or n.op not in host_ops, f"{n.op} rejected")
                    for n in graph.nodes] for d in platform.names}
    support = Support(platform, verdicts)
    devices = [platform.devices[support.preferred(n)].name for n in range(len(graph))]
    return graph, PartitionPlan.from_devices(graph, support, "hand", devices, groups=groups)


def test_constant_only_is_what_no_graph_input_reaches() -> None:
    graph, _ = graph_and_plan(set())
    assert families.constant_only(graph) == [True, True, False, False, False, False]


def test_each_class_of_false_host_op_and_a_real_one() -> None:
    graph, _ = graph_and_plan(set())
    constants = families.constant_only(graph)
    neuron = Table("nn.batch_matmul", "nn.conv2d")
    classes = [families.op_class(graph, n, neuron, constants, set()) for n in range(len(graph))]
    assert classes[:4] == ["constant", "constant", "rewrite", "real"]
    # A rewrite counts only where the target lists what the op is rewritten to, and not where
    # it lists the op itself (then a rule rejected it, which the replacement would meet too).
    assert families.op_class(graph, 2, Table("nn.conv2d"), constants, set()) == "real"
    assert families.op_class(graph, 2, Table("einsum", "nn.batch_matmul"), constants,
                             set()) == "real"
    assert families.op_class(graph, 3, neuron, constants, {3}) == "piece"
    assert families.classify_island(["constant", "rewrite", "piece"]) == "false"
    assert families.classify_island(["constant", "real"]) == "real"


def test_casts_to_their_own_type_are_identities() -> None:
    b = OpGraphBuilder("casts")
    x = b.input("x", F32)
    same = b.op("cast_like", [x, x], name="same")
    b.op("cast", [same], outputs=[TensorType((1, 4, 8), "float16")], name="narrowing")
    graph = b.build()
    constants = families.constant_only(graph)
    assert [families.op_class(graph, n, Table(), constants, set()) for n in (0, 1)] == \
        ["identity", "real"]
    # cast_like of a weight like a live tensor, as the importer writes it: the value cast is
    # args[0] (call order), the weight, not the tensor it reads from outside.
    weight = TensorType((4, 1), "float32")
    like = OpNode(0, "cast_like", "weight_like_x", None, inputs=(F32,), outputs=(weight,),
                  weights=(weight,), args=(weight, F32))
    graph = OpGraph([like], [], {"x": (F32, [0])}, [(0, 0)])
    assert families.op_class(graph, 0, Table(), [False], set()) == "identity"
    narrowing = replace(like, outputs=(TensorType((4, 1), "float16"),))
    graph = OpGraph([narrowing], [], {"x": (F32, [0])}, [(0, 0)])
    assert families.op_class(graph, 0, Table(), [False], set()) == "real"


def test_pieces_are_units_the_target_would_accept_whole() -> None:
    b = OpGraphBuilder("norm")
    x = b.input("x", F32)
    root = b.op("sqrt", [x])
    b.op("divide", [root, x])
    graph = b.build()
    toy = Pattern("toy_norm", (Step.of("sqrt", "x"), Step.of("divide", 0, "x")),
                  stands_for=("nn.toy_norm",))
    assert families.piece_nodes(graph, Table("nn.toy_norm"), [toy]) == {0, 1}
    assert families.piece_nodes(graph, Table("sqrt", "divide"), [toy]) == set()
    # A pattern standing for no op: a piece where the target has every op of the unit.
    plain = Pattern("plain", toy.steps)
    assert families.piece_nodes(graph, Table("sqrt", "divide"), [plain]) == {0, 1}
    assert families.piece_nodes(graph, Table("sqrt"), [plain]) == set()


def test_plan_figures_count_false_and_real_islands() -> None:
    groups = [[0, 1], [2, 3], [4, 5]]
    _, plan = graph_and_plan({"ones", "cumsum", "einsum", "take"}, groups)
    plan.validate()
    figures = families.plan_figures(plan)
    # Host islands: {ones, cumsum} (constants) and {einsum, take} (take of int64 ids is real).
    assert figures["islands"] == 2 and figures["host_ops"] == 4
    assert figures["false_islands"] == 1 and figures["false_by_class"] == {"constant": 2}
    verdicts = sorted((i["verdict"], i["ops"]) for i in figures["island_list"])
    assert verdicts == [("false", 2), ("real", 2)]
    _, plan = graph_and_plan({"ones", "cumsum", "einsum"}, [[0, 1], [2], [3, 4, 5]])
    plan.validate()
    figures = families.plan_figures(plan)
    assert figures["false_islands"] == figures["islands"] == 2
    assert figures["false_by_class"] == {"constant": 2, "rewrite": 1}


def test_adjacent_regions_count_same_device_regions_with_nothing_between() -> None:
    _, plan = graph_and_plan(set(), groups=[[0, 1], [2, 3], [4], [5]])
    assert families.adjacent_regions(plan) == 3  # {0,1} -> {4}, {2,3} -> {4}, {4} -> {5}
    _, plan = graph_and_plan(set(), groups=[list(range(6))])
    assert families.adjacent_regions(plan) == 0


def run(label: str, islands: int, failure: bool = False) -> dict:
    plan = {"ops": 10, "units": 1, "regions": 2, "islands": islands, "false_islands": 1,
            "adjacent_regions": 1, "host_ops": 3, "reasons": [["take: int64 ids", 3]],
            "false_by_class": {"constant": 2}}
    tuned = {"name": "llama", "group": "tuned", "plans": {"neuron": plan, "cpu": dict(plan)}}
    held = {"name": "qwen2", "group": "held-out",
            "plans": {"neuron": {**plan, "islands": 7}, "cpu": dict(plan)}}
    if failure:
        held = {"name": "qwen2", "group": "held-out", "plans": {},
                "load_failure": "ValueError: no export"}
    return {"label": label, "command": f"bench/model_families.py --label {label}",
            "platforms": ["cpu", "neuron"], "machine": "test", "versions": {"tvm": "0.19"},
            "seconds": 1.0, "families": [tuned, held]}


def test_the_page_keeps_held_out_sealed_until_an_after_run(tmp_path) -> None:
    results, page = tmp_path / "results", tmp_path / "families.md"
    results.mkdir()
    assert families.write_page(results, page) is None
    (results / "families_before.json").write_text(json.dumps(run("before", 2)))
    text = families.write_page(results, page)
    assert text == page.read_text()
    tuned, held = text.split("## Tuned families")[1].split("## Held-out families")
    assert "| llama | neuron | 10 | 1 | 2 | 2 | 1 (2 constant ops) | 1 | 3 | 3x take: int64 ids |" in tuned
    assert "qwen2" not in text and "Sealed" in held
    # Totals exclude the host-only platform: one neuron plan per group.
    assert "| held-out | 1 | 0 | 1 | 0 | 2 | 7 | 1 | 0 | 1 | 3 |" in text
    assert families.PROTOCOL in text and families.RULE in text


def test_before_and_after_side_by_side_with_load_failures(tmp_path) -> None:
    results, page = tmp_path / "results", tmp_path / "families.md"
    results.mkdir()
    (results / "families_before.json").write_text(json.dumps(run("before", 2, failure=True)))
    (results / "families_after.json").write_text(json.dumps(run("after", 0)))
    text = families.write_page(results, page)
    assert "| llama | neuron | 10 | 1 | 2 | 2 -> 0 | 1 (2 constant ops) | 1 | 3 |" in text
    held = text.split("## Held-out families")[1]
    assert "| qwen2 | neuron | - -> 10 |" in held and "Sealed" not in held
    assert "- before: qwen2: ValueError: no export" in held
    assert "| held-out | 1 | 1 -> 0 | 0 -> 1 |" in text


def test_a_false_island_that_is_only_an_embedding_lookup_is_counted_apart() -> None:
    lookup = {"verdict": "false", "op_types": {"less": 1, "add": 1, "where": 1, "take": 1}}
    assert families.is_false_lookup(lookup)
    assert not families.is_false_lookup({**lookup, "verdict": "real"})
    assert not families.is_false_lookup({"verdict": "false", "op_types": {"cast_like": 1}})
