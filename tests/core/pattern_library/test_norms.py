"""RMSNorm and GroupNorm as the exporters write them: found as units, judged, priced and run whole.

The hand-built graphs follow the node lists of a real import (``load_model`` of transformers'
``LlamaRMSNorm`` and of ``nn.GroupNorm``, read off ``torch.export`` -> ONNX -> Relay); the tests
at the end import those modules (TVM and PyTorch) and check the same units, the numerics and the
profile.
"""

from __future__ import annotations

import pytest

from partition_lab.core.graph import OpGraph, OpGraphBuilder, TensorType
from partition_lab.core.pattern_library import PATTERNS
from partition_lab.core.patterns import composite_node, find_units
from partition_lab.cost_models import get_cost_model
from partition_lab.cost_models.base import node_times
from partition_lab.strategies import get_strategy
from partition_lab.targets import TargetSpec, get_platform
from partition_lab.targets.devices import without_patterns
from transformer_graphs import SCALAR, W, X, support_of

DENSE = TensorType((64, 64), "float32")


def units_of(graph: OpGraph) -> list[tuple[str, str, list[str]]]:
    return [(u.name, u.pattern.form, [graph[n].name for n in u.nodes])
            for u in find_units(graph, PATTERNS)]


# ------------------------------------------------------------------------------ RMSNorm
def rms_norm_graph(scale: str = "w", read_inside: bool = False) -> OpGraph:
    """``x * rsqrt(mean(x^2) + eps) * w`` as ``torch.export`` -> ONNX writes it for Llama and
    Gemma: ``rsqrt`` as ``sqrt`` then ``divide(1, .)``. ``scale``: ``"w"`` (the weight, or
    Gemma's ``1 + w`` folded into it), ``"1 + w"`` (Gemma's, not folded: an ``add`` on the
    weight that reads no tensor) or empty; ``read_inside``: the reciprocal is also an output."""
    b = OpGraphBuilder(f"rms_norm_{scale}")
    x = b.input("x", X)
    square = b.op("power", [x], weights=[SCALAR], name="pow")
    mean = b.op("mean", [square], attrs={"axis": (-1,), "keepdims": 1}, name="mean")
    std = b.op("sqrt", [b.op("add", [mean], weights=[SCALAR], name="eps")], name="sqrt")
    inverse = b.op("divide", [std], weights=[SCALAR], name="reciprocal")
    y = b.op("multiply", [x, inverse], name="normed")
    if scale == "w":
        y = b.op("multiply", [y], weights=[W], name="scale")
    elif scale == "1 + w":
        one_plus_w = b.op("add", [], weights=[W], outputs=[W], name="one_plus_w")
        y = b.op("multiply", [y, one_plus_w], name="scale")
    return b.build(outputs=[y, inverse] if read_inside else [y])


@pytest.mark.parametrize("scale, form, names", [
    ("w", "power, 1/sqrt, affine", ["scale"]),
    ("1 + w", "power, 1/sqrt, * (1 + w)", ["one_plus_w", "scale"]),
    ("", "power, 1/sqrt", []),
])
def test_rms_norm_as_torch_export_writes_rsqrt_is_one_unit(scale: str, form: str,
                                                           names: list[str]) -> None:
    graph = rms_norm_graph(scale)
    body = ["pow", "mean", "eps", "sqrt", "reciprocal", "normed"]
    assert units_of(graph) == [("rms_norm", form, body + names)]


def test_an_rms_norm_whose_inside_is_read_outside_is_not_a_unit() -> None:
    assert units_of(rms_norm_graph(read_inside=True)) == []


def test_on_neuron_an_rms_norm_is_one_verdict_naming_it_and_one_region() -> None:
    graph = rms_norm_graph()
    platform = get_platform("neuron")
    support = support_of(platform, graph)
    verdicts = {support.verdict(n, 0) for n in range(len(graph))}
    assert len(verdicts) == 1
    (verdict,) = verdicts
    assert verdict.supported and verdict.rule == "pattern:rms_norm"
    assert verdict.reason.startswith("rms_norm (7 ops: power, mean, add, sqrt, ... (2 more)) "
                                     "as one unit: neuron supports each of its ops")
    plan = get_strategy("greedy").run(graph, support)
    assert len(plan.regions) == 1 and plan.device_of(0) == "neuron"


