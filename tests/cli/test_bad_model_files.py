"""Hostile model inputs: files that would run code, read outside their
folder, rewrite the export through their names, block, or blow up in memory.

Each CLI case is built here (no shipped binaries) and must end with exit status 2, exactly one
stderr line naming what is wrong, and the directory exactly as it was (the helpers of
tests/cli/test_bad_input.py). Cases that succeed check that the result is unchanged by the hostile
part (an export whose names hold comment markers computes what the model computes).
"""

from __future__ import annotations

import json
import os
import pickle
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from test_bad_input import assert_clean_failure, onnx_model, save, tiny_onnx

from partition_lab.cli import main

Builder = Callable[[Path], tuple[list[str], str]]
CASES: dict[str, Builder] = {}


def _torch():  # noqa: ANN202
    """torch with Triton hidden first, as the package loads it: importing Triton after TVM
    aborts the process (another test file of this worker may have imported TVM)."""
    from partition_lab.errors import PartitionLabError
    from partition_lab.relay.frontends._torch import require_torch

    try:
        return require_torch("the .pt2 hostile-input tests")
    except PartitionLabError as missing:
        pytest.skip(str(missing))


def case(name: str) -> Callable[[Builder], Builder]:
    """Register a CLI case: it makes its inputs in a directory and returns the arguments and a
    part of the one expected error line."""
    def register(builder: Builder) -> Builder:
        assert name not in CASES, name
        CASES[name] = builder
        return builder
    return register


# ------------------------------------------------------------------------ 1: code in a .pt2
class _RunsCode:
    """A pickle that creates ``marker`` when unpickled (what an attacker's would do)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.fixture(scope="module")
def pt2_program(tmp_path_factory) -> Path:
    """A small program saved with torch.export.save (Linear, ReLU)."""
    torch = _torch()
    path = tmp_path_factory.mktemp("pt2") / "m.pt2"
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval()
    torch.export.save(torch.export.export(model, (torch.randn(1, 4),)), str(path))
    return path


def _rewrite(source: Path, target: Path, edit: Callable[[str, bytes], bytes]) -> Path:
    """A copy of the zip archive ``source`` with each entry's bytes passed through ``edit``."""
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "w") as new:
        for name in old.namelist():
            new.writestr(name, edit(name, old.read(name)))
    return target


def _pickled_weight(marker: Path) -> Callable[[str, bytes], bytes]:
    def edit(name: str, data: bytes) -> bytes:
        if name.endswith("model_weights_config.json"):
            config = json.loads(data)
            config["config"]["0.weight"]["use_pickle"] = True
            return json.dumps(config).encode()
        return pickle.dumps(_RunsCode(marker)) if name.endswith("weights/weight_0") else data
    return edit


def _pickled_sample_inputs(marker: Path) -> Callable[[str, bytes], bytes]:
    # torch retries a failed weights-only load of the sample inputs with a full unpickle
    def edit(name: str, data: bytes) -> bytes:
        return pickle.dumps(_RunsCode(marker)) if name.endswith("sample_inputs/model.pt") \
            else data
    return edit


def _pickled_constant(marker: Path) -> Callable[[str, bytes], bytes]:
    def edit(name: str, data: bytes) -> bytes:
        if name.endswith("model_constants_config.json"):
            return json.dumps({"config": {"c": {"path_name": "opaque_obj_0", "is_param": False,
                                                "use_pickle": False}}}).encode()
        return data
    return edit


