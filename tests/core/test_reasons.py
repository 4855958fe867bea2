"""Reasons grouped from their structured form: one rule, several reasons, each op its own words."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from tvm import relay

import partition_lab


def _stem_conv_dense_model() -> tuple[tvm.IRModule, dict[str, np.ndarray]]:
    """Batch 1: an RGB stem conv (cin 3), two 16-channel convs and a dense.

    On tensorcore one rule (tensorcore-shape) rejects all four, for three different reasons:
    the stem for batch and cin, the other convs for batch only, the dense for its batch.
    """
    rng = np.random.default_rng(0)
    data = relay.var("data", shape=(1, 3, 16, 16))
    params = {
        "w0": rng.standard_normal((16, 3, 3, 3)).astype("float32"),
        "w1": rng.standard_normal((16, 16, 3, 3)).astype("float32"),
        "w2": rng.standard_normal((16, 16, 3, 3)).astype("float32"),
        "wd": rng.standard_normal((16, 16 * 16 * 16)).astype("float32"),
    }
    w = {k: relay.var(k, shape=v.shape) for k, v in params.items()}
    x = relay.nn.relu(relay.nn.conv2d(data, w["w0"], padding=(1, 1), channels=16, kernel_size=3))
    x = relay.nn.relu(relay.nn.conv2d(x, w["w1"], padding=(1, 1), channels=16, kernel_size=3))
    x = relay.nn.relu(relay.nn.conv2d(x, w["w2"], padding=(1, 1), channels=16, kernel_size=3))
    x = relay.nn.dense(relay.nn.batch_flatten(x), w["wd"])
    func = relay.Function([data, *w.values()], x)
    return tvm.IRModule.from_expr(func), params


@pytest.fixture(scope="module")
def tensorcore_result() -> partition_lab.PartitionResult:
    mod, params = _stem_conv_dense_model()
    return partition_lab.partition(mod, "tensorcore", params=params, name="stem")


def test_one_rule_with_several_reasons_keeps_each_ops_own_words(tensorcore_result) -> None:
    plan = tensorcore_result.plan
    graph = plan.graph
    convs = [n.id for n in graph.nodes if n.op == "nn.conv2d"]
    dense = next(n.id for n in graph.nodes if n.op == "nn.dense")
    group = next(g for g in plan.reason_groups() if dense in {d.node for d in g.decisions})
    # One structured reason (rejected by tensorcore's shape rule) holds all convs and the dense ...
    assert {d.node for d in group.decisions} >= {*convs, dense}
    assert (group.why.code, group.why.device, group.why.rule) == \
        ("rejected", "tensorcore", "tensorcore-shape")
    # ... and it splits by text: only the stem conv is blamed for cin 3, the dense is a dense.
    by_text = {text: {d.node for d in ds} for text, ds in group.details}
    cin3 = [nodes for text, nodes in by_text.items() if "cin 3" in text]
    assert cin3 == [{convs[0]}]
    dense_texts = [text for text, nodes in by_text.items() if dense in nodes]
    assert len(dense_texts) == 1 and dense_texts[0].startswith("nn.dense")
    assert all(not text.startswith("nn.dense") for text, nodes in by_text.items()
               if dense not in nodes)
    assert group.headline == "rule tensorcore-shape of tensorcore rejects them"


def test_the_summary_prints_every_detail_under_its_rule(tensorcore_result) -> None:
    plan = tensorcore_result.plan
    graph = plan.graph
    lines = plan.summary().splitlines()
    head = next(i for i, line in enumerate(lines) if "rule tensorcore-shape" in line)
    details = []
    for line in lines[head + 1:]:
        if not line.startswith("    "):
            break
        details.append(line.strip())
    stem = graph[next(n.id for n in graph.nodes if n.op == "nn.conv2d")].name
    dense = graph[next(n.id for n in graph.nodes if n.op == "nn.dense")].name
    stem_line = next(line for line in details if line.startswith(stem))
    assert "cin 3" in stem_line
    dense_line = next(line for line in details if line.startswith(dense))
    assert "nn.conv2d" not in dense_line and "cin" not in dense_line
    # Only the stem's line mentions cin 3: no other op is explained by its reason.
    assert [line for line in details if "cin 3" in line] == [stem_line]


def test_json_reason_groups_cover_the_ops_off_the_preferred_device(tensorcore_result) -> None:
    data = tensorcore_result.to_dict()
    top = data["devices"][0]["name"]
    off = sorted(n["id"] for n in data["nodes"] if n["device"] != top)
    grouped = sorted(i for g in data["reason_groups"] for i in g["nodes"])
    assert grouped == off
    texts = {n["id"]: n["reason"] for n in data["nodes"]}
    for group in data["reason_groups"]:
        assert sorted(i for d in group["details"] for i in d["nodes"]) == sorted(group["nodes"])
        for detail in group["details"]:
            assert {texts[i] for i in detail["nodes"]} == {detail["text"]}
