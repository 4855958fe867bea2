"""The zoo's torchvision builds (tv:NAME): a zoo that needs no MXNet.

Small variants only: each builds in seconds. Oracles: the architecture's op counts (as for the
gluoncv zoo), the module's own ``named_modules()`` for the names, PyTorch running the seeded
module for the numerics, the cache's hash files for rebuilds.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest

import partition_lab
from partition_lab import zoo
from partition_lab.cli import (
    DEFAULT_MODEL,
    DEFAULT_MODEL_WITHOUT_MXNET,
    build_parser,
    default_model_name,
    main,
    resolve_job,
)
from partition_lab.errors import InputShapeError, PartitionLabError, UnsupportedOperatorError
from partition_lab.relay.frontends import calls_without_source_name, source_name
from partition_lab.relay.frontends._spans import calls_in_order
from partition_lab.relay.frontends._torch import module_path
from partition_lab.relay.runtime import RegionExecutor
from partition_lab.zoo._build import is_intact, seeded_torch_module
from relay_ops import counts_of

try:  # hides Triton from torch first: importing it after TVM crashes the process
    from partition_lab.relay.frontends._torch import require_torch

    torch = require_torch("the torchvision zoo tests")
except PartitionLabError as missing:
    pytest.skip(str(missing), allow_module_level=True)
pytest.importorskip("torchvision")

TV = zoo.torchvision_names()


def test_torchvision_builds_are_listed_apart_with_what_they_need() -> None:
    assert TV == ["tv:resnet50", "tv:resnet152", "tv:simple_pose_resnet152", "tv:fcn_resnet101",
                  "tv:mobilenet_v2", "tv:vit_b_16", "tv:swin_t",
                  "tv:ssdlite320_mobilenet_v3_large", "tv:convnext_tiny",
                  "tv:efficientnet_b0", "tv:deeplabv3_mobilenet_v3_large"]
    assert not set(TV) & set(zoo.names() + zoo.evaluation_names())  # both frontends load those
    pose = zoo.info("tv:simple_pose_resnet152")
    assert pose.needs == ("torch", "torchvision", "onnxscript") and pose.frontends == ("onnx",)
    assert "simple_pose_resnet152_v1b" in pose.story and "Deconvolution" in pose.story
    assert pose.input_shapes == zoo.info("simple_pose_resnet152_v1b").input_shapes
    assert zoo.info("resnet50_v1").needs == ("mxnet", "gluoncv")
    with pytest.raises(UnsupportedOperatorError, match="no MXNet files"):
        zoo.mxnet_paths("tv:resnet50", small=True)
    with pytest.raises(UnsupportedOperatorError, match="--frontend onnx|frontend='onnx'"):
        zoo.load("tv:resnet50", frontend="mxnet", small=True)


def leaf_and_container_paths(module, inputs) -> tuple[set[str], set[str]]:
    """Modules that call another module in ``forward`` (containers) and those that call none
    (leaves), seen with forward hooks on a run of ``module``: a module that owns a submodule
    but never calls it (``MultiheadAttention`` uses its ``out_proj`` weights directly) is a
    leaf, as the frontend's names treat it."""
    called: list[str] = []
    hooks = [sub.register_forward_pre_hook(lambda _m, _a, path=path: called.append(path))
             for path, sub in module.named_modules()]
    try:
        with torch.no_grad():
            module(*inputs)
    finally:
        for hook in hooks:
            hook.remove()
    containers = {path for path in called
                  if any(other.startswith(f"{path}.") or (not path and other) for other in called)}
    return set(called) - containers, containers


@pytest.mark.slow
@pytest.mark.parametrize("name", TV)
def test_small_build_loads_with_its_op_counts_and_module_paths(name: str) -> None:
    mod, params = zoo.load(name, small=True)
    entry = zoo.info(name)
    counts = counts_of(mod, entry.small_expected_ops)
    assert counts == dict(entry.small_expected_ops)
    assert calls_without_source_name(mod) == []
    sample = torch.from_numpy(zoo.sample_inputs(name, small=True)["data"])
    leaves, containers = leaf_and_container_paths(seeded_torch_module(entry, small=True), [sample])
    for call in calls_in_order(mod["main"]):
        path, op = module_path(source_name(call))
        assert path in (leaves if op is None else containers), source_name(call)
    assert [p.name_hint for p in mod["main"].params if p.name_hint not in params] == ["data"]