def test_an_rms_norm_is_priced_as_one_op_on_neuron() -> None:
    graph = rms_norm_graph()
    platform = get_platform("neuron")
    support = support_of(platform, graph)
    model = get_cost_model(platform)
    (unit,) = support.units
    composite = composite_node(graph, unit)
    assert composite.op == "composite:rms_norm" and len(composite.inputs) == 1
    whole = node_times(model, graph, platform, "neuron", support.units)
    alone = [model.op_time(graph[n], "neuron") for n in unit.nodes]
    assert sum(whole) == pytest.approx(model.op_time(composite, "neuron"))
    assert sum(whole) < sum(alone) / 3  # seven launches became one


# ------------------------------------------------------------------------------ GroupNorm
def group_norm_graph(affine: str = "cast_like") -> OpGraph:
    """dense -> GroupNorm -> dense, the GroupNorm as ``nn.GroupNorm`` exports: reshape to
    (N, groups, -1), ``nn.instance_norm``, reshape back, then the weight and bias, each
    ``cast_like`` the activation (Wav2Vec2's feature extractor) when ``affine`` says so."""
    channels, groups = TensorType((1, 16, 64), "float32"), TensorType((1, 4, 256), "float32")
    per_channel = TensorType((16, 1), "float32")
    b = OpGraphBuilder(f"group_norm_{affine}")
    x = b.op("nn.dense", [b.input("x", X)], weights=[DENSE], outputs=[channels], name="fc1")
    split = b.op("reshape", [x], outputs=[groups], name="gn/reshape")
    normed = b.op("nn.instance_norm", [split], weights=[TensorType((4,), "float32")] * 2,
                  attrs={"axis": 1, "epsilon": 1e-5, "center": 1, "scale": 1},
                  name="gn/instance_norm")
    y = b.op("reshape", [normed], outputs=[channels], name="gn/reshape#2")
    if affine == "cast_like":
        gamma = b.op("cast_like", [y], weights=[per_channel], outputs=[per_channel],
                     name="gn/cast_like")
        y = b.op("multiply", [y, gamma], name="gn/multiply")
        beta = b.op("cast_like", [y], weights=[per_channel], outputs=[per_channel],
                    name="gn/cast_like#2")
        y = b.op("add", [y, beta], name="gn/add")
    elif affine == "plain":
        y = b.op("add", [b.op("multiply", [y], weights=[per_channel], name="gn/multiply")],
                 weights=[per_channel], name="gn/add")
    return b.build(outputs=[b.op("nn.dense", [y], weights=[DENSE], name="fc2")])


@pytest.mark.parametrize("affine, form, count", [
    ("cast_like", "instance_norm, cast_like affine", 7),
    ("plain", "instance_norm, plain affine", 5),
    ("", "instance_norm", 3),
])
def test_group_norm_through_instance_norm_is_one_unit(affine: str, form: str, count: int) -> None:
    (found,) = units_of(group_norm_graph(affine))
    assert found[:2] == ("group_norm", form) and len(found[2]) == count
    assert found[2][:3] == ["gn/reshape", "gn/instance_norm", "gn/reshape#2"]


def test_on_neuron_a_group_norm_is_one_island_whose_every_op_names_it() -> None:
    """MXNet GroupNorm is on no neuron-cc list: the unit stays on the host whole, its
    ``cast_like``s inside it (no ``cast_scale`` takes them), one island where op by op the
    instance norm and each cast_like were islands of their own."""
    graph = group_norm_graph()
    platform = get_platform("neuron")
    support = support_of(platform, graph)
    assert [u.name for u in support.units] == ["group_norm"]
    plan = get_strategy("greedy").run(graph, support)
    host = [n for n in range(len(graph)) if plan.device_of(n) == "cpu"]
    assert [graph[n].name.split("/")[0] for n in host] == ["gn"] * 7
    assert len(plan.cpu_regions) == 1
    for decision in plan.decisions:
        if decision.device == "cpu":
            assert decision.reason.startswith("group_norm (7 ops: reshape, nn.instance_norm, "
                                              "cast_like, multiply, ... (1 more)) is "
                                              "nn.group_norm as one op")
            assert "it comes from GroupNorm, which no neuron-cc release lists" in decision.reason
    op_by_op = without_patterns(platform)
    plain = get_strategy("greedy").run(graph, support_of(op_by_op, graph))
    assert len(plain.cpu_regions) > 1


