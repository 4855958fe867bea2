"""The zoo's transformer and CNN suite: ViT-B/16, Swin-T, ConvNeXt-T, EfficientNet-B0,
DeepLabV3-MobileNetV3 (torchvision) and BERT-base, DistilBERT (Hugging Face ``transformers``).

Small variants only. Oracles: the architectures' op counts, the module's own output (PyTorch),
the unpartitioned module built by TVM (numerics region by region, llvm), and the patterns' units
(a host op inside a LayerNorm, GELU, softmax or attention unit is what the patterns exist to prevent).
``hf:`` tests skip where ``transformers`` is missing, as the torch tests skip without torch.
"""

from __future__ import annotations

import numpy as np
import pytest

import partition_lab
from partition_lab import zoo
from partition_lab._optional import MissingDependencyError, require_transformers
from partition_lab.api import analyze
from partition_lab.errors import PartitionLabError
from partition_lab.relay.frontends import calls_without_source_name
from partition_lab.relay.runtime import RegionExecutor, run_module
from partition_lab.strategies import get_strategy
from partition_lab.zoo._build import seeded_torch_module
from relay_ops import counts_of

try:  # hides Triton from torch first: importing it after TVM crashes the process
    from partition_lab.relay.frontends._torch import require_torch

    torch = require_torch("the transformer zoo tests")
except PartitionLabError as missing:
    pytest.skip(str(missing), allow_module_level=True)
pytest.importorskip("torchvision")

try:
    require_transformers("the Hugging Face zoo tests")
    HF_PROBLEM = ""
except MissingDependencyError as problem:
    HF_PROBLEM = str(problem)
needs_transformers = pytest.mark.skipif(bool(HF_PROBLEM), reason=HF_PROBLEM)

PLATFORMS = ("neuron", "neuron@2020", "tensorcore")
#: Ops of the patterns: none may be left on neuron's host by a decomposition.
PATTERN_PIECES = {"layer_norm", "gelu", "softmax", "attention", "cast_scale"}
RTOL, ATOL = 1e-4, 1e-5


def hf(name: str) -> object:
    return pytest.param(name, marks=needs_transformers)


SUITE = ["tv:vit_b_16", "tv:swin_t", "tv:convnext_tiny", "tv:efficientnet_b0",
         "tv:deeplabv3_mobilenet_v3_large", hf("hf:bert_base"), hf("hf:distilbert")]


def test_the_hugging_face_builds_are_listed_with_what_they_need() -> None:
    assert zoo.transformers_names() == ["hf:bert_base", "hf:distilbert"]
    bert = zoo.info("hf:bert_base")
    assert bert.needs == ("torch", "transformers", "onnxscript") and bert.frontends == ("onnx",)
    assert bert.input_shapes == {"input_ids": (1, 128)} and bert.dtype == "int64"
    assert bert.small_input_shapes == {"input_ids": (1, 16)}
    assert zoo.parse_spec("hf:bert_base:small") == ("hf:bert_base", True)
    ids = zoo.sample_inputs("hf:distilbert", small=True)["input_ids"]
    assert ids.dtype == np.int64 and ids.shape == (1, 16)
    assert ids.min() >= 0 and ids.max() < bert.vocabulary and len(set(ids.ravel())) > 8


@pytest.mark.slow
@pytest.mark.parametrize("name", [hf("hf:bert_base"), hf("hf:distilbert")])
def test_small_hugging_face_build_has_its_op_counts_and_module_paths(name: str) -> None:
    mod, params = zoo.load(name, small=True)
    entry = zoo.info(name)
    counts = counts_of(mod, entry.small_expected_ops)
    assert counts == dict(entry.small_expected_ops)
    assert calls_without_source_name(mod) == []
    assert [p.name_hint for p in mod["main"].params if p.name_hint not in params] == ["input_ids"]
    assert str(mod["main"].params[0].checked_type.dtype) == "int64"
    assert any(key.startswith("model.encoder.layer.1." if name == "hf:bert_base" else
                              "model.transformer.layer.1.") for key in params)


def greedy_plan(name: str, platform: str):  # noqa: ANN201
    mod, params = zoo.load(name, small=True)
    analysis = analyze(mod, platform, params=params, name=name)
    plan = get_strategy("greedy").run(analysis.graph, analysis.support)
    plan.validate()
    return analysis, plan


