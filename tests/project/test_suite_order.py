"""The suite's own scheduling in tests/conftest.py: the longest files first, and the newest-Python
job's one zoo model per parametrized test."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import conftest
from repo_paths import TESTS_DIR


def test_every_file_run_first_exists():
    missing = [name for name in conftest.RUN_FIRST if not (TESTS_DIR / name).is_file()]
    assert missing == []


def _item(path: str, name: str, **params):
    return SimpleNamespace(path=Path(path), originalname=name, name=f"{name}[{params}]",
                           callspec=SimpleNamespace(params=params))


def test_one_model_per_test_keeps_the_first_models_cases_and_every_other_test():
    items = [
        _item("a.py", "test_numerics", model="resnet50_v1", frontend="mxnet"),
        _item("a.py", "test_numerics", model="resnet50_v1", frontend="onnx"),
        _item("a.py", "test_numerics", model="tiny_yolo_v2", frontend="onnx"),
        _item("a.py", "test_other", model="tiny_yolo_v2"),
        _item("a.py", "test_other", model="tv:resnet50"),
        _item("b.py", "test_numerics", model="tiny_yolo_v2", frontend="onnx"),
        _item("a.py", "test_not_a_model", strategy="greedy"),
        _item("a.py", "test_not_a_model", strategy="cost"),
    ]
    deselected = []
    config = SimpleNamespace(hook=SimpleNamespace(
        pytest_deselected=lambda items: deselected.extend(items)))
    kept = list(items)
    conftest._keep_one_model_per_test(kept, config)
    assert kept == [items[0], items[1], items[3], items[5], items[6], items[7]]
    assert deselected == [items[2], items[4]]


def test_every_package_has_its_test_folder_and_every_folder_is_in_the_index():
    package = TESTS_DIR.parent / "src" / "partition_lab"
    packages = {p.name for p in package.iterdir() if (p / "__init__.py").is_file()}
    folders = {p.name for p in TESTS_DIR.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))}
    index = (TESTS_DIR / "README.md").read_text()
    listed = set(re.findall(r"^\| `([a-z_]+)/` \|", index, flags=re.M))
    assert packages - folders == set()
    assert folders - listed == set()
    assert listed - folders == set()
