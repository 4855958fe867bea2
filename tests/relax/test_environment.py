"""Without apache-tvm >= 0.20, importing the Relax adapter says how to install it (one line)."""

from __future__ import annotations

import sys
import types

import pytest
from relax_env import RELAX

from partition_lab._optional import MissingDependencyError


def _import_relax():
    for name in [m for m in sys.modules if m.startswith("partition_lab.relax")]:
        del sys.modules[name]
    import partition_lab.relax  # noqa: F401


@pytest.mark.skipif(RELAX, reason="needs the Relay stack's TVM 0.19 (the main venv)")
def test_relay_tvm_gives_missing_dependency_error():
    with pytest.raises(MissingDependencyError) as info:
        _import_relax()
    message = str(info.value)
    assert "apache-tvm >= 0.20" in message and "pip install '.[relax]'" in message
    assert "\n" not in message


@pytest.mark.parametrize("version", ["0.19.0", None])
def test_old_or_absent_tvm_gives_missing_dependency_error(monkeypatch, version):
    if version is None:
        monkeypatch.setitem(sys.modules, "tvm", None)  # import tvm raises ImportError
    else:
        monkeypatch.setitem(sys.modules, "tvm", types.SimpleNamespace(__version__=version))
    saved = {m: sys.modules[m] for m in list(sys.modules) if m.startswith("partition_lab.relax")}
    try:
        with pytest.raises(MissingDependencyError) as info:
            _import_relax()
    finally:
        for name in [m for m in sys.modules if m.startswith("partition_lab.relax")]:
            del sys.modules[name]
        sys.modules.update(saved)
    assert "make test-relax" in str(info.value) and "pip install '.[relax]'" in str(info.value)
    assert "\n" not in str(info.value)
