"""The zoo cache's content hashes: truncation, corruption, stale part files, rebuilds."""


from __future__ import annotations

import os
import subprocess
import time

from partition_lab import zoo
from partition_lab.zoo import _build


def test_hash_sidecar_detects_truncation_and_same_size_corruption(tmp_path):
    path = tmp_path / "m.params"
    _build.write_atomically(path, b"0123456789" * 100)
    assert _build.is_intact(path)
    path.write_bytes(b"0123456789" * 50)  # cut short
    assert not _build.is_intact(path)
    _build.write_atomically(path, b"0123456789" * 100)
    path.write_bytes(b"x" * 1000)  # same size, other bytes
    assert not _build.is_intact(path)
    _build.discard(path)
    assert list(tmp_path.iterdir()) == []


def test_a_file_without_hash_is_not_intact(tmp_path):
    (tmp_path / "m.json").write_text("{}")  # left by a build killed before its hash
    assert not _build.is_intact(tmp_path / "m.json")


def test_stale_part_files_are_removed_and_live_ones_kept(tmp_path):
    dead = tmp_path / f".m.params.{_dead_pid()}.abc.part"
    live = tmp_path / f".m.params.{os.getpid()}.def.part"
    old = tmp_path / ".m.params.xyz.part"  # no pid in the name, an hour old
    for path in (dead, live, old):
        path.write_bytes(b"partial")
    os.utime(old, (time.time() - 2 * _build.STALE_PART_S,) * 2)
    _build.remove_stale_parts(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [live.name]


def _dead_pid() -> int:

    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_cache_files_are_readable_by_others(tmp_path):
    old = os.umask(0o022)
    try:
        _build.write_atomically(tmp_path / "m.onnx", b"x")
    finally:
        os.umask(old)
    for path in tmp_path.iterdir():
        assert path.stat().st_mode & 0o777 == 0o644, path


def test_a_corrupted_zoo_file_is_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("PARTITION_LAB_CACHE", str(tmp_path))
    symbol, params = zoo.mxnet_paths("resnet50_v1", small=True)
    good = params.read_bytes()
    params.write_bytes(bytes(len(good)))  # same size, zeros
    (params.parent / f".{params.name}.{_dead_pid()}.q.part").write_bytes(b"half")  # SIGTERM
    assert zoo.mxnet_paths("resnet50_v1", small=True) == (symbol, params)
    assert params.read_bytes() == good
    assert not [p for p in params.parent.iterdir() if p.name.endswith(".part")]


