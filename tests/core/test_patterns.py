"""Patterns as units of support: found in the op graph, judged whole, kept on one device.

The graphs are built by hand in the forms TVM's ONNX importer gives ``torch.export``ed modules
(the node lists of ``nn.LayerNorm``, ``nn.GELU``, ``nn.SiLU``, ``nn.Hardswish`` and
``nn.MultiheadAttention`` read off a real import), so these tests need no TVM.
"""

from __future__ import annotations

import pytest

from partition_lab.core.graph import OpGraph, OpGraphBuilder, TensorType
from partition_lab.core.pattern_library import PATTERNS
from partition_lab.core.patterns import Pattern, Step, find_units
from partition_lab.core.support import Support
from partition_lab.cost_models import get_cost_model
from partition_lab.errors import TargetSpecError
from partition_lab.strategies import NotApplicableError, available_strategies, get_strategy
from partition_lab.targets import TargetSpec, get_platform
from transformer_graphs import SCALAR, X, block, support_of


def units_by_name(graph: OpGraph) -> dict[str, list[list[str]]]:
    found: dict[str, list[list[str]]] = {}
    for unit in find_units(graph, PATTERNS):
        found.setdefault(unit.name, []).append([graph[n].name for n in unit.nodes])
    return found


def test_the_importers_forms_are_found_as_units() -> None:
    found = units_by_name(block())
    assert found == {
        "layer_norm": [["ln/mean", "ln/subtract", "ln/variance", "ln/add", "ln/sqrt", "ln/divide",
                        "ln/multiply", "ln/multiply#2", "ln/add#2"]],
        "gelu": [["act", "act#2", "act#3", "act#4", "act#5"]],
        "silu": [["silu", "silu#2"]],
    }


def test_a_unit_whose_inside_is_read_outside_is_not_a_unit() -> None:
    b = OpGraphBuilder("leaky")
    x = b.input("x", X)
    sig = b.op("sigmoid", [x], name="sig")
    out = b.op("multiply", [x, sig], name="mul")
    also = b.op("nn.relu", [sig], name="reads_the_sigmoid")
    graph = b.build(outputs=[out, also])
    assert find_units(graph, PATTERNS) == []


def test_a_named_input_must_be_one_tensor() -> None:
    """``mean(x)`` and ``subtract(y, mean)`` on different tensors is not a LayerNorm."""
    b = OpGraphBuilder("two_inputs")
    x, y = b.input("x", X), b.input("y", X)
    mean = b.op("mean", [x])
    sub = b.op("subtract", [y, mean])
    var = b.op("variance", [x, mean])
    std = b.op("sqrt", [b.op("add", [var], weights=[SCALAR])])
    out = b.op("multiply", [sub, b.op("divide", [std], weights=[SCALAR])])
    graph = b.build(outputs=[out])
    assert "layer_norm" not in units_by_name(graph)
    assert units_by_name(block())["layer_norm"]  # the same ops on one tensor are one


def test_an_op_reading_one_tensor_twice_matches_an_argument_named_twice() -> None:
    """``x * x`` lists x once among its inputs; the rms_norm form ``multiply(x, x)`` still
    matches it, and ``x * y`` does not."""
    def rms_norm(second_factor: str) -> OpGraph:
        b = OpGraphBuilder(f"rms_{second_factor}")
        x, y = b.input("x", X), b.input("y", X)
        square = b.op("multiply", [x, x if second_factor == "x" else y], name="square")
        mean = b.op("mean", [square], name="mean")
        eps = b.op("add", [mean], weights=[SCALAR], name="eps")
        inv = b.op("rsqrt", [eps], name="rsqrt")
        return b.build(outputs=[b.op("multiply", [x, inv], name="scale")])

    assert units_by_name(rms_norm("x")) == {"rms_norm": [["square", "mean", "eps", "rsqrt",
                                                          "scale"]]}
    assert units_by_name(rms_norm("y")) == {}


def test_a_pattern_must_have_one_output() -> None:
    with pytest.raises(ValueError, match="feed no later step"):
        Pattern("two_outputs", (Step.of("sigmoid", "x"), Step.of("tanh", "x")))
    with pytest.raises(ValueError, match="does not come before it"):
        Pattern("backwards", (Step.of("sigmoid", 1), Step.of("tanh", "x")))
    assert len({(p.name, p.form) for p in PATTERNS}) == len(PATTERNS)


