"""Routes explained, the Relay side: ``tests/relax/relay_plans.json`` is what this Relay
stack plans now (the Relax tests compare their plans with it per ONNX node,
``tests/relax/test_routes.py``); every difference the project accepts is explained in
``docs/evidence/routes.md``; preparation keeps every node's name; a plan says which exporter wrote its
graph."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import jsonschema
import onnx
import pytest

import partition_lab
from partition_lab.core.names import carried_names
from partition_lab.core.provenance import exporter_of, printable, recorded_exporter
from partition_lab.errors import PartitionLabError
from partition_lab.schemas import load_schema
from repo_paths import REPO_ROOT, TESTS_DIR

RELAX_TESTS = TESTS_DIR / "relax"
DOCS = REPO_ROOT / "docs" / "evidence" / "routes.md"
sys.path.insert(0, str(RELAX_TESTS))

import models  # noqa: E402
import relay_plans  # noqa: E402
from route_diff import CLASSES, known_differences  # noqa: E402


def _load(name: str, tmp_path: Path) -> tuple:
    path = tmp_path / f"{name}.onnx"
    onnx.save(models.MODELS[name](), str(path))
    return partition_lab.load_model(str(path))


def test_relay_plans_json_is_what_the_relay_stack_plans_now():
    """Else the Relax tests compare with stale plans: run tests/relax/relay_plans.py."""
    assert relay_plans.dumps(relay_plans.relay_plans()) == relay_plans.PLANS_FILE.read_text(), \
        "regenerate it: TOPHUB_LOCATION=NONE PYTHONPATH=src .venv/bin/python " \
        "tests/relax/relay_plans.py"


def test_every_known_difference_is_explained_in_the_docs():
    text = DOCS.read_text()
    for entry in known_differences():
        assert entry["class"] in CLASSES
        assert f"`{entry['id']}`" in text, f"docs/evidence/routes.md does not explain {entry['id']}"
    for cls in CLASSES:
        assert f"**{cls}**" in text, f"docs/evidence/routes.md does not explain the class {cls}"


@pytest.mark.parametrize(("before", "after", "found"), [
    # a pass rebuilds the calls it converts without their names, in order
    ([("conv", "c1"), ("bn", "b1"), ("conv", "c2"), ("bn", "b2")],
     [("lt", None), ("conv", "c1"), ("bn", None), ("conv", "c2"), ("bn", None)],
     {2: "b1", 4: "b2"}),
    # ConvertLayout turns a bias_add it transposes into an add
    ([("conv", "c1"), ("nn.bias_add", "c1"), ("add", "fc")],
     [("conv", "c1"), ("add", None), ("add", "fc")], {1: "c1"}),
    # inserted calls of an op make the counts differ: nothing is guessed
    ([("transpose", "t1")], [("transpose", None), ("transpose", None)], {}),
    # a call the pass folded away takes its name with it
    ([("reshape", "c1"), ("reshape", "flatten")], [("reshape", "flatten")], {}),
])
def test_carried_names(before, after, found):
    assert carried_names(before, after) == found


def test_names_are_put_back_on_a_chain_deeper_than_pythons_stack():
    """The Relay rebuild runs bottom-up without recursion (an ExprMutator overflowed)."""
    import tvm
    from tvm import relay

    from partition_lab.relay.frontends._spans import calls_in_order, make_span, span_name
    from partition_lab.relay.passes.prepare import names_kept

    x = relay.var("x", shape=(1, 4))
    named, plain = x, x
    for i in range(3000):
        named = relay.Call(relay.op.get("nn.relu"), [named], None, None, make_span(f"r{i}"))
        plain = relay.nn.relu(plain)
    before, after = (relay.transform.InferType()(tvm.IRModule.from_expr(relay.Function([x], e)))
                     for e in (named, plain))
    calls = calls_in_order(names_kept(before, after)["main"].body)
    assert [span_name(c) for c in calls] == [f"r{i}" for i in range(3000)]


@pytest.mark.parametrize(("name", "node"), [("resblock", "bn1"), ("branches", "split"),
                                            ("convnet", "conv1")])
def test_names_survive_preparation(name, node, tmp_path):
    """ConvertLayout rebuilt a BatchNorm, a split and a conv's bias add without their names:
    excluding the node by name on tensorcore missed those ops."""
    mod, params = _load(name, tmp_path)
    prepared = partition_lab.partition(mod, "tensorcore", params=params, strategy="greedy")
    cpu = partition_lab.partition(mod, "cpu", params=params, strategy="greedy")
    named = {n.source_name for n in prepared.graph} - {None}
    assert {n.source_name for n in cpu.graph} - {None} <= named
    excluded = partition_lab.partition(mod, "tensorcore", params=params, strategy="greedy",
                                       excl_node_names=[node])
    ops = [n for n in excluded.graph if n.source_name == node]
    assert len(ops) == len([n for n in cpu.graph if n.source_name == node])
    assert all(excluded.plan.decisions[n.id].device == "cpu" for n in ops)


def test_a_hand_made_onnx_file_has_no_exporter(tmp_path):
    """Plans of models whose file names no producer read as before: no "exporter" key."""
    mod, params = _load("convnet", tmp_path)
    result = partition_lab.partition(mod, "neuron", params=params, strategy="greedy")
    assert "exporter" not in result.to_dict()
    assert "graph from" not in result.plan.summary()


def test_an_onnx_file_says_who_wrote_it(tmp_path):
    model = models.convnet()
    model.producer_name, model.producer_version = "pytorch", "2.5.1"
    path = tmp_path / "written.onnx"
    onnx.save(model, str(path))
    mod, params = partition_lab.load_model(str(path))
    result = partition_lab.partition(mod, "neuron", params=params, strategy="greedy")
    assert result.to_dict()["exporter"] == "ONNX file by pytorch 2.5.1 (opset 17)"
    plan = json.loads(result.to_json())
    jsonschema.Draft202012Validator(load_schema("plan")).validate(plan)
    with pytest.raises(jsonschema.ValidationError):  # the schema knows the key
        jsonschema.Draft202012Validator(load_schema("plan")).validate({**plan, "exporter": 3})
    assert result.plan.summary().splitlines()[0].endswith(
        "; graph from ONNX file by pytorch 2.5.1 (opset 17)")
    tensorcore = partition_lab.partition(mod, "tensorcore", params=params, strategy="greedy")
    assert tensorcore.graph.exporter == "ONNX file by pytorch 2.5.1 (opset 17)"  # prepared


def test_the_exporter_text_cannot_break_the_relay_text():
    assert printable('a "quoted" */ name\nwith % and \\') == "a ?quoted? ?/ name with ? and ?"
    assert len(printable("x" * 500)) <= 160


def test_a_module_says_which_exporter_wrote_its_graph():
    """Where a module and its ONNX export differ in op count, the summary says why: this graph
    is torch.onnx's with the exporter's optimizer off (every BatchNorm kept)."""
    try:
        from partition_lab.relay.frontends._torch import module_to_onnx, require_torch

        torch = require_torch("the exporter test")
    except PartitionLabError as missing:
        pytest.skip(str(missing))

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 16, 3, padding=1)
            self.bn = torch.nn.BatchNorm2d(16)

        def forward(self, x):
            return torch.relu(self.bn(self.conv(x)))

    example = torch.zeros(1, 3, 16, 16)
    mod, params = partition_lab.load_model(Block(), example)
    result = partition_lab.partition(mod, "neuron", params=params)
    written = result.to_dict()["exporter"]
    assert written.startswith("torch.onnx (dynamo, opset 18, optimizer off; torch ")
    assert result.plan.summary().splitlines()[0].endswith(f"; graph from {written}")
    assert "nn.batch_norm" in {n.op for n in result.graph}
    assert exporter_of(module_to_onnx(Block(), example)) == written  # the zoo's files too


def test_the_recorded_exporter_survives_relay_text(tmp_path):
    """main's attribute is printed with the module and parsed back (export_partitioned)."""
    from partition_lab.relay.export import export_partitioned, read_partitioned

    model = models.convnet()
    model.producer_name = 'pytorch "2" */'
    path = tmp_path / "written.onnx"
    onnx.save(model, str(path))
    mod, params = partition_lab.load_model(str(path))
    result = partition_lab.partition(mod, "neuron", params=params, strategy="greedy")
    assert result.graph.exporter == "ONNX file by pytorch ?2? ?/ (opset 17)"
    back = read_partitioned(export_partitioned(result.mod, tmp_path / "p.relay"))
    assert recorded_exporter(back["main"]) == result.graph.exporter
