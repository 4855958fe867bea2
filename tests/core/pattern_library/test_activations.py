"""GELU-tanh in the three orders the exporters write its 0.5, and QuickGELU: found as units,
judged, priced and run whole.

The hand-built graphs follow the node lists of a real import (``load_model`` of transformers'
``gelu_pytorch_tanh`` (Gemma), ``gelu_new`` (Phi) and of ``x * sigmoid(1.702 * x)`` written from
its definition); the tests at the end import those (TVM and PyTorch).
"""

from __future__ import annotations

import pytest

from partition_lab.core.graph import OpGraph, OpGraphBuilder, TensorType
from partition_lab.core.pattern_library import PATTERNS
from partition_lab.core.patterns import composite_node, find_units
from partition_lab.cost_models import get_cost_model
from partition_lab.cost_models.base import node_times
from partition_lab.targets import get_platform
from transformer_graphs import SCALAR, X, support_of

HALF = TensorType((1, 16, 64), "float16")


def units_of(graph: OpGraph) -> list[tuple[str, str, list[str]]]:
    return [(u.name, u.pattern.form, [graph[n].name for n in u.nodes])
            for u in find_units(graph, PATTERNS)]


def gelu_tanh_graph(half: str) -> OpGraph:
    """0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))) with the 0.5 where ``half``
    says: ``"last"``, ``"x first"`` (Phi's ``gelu_new``: 0.5 * x, then times (1 + tanh)) or
    ``"before x"`` (Gemma's: x * ((1 + tanh) * 0.5))."""
    b = OpGraphBuilder(f"gelu_tanh_{half}")
    x = b.input("x", X)
    halved = b.op("multiply", [x], weights=[SCALAR], name="half") if half == "x first" else None
    cube = b.op("multiply", [b.op("power", [x], weights=[SCALAR], name="cube")],
                weights=[SCALAR], name="c")
    inner = b.op("multiply", [b.op("add", [x, cube], name="x+c")], weights=[SCALAR], name="k")
    one = b.op("add", [b.op("tanh", [inner], name="tanh")], weights=[SCALAR], name="1+tanh")
    if half == "last":
        y = b.op("multiply", [b.op("multiply", [x, one], name="x*")], weights=[SCALAR],
                 name="half")
    elif half == "x first":
        y = b.op("multiply", [halved, one], name="x*")
    else:
        y = b.op("multiply", [x, b.op("multiply", [one], weights=[SCALAR], name="half")],
                 name="x*")
    return b.build(outputs=[y])


@pytest.mark.parametrize("half", ["last", "x first", "before x"])
def test_gelu_tanh_in_each_order_of_its_half_is_one_unit(half: str) -> None:
    graph = gelu_tanh_graph(half)
    ((name, form, names),) = units_of(graph)
    assert (name, form) == ("gelu_tanh", f"0.5 {half}")
    assert sorted(names) == sorted(node.name for node in graph)


def gelu_tanh_mixed_precision() -> OpGraph:
    """Phi's GELU-tanh after ToMixedPrecision (``tensorcore``): x is float16, ``0.5 * x`` is
    computed on it and cast, the rest reads ``cast(x)`` (a cast two nodes read)."""
    b = OpGraphBuilder("gelu_tanh_fp16")
    x = b.op("nn.dense", [b.input("x", HALF)], weights=[TensorType((64, 64), "float16")],
             name="fc")
    halved = b.op("cast", [b.op("multiply", [x], weights=[SCALAR], name="half")],
                  outputs=[X], attrs={"dtype": "float32"}, name="half/cast")
    wide = b.op("cast", [x], outputs=[X], attrs={"dtype": "float32"}, name="x/cast")
    cube = b.op("multiply", [b.op("power", [wide], weights=[SCALAR], name="cube")],
                weights=[SCALAR], name="c")
    inner = b.op("multiply", [b.op("add", [wide, cube], name="x+c")], weights=[SCALAR], name="k")
    one = b.op("add", [b.op("tanh", [inner], name="tanh")], weights=[SCALAR], name="1+tanh")
    return b.build(outputs=[b.op("multiply", [halved, one], name="x*")])


def test_a_named_value_matches_a_cast_of_it_as_mixed_precision_writes_gelu_tanh() -> None:
    graph = gelu_tanh_mixed_precision()
    ((name, form, names),) = units_of(graph)
    assert (name, form) == ("gelu_tanh", "0.5 x first")
    assert "half/cast" in names  # read by one node: seen through, inside the unit
    assert "x/cast" not in names and "fc" not in names  # read twice: an input, as x is
    unit = find_units(graph, PATTERNS)[0]
    assert {t.dtype for t in composite_node(graph, unit).inputs} == {"float16", "float32"}