@pytest.mark.slow
def test_full_size_default_model_has_its_op_counts_and_names() -> None:
    """The command line's default without MXNet, full size (the other full-size builds were
    checked the same way when their counts were written: ResNet-50/152, FCN, MobileNet v2)."""
    name = DEFAULT_MODEL_WITHOUT_MXNET
    mod, _ = zoo.load(name)
    counts = counts_of(mod, zoo.info(name).expected_ops)
    assert counts == {"nn.conv2d": 156, "nn.conv2d_transpose": 3}
    assert calls_without_source_name(mod) == []
    names = {source_name(call) for call in calls_in_order(mod["main"])}
    assert {"backbone.layer4.2.conv3", "deconv.0", "final"} <= names


@pytest.mark.slow
def test_small_simple_pose_story_and_numerics_match_torch() -> None:
    """The report's story through PyTorch: the deconvolutions stay on the CPU on neuron@2020,
    named by module path, and the partitioned program computes what the module computes."""
    name = "tv:simple_pose_resnet152"
    mod, params = zoo.load(name, small=True)
    result = partition_lab.partition(mod, "neuron@2020", params=params)
    result.plan.validate()
    host = {(n["op"], n["source_name"]) for n in result.plan.to_dict()["nodes"]
            if n["device"] == "cpu"}
    assert host == {("nn.conv2d_transpose", f"deconv.{i}") for i in (0, 3, 6)}
    assert len(result.plan.accelerator_regions) == 4  # as the report's 4 accelerator subgraphs
    assert "deconv.0" in result.plan.summary()
    inputs = zoo.sample_inputs(name, small=True)
    got = RegionExecutor(result, opt_level=0).run(inputs)
    with torch.no_grad():
        expected = seeded_torch_module(zoo.info(name), small=True)(
            torch.from_numpy(inputs["data"])).numpy()
    np.testing.assert_allclose(got[0], expected, rtol=1e-4, atol=1e-5 * np.abs(expected).max())
    # onnxruntime on the cached file agrees too: the file holds the seeded module's weights.
    reference = zoo.reference_outputs(name, inputs, small=True)
    np.testing.assert_allclose(reference[0], expected, rtol=1e-4,
                               atol=1e-5 * np.abs(expected).max())


