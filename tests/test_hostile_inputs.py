"""Hostile model inputs, round 2 (issue 21): files that would run code, read outside their
folder, rewrite the export through their names, block, or blow up in memory.

Each CLI case is built here (no shipped binaries) and must end with exit status 2, exactly one
stderr line naming what is wrong, and the directory exactly as it was (the helpers of
tests/test_hostile.py). Cases that succeed check that the result is unchanged by the hostile
part (an export whose names hold comment markers computes what the model computes).
"""

from __future__ import annotations

import io
import json
import os
import pickle
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from test_hostile import RELAY_TEXT, assert_clean_failure, onnx_model, save, snapshot, tiny_onnx

from partition_lab.cli import main

Builder = Callable[[Path], tuple[list[str], str]]
CASES: dict[str, Builder] = {}


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
    torch = pytest.importorskip("torch")
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
    return ["partition", tiny_onnx(d), "-t", d / "npu.json"], "nested too deeply"


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


# ---------------------------------------------------------------------------- the suite
@pytest.mark.parametrize("name", sorted(CASES))
def test_hostile_model_input(name, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # a default output name would land here, and be seen
    argv, needle = CASES[name](tmp_path)
    assert_clean_failure(argv, needle, tmp_path, capsys)
