"""Decoder blocks and einsum attention partitioned compute what the unpartitioned module does.

A small Llama (``transformers.LlamaConfig``: hidden 64, 4 heads, 2 key/value heads, random
weights, nothing downloaded) has RMSNorm, rotary embedding (``rotate_half``), grouped-query
attention's ``repeat_kv`` and SiLU; Phi has partial rotary. Oracles: the unpartitioned prepared
module built by TVM (llvm, region by region, rtol 1e-4), the module's own output (PyTorch), and
the units (every rotary and ``repeat_kv`` of the model is one, inside a ``Composite`` function of
an accelerator region).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import partition_lab
from partition_lab._optional import MissingDependencyError, require_transformers
from partition_lab.errors import PartitionLabError
from partition_lab.relay.runtime import RegionExecutor, run_module

try:  # hides Triton from torch first: importing it after TVM crashes the process
    from partition_lab.relay.frontends._torch import require_torch

    torch = require_torch("the decoder numerics tests")
except PartitionLabError as missing:
    pytest.skip(str(missing), allow_module_level=True)
try:
    require_transformers("the decoder numerics tests")
except MissingDependencyError as missing:
    pytest.skip(str(missing), allow_module_level=True)

RTOL, ATOL = 1e-4, 1e-5
SEQUENCE = 16


def decoder(kind: str, layers: int = 1) -> object:
    """``kind`` (llama, phi) from its config, returning logits."""
    import transformers

    torch.manual_seed(0)
    common = dict(hidden_size=64, num_hidden_layers=layers, num_attention_heads=4,
                  num_key_value_heads=2, vocab_size=1024, intermediate_size=128,
                  max_position_embeddings=64, use_cache=False)
    model = (transformers.LlamaForCausalLM(transformers.LlamaConfig(**common)) if kind == "llama"
             else transformers.PhiForCausalLM(transformers.PhiConfig(**common)))

    class Logits(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids):  # noqa: ANN001, ANN202
            return self.model(input_ids=input_ids).logits

    return Logits().eval()


def check_region_by_region(result, inputs: dict[str, np.ndarray]) -> np.ndarray:  # noqa: ANN001
    got = RegionExecutor(result, opt_level=0).run(inputs)
    unpartitioned = run_module(result.prepared_mod, inputs, opt_level=0)
    assert len(got) == len(unpartitioned) == 1
    scale = np.abs(unpartitioned[0]).max()
    np.testing.assert_allclose(got[0], unpartitioned[0], rtol=RTOL, atol=ATOL * scale)
    return got[0]


def einsum_attention(dim: int) -> object:
    class Attention(torch.nn.Module):
        def __init__(self, heads: int = 2) -> None:
            super().__init__()
            self.heads, self.scale = heads, (dim // heads) ** -0.5  # noqa: B023
            self.qkv = torch.nn.Linear(dim, 3 * dim)
            self.proj = torch.nn.Linear(dim, dim)

        def forward(self, x):  # noqa: ANN001, ANN202
            b, n, c = x.shape
            q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads) \
                .permute(2, 0, 3, 1, 4)
            weights = (torch.einsum("bhid,bhjd->bhij", q, k) * self.scale).softmax(dim=-1)
            out = torch.einsum("bhij,bhjd->bhid", weights, v)
            return self.proj(out.transpose(1, 2).reshape(b, n, c))

    torch.manual_seed(0)
    return Attention().eval()


@pytest.fixture(scope="module")
def llama() -> tuple:
    module = decoder("llama")
    ids = torch.randint(0, 1000, (1, SEQUENCE), generator=torch.Generator().manual_seed(1))
    mod, params = partition_lab.load_model(module, ids)
    with torch.no_grad():
        expected = module(ids).numpy()
    return mod, params, {"input_ids": ids.numpy()}, expected


@pytest.mark.parametrize("platform", ["neuron", "tensorcore"])
def test_an_rms_norm_rope_decoder_block_partitioned_computes_as_unpartitioned(llama,
                                                                              platform: str) -> None:
    mod, params, inputs, expected = llama
    (name,) = [p.name_hint for p in mod["main"].params if p.name_hint not in params]
    inputs = {name: inputs["input_ids"]}
    result = partition_lab.partition(mod, platform, params=params, strategy="greedy")
    result.plan.validate()
    units = result.plan.support.units
    names = [u.name for u in units]
    assert names.count("rotary") == 2 and names.count("repeat_kv") == 2  # q and k; k and v
    assert "attention" in names
    accelerator = result.plan.support.platform.devices[0].name
    unit_devices = {result.plan.decisions[u.output].device for u in units
                    if u.name in ("rotary", "repeat_kv")}
    assert unit_devices == {accelerator}
    assert len(result.plan.regions) > 1  # the int64 lookup (neuron) or the CUDA cores: split
    got = check_region_by_region(result, inputs)
    if platform == "neuron":  # fp32 throughout: the module's own output too
        np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL * np.abs(expected).max())
    found = composites(result.mod)
    assert found["rotary"] == 2 and found["repeat_kv"] == 2, found


def composites(mod) -> Counter:  # noqa: ANN001
    """Composite function names inside the module's Compiler functions, with their counts."""
    import tvm
    from tvm import relay

    found: Counter = Counter()

    def visit(expr) -> None:  # noqa: ANN001
        if isinstance(expr, relay.Function) and expr.attrs is not None and \
                "Composite" in expr.attrs:
            found[str(expr.attrs["Composite"])] += 1

    for gvar in mod.get_global_vars():
        func = mod[gvar]
        if func.attrs is not None and "Compiler" in func.attrs:
            tvm.relay.analysis.post_order_visit(func.body, visit)
    return found