# Each small model on neuron, greedy: regions, host islands, the ops the host keeps and a word
# of their reason.
NEURON = [
    ("tv:vit_b_16", 1, 0, set(), ""),  # one region: nothing computes at the CLS concatenate
    ("tv:convnext_tiny", 1, 0, set(), ""),
    ("tv:efficientnet_b0", 1, 0, set(), ""),
    ("tv:deeplabv3_mobilenet_v3_large", 2, 2, {"image.resize2d"}, "_contrib_BilinearResize2D"),
    # The int64 token-id lookup (word_embeddings): neuron-cc takes no 64-bit tensors; every host
    # op's reason names the lookup.
    pytest.param("hf:bert_base", 1, 1, {"less", "add", "where", "take"},
                 "embedding lookup with int64 ids (4 ops: less, add, where, take): its take",
                 marks=needs_transformers),
    pytest.param("hf:distilbert", 1, 1, {"less", "add", "where", "take"},
                 "embedding lookup with int64 ids (4 ops: less, add, where, take): its take",
                 marks=needs_transformers),
]


@pytest.mark.slow
@pytest.mark.parametrize("name, regions, islands, host_ops, why", NEURON)
def test_on_neuron_no_pattern_piece_stays_on_the_host(name: str, regions: int, islands: int,
                                                      host_ops: set, why: str) -> None:
    analysis, plan = greedy_plan(name, "neuron")
    assert (len(plan.accelerator_regions), len(plan.cpu_regions)) == (regions, islands)
    in_unit = {node: unit.name for unit in analysis.support.units for node in unit.nodes}
    host = [d for d in plan.decisions if d.device == "cpu"]
    assert {analysis.graph[d.node].op for d in host} == host_ops
    assert not {in_unit[d.node] for d in host if d.node in in_unit} & PATTERN_PIECES
    for decision in host:
        assert why in decision.reason, decision.reason


@pytest.mark.slow
@pytest.mark.parametrize("name", ["tv:vit_b_16", "tv:convnext_tiny", hf("hf:bert_base"),
                                  hf("hf:distilbert")])
def test_on_neuron_2020_each_layer_norm_is_one_island_with_that_releases_reason(name) -> None:
    analysis, plan = greedy_plan(name, "neuron@2020")
    norms = [unit for unit in analysis.support.units if unit.name == "layer_norm"]
    assert norms
    placed = {d.node: d for d in plan.decisions}
    for unit in norms:
        assert {placed[n].device for n in unit.nodes} == {"cpu"}
        assert "LayerNorm was added in neuron-cc 1.2.0.0" in placed[unit.output].reason
    islands = [set(island.nodes) for island in plan.cpu_regions]
    assert all(sum(set(unit.nodes) <= island for island in islands) == 1 for unit in norms)


@pytest.mark.slow
@pytest.mark.parametrize("name", SUITE)
def test_every_suite_model_partitions_and_validates_on_every_platform(name: str) -> None:
    mod, params = zoo.load(name, small=True)
    for platform in PLATFORMS:
        result = partition_lab.partition(mod, platform, params=params, strategy="greedy")
        result.plan.validate()
        for node in result.plan.to_dict()["nodes"]:
            if node["device"] == "cpu":
                assert node["reason"] and node["source_name"], node


@pytest.mark.slow
@pytest.mark.parametrize("name", ["tv:vit_b_16", hf("hf:bert_base"), hf("hf:distilbert")])
@pytest.mark.parametrize("platform", ["neuron", "neuron@2020"])
def test_small_transformer_numerics_partitioned_equal_unpartitioned(name: str,
                                                                    platform: str) -> None:
    """Region by region on llvm against the unpartitioned module built by TVM, and against the
    seeded PyTorch module the zoo exported."""
    mod, params = zoo.load(name, small=True)
    result = partition_lab.partition(mod, platform, params=params, strategy="greedy")
    # a partitioned program: main calls the outlined accelerator function(s) (ViT on neuron is
    # one region)
    assert result.plan.accelerator_regions
    inputs = zoo.sample_inputs(name, small=True)
    got = RegionExecutor(result, opt_level=0).run(inputs)
    unpartitioned = run_module(result.prepared_mod, inputs, opt_level=0)
    assert len(got) == len(unpartitioned) == 1
    scale = np.abs(unpartitioned[0]).max()
    np.testing.assert_allclose(got[0], unpartitioned[0], rtol=RTOL, atol=ATOL * scale)
    with torch.no_grad():
        module = seeded_torch_module(zoo.info(name), small=True)
        expected = module(*[torch.from_numpy(v) for v in inputs.values()]).numpy()
    np.testing.assert_allclose(got[0], expected, rtol=RTOL, atol=ATOL * scale)


