"""The built-in pattern library (:data:`PATTERNS`): each pattern in the forms that TVM's ONNX
importer and ``torch.export`` -> ONNX produce, grouped by kind of construct. The matching engine
is :mod:`partition_lab.core.patterns`."""

from __future__ import annotations

from ..patterns import Pattern
from .activations import (
    gelu_erf,
    gelu_erf_half_first,
    gelu_tanh,
    hard_sigmoid,
    hard_swish,
    quick_gelu,
    silu,
)
from .attention import attention, cast_scale, softmax, window_attention
from .lookups import embedding
from .norms import group_norm, layer_norm, rms_norm
from .positional import repeat_kv, rotary

#: The built-in library: each pattern in the forms the importers produce.
PATTERNS: tuple[Pattern, ...] = (
    *(layer_norm(f"{'divide' if d else 'reciprocal'}{', affine' if a else ''}", d, a)
      for d in (False, True) for a in (True, False)),
    *(rms_norm(f, a) for f in ("x*x", "power") for a in (True, False)),
    gelu_erf("x/sqrt2"), gelu_erf("x*(1/sqrt2)"), gelu_erf_half_first(), gelu_tanh(),
    silu(), hard_swish(), hard_sigmoid(), softmax(), cast_scale(),
    *(attention(scale, mask, reshape, guard, constant_query)
      for constant_query in (False, True) for scale in ("", "multiply", "divide")
      for mask in ("", "tensor", "constant") for reshape in (False, True)
      for guard in (False, True)),
    # RMSNorm as torch.export -> ONNX writes rsqrt (1/sqrt), GELU-tanh's orders, QuickGELU,
    # GroupNorm through instance_norm, the int64 embedding lookup:
    *(rms_norm(f, a, reciprocal=r) for f in ("x*x", "power")
      for a, r in (("1 + w", False), ("w", True), ("1 + w", True), ("", True))),
    gelu_tanh("x first"), gelu_tanh("before x"), quick_gelu(),
    *(group_norm(a) for a in ("cast_like", "plain", "")), embedding(),
    *(window_attention(scale, mask) for scale in ("", "multiply", "divide")
      for mask in ("constant", "tensor")),
    *(rotary(partial, tables) for partial in (False, True) for tables in ("constant", "tensor")),
    repeat_kv(),
)

#: Pattern names, for did-you-mean in target files.
PATTERN_NAMES: tuple[str, ...] = tuple(dict.fromkeys(p.name for p in PATTERNS))
