"""Patterns as units of support: found in the op graph, judged whole, kept on one device.

The graphs are built by hand in the forms TVM's ONNX importer gives ``torch.export``ed modules
(the node lists of ``nn.LayerNorm``, ``nn.GELU``, ``nn.SiLU``, ``nn.Hardswish`` and
``nn.MultiheadAttention`` read off a real import), so these tests need no TVM.
"""

from __future__ import annotations

import pytest

from partition_lab.core.graph import OpGraph, OpGraphBuilder, TensorType
from partition_lab.core.patterns import PATTERNS, Pattern, Step, find_units
from partition_lab.core.support import Support
from partition_lab.cost_models import get_cost_model
from partition_lab.errors import TargetSpecError
from partition_lab.strategies import NotApplicableError, available_strategies, get_strategy
from partition_lab.targets import TargetSpec, get_platform

X = TensorType((1, 16, 64), "float32")
W = TensorType((64,), "float32")
SCALAR = TensorType((), "float32")


def layer_norm(b: OpGraphBuilder, x, prefix: str = "ln"):  # noqa: ANN001, ANN201
    mean = b.op("mean", [x], name=f"{prefix}/mean", attrs={"axis": (2,), "keepdims": 1})
    sub = b.op("subtract", [x, mean], name=f"{prefix}/subtract")
    var = b.op("variance", [x, mean], name=f"{prefix}/variance")
    eps = b.op("add", [var], weights=[SCALAR], name=f"{prefix}/add")
    std = b.op("sqrt", [eps], name=f"{prefix}/sqrt")
    inv = b.op("divide", [std], weights=[SCALAR], name=f"{prefix}/divide")
    norm = b.op("multiply", [sub, inv], name=f"{prefix}/multiply")
    scaled = b.op("multiply", [norm], weights=[W], name=f"{prefix}/multiply#2")
    return b.op("add", [scaled], weights=[W], name=f"{prefix}/add#2")


def gelu(b: OpGraphBuilder, x, prefix: str = "act"):  # noqa: ANN001, ANN201
    scaled = b.op("divide", [x], weights=[SCALAR], name=prefix)
    erf = b.op("erf", [scaled], name=f"{prefix}#2")
    one = b.op("add", [erf], weights=[SCALAR], name=f"{prefix}#3")
    half = b.op("multiply", [one], weights=[SCALAR], name=f"{prefix}#4")
    return b.op("multiply", [x, half], name=f"{prefix}#5")


def block() -> OpGraph:
    """LayerNorm -> dense -> GELU -> dense -> SiLU: a transformer MLP block."""
    b = OpGraphBuilder("mlp_block")
    x = b.input("x", X)
    y = layer_norm(b, x)
    y = b.op("nn.dense", [y], weights=[TensorType((64, 64), "float32")], flops=2 * 16 * 64 * 64)
    y = gelu(b, y)
    y = b.op("nn.dense", [y], weights=[TensorType((64, 64), "float32")], flops=2 * 16 * 64 * 64)
    sig = b.op("sigmoid", [y], name="silu")
    y = b.op("multiply", [y, sig], name="silu#2")
    return b.build(outputs=[y])


def units_by_name(graph: OpGraph) -> dict[str, list[list[str]]]:
    found: dict[str, list[list[str]]] = {}
    for unit in find_units(graph):
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
    assert find_units(graph) == []


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
def _support(platform, graph: OpGraph) -> Support:  # noqa: ANN001
    """Every device's verdicts with the units judged whole (what relay's annotate does)."""
    units = find_units(graph)
    table = {d.name: d.target.check_graph(graph, units) for d in platform.accelerators}
    return Support.with_host(platform, table, units)


@pytest.mark.parametrize("release, on_accelerator, reason", [
    ("neuron", True, "is nn.layer_norm as one op"),
    ("neuron@2020", False, "LayerNorm was added in neuron-cc 1.2.0.0"),
])
def test_a_layer_norm_is_accepted_or_rejected_whole(release: str, on_accelerator: bool,
                                                    reason: str) -> None:
    graph = block()
    support = _support(get_platform(release), graph)
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
    support = _support(platform, graph)
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
    plan = get_strategy("greedy").run(graph, _support(get_platform("neuron"), graph))
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
    (unit,) = find_units(graph)
    assert unit.name == "attention" and "NaN guard" in unit.pattern.form
    assert len(unit.nodes) == len(graph)
    support = _support(get_platform("neuron"), graph)
    isnan = next(n.id for n in graph if n.op == "isnan")
    assert support.verdict(isnan, 0).supported  # isnan is not on neuron's list; the unit is