@pytest.mark.parametrize("edit, needle", [
    (_pickled_weight, "marks '0.weight' as pickled"),
    (_pickled_sample_inputs, "holds a pickle that is not plain tensors"),
    (_pickled_constant, "stores 'c' as a pickled object"),
], ids=["use-pickle-weight", "pickled-sample-inputs", "opaque-object-constant"])
def test_a_pt2_that_would_run_code_is_refused(edit, needle, pt2_program, tmp_path,
                                              monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    marker = tmp_path.parent / f"{tmp_path.name}-ran"  # outside the snapshot, so seen if made
    model = _rewrite(pt2_program, tmp_path / "evil.pt2", edit(marker))
    line = assert_clean_failure(["partition", model], needle, tmp_path, capsys)
    assert not marker.exists(), "the pickle ran"
    assert "can run any code" in line


def test_a_plain_pt2_still_loads(pt2_program, capsys):
    assert main(["partition", str(pt2_program)]) == 0, capsys.readouterr().err


# ------------------------------------------------------------- 2: ONNX external data
def external_data_onnx(d: Path) -> Path:
    """The tiny model with its weights in ``w.bin`` beside it."""
    import onnx

    model = onnx_model()
    onnx.save_model(model, str(d / "net.onnx"), save_as_external_data=True,
                    all_tensors_to_one_file=True, location="w.bin", size_threshold=0)
    return d / "net.onnx"


def _outside(d: Path) -> Path:
    """A folder beside the case's folder (outside its snapshot and the model's folder)."""
    folder = d.parent / f"{d.name}-outside"
    folder.mkdir(exist_ok=True)
    return folder


@case("onnx-external-data-links-outside-the-folder")
def _(d: Path):
    model = external_data_onnx(d)
    secret = _outside(d) / "secret.bin"
    (d / "w.bin").rename(secret)  # the very bytes the model expects: only the place is wrong
    (d / "w.bin").symlink_to(secret)
    return ["partition", model, "--export", d / "out.relay"], "outside the model's folder"


@case("onnx-external-data-folder-links-outside")
def _(d: Path):
    import onnx

    model = onnx_model()
    target_dir = _outside(d)
    (d / "sub").symlink_to(target_dir, target_is_directory=True)
    onnx.save_model(model, str(d / "net.onnx"), save_as_external_data=True,
                    all_tensors_to_one_file=True, location="sub/w.bin", size_threshold=0)
    return ["partition", d / "net.onnx"], "outside the model's folder"


@case("onnx-external-data-is-a-fifo")
def _(d: Path):
    model = external_data_onnx(d)
    (d / "w.bin").unlink()
    os.mkfifo(d / "w.bin")
    return ["partition", model], "is a named pipe (FIFO)"


def test_external_data_inside_the_folder_still_loads(tmp_path, capsys):
    model = external_data_onnx(tmp_path)
    assert main(["partition", str(model)]) == 0, capsys.readouterr().err


# ----------------------------------------------------------------- 5: no graph outputs
@case("onnx-without-graph-outputs")
def _(d: Path):
    model = onnx_model()
    del model.graph.output[:]
    return ["partition", save(model, d / "net.onnx")], "declares no graph outputs"


# --------------------------------------------------------------------- 6: special files
@case("model-is-a-fifo")
def _(d: Path):
    os.mkfifo(d / "net.onnx")
    return ["partition", d / "net.onnx"], "is a named pipe (FIFO)"


@case("relay-model-is-a-fifo")
def _(d: Path):
    os.mkfifo(d / "net.relay")
    return ["partition", d / "net.relay"], "is a named pipe (FIFO)"


@case("model-is-a-device")
def _(d: Path):
    return ["partition", "/dev/zero"], "is a character device"


@case("target-file-is-a-fifo")
def _(d: Path):
    os.mkfifo(d / "npu.toml")
    return ["partition", tiny_onnx(d), "-t", d / "npu.toml"], "is a named pipe (FIFO)"


@case("bundle-is-a-fifo")
def _(d: Path):
    os.mkfifo(d / "net.json.gz")
    return ["profile", d / "net.json.gz", "--cache", d / "cache.json"], "is a named pipe"


# ---------------------------------------------------------- 4, 7: nesting and bombs
@case("target-json-nested-deeply")
def _(d: Path):
    (d / "npu.json").write_text("[" * 100_000 + "]" * 100_000)
    return ["partition", tiny_onnx(d), "-t", d / "npu.json"], "too deeply"


@case("bundle-json-nested-deeply")
def _(d: Path):
    import gzip

    with gzip.open(d / "net.json.gz", "wt") as handle:
        handle.write("[" * 100_000 + "]" * 100_000)
    return ["profile", d / "net.json.gz", "--cache", d / "cache.json"], "too deeply"


@case("bundle-decompression-bomb")
def _(d: Path):
    """1 MB that inflates past the bundle limit (256 MiB); read in chunks, refused there."""
    import gzip

    from partition_lab.executors.graph_io import MAX_BUNDLE_BYTES

    zeros = bytes(1 << 20)
    with gzip.open(d / "net.json.gz", "wb", compresslevel=1) as handle:
        for _ in range(MAX_BUNDLE_BYTES // len(zeros) + 1):
            handle.write(zeros)
    return ["profile", d / "net.json.gz", "--cache", d / "cache.json"], "inflates to more than"


# ---------------------------------------------------------- 3: names written into Relay text
HOSTILE_NAMES = {"Conv": "a */ * 0f /* b", "Relu": "r%2A /* x", "Sigmoid": "s\n*/ y"}


def named_onnx(d: Path, input_name: str = "data") -> Path:
    """conv -> relu -> sigmoid whose node names close and open Relay comments."""
    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype("float32"),
                                     "w */ 0 /*")
    nodes = [helper.make_node("Conv", [input_name, weight.name], ["t0"],
                              name=HOSTILE_NAMES["Conv"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["t0"], ["t1"], name=HOSTILE_NAMES["Relu"]),
             helper.make_node("Sigmoid", ["t1"], ["t2"], name=HOSTILE_NAMES["Sigmoid"])]
    graph = helper.make_graph(
        nodes, "names", [helper.make_tensor_value_info(input_name, TensorProto.FLOAT,
                                                       [1, 3, 8, 8])],
        [helper.make_tensor_value_info("t2", TensorProto.FLOAT, None)], initializer=[weight])
    return save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
                d / "net.onnx")


def _reference(model: Path, data: np.ndarray) -> np.ndarray:
    """The model's output, built from the ONNX file directly (weights bound)."""
    import tvm
    from tvm import relay

    from partition_lab import load_model
    from partition_lab.relay.runtime import build_for_cpu

    mod, params = load_model(model)
    bound = relay.build_module.bind_params_by_name(mod["main"], params)
    return _run(build_for_cpu(tvm.IRModule.from_expr(bound)), data)


def _op_counts(mod) -> dict[str, int]:
    """Ops of ``main`` by name, those inside inline region functions included."""
    import tvm

    from partition_lab.relay.frontends._spans import calls_in_order

    ops = [c.op.name for c in calls_in_order(mod["main"]) if isinstance(c.op, tvm.ir.Op)]
    return {op: ops.count(op) for op in ops}


def _run(lib, data: np.ndarray) -> np.ndarray:
    import tvm
    from tvm.contrib import graph_executor

    runner = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    runner.set_input(0, data)
    runner.run()
    return runner.get_output(0).numpy()


@pytest.mark.parametrize("input_name", ["data", "input.1"])
def test_names_with_comment_markers_do_not_rewrite_the_export(input_name, tmp_path, capsys):
    """The export of a model whose names hold ``*/`` and ``/*`` reads back with the same names,
    the same ops and the same outputs (not ``* 0f``: all zeros); its input, if its name is no
    Relay identifier, is renamed to one (``input.1`` -> ``input_1``)."""
    from partition_lab import load_model
    from partition_lab.relay.frontends import source_name
    from partition_lab.relay.frontends._spans import calls_in_order
    from partition_lab.relay.runtime import build_for_cpu
    from reference_codegen import CODEGEN  # registers the reference BYOC codegen

    model = named_onnx(tmp_path, input_name)
    export, plan = tmp_path / "out.relay", tmp_path / "plan.json"
    assert main(["partition", str(model), "--compiler", CODEGEN, "--export", str(export),
                 "-o", str(plan)]) == 0, capsys.readouterr().err
    original, _ = load_model(model)
    loaded, _ = load_model(export)
    names = {source_name(c) for c in calls_in_order(loaded["main"])}
    assert set(HOSTILE_NAMES.values()) <= names, names
    assert _op_counts(loaded) == _op_counts(original)
    assert [p.name_hint for p in loaded["main"].params] == [input_name.replace(".", "_")]
    # the plan's .relay (for reading: no weights, so not parseable) has every comment closed
    readable = plan.with_suffix(".relay").read_text()
    assert readable.count("/*") == readable.count("*/") and " * 0f" not in readable
    data = np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype("float32")
    expected = _reference(model, data)
    assert np.abs(expected).min() > 0  # a sigmoid: a zeroed export would show
    np.testing.assert_allclose(_run(build_for_cpu(loaded), data), expected, rtol=1e-5,
                               atol=1e-5)


def test_ordinary_names_print_as_tvm_prints_them():
    """Escaping changes nothing for names that need none: the module is printed as it is."""
    import tvm
    from tvm import relay

    from partition_lab.relay._names import printable
    from partition_lab.relay.frontends._spans import make_span

    x = relay.var("data", shape=(1, 4))
    call = relay.Call(tvm.ir.Op.get("nn.relu"), [x], None, None,
                      make_span("layer1.0/relu#2"))
    mod = relay.transform.InferType()(tvm.IRModule.from_expr(relay.Function([x], call)))
    assert printable(mod) is mod


# ------------------------------------------------------------------------ 4: Relay text
def relay_text_model(d: Path, shape: str = "(1, 8)", body: str = "nn.relu(%data)") -> Path:
    (d / "net.relay").write_text('#[version = "0.0.5"]\n'
                                 f"def @main(%data: Tensor[{shape}, float32]) {{\n"
                                 f"  {body}\n}}\n")
    return d / "net.relay"


@case("relay-text-nested-3000-deep")
def _(d: Path):
    body = "%data"
    for _ in range(3000):
        body = f"nn.relu({body})"
    return ["partition", relay_text_model(d, body=body)], "nests brackets more than 1000 deep"


@pytest.mark.parametrize("shape, needle", [
    ("(100000, 100000, 100000)", "more than the limit of 2**32"),
    ("(9223372036854775807, 4)", "more than the limit of 2**32"),
    ("(-5, 4)", "every dimension must be positive. Fix the declaration or pass --input-shape "
                "data=1,4"),
    ("(0, 4)", "every dimension must be positive"),
], ids=["huge", "int64-max", "negative", "zero"])
def test_relay_text_declared_shapes_are_checked(shape, needle, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert_clean_failure(["partition", relay_text_model(tmp_path, shape)], needle, tmp_path,
                         capsys)


@case("relay-text-unparsable-name")
def _(d: Path):
    model = relay_text_model(d, body="nn.relu(%input.1)")
    model.write_text(model.read_text().replace("%data", "%input.1"))
    return ["partition", model], "(expected a `)` found  `.` (line 2, column 20))"


@case("relay-text-meta-without-metadata")
def _(d: Path):
    return ["partition", relay_text_model(d, body="add(%data, meta[relay.Constant][0])")], \
        "uses meta[...] constants but has no #[metadata] section"


# ---------------------------------------------------------------------------- the suite
@pytest.mark.parametrize("name", sorted(CASES))
def test_hostile_model_input(name, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # a default output name would land here, and be seen
    argv, needle = CASES[name](tmp_path)
    assert_clean_failure(argv, needle, tmp_path, capsys)


# ------------------------------------------------------------------------- 8: API misuse
@pytest.mark.parametrize("call, needle", [
    (lambda mod, params: ("partition", None, {}), "mod must be a tvm.IRModule"),
    (lambda mod, params: ("partition", mod, {"params": params, "excl_node_names": "conv0"}),
     "not the string 'conv0' (read as its letters); pass ['conv0']"),
    (lambda mod, params: ("analyze", mod, {"params": params, "exclude_ops": [3]}),
     "must hold names (strings), not 3"),
    (lambda mod, params: ("compare", mod, {"params": {**params, "wieght": params["w"]}}),
     "params names ['wieght'], which main does not have"),
    (lambda mod, params: ("partition", mod, {"params": [1, 2]}), "params must map"),
], ids=["mod-none", "excl-node-names-a-string", "exclude-ops-not-names", "params-misspelled",
        "params-not-a-mapping"])
def test_api_misuse_is_a_partition_lab_error(call, needle, tmp_path):
    from partition_lab import api, load_model
    from partition_lab.errors import ArgumentError

    mod, params = load_model(tiny_onnx(tmp_path))
    function, model, kwargs = call(mod, params)
    with pytest.raises(ArgumentError) as error:
        getattr(api, function)(model, "neuron", **kwargs)
    assert needle in str(error.value) and "\n" not in str(error.value)
