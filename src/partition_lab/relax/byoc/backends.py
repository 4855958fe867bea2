"""TVM's own BYOC backends: where each one's Relax pattern table and ``partition_for_*`` live.

A backend's patterns register in ``tvm.relax.backend.pattern_registry`` when its Python module
imports (``get_patterns_with_prefix(<backend>)``); :func:`load_patterns` imports it and returns
the table, or the one line saying why it could not be read. :func:`partition_for` runs the
backend's own ``partition_for_*`` (the oracle greedy is compared with).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import tvm

from ..._text import did_you_mean
from ...errors import UnknownTargetError


@dataclass(frozen=True)
class Backend:
    """One BYOC backend of TVM: its pattern prefix, module, ``partition_for_*`` and device kind."""

    name: str
    module: str
    partition_for: str | None  # the function's name in ``module``; None: TVM ships none
    cuda: bool  # runs on an NVIDIA GPU: the platform adds the GPU's CUDA cores
    what: str


BACKENDS: dict[str, Backend] = {b.name: b for b in (
    Backend("tensorrt", "tvm.relax.backend.contrib.tensorrt", "partition_for_tensorrt", True,
            "NVIDIA TensorRT"),
    Backend("cutlass", "tvm.relax.backend.cuda.cutlass", "partition_for_cutlass", True,
            "NVIDIA CUTLASS kernels"),
    Backend("cublas", "tvm.relax.backend.cuda.cublas", "partition_for_cublas", True,
            "NVIDIA cuBLAS (matmuls)"),
    Backend("cudnn", "tvm.relax.backend.cuda.cudnn", "partition_for_cudnn", True,
            "NVIDIA cuDNN (convolutions, attention)"),
    Backend("nnapi", "tvm.relax.backend.contrib.nnapi", "partition_for_nnapi", False,
            "Android NNAPI"),
    Backend("coreml", "tvm.relax.backend.metal.coreml", "partition_for_coreml", False,
            "Apple Core ML"),
    Backend("hipblas", "tvm.relax.backend.rocm.hipblas", "partition_for_hipblas", False,
            "AMD hipBLAS (matmuls)"),
)}


def backend(name: str) -> Backend:
    """The backend called ``name``; UnknownTargetError with a did-you-mean otherwise."""
    if name not in BACKENDS:
        raise UnknownTargetError(
            f"unknown TVM backend {name!r}{did_you_mean(name, list(BACKENDS))}; tvm:<backend> "
            f"takes one of {', '.join('tvm:' + b for b in BACKENDS)}")
    return BACKENDS[name]


def load_patterns(spec: Backend) -> tuple[list[Any], str]:
    """``(patterns, problem)``: the backend's registered FusionPatterns in table order, or
    ``([], one line naming the module and the error)`` where its module does not import."""
    try:
        importlib.import_module(spec.module)
    except Exception as error:  # noqa: BLE001 - any import failure is reported, not raised
        return [], (f"tvm:{spec.name}: importing {spec.module} failed "
                    f"({type(error).__name__}: {_line(error)})")
    from tvm.relax.backend.pattern_registry import get_patterns_with_prefix

    patterns = list(get_patterns_with_prefix(spec.name))
    if not patterns:
        return [], f"tvm:{spec.name}: {spec.module} registered no '{spec.name}' patterns"
    return patterns, ""


def partition_for(spec: Backend) -> Callable[[tvm.IRModule], tvm.IRModule]:
    """The backend's own ``partition_for_*`` function."""
    if spec.partition_for is None:
        raise UnknownTargetError(f"TVM ships no partition_for_* for {spec.name}")
    module = importlib.import_module(spec.module)
    return getattr(module, spec.partition_for)


def _line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else "no message"
