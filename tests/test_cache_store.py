"""partition_lab._cache_store: the user cache's size bound with least-recently-used eviction,
holding entries against other processes, and the ``partition-lab cache`` command. Entries are
small synthetic files and folders laid out as each kind lays them out, so nothing is built."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from partition_lab import _cache_store as store
from partition_lab.cli import main

SIZE = 1000  # bytes in each synthetic entry


@pytest.fixture(autouse=True)
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache folder of this test's own."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("PARTITION_LAB_CACHE", str(folder))
    monkeypatch.delenv(store.MAX_BYTES_ENV, raising=False)
    return folder


def model_entry(root: Path, kind: str, key: str, used_at: float) -> Path:
    """A converted/prepared entry file of SIZE bytes, last used at ``used_at``."""
    path = root / kind / key[:2] / f"{key}.tvm"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * SIZE)
    os.utime(path, (used_at, used_at))
    return path


def zoo_entry(root: Path, name: str, used_at: float) -> Path:
    """A built zoo model's folder (two files, SIZE bytes together), last used at ``used_at``."""
    folder = root / "v1-torch2.0-opset18" / name
    folder.mkdir(parents=True)
    (folder / f"{name}.onnx").write_bytes(b"o" * (SIZE - 64))
    (folder / f"{name}.onnx.sha256").write_bytes(b"h" * 64)
    os.utime(folder, (used_at, used_at))
    return folder


def fill(root: Path) -> dict[str, Path]:
    """Five entries of three kinds, used in the order a (oldest) .. e."""
    return {"a": model_entry(root, "converted", "aa" + "0" * 62, 1000.0),
            "b": zoo_entry(root, "tv_resnet50", 2000.0),
            "c": model_entry(root, "prepared", "cc" + "0" * 62, 3000.0),
            "d": model_entry(root, "converted", "dd" + "0" * 62, 4000.0),
            "e": zoo_entry(root, "tv_vit_b_16", 5000.0)}