# ------------------------------------------------------------------------------ judged whole
@pytest.mark.parametrize("release, on_accelerator, reason", [
    ("neuron", True, "is nn.layer_norm as one op"),
    ("neuron@2020", False, "LayerNorm was added in neuron-cc 1.2.0.0"),
])
def test_a_layer_norm_is_accepted_or_rejected_whole(release: str, on_accelerator: bool,
                                                    reason: str) -> None:
    graph = block()
    support = support_of(get_platform(release), graph)
    unit = next(u for u in support.units if u.name == "layer_norm")
    verdicts = {support.verdict(n, 0) for n in unit.nodes}
    assert len(verdicts) == 1  # one verdict for the whole unit, variance included
    (verdict,) = verdicts
    assert verdict.supported is on_accelerator and reason in verdict.reason
    assert verdict.rule in ("pattern:layer_norm", "op-table")
    assert "layer_norm (9 ops: mean, subtract, variance" in verdict.reason


def test_without_patterns_a_target_judges_op_by_op() -> None:
    graph = block()
    plain = TargetSpec("plain", supported=["mean", "subtract", "add", "sqrt", "divide",
                                           "multiply", "nn.dense", "erf", "sigmoid"])
    verdicts = plain.check_graph(graph)
    variance = next(n.id for n in graph if n.op == "variance")
    assert not verdicts[variance].supported
    assert all(v.supported for n, v in enumerate(verdicts) if n != variance)
    judged = plain.extend("judged", patterns=["layer_norm"]).check_graph(graph)
    assert not judged[variance].supported  # nn.layer_norm is not in its table: rejected whole
    assert "is nn.layer_norm as one op" in judged[variance].reason


def test_an_unknown_pattern_name_is_one_line_with_a_suggestion() -> None:
    with pytest.raises(TargetSpecError, match=r"unknown pattern 'layer_nrom' \(did you mean "
                                              r"'layer_norm'\?\)"):
        TargetSpec("npu", supported=["add"], patterns=["layer_nrom"])


@pytest.mark.parametrize("strategy", available_strategies())
@pytest.mark.parametrize("release", ["neuron", "neuron@2020", "tensorcore"])
def test_no_strategy_splits_a_unit(strategy: str, release: str) -> None:
    graph = block()
    platform = get_platform(release)
    support = support_of(platform, graph)
    try:
        plan = get_strategy(strategy).run(graph, support, cost_model=get_cost_model(platform))
    except NotApplicableError:
        return
    plan.validate()
    assert support.units
    for unit in support.units:
        assert len({plan.device_of(n) for n in unit.nodes}) == 1, (unit.name, strategy)


def test_on_neuron_the_block_is_one_region() -> None:
    graph = block()
    plan = get_strategy("greedy").run(graph, support_of(get_platform("neuron"), graph))
    assert len(plan.regions) == 1 and plan.device_of(0) == "neuron"


