"""PyTorch models as input: nn.Module and .pt2 files, named by module path, partitioned, exact.

The oracle for names is the module itself (``named_modules()``); for numerics, PyTorch running
the same module on the same input. Models are small (ResNet-50 at 64x64, a few-layer net with
a bilinear resize, which neuron@2020 rejects) and random (``weights=None``, seeded).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import partition_lab
from partition_lab._optional import MissingDependencyError
from partition_lab.api import bind_params
from partition_lab.cli import main
from partition_lab.errors import InputShapeError, ModelFormatError, PartitionLabError
from partition_lab.relay.frontends import load_model, source_name
from partition_lab.relay.frontends._spans import calls_in_order
from partition_lab.relay.frontends._torch import module_path
from partition_lab.relay.runtime import RegionExecutor, run_module

try:  # hides Triton from torch first: importing it after TVM crashes the process
    from partition_lab.relay.frontends._torch import require_torch

    torch = require_torch("the PyTorch input tests")
except PartitionLabError as missing:
    pytest.skip(str(missing), allow_module_level=True)
torchvision = pytest.importorskip("torchvision")
nn, F = torch.nn, torch.nn.functional

RTOL, ATOL = 1e-4, 1e-4


class Head(nn.Module):
    """A container whose own forward calls an op: its resize is named ``head/<op>``."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(8, 4, 1)

    def forward(self, x):
        return F.interpolate(self.conv(x), scale_factor=2, mode="bilinear", align_corners=False)