def hold_elsewhere(path: Path) -> subprocess.Popen[str]:
    """Another process holding the entry at ``path`` (until its stdin closes)."""
    code = ("import sys; from pathlib import Path; from partition_lab import _cache_store as s; "
            "print(s.hold(Path(sys.argv[1])), flush=True); sys.stdin.read()")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    child = subprocess.Popen([sys.executable, "-c", code, str(path)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env=env)
    assert child.stdout is not None and child.stdout.readline().strip() == "True"
    return child


# ---------------------------------------------------------------------------------- bound
@pytest.mark.parametrize(("text", "size"), [
    ("2GB", 2 * 10**9), ("500 MB", 500 * 10**6), ("1.5GiB", 3 * 2**29), ("123", 123),
    ("64k", 64_000), ("10KiB", 10_240), ("0", None), ("none", None), ("Unlimited", None)])
def test_sizes_parse(text: str, size: int | None) -> None:
    assert store.parse_size(text) == size


def test_the_bound_has_a_default_and_a_bad_value_says_what_to_write(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert store.max_bytes() == store.DEFAULT_MAX_BYTES
    monkeypatch.setenv(store.MAX_BYTES_ENV, "  ")
    assert store.max_bytes() == store.DEFAULT_MAX_BYTES
    monkeypatch.setenv(store.MAX_BYTES_ENV, "2 gigs")
    with pytest.raises(store.CacheError, match=r"PARTITION_LAB_CACHE_MAX_BYTES: '2 gigs' is "
                                               r"not a size.*2GB"):
        store.max_bytes()


def test_every_kind_is_found_where_it_is_written(root: Path) -> None:
    made = fill(root)
    (root / "profile_cache.json").write_text("{}")
    found = {name: sorted(e.path for e in store.entries(name)) for name in store.KINDS}
    assert found == {"converted": sorted([made["a"], made["d"]]), "prepared": [made["c"]],
                     "zoo": sorted([made["b"], made["e"]]),
                     "profile": [root / "profile_cache.json"]}
    assert {e.size for name in ("converted", "prepared", "zoo") for e in store.entries(name)} \
        == {SIZE}


# ------------------------------------------------------------------------------- eviction
def test_past_the_bound_the_least_recently_used_go_and_the_one_just_used_stays(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    made = fill(root)
    store.used(made["a"])  # a hit on the oldest: now the most recently used
    store.release(made["a"])  # (so that only its use, not this process's hold, keeps it)
    new = model_entry(root, "prepared", "ff" + "0" * 62, 500.0)  # written, oldest mtime
    monkeypatch.setenv(store.MAX_BYTES_ENV, str(3 * SIZE))
    removed = store.stored(new)
    # Six entries, room for three: b, c and d (the oldest uses) go; a (just used), e and the
    # entry just written (whatever its time) stay.
    assert [e.path for e in removed] == [made["b"], made["c"], made["d"]]
    assert all(made[k].exists() for k in "ae") and new.exists()
    assert not any(made[k].exists() for k in "bcd")
    assert sum(e.size for name in store.KINDS for e in store.entries(name)) == 3 * SIZE


def test_under_the_bound_or_without_one_nothing_goes(root: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    made = fill(root)
    monkeypatch.setenv(store.MAX_BYTES_ENV, str(5 * SIZE))
    assert store.stored(made["e"]) == []
    monkeypatch.setenv(store.MAX_BYTES_ENV, "none")
    assert store.stored(made["e"]) == []
    assert all(path.exists() for path in made.values())


def test_the_entry_just_written_stays_even_alone_past_the_bound(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Also where locks do not work (this process's hold would keep it otherwise)."""
    made = fill(root)
    monkeypatch.setenv(store.MAX_BYTES_ENV, "1")
    monkeypatch.setattr(store, "hold", lambda path: False)
    store.stored(made["b"])
    assert made["b"].exists() and not any(made[k].exists() for k in "acde")


def test_an_entry_another_process_holds_is_not_evicted(root: Path) -> None:
    made = fill(root)
    holders = [hold_elsewhere(made["a"]), hold_elsewhere(made["b"])]  # a file and a folder
    try:
        removed = store.evict(0)
        assert sorted(e.path for e in removed) == sorted(made[k] for k in "cde")
        assert made["a"].is_file() and (made["b"] / "tv_resnet50.onnx").is_file()
    finally:
        for child in holders:
            child.communicate("")
    # The holders exited, and the kernel dropped their locks.
    assert sorted(e.path for e in store.evict(0)) == sorted([made["a"], made["b"]])


def test_the_profile_cache_is_never_evicted(root: Path) -> None:
    fill(root)
    profile = root / "profile_cache.json"
    profile.write_text("{}")
    store.evict(0)
    assert profile.read_text() == "{}"
    assert [name for name in store.KINDS if store.entries(name)] == ["profile"]


def test_a_folder_an_eviction_left_aside_is_swept(root: Path) -> None:
    made = fill(root)
    aside = made["b"].with_name(".evicted.999999999.tv_resnet50")  # no such process
    made["b"].rename(aside)
    store.evict(10 * SIZE)
    assert not aside.exists() and made["e"].exists()


# ---------------------------------------------------------------------------- the caches
def relay_text(path: Path) -> Path:
    path.write_text('#[version = "0.0.5"]\n'
                    "def @main(%x: Tensor[(1, 8), float32]) { nn.relu(%x) }\n")
    return path


def test_a_corrupt_entry_is_rebuilt_under_a_bound(tmp_path: Path, root: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The converted cache writes through the bound: older entries go, a damaged entry is
    converted again and the rebuilt one is kept and used."""
    from partition_lab import load_model
    from partition_lab.relay import frontends

    made = fill(root)
    conversions: list[Path] = []
    real = frontends._load_file

    def counting(path: Path, *args: object, **kwargs: object) -> object:
        conversions.append(path)
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(frontends, "_load_file", counting)
    monkeypatch.setenv(store.MAX_BYTES_ENV, "1")  # room for nothing but what was just written
    model = relay_text(tmp_path / "m.relay")
    load_model(model, cache=True)
    [entry] = [e.path for e in store.entries("converted")]
    assert entry not in made.values() and not any(p.exists() for p in made.values())
    entry.write_bytes(entry.read_bytes()[:-8])  # cut short
    load_model(model, cache=True)
    load_model(model, cache=True)
    assert len(conversions) == 2  # the damaged entry converted again, the rebuilt one used
    assert [e.path for e in store.entries("converted")] == [entry]


def test_a_hit_makes_an_entry_the_most_recently_used(tmp_path: Path, root: Path) -> None:
    from partition_lab import load_model

    model = relay_text(tmp_path / "m.relay")
    load_model(model, cache=True)
    [entry] = [e.path for e in store.entries("converted")]
    os.utime(entry, (1000.0, 1000.0))
    load_model(model, cache=True)
    assert entry.stat().st_mtime > 1000.0


# --------------------------------------------------------------------------- the command
def test_cache_shows_where_the_bound_and_each_kinds_size(
        root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    fill(root)
    monkeypatch.setenv(store.MAX_BYTES_ENV, "2GB")
    assert main(["cache"]) == 0
    out = capsys.readouterr().out
    assert f"cache: {root} " in out and "bound: 2 GB " in out
    rows = {line.split()[0]: line.split()[1:4] for line in out.splitlines()[3:]}
    assert rows == {"converted": ["2", "2", "kB"], "prepared": ["1", "1", "kB"],
                    "zoo": ["2", "2", "kB"], "profile": ["0", "0", "B"],
                    "total": ["5", "5", "kB"]}
    assert main(["cache", "info", "--kind", "zoo"]) == 0
    assert [line.split()[0] for line in capsys.readouterr().out.splitlines()[3:]] \
        == ["zoo", "total"]


def test_cache_clear_removes_every_kind_but_the_measurements(
        root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fill(root)
    (root / "profile_cache.json").write_text("{}")
    assert main(["cache", "clear"]) == 0
    out = capsys.readouterr().out
    assert "removed 2 converted entries (2 kB)" in out and "removed 1 prepared entry" in out
    assert "removed 2 zoo entries (2 kB)" in out and "kept the profile cache" in out
    assert [name for name in store.KINDS if store.entries(name)] == ["profile"]
    assert main(["cache", "clear", "--kind", "profile"]) == 0
    assert "removed 1 profile entry" in capsys.readouterr().out
    assert not (root / "profile_cache.json").exists()
    assert main(["cache", "clear"]) == 0
    assert "profile" not in capsys.readouterr().out  # none left to keep


def test_cache_clear_of_one_kind_leaves_the_others(root: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    made = fill(root)
    assert main(["cache", "clear", "--kind", "converted"]) == 0
    assert capsys.readouterr().out.splitlines() == ["removed 2 converted entries (2 kB)"]
    assert [k for k, path in made.items() if path.exists()] == ["b", "c", "e"]


def test_cache_clear_keeps_a_held_entry_and_says_so(root: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    made = fill(root)
    child = hold_elsewhere(made["d"])
    try:
        assert main(["cache", "clear", "--kind", "converted"]) == 0
    finally:
        child.communicate("")
    out = capsys.readouterr().out
    assert "removed 1 converted entry" in out and f"kept {made['d']}: a running process" in out
    assert made["d"].exists() and not made["a"].exists()


def test_cache_clear_of_an_unknown_kind_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cache", "clear", "--kind", "models"]) == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'models'" in err and all(name in err for name in store.KINDS)
    with pytest.raises(store.CacheError, match="the kinds are converted, prepared, zoo"):
        store.entries("models")


def test_a_zoo_build_writes_through_the_bound_and_holds_its_folder(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A model the zoo builds is one entry, its folder; older entries make room for it."""
    from partition_lab import zoo

    made = fill(root)
    monkeypatch.setenv(store.MAX_BYTES_ENV, "1")
    symbol, params = zoo.mxnet_paths("matmul_fp16_x100", small=True)
    assert [e.path for e in store.entries("zoo")] == [symbol.parent]
    assert not any(path.exists() for path in made.values())
    assert store.evict(0) == [] and params.is_file()  # this process holds what it built