def test_a_target_that_lists_nn_group_norm_takes_the_unit_and_prices_it_as_one_op() -> None:
    npu = TargetSpec("npu", supported=["nn.dense", "nn.group_norm"], patterns=["group_norm"],
                     default_profile="inferentia1")
    platform = get_platform(npu)
    graph = group_norm_graph()
    support = support_of(platform, graph)
    (unit,) = support.units
    assert all(support.verdict(n, 0).supported for n in unit.nodes)  # reshape, cast_like too
    assert "is nn.group_norm as one op" in support.verdict(unit.output, 0).reason
    plan = get_strategy("greedy").run(graph, support)
    assert {d.device for d in plan.decisions} == {"npu"}
    model = get_cost_model(platform)
    whole = node_times(model, graph, platform, "npu", support.units)
    composite = composite_node(graph, unit)
    assert sum(whole[n] for n in unit.nodes) == pytest.approx(model.op_time(composite, "npu"))


# ------------------------------------------------------------------------------ real exports
@pytest.fixture(scope="module")
def exports():  # noqa: ANN201
    import pattern_exports

    return pattern_exports


def _rms_block():  # noqa: ANN202
    from transformers.models.gemma.modeling_gemma import GemmaRMSNorm
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    torch = pytest.importorskip("torch")

    class Block(torch.nn.Module):
        """Llama's RMSNorm, a linear layer, Gemma's RMSNorm (x * (1 + w)), random weights."""

        def __init__(self) -> None:
            super().__init__()
            self.llama, self.fc, self.gemma = LlamaRMSNorm(64), torch.nn.Linear(64, 64), \
                GemmaRMSNorm(64)
            with torch.no_grad():
                self.llama.weight.uniform_(0.5, 1.5)
                self.gemma.weight.uniform_(-0.5, 0.5)

        def forward(self, x):  # noqa: ANN001, ANN202
            return self.gemma(self.fc(self.llama(x)))

    torch.manual_seed(0)
    return Block().eval(), torch.randn(1, 16, 64)


def test_llama_and_gemma_rms_norms_from_torch_export_are_units_on_neuron(exports) -> None:
    pytest.importorskip("transformers")
    module, x = _rms_block()
    mod, params = exports.exported(module, x)
    result = exports.partitioned(mod, params, "neuron")
    assert exports.composites(result.mod) == {"rms_norm": 2}
    assert {u.pattern.form for u in result.plan.support.units} == {"power, 1/sqrt, affine"}
    assert len(result.plan.accelerator_regions) == 1 and not result.plan.cpu_regions
    exports.assert_matches_torch(result, module, x)
    assert exports.assert_profiled_whole(mod, params, get_platform("neuron"), "rms_norm") == 2


def test_group_norm_from_torch_export_is_one_unit_judged_whole(exports) -> None:
    """``nn.GroupNorm`` with one channel per group (Wav2Vec2's feature extractor) and with four:
    on neuron each is one host island; on a target that lists ``nn.group_norm`` each is one
    ``Composite`` and is profiled whole (the executor's instance_norm kernel runs it)."""
    torch = pytest.importorskip("torch")

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv1d(1, 16, 10, stride=5)
            self.norm1, self.norm4 = torch.nn.GroupNorm(16, 16), torch.nn.GroupNorm(4, 16)
            with torch.no_grad():
                for norm in (self.norm1, self.norm4):
                    norm.weight.uniform_(0.5, 1.5)
                    norm.bias.uniform_(-0.5, 0.5)

        def forward(self, x):  # noqa: ANN001, ANN202
            return self.norm4(torch.relu(self.norm1(self.conv(x))))

    torch.manual_seed(0)
    module, x = Block().eval(), torch.randn(1, 1, 400)
    mod, params = exports.exported(module, x)
    on_neuron = exports.partitioned(mod, params, "neuron")
    assert [u.name for u in on_neuron.plan.support.units] == ["group_norm"] * 2
    assert len(on_neuron.plan.cpu_regions) == 2
    host = [d for d in on_neuron.plan.decisions if d.device == "cpu"]
    assert len(host) == 14 and all(d.reason.startswith("group_norm (7 ops") for d in host)
    exports.assert_matches_torch(on_neuron, module, x)
    npu = TargetSpec("npu", supported=["nn.conv1d", "nn.bias_add", "nn.relu", "expand_dims",
                                       "nn.group_norm"], patterns=["group_norm"],
                     default_profile="inferentia1")
    on_npu = exports.partitioned(mod, params, npu)
    assert exports.composites(on_npu.mod) == {"group_norm": 2}
    assert not on_npu.plan.cpu_regions
    exports.assert_matches_torch(on_npu, module, x)
    assert exports.assert_profiled_whole(mod, params, get_platform(npu), "group_norm") == 2