def test_phis_partial_rotary_is_one_unit_and_computes_as_unpartitioned() -> None:
    module = decoder("phi")
    ids = torch.randint(0, 1000, (1, SEQUENCE), generator=torch.Generator().manual_seed(2))
    mod, params = partition_lab.load_model(module, ids)
    result = partition_lab.partition(mod, "neuron", params=params, strategy="greedy")
    rotary = [u for u in result.plan.support.units if u.name == "rotary"]
    assert [u.pattern.form for u in rotary] == ["partial, constant cos/sin"] * 2
    assert [len(u.nodes) for u in rotary] == [10, 10]
    (name,) = [p.name_hint for p in mod["main"].params if p.name_hint not in params]
    got = check_region_by_region(result, {name: ids.numpy()})
    with torch.no_grad():
        expected = module(ids).numpy()
    np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL * np.abs(expected).max())


def test_einsum_attention_partitioned_region_by_region_computes_as_unpartitioned() -> None:
    """Attention whose matrix products are ``torch.einsum`` (the block of
    ``tests/relay/passes/test_einsum.py``), split into regions (its projections excluded to the
    host), against the unpartitioned module at rtol 1e-4."""
    # width 32, 2 heads, 16 tokens: Tensor Core shapes (multiples of 16)
    module = einsum_attention(32)
    example = torch.randn(1, 16, 32, generator=torch.Generator().manual_seed(3))
    mod, params = partition_lab.load_model(module, example)
    (name,) = [p.name_hint for p in mod["main"].params if p.name_hint not in (params or {})]
    inputs = {name: example.numpy()}
    # fp32 on tensorcore: its host runs in fp32, an fp16 program's islands would differ by
    # more than 1e-4 from the fp16 unpartitioned one
    for platform, options in (("neuron", {}), ("tensorcore", {"precision": "fp32"})):
        result = partition_lab.partition(mod, platform, params=params, strategy="greedy",
                                         exclude_ops=["nn.dense"], **options)
        assert "attention" in {u.name for u in result.plan.support.units}
        assert len(result.plan.regions) > 1, result.plan.summary()
        check_region_by_region(result, inputs)


@pytest.mark.parametrize("runner, options", [
    ("torch", {"repeats": 3, "batch_s": 0.001}),
    ("tvm-llvm", {"number": 1, "repeat": 3, "min_repeat_ms": 0}),
])
def test_profiling_times_rotary_and_repeat_kv_whole_and_the_cost_model_prices_them_so(
        llama, runner: str, options: dict) -> None:
    """Each rotary and repeat_kv unit is timed as one unit (torch: its ops in one timed call;
    TVM: one module of its ops), and the profiled cost model prices the unit at that time, not
    as its ops' sum."""
    import math

    from partition_lab.api import analyze
    from partition_lab.core.patterns import composite_node
    from partition_lab.cost_models.base import node_times
    from partition_lab.cost_models.profiled import ProfiledCostModel
    from partition_lab.cost_models.signatures import op_signature
    from partition_lab.profiling import profile
    from partition_lab.profiling.cache import ProfileCache

    mod, params, _, _ = llama
    analysis = analyze(mod, "neuron", params=params)
    graph = analysis.graph
    units = [u for u in analysis.support.units if u.name in ("rotary", "repeat_kv")]
    assert len(units) == 4
    cache = ProfileCache({})
    profile((mod, params), "neuron", cache=cache, strategies=["greedy"], runner=runner,
            runner_options=options, graphs=False)
    (entry,) = cache.devices.values()
    model = ProfiledCostModel(cache.to_dict(), analysis.platform)
    by_op = node_times(model, graph, analysis.platform, "neuron")
    whole = node_times(model, graph, analysis.platform, "neuron", analysis.support.units)
    for unit in units:
        composite = composite_node(graph, unit)
        stats = entry.ops[op_signature(composite)]
        assert stats.op == f"composite:{unit.name}"
        assert math.isfinite(stats.median_s) and stats.median_s > 0
        priced = sum(whole[n] for n in unit.nodes)
        assert priced == pytest.approx(model.op_time(composite, "neuron"), rel=1e-9)
        assert priced != pytest.approx(sum(by_op[n] for n in unit.nodes), rel=1e-6)