def test_a_gelu_tanh_of_two_different_tensors_is_not_a_unit() -> None:
    b = OpGraphBuilder("two")
    x, y = b.input("x", X), b.input("y", X)
    cube = b.op("multiply", [b.op("power", [x], weights=[SCALAR])], weights=[SCALAR])
    inner = b.op("multiply", [b.op("add", [y, cube])], weights=[SCALAR])
    one = b.op("add", [b.op("tanh", [inner])], weights=[SCALAR])
    graph = b.build(outputs=[b.op("multiply", [b.op("multiply", [x, one])], weights=[SCALAR])])
    assert units_of(graph) == []


def quick_gelu_graph() -> OpGraph:
    b = OpGraphBuilder("quick_gelu")
    x = b.input("x", X)
    gate = b.op("sigmoid", [b.op("multiply", [x], weights=[SCALAR], name="1.702x")],
                name="sigmoid")
    return b.build(outputs=[b.op("multiply", [x, gate], name="x*")])


def test_quick_gelu_is_one_unit_and_a_silu_of_a_scaled_tensor_is_not_one() -> None:
    assert units_of(quick_gelu_graph()) == [
        ("quick_gelu", "x * sigmoid(1.702 x)", ["1.702x", "sigmoid", "x*"])]
    b = OpGraphBuilder("scaled_silu")
    scaled = b.op("multiply", [b.input("x", X)], weights=[SCALAR], name="scaled")
    graph = b.build(outputs=[b.op("multiply", [scaled, b.op("sigmoid", [scaled], name="s")],
                                  name="m")])
    assert units_of(graph) == [("silu", "x * sigmoid(x)", ["s", "m"])]


@pytest.mark.parametrize("build, name, reason", [
    (lambda: gelu_tanh_graph("x first"), "gelu_tanh", "is tanh as one op"),
    (quick_gelu_graph, "quick_gelu", "as one unit: neuron supports each of its ops"),
])
def test_on_neuron_each_is_one_verdict_and_priced_as_one_op(build, name: str,  # noqa: ANN001
                                                            reason: str) -> None:
    graph = build()
    platform = get_platform("neuron")
    support = support_of(platform, graph)
    (unit,) = support.units
    verdicts = {support.verdict(n, 0) for n in unit.nodes}
    assert len(verdicts) == 1
    (verdict,) = verdicts
    assert verdict.supported and verdict.rule == f"pattern:{name}" and reason in verdict.reason
    assert verdict.reason.startswith(f"{name} ({len(unit.nodes)} ops: ")
    model = get_cost_model(platform)
    whole = node_times(model, graph, platform, "neuron", support.units)
    composite = composite_node(graph, unit)
    assert composite.op == f"composite:{name}"
    assert sum(whole) == pytest.approx(model.op_time(composite, "neuron"))
    assert sum(whole) < sum(model.op_time(graph[n], "neuron") for n in unit.nodes)


# ------------------------------------------------------------------------------ real exports
@pytest.mark.parametrize("activation, form", [
    ("gelu_pytorch_tanh", "0.5 before x"),  # Gemma's
    ("gelu_new", "0.5 x first"),  # Phi's
    ("quick_gelu", "x * sigmoid(1.702 x)"),  # from its definition, below
])
def test_activations_from_torch_export_are_units_on_neuron_and_tensorcore(activation: str,
                                                                           form: str) -> None:
    import pattern_exports as exports

    torch = pytest.importorskip("torch")
    if activation == "quick_gelu":
        def act(x):  # noqa: ANN001, ANN202
            return x * torch.sigmoid(1.702 * x)
    else:
        act = pytest.importorskip("transformers.activations").ACT2FN[activation]

    class MLP(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1, self.fc2 = torch.nn.Linear(64, 128), torch.nn.Linear(128, 64)

        def forward(self, x):  # noqa: ANN001, ANN202
            return self.fc2(act(self.fc1(x)))

    torch.manual_seed(0)
    module, x = MLP().eval(), torch.randn(1, 16, 64)
    mod, params = exports.exported(module, x)
    name = "quick_gelu" if activation == "quick_gelu" else "gelu_tanh"
    result = exports.partitioned(mod, params, "neuron")
    assert [(u.name, u.pattern.form) for u in result.plan.support.units] == [(name, form)]
    assert exports.composites(result.mod) == {name: 1} and not result.plan.cpu_regions
    exports.assert_matches_torch(result, module, x)
    assert exports.assert_profiled_whole(mod, params, get_platform("neuron"), name) == 1
    # In mixed precision (tensorcore: float16 with casts around the float32 ops) as well.
    on_tensorcore = exports.partitioned(mod, params, "tensorcore")
    assert [u.name for u in on_tensorcore.plan.support.units] == [name]
