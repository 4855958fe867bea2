"""What several Relax test modules share: the test models loaded through Relax once each, and the
bench drivers (files, not modules of the package) loaded as modules."""

from __future__ import annotations

import importlib.util
from functools import cache
from pathlib import Path
from types import ModuleType

import models
import tvm

import partition_lab

BENCH_GPU = Path(__file__).resolve().parents[2] / "bench" / "gpu"


@cache
def load(name: str) -> tvm.IRModule:
    """``models.MODELS[name]`` imported through Relax (cached: the module is not modified)."""
    return partition_lab.load_model(models.MODELS[name]())[0]


@cache
def bench_script(file: str) -> ModuleType:
    """``bench/gpu/<file>`` loaded as a module (its own folder importable, as when it runs)."""
    path = BENCH_GPU / file
    spec = importlib.util.spec_from_file_location(f"bench_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