class ResizeNet(nn.Module):
    """Two bilinear resizes (neuron@2020 supports only nearest, integer-factor ones): one in a
    leaf module (``up``), one in a container's forward (``head``)."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.head = Head()
        self.up = nn.Upsample(scale_factor=2, mode="bilinear")

    def forward(self, x):
        return self.up(self.head(self.stem(x)))


def seeded(module: nn.Module) -> nn.Module:
    """Non-trivial batch-norm statistics, so that a numerics check cannot pass because every
    batch norm is the identity (as the zoo does)."""
    generator = torch.Generator().manual_seed(1)
    for layer in module.modules():
        if isinstance(layer, nn.BatchNorm2d):
            layer.running_mean.normal_(0.0, 0.1, generator=generator)
            layer.running_var.uniform_(0.5, 1.5, generator=generator)
            layer.weight.data.uniform_(0.5, 1.5, generator=generator)
            layer.bias.data.normal_(0.0, 0.1, generator=generator)
    return module.eval()


def torch_outputs(module: nn.Module, x) -> np.ndarray:
    with torch.no_grad():
        return module(x).numpy()


def container_paths(module: nn.Module) -> set[str]:
    return {path for path, sub in module.named_modules() if any(True for _ in sub.children())}


@pytest.fixture(scope="module")
def resnet50():
    torch.manual_seed(0)
    module = seeded(torchvision.models.resnet50(weights=None))
    x = torch.randn(1, 3, 64, 64)
    mod, params = load_model(module, x)
    return module, x, mod, params


@pytest.fixture(scope="module")
def resize_net():
    torch.manual_seed(0)
    module = seeded(ResizeNet())
    x = torch.randn(1, 3, 16, 16)
    mod, params = load_model(module, x)
    return module, x, mod, params


# ------------------------------------------------------------------------------------ names
@pytest.mark.slow
def test_every_resnet50_call_is_named_by_its_module_path(resnet50) -> None:
    module, _, mod, _ = resnet50
    modules = dict(module.named_modules())
    containers = container_paths(module)
    by_kind: Counter[str] = Counter()
    ops_in_containers = set()
    for call in calls_in_order(mod["main"]):
        path, op = module_path(source_name(call))
        if op is None:
            assert path in modules and path not in containers, source_name(call)
            by_kind["leaf module"] += 1
            continue
        assert path in containers, f"{call.op.name} is named {source_name(call)!r}"
        by_kind["op in a container"] += 1
        ops_in_containers.add(op)
    # Every conv, batch norm, relu, pool and the fc are inside a leaf module; the residual adds
    # and the flatten (a view) are written in Bottleneck's and ResNet's own forward.
    assert by_kind == {"leaf module": 212, "op in a container": 17}
    assert ops_in_containers == {"add", "view"}
    names = Counter((call.op.name, source_name(call)) for call in calls_in_order(mod["main"]))
    assert names[("nn.conv2d", "layer1.0.conv1")] == 1
    assert names[("nn.batch_norm", "layer1.0.bn1")] == 1
    # Bottleneck calls its one self.relu three times: each call is named after it.
    for relu in ("layer1.0.relu", "layer1.0.relu#2", "layer1.0.relu#3"):
        assert names[("nn.relu", relu)] == 1
    assert names[("add", "layer1.0/add")] == 1
    # ONNX wants node names unique: no two calls of one op share a name (a conv and its
    # bias_add come from one ONNX node and do).
    assert set(names.values()) == {1}


def test_inputs_named_by_forward_or_by_input_shapes(resize_net) -> None:
    module, x, mod, params = resize_net
    assert [p.name_hint for p in mod["main"].params if p.name_hint not in params] == ["x"]
    named, named_params = load_model(module, {"image": (1, 3, 8, 8)})
    image = named["main"].params[0]
    assert image.name_hint == "image" and tuple(image.checked_type.shape) == (1, 3, 8, 8)
    assert set(named_params) == set(params)
    with pytest.raises(InputShapeError, match="names 2 input"):
        load_model(module, {"a": (1, 3, 16, 16), "b": (1, 3, 16, 16)}, example_inputs=x)
    with pytest.raises(InputShapeError, match="example inputs"):
        load_model(module)
    with pytest.raises(InputShapeError, match="must be tensors"):
        load_model(module, example_inputs=(x.numpy(),))


def test_module_training_flag_is_restored() -> None:
    module = ResizeNet().train()
    load_model(module, torch.randn(1, 3, 8, 8))
    assert module.training and module.stem[1].training


# ------------------------------------------------------------------- partitions and numerics
@pytest.mark.slow
def test_resnet50_partitions_with_module_paths_in_reasons_and_matches_torch(resnet50) -> None:
    module, x, mod, params = resnet50
    result = partition_lab.partition(mod, "neuron@2020", params=params,
                                     excl_node_names=["layer1.0.conv1"])
    result.plan.validate()
    summary = result.plan.summary()
    # "Why is layer1.0.conv1 on the CPU?" -- the plan says, in the user's names.
    line = next(line for line in summary.splitlines() if "on CPU" in line)
    assert "layer1.0.conv1" in line and "excluded by name" in line
    host = {node["source_name"] for node in result.plan.to_dict()["nodes"]
            if node["device"] == "cpu"}
    assert host == {"layer1.0.conv1"}
    got = RegionExecutor(result, opt_level=0).run({"x": x.numpy()})
    expected = torch_outputs(module, x)
    # Random weights make logits in the hundreds; 50 float32 layers summed in other orders
    # differ by ~1e-6 of that scale, so the absolute tolerance follows the scale.
    np.testing.assert_allclose(got[0], expected, rtol=RTOL, atol=1e-5 * np.abs(expected).max())


def test_unsupported_op_stays_on_host_with_its_module_path(resize_net) -> None:
    module, x, mod, params = resize_net
    result = partition_lab.partition(mod, "neuron@2020", params=params)
    result.plan.validate()
    nodes = result.plan.to_dict()["nodes"]
    host = {(node["op"], node["source_name"]) for node in nodes if node["device"] == "cpu"}
    assert host == {("image.resize2d", "up"), ("image.resize2d", "head/upsample_bilinear2d")}
    reasons = [line for line in result.plan.summary().splitlines() if "on CPU" in line]
    assert len(reasons) == 1
    assert "up" in reasons[0] and "head/upsample_bilinear2d" in reasons[0]
    assert "not on neuron-cc's list" in reasons[0]
    accel = {node["source_name"] for node in nodes if node["device"] != "cpu"}
    assert accel == {"stem.0", "stem.1", "stem.2", "head.conv"}
    got = RegionExecutor(result, opt_level=0).run({"x": x.numpy()})
    np.testing.assert_allclose(got[0], torch_outputs(module, x), rtol=RTOL, atol=ATOL)


# ------------------------------------------------------------------------------ patterns
class TransformerBlock(nn.Module):
    """Pre-norm attention and MLP, with the activations importers decompose."""

    def __init__(self, width: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(width)
        self.fc1, self.act, self.fc2 = nn.Linear(width, 2 * width), nn.GELU(), nn.Linear(2 * width, width)
        self.silu, self.hs = nn.SiLU(), nn.Hardswish()

    def forward(self, x):
        y = self.ln1(x)
        x = x + self.attn(y, y, y, need_weights=False)[0]
        x = x + self.fc2(self.act(self.fc1(self.ln2(x))))
        return self.hs(self.silu(x))


@pytest.fixture(scope="module")
def transformer_block():
    torch.manual_seed(0)
    module = seeded(TransformerBlock())
    x = torch.randn(1, 8, 32)
    mod, params = load_model(module, x)
    return module, x, mod, params


@pytest.mark.parametrize("target, host_ops", [
    ("neuron", set()),  # variance and cast_like are parts of LayerNorm and of the scale
    ("neuron@2020", {"ln1", "ln2"}),  # LayerNorm arrived in neuron-cc 1.2.0.0: whole on the host
])
def test_a_transformer_block_is_split_by_patterns_and_matches_torch(transformer_block, target,
                                                                    host_ops) -> None:
    module, x, mod, params = transformer_block
    result = partition_lab.partition(mod, target, params=params)
    result.plan.validate()
    nodes = result.plan.to_dict()["nodes"]
    on_host = {node["source_name"].split("/")[0] for node in nodes if node["device"] == "cpu"}
    assert on_host == host_ops
    assert len(result.plan.cpu_regions) == len(host_ops)  # each LayerNorm one island, whole
    for node in nodes:
        if node["device"] == "cpu":
            assert "LayerNorm was added in neuron-cc 1.2.0.0" in node["reason"]
            assert node["why"]["rule"] == "pattern:layer_norm" and "layer_norm (9 ops" in node["reason"]
    expected_composites = {"layer_norm": 2 - len(host_ops), "attention": 1, "gelu": 1, "silu": 1,
                           "hard_swish": 1, "cast_scale": 1}
    assert composites(result.mod) == {k: v for k, v in expected_composites.items() if v}
    got = RegionExecutor(result, opt_level=0).run({"x": x.numpy()})
    np.testing.assert_allclose(got[0], torch_outputs(module, x), rtol=RTOL, atol=ATOL)


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


# -------------------------------------------------------------------------------------- .pt2
@pytest.fixture(scope="module")
def resize_pt2(tmp_path_factory, resize_net):
    module, x, _, _ = resize_net
    path = tmp_path_factory.mktemp("pt2") / "resize_net.pt2"
    with torch.no_grad():
        torch.export.save(torch.export.export(module, (x,)), str(path))
    return path


def test_pt2_file_loads_as_the_module_does(resize_net, resize_pt2) -> None:
    module, x, mod, params = resize_net
    from_file, file_params = load_model(resize_pt2)
    names = [(c.op.name, source_name(c)) for c in calls_in_order(from_file["main"])]
    assert names == [(c.op.name, source_name(c)) for c in calls_in_order(mod["main"])]
    assert set(file_params) == set(params)
    bound = bind_params(from_file, file_params)
    got = run_module(bound, {"x": x.numpy()}, opt_level=0)
    np.testing.assert_allclose(got[0], torch_outputs(module, x), rtol=RTOL, atol=ATOL)


def test_cli_draws_and_plans_a_pt2_file_in_module_names(resize_pt2, tmp_path, capsys) -> None:
    svg, plan = tmp_path / "net.svg", tmp_path / "plan.json"
    assert main(["viz", str(resize_pt2), "--target", "neuron@2020", "-o", str(svg)]) == 0
    assert main(["partition", str(resize_pt2), "--target", "neuron@2020", "-o", str(plan)]) == 0
    assert main(["compare", str(resize_pt2), "--target", "neuron@2020"]) == 0
    capsys.readouterr()
    drawing = svg.read_text()
    assert "head/upsample_bilinear2d" in drawing and "stem.0" in drawing
    data = json.loads(plan.read_text())
    assert data["graph"] == "resize_net"
    host = {node["source_name"] for node in data["nodes"] if node["device"] == "cpu"}
    assert host == {"up", "head/upsample_bilinear2d"}


def test_bad_pt2_file_is_one_line_error(tmp_path, capsys) -> None:
    bad = tmp_path / "broken.pt2"
    bad.write_bytes(b"not a zip archive")
    with pytest.raises(ModelFormatError, match="torch.export.save"):
        load_model(bad)
    assert main(["viz", str(bad)]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "broken.pt2" in err and "Traceback" not in err


def test_without_torch_the_error_is_one_line_naming_the_fix(tmp_path, monkeypatch,
                                                            capsys) -> None:
    model = tmp_path / "model.pt2"
    model.write_bytes(b"whatever")
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch -> ImportError
    with pytest.raises(MissingDependencyError, match=r"needs torch.*pip install '\.\[relay,torch\]'"):
        load_model(model)
    assert main(["viz", str(model), "-o", str(tmp_path / "m.svg")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install '.[relay,torch]'" in err


# ------------------------------------------------------------- the ONNX frontend, found here
def test_onnx_reduce_over_several_constant_axes_keeps_them_all() -> None:
    """Opset 18 gives ReduceMean its axes as an input (PyTorch writes AdaptiveAvgPool2d(1) so);
    TVM 0.19 alone reduces over the first axis only."""
    axes = numpy_helper.from_array(np.array([2, 3], dtype=np.int64), "axes")
    graph = helper.make_graph(
        [helper.make_node("ReduceMean", ["x", "axes"], ["y"], name="pool", keepdims=1)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 1, 1])], [axes])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    from partition_lab.relay.frontends._onnx import load_onnx_model

    mod, _ = load_onnx_model(onnx.ModelProto.FromString(model.SerializeToString()), "pool.onnx",
                             None)
    x = np.random.default_rng(0).standard_normal((1, 2, 3, 4)).astype("float32")
    got = run_module(mod, {"x": x}, opt_level=0)[0]
    np.testing.assert_allclose(got, x.mean(axis=(2, 3), keepdims=True), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("op, reduce", [("GlobalAveragePool", np.mean),
                                        ("GlobalMaxPool", np.max)])
def test_a_global_1d_pool_is_read_partitioned_and_computed(op: str, reduce) -> None:
    """A 3-D GlobalAveragePool (the TorchScript export of Swin's ``AdaptiveAvgPool1d(1)``) is
    TVM's ``nn.adaptive_avg_pool1d``, whose attributes TVM 0.19 cannot show to Python: the graph
    reader failed on it ("has no attribute list_field_info"). It loads as the reduction it is."""
    graph = helper.make_graph(
        [helper.make_node(op, ["x"], ["y"], name="pooler")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    from partition_lab.relay.frontends._onnx import load_onnx_model

    mod, params = load_onnx_model(model, "pool.onnx", None)
    assert "adaptive" not in mod.astext() and "span=pooler" in mod.astext()
    for platform in ("neuron", "cpu"):
        partition_lab.partition(mod, platform, params=params).plan.validate()
    x = np.random.default_rng(0).standard_normal((1, 4, 6)).astype("float32")
    got = run_module(mod, {"x": x}, opt_level=0)[0]
    np.testing.assert_allclose(got, reduce(x, axis=2, keepdims=True), rtol=1e-6, atol=1e-6)


class Normalized(nn.Module):
    """Cosine-attention's pieces: a weight-normed projection, then ``F.normalize``, which
    PyTorch's exporter writes as ReduceL2 with its axes as an input (opset 18) and Clip (the
    exporter computes the weight's norm itself: the weights are constants)."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.utils.parametrizations.weight_norm(nn.Linear(8, 6, bias=False))

    def forward(self, x):
        return F.normalize(self.proj(x), dim=-1)


def test_normalize_and_weight_norm_load_and_match_torch() -> None:
    torch.manual_seed(0)
    module = Normalized().eval()
    x = torch.randn(2, 5, 8)
    mod, params = load_model(module, x)
    ops = Counter(call.op.name for call in calls_in_order(mod["main"]))
    assert ops["sqrt"] == 1 and ops["clip"] == 1  # the norm, and its guard against zero
    x[0, 0] = 0.0  # projected to zero (no bias): the guard makes it zero, not NaN
    got = run_module(bind_params(mod, params), {"x": x.numpy()}, opt_level=0)[0]
    want = torch_outputs(module, x)
    assert not want[0, 0].any()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reduction", ["none", None])
def test_onnx_scatter_nd_with_reduction_none_is_a_plain_update(reduction) -> None:
    """Opset 18 exporters write ScatterND's default as reduction="none" (Swin-T's shifted
    windows); TVM 0.19 alone rejects that spelling."""
    attrs = {} if reduction is None else {"reduction": reduction}
    indices = numpy_helper.from_array(np.array([[0], [2]], dtype=np.int64), "indices")
    updates = numpy_helper.from_array(np.full((2, 4), 7.0, dtype=np.float32), "updates")
    graph = helper.make_graph(
        [helper.make_node("ScatterND", ["x", "indices", "updates"], ["y"], name="scatter",
                          **attrs)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4])], [indices, updates])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    from partition_lab.relay.frontends._onnx import load_onnx_model

    mod, params = load_onnx_model(onnx.ModelProto.FromString(model.SerializeToString()),
                                  "scatter.onnx", None)
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    got = run_module(bind_params(mod, params), {"x": x}, opt_level=0)[0]
    expected = x.copy()
    expected[[0, 2]] = 7.0
    np.testing.assert_array_equal(got, expected)


