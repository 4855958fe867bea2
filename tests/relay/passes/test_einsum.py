"""einsums_as_batch_matmul: two-operand einsums that are batched matrix products become
nn.batch_matmul (computing the same, keeping the einsum's source name); other einsums stay.
Oracles: TVM's own einsum built on llvm, and the PyTorch module an attention block came from."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from tvm import relay

import partition_lab
from partition_lab.errors import PartitionLabError
from partition_lab.relay.frontends._spans import calls_in_order, make_span, span_name
from partition_lab.relay.passes.prepare import einsums_as_batch_matmul, prepare
from partition_lab.relay.runtime import RegionExecutor, run_module

NAME = "attn.qk"


def einsum_module(equation: str, *shapes: tuple[int, ...]) -> tvm.IRModule:
    """One einsum of ``equation`` on inputs x0, x1, ... of ``shapes``, named :data:`NAME`."""
    xs = [relay.var(f"x{i}", shape=shape) for i, shape in enumerate(shapes)]
    made = relay.einsum(xs, equation)
    call = relay.Call(made.op, made.args, made.attrs, None, make_span(NAME))
    return relay.transform.InferType()(tvm.IRModule.from_expr(relay.Function(xs, call)))


def ops_of(mod: tvm.IRModule) -> list[str]:
    return [c.op.name for c in calls_in_order(mod["main"].body) if isinstance(c.op, tvm.ir.Op)]


def random_inputs(mod: tvm.IRModule) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {p.name_hint: rng.standard_normal([int(d) for d in p.checked_type.shape])
            .astype("float32") for p in mod["main"].params}


PRODUCTS = {
    "bhid,bhjd->bhij": ((2, 3, 4, 5), (2, 3, 6, 5)),  # q @ k^T
    "bhij,bhjd->bhid": ((2, 3, 4, 6), (2, 3, 6, 5)),  # attention @ v
    "bid,bjd->bij": ((3, 4, 5), (3, 6, 5)),
    "...id,...jd->...ij": ((2, 3, 4, 5), (2, 3, 6, 5)),
    "bhid,bhjd->bhji": ((2, 3, 4, 5), (2, 3, 6, 5)),  # the output's free axes swapped
    "bihd,bjhd->bhij": ((2, 4, 3, 5), (2, 6, 3, 5)),  # heads after the sequence
    "bhid,bhjd->ibhj": ((2, 3, 4, 5), (2, 3, 6, 5)),  # a free axis first in the output
    "id,jd->ij": ((4, 5), (6, 5)),  # no batch axis
    "ij,jk": ((4, 5), (5, 6)),  # numpy's implicit output: "ik"
}


@pytest.mark.parametrize("equation", list(PRODUCTS))
def test_batched_matrix_products_become_batch_matmul_and_compute_the_same(equation: str) -> None:
    mod = einsum_module(equation, *PRODUCTS[equation])
    rewritten = einsums_as_batch_matmul(mod)
    ops = ops_of(rewritten)
    assert "einsum" not in ops and ops.count("nn.batch_matmul") == 1, ops
    assert set(ops) <= {"nn.batch_matmul", "transpose", "reshape"}
    assert {span_name(c) for c in calls_in_order(rewritten["main"].body)} == {NAME}
    (product,) = [c for c in calls_in_order(rewritten["main"].body)
                  if c.op.name == "nn.batch_matmul"]
    # The NT form TVM's ONNX importer gives MatMul, and Tensor Core's template asks for.
    assert (bool(product.attrs.transpose_a), bool(product.attrs.transpose_b)) == (False, True)
    inputs = random_inputs(mod)
    (got,), (want,) = run_module(rewritten, inputs, opt_level=0), run_module(mod, inputs,
                                                                             opt_level=0)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_attention_axes_already_in_order_need_no_transpose_or_reshape_of_3d_operands() -> None:
    assert ops_of(einsums_as_batch_matmul(einsum_module(*_qk_3d()))) == ["nn.batch_matmul"]
    assert ops_of(einsums_as_batch_matmul(einsum_module("bij,bjd->bid", (3, 4, 6), (3, 6, 5)))) \
        == ["transpose", "nn.batch_matmul"]


def _qk_3d() -> tuple[str, tuple[int, ...], tuple[int, ...]]:
    return "bid,bjd->bij", (3, 4, 5), (3, 6, 5)


@pytest.mark.parametrize("equation, shapes", [
    ("ij->ji", ((4, 5),)),  # one operand
    ("ij,jk,kl->il", ((2, 3), (3, 4), (4, 5))),  # three operands
    ("bij,bjk", ((2, 3, 4), (2, 4, 5))),  # implicit output "ik": the batch is summed
    ("bid,bd->bi", ((2, 3, 4), (2, 4))),  # matrix times vector: no free axis on one side
    ("bhid,bjd->bhij", ((2, 3, 4, 5), (2, 6, 5))),  # two free axes on one side
    ("bid,bjd->bj", ((2, 3, 4), (2, 6, 4))),  # a free axis summed
    ("bii,bij->bj", ((2, 3, 3), (2, 3, 4))),  # a diagonal
    ("...id,...jd->...ij", ((2, 3, 4, 5), (1, 3, 6, 5))),  # a broadcast batch axis
    ("bidk,bjdk->bij", ((2, 3, 4, 5), (2, 6, 4, 5))),  # two contracted axes
])
def test_other_einsums_are_left_as_they_are(equation: str, shapes: tuple) -> None:
    mod = einsum_module(equation, *shapes)
    assert einsums_as_batch_matmul(mod) is mod


def test_preparation_rewrites_einsums_with_or_without_steps() -> None:
    mod = einsum_module(*_qk_3d())
    for steps in ([], ["convert_layout:NHWC"]):
        assert ops_of(prepare(mod, steps)) == ["nn.batch_matmul"]


# ---------------------------------------------------------------- an attention block from torch
try:  # hides Triton from torch first: importing it after TVM crashes the process
    from partition_lab.relay.frontends._torch import require_torch

    torch = require_torch("the einsum attention test")
except PartitionLabError as missing:
    torch, TORCH_PROBLEM = None, str(missing)
else:
    TORCH_PROBLEM = ""


def einsum_attention() -> object:
    """A multi-head self-attention block whose two matrix products are torch.einsum."""

    class Attention(torch.nn.Module):
        def __init__(self, dim: int = 16, heads: int = 2) -> None:
            super().__init__()
            self.heads, self.scale = heads, (dim // heads) ** -0.5
            self.qkv = torch.nn.Linear(dim, 3 * dim)
            self.proj = torch.nn.Linear(dim, dim)

        def forward(self, x):
            b, n, c = x.shape
            q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads) \
                .permute(2, 0, 3, 1, 4)
            weights = (torch.einsum("bhid,bhjd->bhij", q, k) * self.scale).softmax(dim=-1)
            out = torch.einsum("bhij,bhjd->bhid", weights, v)
            return self.proj(out.transpose(1, 2).reshape(b, n, c))

    torch.manual_seed(0)
    return Attention().eval()


@pytest.mark.skipif(bool(TORCH_PROBLEM), reason=TORCH_PROBLEM)
def test_einsum_attention_from_torch_has_no_host_island_on_neuron_and_computes_the_same() -> None:
    module = einsum_attention()
    example = torch.randn(1, 8, 16)
    mod, params = partition_lab.load_model(module, example)
    einsums = [span_name(c) for c in calls_in_order(mod["main"].body)
               if isinstance(c.op, tvm.ir.Op) and c.op.name == "einsum"]
    assert len(einsums) == 2 and all(einsums)  # the exporter kept them: the rewrite is tested
    result = partition_lab.partition(mod, "neuron", params=params, strategy="greedy")
    result.plan.validate()
    ops = [n.op for n in result.graph]
    assert "einsum" not in ops
    # The einsums' names are on the batch matmuls they became (exclusions by name still work).
    assert sorted(n.source_name for n in result.graph if n.op == "nn.batch_matmul") == \
        sorted(einsums)
    assert result.plan.cpu_regions == [], result.plan.summary()
    (name,) = [p.name_hint for p in mod["main"].params if p.name_hint not in (params or {})]
    (got,) = RegionExecutor(result, opt_level=0).run({name: example.numpy()})
    with torch.no_grad():
        want = module(example).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * np.abs(want).max())
