"""Outputs written as one unit: both files or neither, restored on a failed rename."""


from __future__ import annotations

import os
from pathlib import Path

import pytest

from partition_lab import _outputs


def test_outputs_are_written_together(tmp_path):
    files = {tmp_path / "a.json": b"A", tmp_path / "a.relay": b"R"}
    _outputs.write_together(files)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == {"a.json": b"A",
                                                                   "a.relay": b"R"}


def test_a_failed_second_rename_restores_the_first_file(tmp_path, monkeypatch):
    plan, relay = tmp_path / "plan.json", tmp_path / "plan.relay"
    plan.write_text("old plan")
    relay.write_text("old relay")
    real = os.replace

    def failing(src, dst):
        if Path(dst) == relay:
            raise OSError("disk full")
        return real(src, dst)

    monkeypatch.setattr(_outputs.os, "replace", failing)
    with pytest.raises(OSError, match="disk full"):
        _outputs.write_together({plan: b"new plan", relay: b"new relay"})
    monkeypatch.undo()
    assert plan.read_text() == "old plan" and relay.read_text() == "old relay"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.json", "plan.relay"]


def test_a_failed_second_rename_removes_a_first_file_that_was_new(tmp_path, monkeypatch):
    plan, relay = tmp_path / "plan.json", tmp_path / "plan.relay"
    real = os.replace
    monkeypatch.setattr(_outputs.os, "replace", lambda s, d: (
        (_ for _ in ()).throw(OSError("no space")) if Path(d) == relay else real(s, d)))
    with pytest.raises(OSError):
        _outputs.write_together({plan: b"P", relay: b"R"})
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("make, expected", [
    (lambda d: (d / "m.onnx", [d / "m.onnx"]), "it is the input"),
    (lambda d: (d / "x" / "m.json", []), "does not exist"),
    (lambda d: (d, []), "it is a directory"),
])
def test_check_outputs(tmp_path, make, expected):
    (tmp_path / "m.onnx").write_bytes(b"x")
    output, inputs = make(tmp_path)
    with pytest.raises(_outputs.OutputError, match=expected):
        _outputs.check_outputs([output], inputs)


def test_two_outputs_that_are_one_file(tmp_path):
    with pytest.raises(_outputs.OutputError, match="also the output"):
        _outputs.check_outputs([tmp_path / "a", tmp_path / "." / "a"])


def test_input_files_of_a_symbol_include_its_params(tmp_path):
    (tmp_path / "m-symbol.json").write_text("{}")
    (tmp_path / "m-0003.params").write_bytes(b"")
    (tmp_path / "other.params").write_bytes(b"")
    files = _outputs.input_files(str(tmp_path / "m-symbol.json"), "t.toml", "cache.json")
    assert [p.name for p in files] == ["m-symbol.json", "m-0003.params", "t.toml", "cache.json"]
    assert _outputs.input_files(None, "neuron") == []