def test_a_node_the_converter_fails_on_is_named_in_one_line(tmp_path, capsys) -> None:
    """ScatterND's reduction "max" needs opset 18 in TVM 0.19: the error names the node (its
    PyTorch module path), the op and the opset, in one line."""
    indices = numpy_helper.from_array(np.array([[0], [2]], dtype=np.int64), "indices")
    updates = numpy_helper.from_array(np.full((2, 4), 7.0, dtype=np.float32), "updates")
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"], name="features.1.0.relu"),
         helper.make_node("ScatterND", ["r", "indices", "updates"], ["y"],
                          name="features.1.1.attn/scatter", reduction="max")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4])], [indices, updates])
    path = tmp_path / "scatter.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)]), path)
    assert main(["partition", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "node 'features.1.1.attn/scatter'" in err and "(ScatterND, opset 16)" in err
    assert "max" in err


def test_torch_is_imported_only_for_pytorch_sources(tmp_path) -> None:
    """An ONNX user without torch (or who does not want its import time) never loads it."""
    script = (
        "import sys\n"
        "from partition_lab import load_model, zoo\n"
        "import partition_lab.cli\n"
        "load_model(sys.argv[1])\n"
        "assert 'torch' not in sys.modules and 'triton' not in sys.modules, 'torch imported'\n"
    )
    model = helper.make_model(helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])]),
        opset_imports=[helper.make_opsetid("", 13)])
    path = tmp_path / "relu.onnx"
    onnx.save(model, str(path))
    done = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stderr


