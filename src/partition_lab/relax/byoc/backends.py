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
from ...errors import TargetSpecError, UnknownTargetError


@dataclass(frozen=True)
class Backend:
    """One BYOC backend of TVM: its pattern prefix, module, ``partition_for_*`` and device kind."""

    name: str
    module: str
    partition_for: str | None  # the function's name in ``module``; None: TVM ships none
    cuda: bool  # runs on an NVIDIA GPU: the platform adds the GPU's CUDA cores
    what: str
    # The form partition_for_* leaves: annotate_codegen=True (one Codegen function per
    # composite) or MergeCompositeFunctions; FuseOpsByPattern's bind_constants; cutlass and
    # cudnn's annotate_workspace + AllocateWorkspace; coreml's CanonicalizeBindings first.
    per_composite: bool = False
    bind_constants: bool = False
    workspace: bool = False
    canonicalize: bool = False


BACKENDS: dict[str, Backend] = {b.name: b for b in (
    Backend("tensorrt", "tvm.relax.backend.contrib.tensorrt", "partition_for_tensorrt", True,
            "NVIDIA TensorRT", bind_constants=True),
    Backend("cutlass", "tvm.relax.backend.cuda.cutlass", "partition_for_cutlass", True,
            "NVIDIA CUTLASS kernels", per_composite=True, workspace=True),
    Backend("cublas", "tvm.relax.backend.cuda.cublas", "partition_for_cublas", True,
            "NVIDIA cuBLAS (matmuls)", per_composite=True),
    Backend("cudnn", "tvm.relax.backend.cuda.cudnn", "partition_for_cudnn", True,
            "NVIDIA cuDNN (convolutions, attention)", per_composite=True, workspace=True),
    Backend("nnapi", "tvm.relax.backend.contrib.nnapi", "partition_for_nnapi", False,
            "Android NNAPI"),
    Backend("coreml", "tvm.relax.backend.metal.coreml", "partition_for_coreml", False,
            "Apple Core ML", bind_constants=True, canonicalize=True),
    Backend("hipblas", "tvm.relax.backend.rocm.hipblas", "partition_for_hipblas", False,
            "AMD hipBLAS (matmuls)", per_composite=True),
)}


#: The options of a backend's ``partition_for_*`` that ``tvm:<backend>`` takes as target options
#: (``get_target("tvm:nnapi", feature_level=7)``, ``--option feature_level=7``): name -> (type,
#: default, what it changes).
OPTIONS: dict[str, dict[str, tuple[type, Any, str]]] = {
    "nnapi": {"feature_level": (int, None, "the NNAPI feature level: patterns needing a higher "
                                "one leave the table (partition_for_nnapi's feature_level)")},
    "cublas": {"bind_constants": (bool, False, "constants bound inside the Codegen functions "
                                  "rather than passed from main (partition_for_cublas's)")},
    "cutlass": {"use_flash_mqa": (bool, True, "the oracle partition_for_cutlass rewrites "
                                  "multi-query attention for Flash Attention first; our matching "
                                  "applies none of its rewrites, so only the oracle changes")},
}


def checked_options(spec: Backend, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` checked against :data:`OPTIONS` (TargetSpecError naming the ones taken)."""
    known = OPTIONS.get(spec.name, {})
    checked: dict[str, Any] = {}
    for key, value in options.items():
        if key not in known:
            takes = (f"takes {', '.join(sorted(known))}" if known else "takes no options")
            raise TargetSpecError(f"tvm:{spec.name} {takes}; got {key!r}"
                                  f"{did_you_mean(key, list(known))}")
        kind = known[key][0]
        if kind is bool and isinstance(value, str) and value.lower() in ("true", "false"):
            value = value.lower() == "true"
        elif kind is int and isinstance(value, str) and value.strip().lstrip("-").isdigit():
            value = int(value)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise TargetSpecError(f"tvm:{spec.name} option {key} takes a {kind.__name__}, "
                                  f"not {value!r}")
        checked[key] = value
    return checked


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


def partition_for(spec: Backend, **options: Any) -> Callable[[tvm.IRModule], tvm.IRModule]:
    """The backend's own ``partition_for_*`` function, with ``options`` (:data:`OPTIONS`)."""
    if spec.partition_for is None:
        raise UnknownTargetError(f"TVM ships no partition_for_* for {spec.name}")
    module = importlib.import_module(spec.module)
    function = getattr(module, spec.partition_for)
    if not options:
        return function
    return lambda mod: function(mod, **options)


def _line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else "no message"