@needs_transformers
def test_small_bert_on_tensorcore_with_units_behind_casts_computes_as_unpartitioned() -> None:
    """On tensorcore ToMixedPrecision puts casts around erf and softmax; GELU and attention are
    units with those casts inside (Composite functions in the Tensor Core regions), and the
    partitioned program still computes what the prepared one does (llvm, region by region)."""
    mod, params = zoo.load("hf:bert_base", small=True)
    result = partition_lab.partition(mod, "tensorcore", params=params, strategy="greedy")
    names = {unit.name for unit in result.plan.support.units}
    assert {"layer_norm", "gelu", "attention"} <= names
    assert any(result.graph[n].op == "cast" for unit in result.plan.support.units
               if unit.name == "attention" for n in unit.nodes)
    assert len(result.plan.regions) > 1
    inputs = zoo.sample_inputs("hf:bert_base", small=True)
    got = RegionExecutor(result, opt_level=0).run(inputs)
    (unpartitioned,) = run_module(result.prepared_mod, inputs, opt_level=0)
    np.testing.assert_allclose(got[0], unpartitioned, rtol=RTOL,
                               atol=ATOL * np.abs(unpartitioned).max())


@needs_transformers
def test_a_hugging_face_build_takes_another_batch_and_sequence_or_says_why(tmp_path, monkeypatch,
                                                                           capsys) -> None:
    from partition_lab.cli import main

    monkeypatch.setenv(zoo.CACHE_ENV, str(tmp_path))
    shapes = {"input_ids": (2, 24)}
    mod, params = zoo.load("hf:distilbert", small=True, input_shapes=shapes)
    assert tuple(mod["main"].params[0].checked_type.shape) == (2, 24)
    assert tuple(mod["main"].ret_type.shape) == (2, 24, 32)
    result = partition_lab.partition(mod, "neuron", params=params, strategy="greedy")
    inputs = zoo.sample_inputs("hf:distilbert", small=True, input_shapes=shapes)
    got = RegionExecutor(result, opt_level=0).run(inputs)
    with torch.no_grad():
        module = seeded_torch_module(zoo.info("hf:distilbert"), small=True)
        expected = module(torch.from_numpy(inputs["input_ids"])).numpy()
    np.testing.assert_allclose(got[0], expected, rtol=RTOL, atol=ATOL * np.abs(expected).max())
    # The small configs have 64 positions: a longer sequence is one line, torch's log kept quiet.
    capsys.readouterr()
    assert main(["partition", "hf:distilbert:small", "--input-shape", "input_ids=1,100"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err
    assert "hf:distilbert:small cannot take input_ids=1,100: exporting it at those shapes failed" \
        in err and "64" in err


# ---------------------------------------------------------------------------- units in profiles
@needs_transformers
@pytest.mark.parametrize("runner, options", [
    ("torch", {"repeats": 3, "batch_s": 0.001}),
    ("tvm-llvm", {"number": 1, "repeat": 3, "min_repeat_ms": 0}),
])
def test_profiling_times_each_unit_whole_and_the_cost_model_prices_it_so(runner: str,
                                                                          options: dict) -> None:
    """Each LayerNorm, attention and GELU unit of small DistilBERT on neuron is timed as one
    unit (torch: its ops in one timed call; TVM: one module of its ops, fused as a region's
    are), and the profiled cost model prices the unit at that time, not as its ops' sum."""
    import math

    from partition_lab.core.patterns import composite_node
    from partition_lab.cost_models.base import node_times
    from partition_lab.cost_models.profiled import ProfiledCostModel
    from partition_lab.cost_models.signatures import op_signature
    from partition_lab.profiling import profile
    from partition_lab.profiling.cache import ProfileCache

    mod, params = zoo.load("hf:distilbert", small=True)
    analysis = analyze(mod, "neuron", params=params)
    graph, units = analysis.graph, analysis.support.units
    assert {u.name for u in units} >= {"layer_norm", "attention", "gelu"}
    cache = ProfileCache({})
    profile((mod, params), "neuron", cache=cache, strategies=["greedy"], runner=runner,
            runner_options=options, graphs=False)
    (entry,) = cache.devices.values()
    model = ProfiledCostModel(cache.to_dict(), analysis.platform)
    by_op = node_times(model, graph, analysis.platform, "neuron")
    whole = node_times(model, graph, analysis.platform, "neuron", units)
    # The int64 embedding lookup is a unit too, but on the host (neuron rejects it whole).
    on_neuron = [u for u in units if analysis.support.verdict(u.output, 0).supported]
    assert {u.name for u in units} - {u.name for u in on_neuron} == {"embedding"}
    for unit in on_neuron:
        composite = composite_node(graph, unit)
        stats = entry.ops[op_signature(composite)]
        assert stats.op == f"composite:{unit.name}"
        assert math.isfinite(stats.median_s) and stats.median_s > 0
        priced = sum(whole[n] for n in unit.nodes)
        assert priced == pytest.approx(model.op_time(composite, "neuron"), rel=1e-9)
        assert priced != pytest.approx(sum(by_op[n] for n in unit.nodes), rel=1e-6)
