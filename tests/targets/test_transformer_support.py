"""The transformer support tables of docs/guide/targets-reference.md §5, row by row, against what the
built-in targets decide, and the Tensor Core table's TVM columns against TVM 0.19 itself.

A verdict cell reads ``✓`` or ``✗`` followed by "quoted" fragments of the reason. The neuron
table's unit rows are checked on every form of the pattern (each alternative op of each step), built
from the pattern's own steps; the TVM cross-check asks TVM's CUDA strategy which implementation it
selects for ``cuda -arch=sm_80`` (no GPU needed) and what ``Legalize`` pads.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

import pytest

from partition_lab.core.graph import OpGraph, OpGraphBuilder, OpNode, TensorType
from partition_lab.core.pattern_library import PATTERN_NAMES, PATTERNS
from partition_lab.core.patterns import Pattern, find_units
from partition_lab.targets import get_target
from partition_lab.targets.shapes import dimension
from repo_paths import REPO_ROOT

REFERENCE = REPO_ROOT / "docs" / "guide" / "targets-reference.md"
NEURON_HEADING = "### 5.1 "
TENSORCORE_HEADING = "### 5.2 "
X = TensorType((1, 128, 768), "float32")
SCALAR = TensorType((), "float32")
IDS = TensorType((1, 128), "int64")


# ------------------------------------------------------------------------------ reading the page
def table(heading: str) -> tuple[list[str], list[list[str]]]:
    """The header cells and rows of the first table after the line starting with ``heading``."""
    lines = REFERENCE.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(heading))
    first = next(i for i in range(start, len(lines)) if lines[i].startswith("|"))
    block = list(itertools.takewhile(lambda line: line.startswith("|"), lines[first:]))
    header, *rows = ([cell.strip() for cell in line.strip().strip("|").split("|")]
                     for line in block if not set(line) <= set("|-: "))
    return header, rows


@dataclass(frozen=True)
class Expected:
    supported: bool
    fragments: tuple[str, ...]

    @classmethod
    def of(cls, cell: str) -> Expected:
        assert cell[:1] in "✓✗", f"a verdict cell starts with ✓ or ✗: {cell!r}"
        return cls(cell.startswith("✓"), tuple(re.findall(r'"([^"]+)"', cell)))

    def check(self, verdict, where: str) -> None:  # noqa: ANN001
        assert verdict.supported is self.supported, f"{where}: {verdict.reason}"
        for fragment in self.fragments:
            assert fragment in verdict.reason, f"{where}: {fragment!r} not in {verdict.reason!r}"


def tuples(cell: str) -> list[tuple[int, ...]]:
    return [tuple(int(v) for v in group.split(",")) for group in re.findall(r"\(([\d, ]+)\)", cell)]


# ------------------------------------------------------------------------------ 5.1 neuron
def instances(pattern: Pattern) -> list[OpGraph]:
    """One graph per choice of op at each step of ``pattern``, built from its steps: named values
    are graph inputs (``ids`` int64, as tokenizers give them), a step with one argument or none
    gets a constant operand (as eps, 0.5, gamma). A pattern that checks its shapes gets the
    shapes of :func:`layout`."""
    graphs = []
    value, steps = layout(pattern)
    for ops in itertools.product(*(sorted(step.ops) for step in pattern.steps)):
        b = OpGraphBuilder(f"{pattern.name}:{pattern.form}:{'-'.join(ops)}")
        named, nodes = {}, []
        for index, (step, op) in enumerate(zip(pattern.steps, ops, strict=True)):
            for name in step.args:
                if isinstance(name, str) and name not in named:
                    named[name] = b.input(name, IDS if name == "ids" else value)
            args = [nodes[a] if isinstance(a, int) else named[a] for a in step.args]
            shape, attrs = steps.get(index, (None, {}))
            nodes.append(b.op(op, args, weights=[SCALAR] if len(args) < 2 else [],
                              name=f"step{index}", attrs=attrs,
                              outputs=None if shape is None else [TensorType(shape, "float32")]))
        graphs.append(b.build(outputs=[nodes[-1]]))
    return graphs


def layout(pattern: Pattern) -> tuple[TensorType, dict[int, tuple[tuple[int, ...], dict]]]:
    """The input and the (output shape, attributes) of the steps whose shapes a pattern's check
    reads: rotary's halves of (1, 4, 16, 16) (Phi: of its first 8 channels), repeat_kv's two
    copies of (1, 2, 16, 16)."""
    def cut(shape: tuple[int, ...], start: int, width: int) -> tuple[tuple[int, ...], dict]:
        return shape[:-1] + (width,), {"begin": (start,), "end": (start + width,), "axes": (3,)}

    if pattern.name == "repeat_kv":
        return TensorType((1, 2, 16, 16), "float32"), {
            0: ((1, 2, 1, 16, 16), {"axis": 2}), 1: ((1, 2, 2, 16, 16), {}),
            2: ((1, 4, 16, 16), {})}
    if pattern.name != "rotary":
        return X, {}
    full = (1, 4, 16, 16)
    partial = "partial" in pattern.form
    x, first = ((1, 4, 16, 8), 1) if partial else (full, 0)
    steps = {first + 1: cut(x, 4 if partial else 8, x[-1] // 2),
             first + 2: (x[:-1] + (x[-1] // 2,), {}), first + 3: cut(x, 0, x[-1] // 2),
             first + 4: (x, {})}
    if partial:
        steps.update({0: cut(full, 0, 8), 8: cut(full, 8, 8), 9: (full, {})})
    return TensorType(full, "float32"), steps


def _forms(name: str, qualifier: str) -> list[Pattern]:
    """The forms of pattern ``name`` a row speaks of: "(erf forms)" keeps the forms naming erf."""
    forms = [p for p in PATTERNS if p.name == name]
    word = qualifier.split()[0] if qualifier else "every"
    return forms if word == "every" else [p for p in forms if word in p.form]


NEURON_HEADER, NEURON_ROWS = table(NEURON_HEADING)
NEURON_TARGETS = [re.search(r"`([^`]+)`", cell).group(1) for cell in NEURON_HEADER[-2:]]
CONSTRUCT = re.compile(r"^(unit|op) `([^`]+)`(?: \(([^)]*)\))?$")


@pytest.mark.parametrize("row", NEURON_ROWS, ids=[row[0] for row in NEURON_ROWS])
def test_neuron_table_row(row: list[str]) -> None:
    kind, name, qualifier = CONSTRUCT.match(row[0]).groups()
    for target_name, cell in zip(NEURON_TARGETS, row[-2:], strict=True):
        target, expected = get_target(target_name), Expected.of(cell)
        if kind == "op":
            b = OpGraphBuilder(name)
            b.op(name, [b.input("x", X)], outputs=[X])
            expected.check(target.check(b.build()[0]), f"{name} on {target_name}")
            continue
        forms = _forms(name, qualifier or "")
        assert forms, f"no form of pattern {name} matches {qualifier!r}"
        for pattern in forms:
            for graph in instances(pattern):
                units = find_units(graph, PATTERNS)
                assert [(u.name, len(u.nodes)) for u in units] == [(name, len(graph))], graph.name
                verdicts = target.check_graph(graph, units)
                assert len({(v.supported, v.reason) for v in verdicts}) == 1  # judged whole
                expected.check(verdicts[-1], f"{graph.name} on {target_name}")


def test_the_neuron_table_covers_every_pattern_and_what_it_stands_for() -> None:
    rows = [CONSTRUCT.match(row[0]).groups()[:2] for row in NEURON_ROWS]
    assert {name for kind, name in rows if kind == "unit"} == set(PATTERN_NAMES)
    stands_for = {op for p in PATTERNS for op in p.stands_for} - {"multiply", "tanh"}
    assert stands_for <= {name for kind, name in rows if kind == "op"}
    assert NEURON_TARGETS == ["neuron@2020", "neuron"]


# ------------------------------------------------------------------------------ 5.2 tensorcore
@dataclass(frozen=True)
class MatmulRow:
    """One row of the Tensor Core table."""

    label: str
    op: str
    dtype: str
    x: tuple[int, ...]
    y: tuple[int, ...]
    mkn: tuple[int, int, int]
    tvm_picks: str
    legalized: tuple[int, int, int] | None
    plain: Expected
    padded: Expected

    @classmethod
    def of(cls, row: list[str]) -> MatmulRow:
        label, op, dtype, shapes, mkn, picks, legalize, plain, padded = row
        x, y = tuples(shapes)
        (mkn_tuple,) = tuples(mkn)
        padded_to = tuples(legalize)
        return cls(label, op.strip("`"), dtype, x, y, mkn_tuple,
                   picks.strip("`").split()[0],
                   padded_to[0] if padded_to else None, Expected.of(plain), Expected.of(padded))

    def node(self) -> OpNode:
        b = OpGraphBuilder(self.op)
        x = b.input("x", TensorType(self.x, self.dtype))
        if self.op == "nn.dense":
            b.op(self.op, [x], weights=[TensorType(self.y, self.dtype)],
                 outputs=[TensorType((*self.x[:-1], self.y[0]), self.dtype)],
                 attrs={"units": self.y[0], "out_dtype": ""})
        else:
            y = b.input("y", TensorType(self.y, self.dtype))
            b.op(self.op, [x, y], outputs=[TensorType((self.x[0], self.x[1], self.y[1]), self.dtype)],
                 attrs={"transpose_a": False, "transpose_b": True, "out_dtype": ""})
        return b.build()[0]

    def target(self, padding: bool):  # noqa: ANN201
        precision = "fp32" if self.dtype == "float32" else "fp16"
        return get_target("tensorcore", precision=precision, padding=padding)


TENSORCORE_ROWS = [MatmulRow.of(row) for row in table(TENSORCORE_HEADING)[1]]


@pytest.mark.parametrize("row", TENSORCORE_ROWS, ids=[r.label for r in TENSORCORE_ROWS])
def test_tensorcore_table_row(row: MatmulRow) -> None:
    node = row.node()
    dims = ("batch", "in_features", "units") if row.op == "nn.dense" else ("m", "k", "n")
    assert tuple(dimension(node, d) for d in dims) == row.mkn
    row.plain.check(row.target(padding=False).check(node), f"{row.label}")
    row.padded.check(row.target(padding=True).check(node), f"{row.label}, padding=True")


@pytest.fixture(scope="module")
def tvm_cuda():  # noqa: ANN201
    """TVM's answers for ``cuda -arch=sm_80``; a local GPU's compute capability would replace the
    arch (nvcc.have_tensorcore), so a machine with a pre-Volta GPU skips."""
    tvm = pytest.importorskip("tvm")
    import logging

    from tvm import relay, te
    from tvm.relay.backend import te_compiler

    if tvm.cuda(0).exist and int(tvm.cuda(0).compute_version.split(".")[0]) < 7:
        pytest.skip("the local GPU has no Tensor Cores; TVM would use its arch, not sm_80")
    logging.getLogger("autotvm").setLevel(logging.ERROR)  # "Cannot find config" per workload
    target = tvm.target.Target("cuda -arch=sm_80")

    def module(op: str, x: tuple[int, ...], y: tuple[int, ...], dtype: str):  # noqa: ANN202
        xv, yv = relay.var("x", shape=x, dtype=dtype), relay.var("y", shape=y, dtype=dtype)
        call = relay.nn.dense(xv, yv) if op == "nn.dense" else relay.nn.batch_matmul(xv, yv)
        return relay.transform.InferType()(tvm.IRModule.from_expr(call))

    def picks(op: str, x: tuple[int, ...], y: tuple[int, ...], dtype: str) -> str:
        call = module(op, x, y, dtype)["main"].body
        inputs = [te.placeholder(x, dtype), te.placeholder(y, dtype)]
        try:
            with target:
                impl, _ = te_compiler.select_implementation(
                    call.op, call.attrs, inputs, call.checked_type, target, use_autotvm=False)
        except ValueError:
            return "ValueError"
        return impl.name

    def legalize(op: str, x: tuple[int, ...], y: tuple[int, ...], dtype: str):  # noqa: ANN202
        """The (x, y) shapes of the op after Legalize, or "ValueError"."""
        try:
            with target:
                mod = relay.transform.Legalize()(module(op, x, y, dtype))
        except (ValueError, tvm.TVMError):
            return "ValueError"
        found = []
        relay.analysis.post_order_visit(mod["main"].body, lambda e: found.append(e) if (
            isinstance(e, relay.Call) and getattr(e.op, "name", "") == op) else None)
        (call,) = found
        return tuple(tuple(int(d) for d in arg.checked_type.shape) for arg in call.args)

    return picks, legalize


@pytest.mark.parametrize("row", TENSORCORE_ROWS, ids=[r.label for r in TENSORCORE_ROWS])
def test_tensorcore_table_row_is_what_tvm_does(tvm_cuda, row: MatmulRow) -> None:  # noqa: ANN001
    picks, legalize = tvm_cuda
    picked = picks(row.op, row.x, row.y, row.dtype)
    assert picked == row.tvm_picks
    assert row.plain.supported == ("tensorcore" in picked)
    after = legalize(row.op, row.x, row.y, row.dtype)
    if after == "ValueError":
        assert row.legalized is None and not row.padded.supported
        return
    x, y = after
    mkn = (x[-2], x[-1], y[-2])
    assert mkn == (row.legalized or row.mkn)
    assert row.padded.supported == ("tensorcore" in picks(row.op, x, y, row.dtype))