def test_a_target_file_declares_patterns_and_a_typo_is_one_line(tmp_path, capsys) -> None:
    from partition_lab.cli import main
    from partition_lab.targets import load_target_file

    good = tmp_path / "npu.toml"
    good.write_text('name = "npu"\nsupported = ["mean", "subtract", "add", "sqrt", "divide", '
                    '"multiply", "nn.layer_norm"]\npatterns = ["layer_norm"]\n')
    npu = load_target_file(good)
    graph = block()
    variance = next(n.id for n in graph if n.op == "variance")
    assert npu.patterns == {"layer_norm"}
    assert npu.check_graph(graph)[variance].supported
    bad = tmp_path / "typo.toml"
    bad.write_text('name = "npu"\nsupported = ["add"]\npatterns = ["layer_nrom"]\n')
    with pytest.raises(TargetSpecError, match="did you mean 'layer_norm'"):
        load_target_file(bad)
    out = tmp_path / "plan.json"
    assert main(["partition", "zoo:resnet50_v1:small", "--target", str(bad), "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "unknown pattern 'layer_nrom'" in err and str(bad) in err
    assert not out.exists()


def test_attention_with_a_folded_mask_and_a_nan_guard_is_one_unit() -> None:
    """What ``torch.export`` writes for a Hugging Face BERT's masked attention: a constant mask
    added before the softmax and ``where(isnan(p), 0, p)`` after it (nodes as imported)."""
    b = OpGraphBuilder("bert_attention")
    scores_shape = TensorType((1, 2, 16, 16), "float32")
    q, k, v = (b.input(name, TensorType((2, 16, 16), "float32")) for name in "qkv")
    scores = b.op("nn.batch_matmul", [q, k], name="sdpa/bmm")
    scores = b.op("reshape", [scores], outputs=[scores_shape], name="sdpa/reshape")
    masked = b.op("add", [scores], weights=[scores_shape], name="sdpa/mask")
    p = b.op("nn.softmax", [masked], name="sdpa/softmax")
    nan = b.op("isnan", [p], outputs=[TensorType((1, 2, 16, 16), "bool")], name="sdpa/isnan")
    p = b.op("where", [nan, p], weights=[SCALAR], outputs=[scores_shape], name="sdpa/where")
    p = b.op("reshape", [p], outputs=[TensorType((2, 16, 16), "float32")], name="sdpa/reshape#2")
    out = b.op("nn.batch_matmul", [p, v], name="sdpa/bmm#2")
    graph = b.build(outputs=[out])
    (unit,) = find_units(graph, PATTERNS)
    assert unit.name == "attention" and "NaN guard" in unit.pattern.form
    assert len(unit.nodes) == len(graph)
    support = support_of(get_platform("neuron"), graph)
    isnan = next(n.id for n in graph if n.op == "isnan")
    assert support.verdict(isnan, 0).supported  # isnan is not on neuron's list; the unit is


# ------------------------------------------------------------------------------ priced whole
def test_a_unit_is_priced_as_one_op_where_its_device_declares_the_pattern() -> None:
    """On neuron (which declares layer_norm) the LayerNorm costs one op: one op overhead and
    only the tensors it reads from outside and its output; op by op it pays nine overheads and
    every intermediate tensor. Plan totals and the strategies' tables agree."""
    from partition_lab.core.patterns import composite_node
    from partition_lab.cost_models.base import evaluate, node_times
    from partition_lab.strategies.costing import CostTables

    graph = block()
    platform = get_platform("neuron")
    support = support_of(platform, graph)
    model = get_cost_model(platform)
    unit = next(u for u in support.units if u.name == "layer_norm")
    composite = composite_node(graph, unit)
    assert composite.op == "composite:layer_norm" and len(composite.inputs) == 1
    assert composite.flops == sum(graph[n].flops for n in unit.nodes)
    whole = node_times(model, graph, platform, "neuron", support.units)
    alone = [model.op_time(graph[n], "neuron") for n in unit.nodes]
    assert sum(whole[n] for n in unit.nodes) == pytest.approx(model.op_time(composite, "neuron"))
    assert sum(whole[n] for n in unit.nodes) < sum(alone) / 3  # nine launches became one
    # The host declares no pattern: op by op there.
    assert node_times(model, graph, platform, "cpu", support.units) == [
        model.op_time(node, "cpu") for node in graph]
    plan = get_strategy("greedy").run(graph, support)
    tables = CostTables(graph, model, platform, support.units)
    devices = [platform.index(d.device) for d in plan.decisions]
    regions = [r.nodes for r in plan.regions]
    assert tables.total(devices, regions) == pytest.approx(evaluate(plan, model).total)
    # The same assignment without units (the support op by op) pays more.
    no_units = Support(platform, {d.name: support.of(d.name) for d in platform.devices})
    op_by_op = plan.__class__.from_devices(graph, no_units, "by-op",
                                           [d.device for d in plan.decisions])
    assert evaluate(op_by_op, model).total > evaluate(plan, model).total


def test_with_a_profile_a_unit_is_priced_as_it_was_measured() -> None:
    """Ops timed one by one (and the unit not) keep their measured times: the runner that timed
    them runs a unit as its ops. A timed composite prices the unit whole."""
    from partition_lab.cost_models.base import node_times

    graph = block()
    platform = get_platform("neuron")
    units = support_of(platform, graph).units
    roofline = get_cost_model(platform)

    class Measured:
        name = "measured"

        def __init__(self, composites_timed: bool) -> None:
            self.composites_timed = composites_timed

        def op_time(self, node, device):  # noqa: ANN001, ANN202
            return roofline.op_time(node, device)

        def is_measured(self, node, device):  # noqa: ANN001, ANN202
            return self.composites_timed or not node.op.startswith("composite:")

    by_op = [roofline.op_time(n, "neuron") for n in graph]
    assert node_times(Measured(False), graph, platform, "neuron", units) == by_op
    whole = node_times(Measured(True), graph, platform, "neuron", units)
    assert whole == node_times(roofline, graph, platform, "neuron", units) != by_op


def test_an_attention_unit_is_matrix_work_and_a_silu_vector_work() -> None:
    from partition_lab.core.ops import op_class
    from partition_lab.core.patterns import composite_node

    b = OpGraphBuilder("attention")
    q, k, v = (b.input(name, TensorType((2, 16, 8), "float32")) for name in "qkv")
    scores = b.op("nn.batch_matmul", [q, k], flops=2 * 2 * 16 * 16 * 8)
    probabilities = b.op("nn.softmax", [scores])
    out = b.op("nn.batch_matmul", [probabilities, v], flops=2 * 2 * 16 * 16 * 8)
    gate = b.op("sigmoid", [out])
    graph = b.build(outputs=[b.op("multiply", [out, gate])])
    attention, silu = find_units(graph, PATTERNS)
    assert (attention.name, silu.name) == ("attention", "silu")
    assert op_class(composite_node(graph, attention)) == "matrix"
    assert op_class(composite_node(graph, silu)) == "vector"
    assert len(composite_node(graph, attention).inputs) == 3  # q, k, v; not the scores


# ------------------------------------------------------------------------------ custom patterns
MISH = '''
name = "npu"
supported = ["exp", "add", "log", "multiply", "nn.dense"]
[[custom_patterns]]
name = "mish"
stands_for = ["tanh"]
steps = [
  { op = "exp", args = ["x"] },
  { op = "add", args = [0] },
  { op = "log", args = [1] },
  { op = "tanh", args = [2] },
  { op = "multiply", args = ["x", 3] },
]
'''


def mish_block() -> OpGraph:
    b = OpGraphBuilder("mish_block")
    x = b.input("x", X)
    y = b.op("nn.dense", [x], weights=[TensorType((64, 64), "float32")], name="fc")
    soft = b.op("log", [b.op("add", [b.op("exp", [y], name="e")], weights=[SCALAR], name="a")],
                name="l")
    out = b.op("multiply", [y, b.op("tanh", [soft], name="t")], name="m")
    return b.build(outputs=[out])


def test_a_target_file_defines_a_pattern_judged_whole(tmp_path) -> None:
    from partition_lab.targets import load_target_file

    path = tmp_path / "npu.toml"
    path.write_text(MISH)
    npu = load_target_file(path)
    assert "mish" in npu.patterns and [p.name for p in npu.custom_patterns] == ["mish"]
    graph = mish_block()
    tanh = next(n.id for n in graph if n.op == "tanh")
    verdicts = npu.check_graph(graph)
    # tanh is not in the table: the whole unit is rejected with the pattern's reason...
    assert not any(verdicts[n].supported for n in range(1, len(graph)))
    assert "mish (5 ops: exp, add, log, tanh" in verdicts[tanh].reason
    assert verdicts[0].supported  # ...while the dense is judged alone
    path.write_text(MISH.replace('"nn.dense"]', '"nn.dense", "tanh"]'))
    assert all(v.supported for v in load_target_file(path).check_graph(graph))


def test_a_custom_pattern_attribute_constraint_must_hold() -> None:
    b = OpGraphBuilder("centre")
    x = b.input("x", X)
    mean = b.op("mean", [x], attrs={"axis": (2,), "keepdims": 1})
    graph = b.build(outputs=[b.op("subtract", [x, mean])])
    for axis, found in [((2,), True), ([2], True), ((1,), False)]:
        mean_only = Pattern("centred", (Step.of("mean", "x", axis=axis),
                                        Step.of("subtract", "x", 0)))
        units = find_units(graph, [mean_only])
        assert bool(units) is found, axis


@pytest.mark.parametrize("change, message", [
    (('"tanh", args = [2]', '"tanhh", args = [2]'), "'tanhh' is not a Relay op (did you mean 'tanh'?)"),
    (('args = [2]', 'args = [4]'), "steps: step 3 refers to step 4, which does not come before it"),
    (('{ op = "add", args = [0] }', '{ op = "add", args = [0], attrs = { axsi = 1 } }'),
     "custom_patterns[0].steps[1].attrs.axsi"),
    (('name = "mish"', 'name = "gelu"'), "has the name of a built-in pattern"),
    (('name = "mish"', 'name = "mi sh"'), "is not a name a codegen can use"),
    (('stands_for = ["tanh"]', 'stands_for = ["tnh"]'), "'tnh' is not a Relay op"),
    (('{ op = "exp", args = ["x"] }', '{ op = "exp", arg = ["x"] }'), "unknown key 'arg'"),
])
def test_a_bad_custom_pattern_is_one_line_exit_2_and_nothing_written(
        tmp_path, capsys, change: tuple[str, str], message: str) -> None:
    from partition_lab.cli import main

    assert change[0] in MISH
    bad = tmp_path / "bad.toml"
    bad.write_text(MISH.replace(*change))
    out = tmp_path / "plan.json"
    assert main(["partition", "zoo:resnet50_v1:small", "--target", str(bad), "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and message in err and str(bad) in err, err
    assert not out.exists()


def test_a_plan_file_keeps_its_units_and_prices_them_as_before() -> None:
    """Units and the patterns each device judged whole travel in the plan JSON (and bundles),
    so a plan read back (on the GPU machine, without TVM or rules) is priced and re-planned as
    it was made; read against the real platform its verdicts still check out."""
    import json

    from partition_lab.core.plan import PartitionPlan
    from partition_lab.cost_models.base import evaluate
    from partition_lab.executors.graph_io import platform_from_dict, platform_to_dict

    graph = block()
    platform = get_platform("neuron")
    support = support_of(platform, graph)
    plan = get_strategy("greedy").run(graph, support)
    data = json.loads(json.dumps(plan.to_dict()))
    assert [u["pattern"] for u in data["units"]] == ["layer_norm", "gelu", "silu"]
    assert "layer_norm" in next(d for d in data["devices"] if d["name"] == "neuron")["patterns"]
    for read in (PartitionPlan.from_dict(graph, data),  # no rules: the records' patterns
                 PartitionPlan.from_dict(graph, data, platform)):  # checked against neuron's
        assert [(u.name, u.nodes) for u in read.support.units] == [
            (u.name, u.nodes) for u in support.units]
    read = PartitionPlan.from_dict(graph, data)
    rebuilt = platform_from_dict(platform_to_dict(platform))
    assert rebuilt.devices[0].target.patterns == platform.devices[0].target.patterns
    model = get_cost_model(platform)
    assert evaluate(read, model).total == pytest.approx(evaluate(plan, model).total)
    assert plan.to_dict() == read.to_dict()


@pytest.mark.parametrize("units, message", [
    ("nope", "units must be a list"),
    ([{"pattern": "gelu", "nodes": [99]}], r"units\[0\]: nodes must be a non-empty list"),
    ([{"nodes": [1]}], r"units\[0\]: expected an object with a pattern name"),
    ([{"pattern": 'gelu" */ x', "form": "", "nodes": [1]}], r"units\[0\]: pattern .* is not a name"),
    ([{"pattern": "gelu", "form": 3, "nodes": [1]}], r"units\[0\]: form must be a string"),
])
def test_a_plan_file_with_broken_units_is_one_clear_error(units, message: str) -> None:
    import json

    from partition_lab.core.plan import PartitionPlan
    from partition_lab.errors import PlanError

    graph = block()
    data = json.loads(json.dumps(get_strategy("greedy").run(
        graph, support_of(get_platform("neuron"), graph)).to_dict()))
    data["units"] = units
    with pytest.raises(PlanError, match=message):
        PartitionPlan.from_dict(graph, data)


def test_casts_that_mixed_precision_puts_around_erf_and_softmax_are_seen_through() -> None:
    """ToMixedPrecision keeps erf and softmax in float32 with a cast on each side; GELU and
    attention are still one unit each, the casts inside them; a cast read elsewhere too is
    not swallowed."""
    half, single = TensorType((1, 16, 64), "float16"), TensorType((1, 16, 64), "float32")
    b = OpGraphBuilder("gelu_mixed")
    x = b.input("x", half)
    scaled = b.op("divide", [x], weights=[SCALAR], name="act", outputs=[half])
    up = b.op("cast", [scaled], name="act/cast", outputs=[single])
    erf = b.op("erf", [up], name="act#2", outputs=[single])
    down = b.op("cast", [erf], name="act/cast#2", outputs=[half])
    one = b.op("add", [down], weights=[SCALAR], name="act#3", outputs=[half])
    half_ = b.op("multiply", [one], weights=[SCALAR], name="act#4", outputs=[half])
    out = b.op("multiply", [x, half_], name="act#5", outputs=[half])
    graph = b.build(outputs=[out])
    assert units_by_name(graph) == {"gelu": [["act", "act/cast", "act#2", "act/cast#2", "act#3",
                                              "act#4", "act#5"]]}
    b2 = OpGraphBuilder("gelu_leaky_cast")
    x = b2.input("x", half)
    scaled = b2.op("divide", [x], weights=[SCALAR], outputs=[half])
    up = b2.op("cast", [scaled], outputs=[single])
    erf = b2.op("erf", [up], outputs=[single])
    one = b2.op("add", [b2.op("cast", [erf], outputs=[half])], weights=[SCALAR], outputs=[half])
    out = b2.op("multiply", [x, b2.op("multiply", [one], weights=[SCALAR], outputs=[half])],
                outputs=[half])
    also = b2.op("nn.relu", [up], outputs=[single])  # the first cast is read outside the GELU
    assert "gelu" not in units_by_name(b2.build(outputs=[out, also]))