def test_cache_reuses_and_rebuilds_with_the_zoo_cache_code(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(zoo.CACHE_ENV, str(tmp_path))
    path = zoo.onnx_path("tv:resnet50", small=True)
    assert path.is_relative_to(zoo.cache_dir("torch")) and "torch" in path.parent.parent.name
    assert ":" not in path.name and is_intact(path)
    built = path.stat().st_mtime_ns
    assert zoo.onnx_path("tv:resnet50", small=True) == path
    assert path.stat().st_mtime_ns == built  # intact: not built again
    path.write_bytes(b"cut short")
    assert not is_intact(path)
    assert zoo.onnx_path("tv:resnet50", small=True) == path and is_intact(path)
    assert os.path.getsize(path) > 1_000_000  # the weights, not the garbage


# ------------------------------------------------------------------------------ command line
def test_default_model_is_the_torchvision_build_without_mxnet(monkeypatch) -> None:
    args = build_parser().parse_args(["viz"])
    monkeypatch.setitem(sys.modules, "mxnet", None)  # import mxnet -> ImportError
    assert default_model_name() == DEFAULT_MODEL_WITHOUT_MXNET
    job = resolve_job(args, default_model=True)
    assert (job.model, job.target, job.strategy) == (DEFAULT_MODEL_WITHOUT_MXNET, "neuron@2020",
                                                     "cost")


def test_default_model_stays_the_gluoncv_build_with_mxnet() -> None:
    pytest.importorskip("mxnet")
    if importlib.util.find_spec("gluoncv") is None:
        pytest.skip("gluoncv is not installed")
    assert default_model_name() == DEFAULT_MODEL == "zoo:simple_pose_resnet152_v1b"


def test_cli_lists_both_zoos_and_draws_a_tv_model(tmp_path, capsys) -> None:
    assert main(["zoo"]) == 0
    listing = capsys.readouterr().out
    assert "tv:simple_pose_resnet152\n" in listing and "simple_pose_resnet152_v1b\n" in listing
    assert "needs: torch, torchvision, onnxscript" in listing
    assert "needs: mxnet, gluoncv" in listing
    out = tmp_path / "pose.svg"
    assert main(["viz", "tv:simple_pose_resnet152:small", "--target", "neuron@2020",
                 "-o", str(out)]) == 0
    assert "deconv.0" in out.read_text()
    assert main(["viz", "tv:no_such_model", "-o", str(out)]) == 2
    assert main(["viz", "tv:resnet50:large", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "no zoo model named 'tv:no_such_model'" in err and "tv:NAME" in err


def test_the_zoo_works_without_mxnet() -> None:
    """Where MXNet does not import, the zoo module, its listing and the tv: builds still work
    (gluoncv is imported only to build a Gluon model)."""
    zoo.onnx_path("tv:resnet50", small=True)  # built here, where the test suite's cache is
    script = (
        "import sys\n"
        "sys.modules['mxnet'] = sys.modules['gluoncv'] = None\n"
        "from partition_lab import zoo\n"
        "from partition_lab.cli import default_model_name, main\n"
        "assert default_model_name() == 'tv:simple_pose_resnet152'\n"
        "mod, params = zoo.load('tv:resnet50', small=True)\n"
        "assert 'layer1.0.conv1.weight' in params\n"
        "sys.exit(main(['zoo']))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert "tv:resnet50\n" in done.stdout


@pytest.mark.parametrize("spec, parsed", [
    ("zoo:resnet50_v1", ("resnet50_v1", False)), ("zoo:resnet50_v1:small", ("resnet50_v1", True)),
    ("tv:resnet50", ("tv:resnet50", False)), ("tv:resnet50:small", ("tv:resnet50", True)),
    ("tv:resnet50:tiny", None), ("zoo:", None), ("onnx:model", None),
])
def test_zoo_specs_parse_in_one_place(spec, parsed) -> None:
    assert zoo.parse_spec(spec) == parsed
    assert zoo.is_spec(spec) == spec.startswith(("zoo:", "tv:"))


def test_profile_loads_torchvision_builds_by_name() -> None:
    # profile() resolves model arguments itself (it also takes bundles): tv: names work there
    # as in viz/partition/compare, and a malformed one says the expected form.
    from partition_lab.errors import ProfileError
    from partition_lab.profiling.inputs import _load

    mod, params = _load("tv:resnet50:small", None, None)
    calls = calls_in_order(mod["main"])
    assert params and any(source_name(c).startswith("layer1.0") for c in calls)
    with pytest.raises(ProfileError, match="expected zoo:NAME, tv:NAME or hf:NAME"):
        _load("tv:resnet50:tiny", None, None)


@pytest.mark.slow
@pytest.mark.parametrize("target, strategy, host_convs", [
    ("neuron", None, 0),
    ("neuron@2020", None, 31),  # the depthwise convolutions: grouped conv came in 1.3.0.0
    ("tensorcore", "greedy", 0),
])
def test_small_ssdlite_detector_partitions_and_validates(target, strategy, host_convs) -> None:
    """The detector of the suite: SSDlite up to its decoded boxes and scores (torchvision's
    post-processing cannot be exported or split, README's known limitations)."""
    name = "tv:ssdlite320_mobilenet_v3_large"
    mod, params = zoo.load(name, small=True)
    result = partition_lab.partition(mod, target, params=params, strategy=strategy)
    result.plan.validate()
    nodes = result.plan.to_dict()["nodes"]
    host = [n for n in nodes if n["device"] == "cpu"]
    assert len(host) == host_convs and {n["op"] for n in host} <= {"nn.conv2d"}
    assert all("grouped/depthwise conv" in n["reason"] for n in host)
    if target != "neuron@2020":
        return
    # Region by region on the host: the plan with 31 islands computes what the module does.
    inputs = zoo.sample_inputs(name, small=True)
    got = RegionExecutor(result, opt_level=0).run(inputs)
    with torch.no_grad():
        boxes, scores = seeded_torch_module(zoo.info(name), small=True)(
            torch.from_numpy(inputs["data"]))
    assert scores.std() > 1e-3  # seeded batch norms: the scores are not all 1/3
    np.testing.assert_allclose(got[0], boxes.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got[1], scores.numpy(), rtol=1e-4, atol=1e-6)


def test_hugging_face_builds_without_transformers_fail_in_one_line(tmp_path, monkeypatch) -> None:
    """transformers is no dependency of the package: where it is missing, building an hf: model
    says so in one line naming the fix (as a missing torch does), and nothing is cached."""
    from partition_lab._optional import MissingDependencyError

    monkeypatch.setenv(zoo.CACHE_ENV, str(tmp_path))
    monkeypatch.setitem(sys.modules, "transformers", None)  # import transformers -> ImportError
    with pytest.raises(MissingDependencyError) as missing:
        zoo.onnx_path("hf:distilbert", small=True)
    message = str(missing.value)
    assert "\n" not in message and "'hf:distilbert' needs transformers" in message
    assert "pip install '." in message and ",hf]'" in message  # the [hf] extra
    assert not list(tmp_path.rglob("*.onnx"))


# ------------------------------------------------------------------------------ other shapes
def test_a_torch_build_loads_at_another_batch_exported_again(tmp_path, monkeypatch) -> None:
    """The export writes the batch into ViT's reshapes: another batch is another export, cached
    apart from the model's own file, and it computes what the module computes."""
    monkeypatch.setenv(zoo.CACHE_ENV, str(tmp_path))
    name, shapes = "tv:vit_b_16", {"data": (3, 3, 32, 32)}
    mod, params = zoo.load(name, small=True, input_shapes=shapes)
    assert [tuple(p.checked_type.shape) for p in mod["main"].params if p.name_hint == "data"] \
        == [(3, 3, 32, 32)]
    assert tuple(mod["main"].ret_type.shape) == (3, 10)
    assert mod.attrs["partition_lab.name"] == "tv:vit_b_16:small (data=3,3,32,32)"
    files = sorted(path.name for path in tmp_path.rglob("*.onnx"))
    assert files == ["tv_vit_b_16@data=3x3x32x32.onnx"]
    assert zoo.onnx_path(name, small=True).name == "tv_vit_b_16.onnx"  # its own shapes, apart
    assert len(list(tmp_path.rglob("*.onnx"))) == 2
    own, _ = zoo.load(name, small=True)
    assert tuple(own["main"].params[0].checked_type.shape) == (1, 3, 32, 32)
    assert zoo.load(name, small=True, input_shapes={"data": (1, 3, 32, 32)})[0]["main"].same_as(
        own["main"])  # the model's own shapes asked for explicitly
    result = partition_lab.partition(mod, "neuron", params=params, strategy="greedy")
    result.plan.validate()
    inputs = zoo.sample_inputs(name, small=True, input_shapes=shapes)
    assert inputs["data"].shape == (3, 3, 32, 32)
    got = RegionExecutor(result, opt_level=0).run(inputs)
    with torch.no_grad():
        expected = seeded_torch_module(zoo.info(name), small=True)(
            torch.from_numpy(inputs["data"])).numpy()
    np.testing.assert_allclose(got[0], expected, rtol=1e-4, atol=1e-5 * np.abs(expected).max())


@pytest.mark.parametrize("shapes, message", [
    # ViT's position embedding is fixed: the module's own assertion, in one line.
    ({"data": (1, 3, 64, 64)}, "tv:vit_b_16:small cannot take data=1,3,64,64: exporting it at "
                               "those shapes failed (Wrong image height! Expected 32 but got "
                               "64!); its own inputs are data=1,3,32,32"),
    ({"image": (1, 3, 32, 32)}, "tv:vit_b_16:small has no input 'image'; its inputs are "
                                "data=1,3,32,32"),
    ({"data": (3, 32, 32)}, "tv:vit_b_16:small's input data has 4 dimensions (data=1,3,32,32); "
                            "got 3"),
])
def test_a_shape_the_model_cannot_take_is_one_line(shapes, message, tmp_path,
                                                    monkeypatch) -> None:
    monkeypatch.setenv(zoo.CACHE_ENV, str(tmp_path))
    with pytest.raises(InputShapeError) as error:
        zoo.load("tv:vit_b_16", small=True, input_shapes=shapes)
    assert str(error.value) == message
    assert not list(tmp_path.rglob("*.onnx"))  # nothing half-built left in the cache


def test_cli_input_shape_on_a_tv_model_exports_it_again(tmp_path, monkeypatch, capsys) -> None:
    """``partition-lab viz tv:vit_b_16 --input-shape data=32,3,224,224 -t tensorcore``, small."""
    monkeypatch.setenv(zoo.CACHE_ENV, str(tmp_path))
    out = tmp_path / "vit.svg"
    assert main(["viz", "tv:vit_b_16:small", "--input-shape", "data=8,3,32,32", "-t",
                 "tensorcore", "-o", str(out)]) == 0
    assert "<svg" in out.read_text()
    assert [path.name for path in tmp_path.rglob("*.onnx")] == ["tv_vit_b_16@data=8x3x32x32.onnx"]
    capsys.readouterr()
    assert main(["viz", "tv:vit_b_16:small", "--input-shape", "data=8,3,48,48", "-t",
                 "tensorcore", "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "cannot take data=8,3,48,48" in err
    assert "Wrong image height! Expected 32 but got 48!" in err
    assert main(["viz", "zoo:resnet50_v1:small", "--input-shape", "data=8,3,64,64",
                 "-o", str(out)]) == 2
    assert "resnet50_v1:small has fixed input shapes (data=1,3,64,64): it is built with MXNet" \
        in capsys.readouterr().err
