"""A transformer MLP block as TVM's ONNX importer writes it, and its support table:
the hand-built graphs the patterns and the measured choice are tested on (no TVM)."""

from __future__ import annotations

from partition_lab.core.graph import OpGraph, OpGraphBuilder, TensorType
from partition_lab.core.pattern_library import PATTERNS
from partition_lab.core.patterns import find_units
from partition_lab.core.support import Support

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


def support_of(platform, graph: OpGraph) -> Support:  # noqa: ANN001
    """Every device's verdicts with the units judged whole (what relay's annotate does)."""
    units = find_units(graph, PATTERNS)
    table = {d.name: d.target.check_graph(graph, units) for d in platform.accelerators}
    return Support.with_host(platform, table, units)
