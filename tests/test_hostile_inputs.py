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