def _small_encoder(kind: str):
    """A small Whisper encoder (Conv1d stem + 2 transformer layers) or Wav2Vec2 model
    (Conv1d feature encoder, weight-normed positional conv, 2 layers), random weights."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    if kind == "whisper":
        config = transformers.WhisperConfig(
            d_model=64, encoder_layers=2, decoder_layers=1, encoder_attention_heads=4,
            decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128,
            num_mel_bins=16, max_source_positions=16)
        return transformers.WhisperModel(config).encoder.eval(), torch.randn(1, 16, 32)
    config = transformers.Wav2Vec2Config(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
        conv_dim=(32, 32), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=4)
    return transformers.Wav2Vec2Model(config).eval(), torch.randn(1, 1600)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["whisper", "wav2vec2"])
def test_conv1d_encoders_load_partition_and_validate_on_every_platform(kind: str) -> None:
    from partition_lab.targets import available_targets

    module, features = _small_encoder(kind)
    mod, params = load_model(module, features)
    assert "nn.conv1d" in mod.astext(show_meta_data=False)
    platforms = available_targets()
    assert {"neuron", "neuron@2020", "tensorcore", "cpu"} <= set(platforms), platforms
    for platform in platforms:
        result = partition_lab.partition(mod, platform, params=params, strategy="greedy")
        result.plan.validate()
        for node in result.plan.to_dict()["nodes"]:
            if node["device"] == "cpu":
                assert node["reason"] and node["source_name"], (platform, node)


@pytest.mark.slow
@pytest.mark.parametrize("platform", ["neuron", "neuron@2020", "tensorcore"])
def test_a_whisper_encoder_computes_partitioned_as_unpartitioned_and_as_torch(
        platform: str) -> None:
    """Region by region on llvm, rtol 1e-4, against the unpartitioned (prepared) module; and
    against PyTorch where preparation keeps float32 (tensorcore's ToMixedPrecision computes in
    float16: 8% of its outputs differ from torch's by up to 9e-4)."""
    module, features = _small_encoder("whisper")
    mod, params = load_model(module, features)
    result = partition_lab.partition(mod, platform, params=params, strategy="greedy")
    # neuron takes the whole encoder (one region); neuron@2020 keeps its LayerNorms on the host
    # (10 regions) and tensorcore splits it in 2: there the comparison is region by region
    assert len(result.plan.regions) == {"neuron": 1, "neuron@2020": 10, "tensorcore": 2}[platform]
    inputs = {"input_features": features.numpy()}
    got = RegionExecutor(result, opt_level=0).run(inputs)
    unpartitioned = run_module(result.prepared_mod, inputs, opt_level=0)
    scale = np.abs(unpartitioned[0]).max()
    np.testing.assert_allclose(got[0], unpartitioned[0], rtol=1e-4, atol=1e-5 * scale)
    if platform == "tensorcore":
        return
    with torch.no_grad():
        expected = module(features).last_hidden_state.numpy()
    np.testing.assert_allclose(got[0], expected, rtol=1e-4, atol=1e-4 * scale)
