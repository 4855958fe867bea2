"""The ``tensorcore`` target: when TVM 0.19's CUDA backend puts an op on NVIDIA Tensor Cores.

Anchors are ``nn.conv2d`` (``conv2d_nhwc_tensorcore``), ``nn.dense`` (``dense_tensorcore``) and
``nn.batch_matmul`` (``batch_matmul_tensorcore``); elementwise, normalization, pooling and layout
ops ride along with them. The tables and their sources are in ``data/tensorcore.toml``; this file
holds the rules whose logic is arithmetic (winograd tiles, Legalize's padding).

Options
-------
precision : ``"fp16"`` (default) or ``"fp32"``
    fp16: the pass layer runs ToMixedPrecision, and convs must be float16. fp32: no mixed
    precision; fp32 NHWC convs are accepted because ``conv2d_nhwc_tensorcore`` has no dtype check
    and casts its inputs to float16 (what the field report ran); fp32 dense/batch_matmul are
    rejected, as their templates need float16/int8/int4 inputs.
padding : bool, default False
    Model Legalize's ``pad_to_tensorcore``: an op whose (M, K, N) miss the WMMA multiples is
    padded when that adds at most 2x the work (tensorcore_alter_op.py 102, 192). Legalize runs
    only when the CUDA partition is built alone with one target (targets-reference §2.1).
    Batch 1 never qualifies (7x extra work).
winograd : bool, default False
    Count ``conv2d_nhwc_winograd_tensorcore`` as eligible. TVM registers it at plevel 5, below
    ``conv2d_nhwc.gpu`` (10), so without AutoTVM tuning records it is never selected; set this to
    model a tuned build. When off, a rejection still says if the winograd template would match.
keep_fp32_on_overflow : bool, default False
    With precision fp16, an op that uses a constant past float16's range (a BatchNorm moving
    variance of 9.8e7 becomes inf) computes in float32 instead: its inputs are cast up and its
    results back to float16. Either way the plan names such ops (``numeric_hazards``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from ..core.graph import OpNode
from ..core.pattern_library import PATTERN_NAMES
from ..core.platform import Device, Platform
from ..core.support import Verdict
from ..errors import TargetSpecError
from .base import TargetSpec
from .devices import host
from .rules import AnyOf, AttrIn, DtypeIn, MultipleOf, Rule
from .schema import packaged_data
from .shapes import attr, data_type, dimension

TENSOR_CORE_COLOUR = "#76b900"
CUDA_CORE_COLOUR = "#4c9be8"
OPTIONS: Mapping[str, Any] = {"precision": "fp16", "padding": False, "winograd": False,
                              "keep_fp32_on_overflow": False}
PRECISIONS = ("fp16", "fp32")
CONV = frozenset({"nn.conv2d"})
DENSE = frozenset({"nn.dense"})
BATCH_MATMUL = frozenset({"nn.batch_matmul"})
# Data dtypes whose (M, K, N) Legalize pads toward the Tensor Core shapes (conv2d_alter_op.py
# 426-501, tensorcore_alter_op.py 29-227); int4 uses other candidates and is not modelled.
PADDED_DTYPES = frozenset({"float16", "int8", "uint8"})
MATMUL_DTYPES = frozenset({"float16", "int8", "uint8", "int4", "uint4"})
PAD_LIMIT = 2.0
PAD_CANDIDATES = ((16, 16, 16), (32, 16, 8), (8, 16, 32))  # TVM's order; ties keep the first


def platform(spec: TargetSpec) -> Platform:
    """Tensor Core regions (BYOC ``tensorcore``) + the GPU's CUDA cores (TVM's ``cuda`` main
    target, same memory) + the host CPU in float32.

    An op that misses the Tensor Core rules still runs on the GPU; only what the GPU cannot run
    goes to the host.
    """
    tensor_cores = Device("tensorcore", spec, role="byoc", memory="gpu", compiler="tensorcore",
                          preference=20, colour=TENSOR_CORE_COLOUR, profile=spec.default_profile,
                          description="TVM's CUDA Tensor Core schedules (BYOC regions)")
    cuda_cores = Device("cuda", _cuda_cores_target(spec), role="main", memory="gpu",
                        preference=10, colour=CUDA_CORE_COLOUR, profile=spec.default_profile,
                        matrix_engine=False,
                        description="the GPU's CUDA cores (TVM's cuda main target)")
    return Platform("tensorcore", (tensor_cores, cuda_cores, host("float32")),
                    description="NVIDIA GPU: Tensor Core regions, CUDA cores, host CPU",
                    options=dict(spec.options))


def _cuda_cores_target(tensor_cores: TargetSpec) -> TargetSpec:
    return TargetSpec(
        "cuda", description="the GPU's CUDA cores: TVM's cuda target runs every Relay op",
        provenance="TVM cuda target (topi CUDA schedules)", supports_all=True,
        supported_reason="runs on the GPU's CUDA cores (TVM cuda target)",
        prepare_steps=tensor_cores.prepare_steps(),
        default_profile=tensor_cores.default_profile)


def build(**options: Any) -> TargetSpec:
    """The ``tensorcore`` target with ``options`` (see the module docstring).

    Raises TargetSpecError on an unknown option or value.
    """
    opts = _check_options(options)
    data = packaged_data("tensorcore.toml")
    std = _alternatives(data["shapes"]["std_multiples"])
    supported = {op: f"{op} has a Tensor Core template: {where}" for op, where in data["anchors"].items()}
    for group, ops in data["ride_along"].items():
        for op in ops:
            supported[op] = f"rides along with a Tensor Core region ({group})"
    steps = ["convert_layout:NHWC"] + (["mixed_precision:float16"] if opts["precision"] == "fp16" else [])
    source = data["source"]
    return TargetSpec(
        "tensorcore",
        description="NVIDIA Tensor Cores through TVM 0.19's CUDA templates (WMMA); other ops "
                    "ride along with a conv2d/dense/batch_matmul that qualifies",
        version="TVM 0.19.0",
        provenance=f"TVM v0.19.0 CUDA Tensor Core strategies, {source['path']}",
        supported=supported,
        unsupported=dict(data["rejected"]),
        anchors=data["anchors"],
        rules=_rules(opts, data["messages"], std, _alternatives(data["shapes"]["int4_multiples"])),
        prepare_steps=steps,
        default_profile="t4",
        options=opts,
        factory=build,
        patterns=PATTERN_NAMES,
        sources=[f"{source['repository']}@{source['commit']} {source['path']}"],
    )


def _check_options(options: Mapping[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise TargetSpecError(f"tensorcore has no option {', '.join(unknown)}; options: "
                              f"{', '.join(f'{k} (default {v!r})' for k, v in OPTIONS.items())}")
    opts = {**OPTIONS, **options}
    if opts["precision"] not in PRECISIONS:
        raise TargetSpecError(f"tensorcore precision {opts['precision']!r} is not one of "
                              f"{', '.join(PRECISIONS)}")
    for flag in ("padding", "winograd", "keep_fp32_on_overflow"):
        if not isinstance(opts[flag], bool):
            raise TargetSpecError(f"tensorcore option {flag} must be True or False, got {opts[flag]!r}")
    return opts


def _rules(opts: Mapping[str, Any], messages: Mapping[str, str], std: Alternatives,
           int4: Alternatives) -> list[Rule]:
    """Conditions in the order a user wants to hear about them: structure, dtype, then shape."""
    fp32 = opts["precision"] == "fp32"
    rules: list[Rule] = [
        AttrIn("tensorcore-groups", CONV, "groups", (1,), message=messages["groups"]),
        AttrIn("tensorcore-layout", CONV, "data_layout", ("NHWC",), message=messages["data_layout"]),
        AttrIn("tensorcore-layout", CONV, "kernel_layout", ("HWIO",),
               message=messages["kernel_layout"]),
        DtypeIn("tensorcore-precision", CONV, tensor="args",
                dtypes=frozenset({"float16", "float32"} if fp32 else {"float16"}),
                message=messages["conv_fp16"],
                accept_reason={"float32": "{op}: float32 inputs are cast to float16 inside "
                               "conv2d_nhwc_tensorcore (precision fp32: reduced input precision, "
                               "as in the field report)"} if fp32 else {}),
        DenseRank(),
        AttrIn("tensorcore-transpose", BATCH_MATMUL, "transpose_a", (False,),
               message=messages["transpose_a"]),
        AttrIn("tensorcore-transpose", BATCH_MATMUL, "transpose_b", (True,),
               message=messages["transpose_b"]),
    ]
    for ops, template in ((DENSE, "dense_tensorcore"), (BATCH_MATMUL, "batch_matmul_tensorcore")):
        rules.append(DtypeIn("tensorcore-precision", ops, dtypes=MATMUL_DTYPES, tensor="args",
                             message=messages["matmul_dtype"].replace("{template}", template)))
    rules += _shape_rules(opts, messages["shape_context"], std, int4)
    return rules


def _shape_rules(opts: Mapping[str, Any], context: str, std: Alternatives,
                 int4: Alternatives) -> list[Rule]:
    shapes = []
    for ops, template, dims in (
        (CONV, "conv2d_nhwc_tensorcore", ("batch", "cin", "cout")),
        (DENSE, "dense_tensorcore", ("batch", "in_features", "units")),
        (BATCH_MATMUL, "batch_matmul_tensorcore", ("m", "k", "n")),
    ):
        why = context.format(dims=", ".join(dims))
        alternatives: list[Rule] = [MultipleOf(template, ops, dims, std, context=why,
                                               dtypes=frozenset() if ops == CONV else PADDED_DTYPES)]
        if ops != CONV:
            alternatives.append(MultipleOf(template, ops, dims, int4, dtypes=frozenset({"int4", "uint4"}),
                                           context="int4 Tensor Core shapes need (M, K, N) multiples of (8,32,8)"))
        else:
            alternatives.append(WinogradTensorCore(enabled=opts["winograd"], alternatives=std))
        if opts["padding"]:
            alternatives.append(PadToTensorCore(ops, dims))
        shapes.append(AnyOf("tensorcore-shape", tuple(alternatives), ops))
    return shapes


Alternatives = tuple[tuple[int, ...], ...]


def _alternatives(rows: Sequence[Sequence[int]]) -> Alternatives:
    return tuple(tuple(row) for row in rows)


@dataclass(frozen=True)
class DenseRank(Rule):
    """``nn.dense`` with 2-D data only: TVM 0.19's CUDA dense strategy unpacks ``b, i =
    data.shape`` (cuda.py 897-899) and ``dense_tensorcore`` asserts 2-D (dense_tensorcore.py
    55), so a Relay dense on 3-D data (which Relay's type relation allows) fails there; the
    importers flatten a MatMul to 2-D first (onnx.py 306-309), which is the form judged here.
    """

    name: str = "tensorcore-rank"
    ops: frozenset[str] = DENSE
    kind: ClassVar[str] = "dense_rank"

    def check(self, node: OpNode) -> Verdict | None:
        data = data_type(node)
        if data is None or len(data.shape) == 2:
            return None
        return self.reject(f"{node.op}: data is {len(data.shape)}-D {tuple(data.shape)}; "
                           "TVM 0.19's CUDA dense strategy and dense_tensorcore take 2-D "
                           "[M, K] data only (cuda.py 897-899, dense_tensorcore.py 55)")

    def describe(self) -> str:
        return f"{self.name} (nn.dense): data must be 2-D [M, K]"


@dataclass(frozen=True)
class WinogradTensorCore(Rule):
    """``conv2d_nhwc_winograd_tensorcore`` eligibility (cuda.py 219-254, judge_winograd 460-516).

    Needs a square kernel of size 3 to 7, stride 1, dilation 1, and (P, cin, cout) in the WMMA
    multiples, where P = batch * ceil(OH/t) * ceil(OW/t) winograd tiles and t = 4 if the input
    height is a multiple of 8, else 2.
    """

    enabled: bool
    alternatives: Alternatives
    name: str = "conv2d_nhwc_winograd_tensorcore"
    ops: frozenset[str] = CONV
    kind: ClassVar[str] = "winograd_tensorcore"

    def check(self, node: OpNode) -> Verdict | None:
        shape = _winograd_shape(node)
        if isinstance(shape, str):
            return self.reject(f"{self.name}: {shape}") if self.enabled else None
        sizes, tiles = shape
        match = next((alt for alt in self.alternatives
                      if all(s % m == 0 for s, m in zip(sizes, alt, strict=True))), None)
        shown = f"(P, cin, cout) = ({', '.join(map(str, sizes))}) with {tiles}"
        if match is None:
            return self.reject(f"{self.name}: {shown} matches none of the Tensor Core "
                               "shapes") if self.enabled else None
        fits = f"{shown} matches ({','.join(map(str, match))})"
        if self.enabled:
            return self.accept(f"{self.name}: {fits}")
        return self.reject(f"{self.name} would apply: {fits}; but TVM 0.19 selects it only from "
                           "AutoTVM tuning records (plevel 5 < conv2d_nhwc.gpu's 10), so it is "
                           "not counted (option winograd=True counts it)")

    def describe(self) -> str:
        state = "counted" if self.enabled else "not counted (needs tuning records; winograd=True)"
        return (f"{self.name} (nn.conv2d): 3x3..7x7 kernel, stride 1, dilation 1, "
                f"(P, cin, cout) in the Tensor Core multiples; {state}")

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "enabled": self.enabled}


def _winograd_shape(node: OpNode) -> tuple[tuple[int, int, int], str] | str:
    """((P, cin, cout), tile description), or why the winograd template does not apply."""
    n, h, w = (dimension(node, d) for d in ("batch", "height", "width"))
    kh, kw, cin, cout = (dimension(node, d) for d in ("kernel_h", "kernel_w", "cin", "cout"))
    if None in (n, h, w, kh, kw, cin, cout):
        return "cannot read the conv's shapes"
    strides, dilation = tuple(attr(node, "strides")), tuple(attr(node, "dilation"))
    if not (2 < kh < 8 and kh == kw and strides == (1, 1) and dilation == (1, 1)):
        return (f"kernel {kh}x{kw}, strides {strides}, dilation {dilation} (needs a square 3..7 "
                "kernel, stride 1, dilation 1)")
    top, left, bottom, right = _pad4(attr(node, "padding"))
    tile = 4 if h % 8 == 0 else 2
    out_h, out_w = h + top + bottom - kh + 1, w + left + right - kw + 1
    tiles_h, tiles_w = -(-out_h // tile), -(-out_w // tile)
    return (n * tiles_h * tiles_w, cin, cout), f"P = {n}*{tiles_h}*{tiles_w} tiles of {tile}x{tile}"


def _pad4(padding: Any) -> tuple[int, int, int, int]:
    """Relay conv padding as (top, left, bottom, right) (topi.nn.get_pad_tuple)."""
    if isinstance(padding, int):
        return (padding,) * 4
    padding = tuple(padding)
    if len(padding) == 2:
        return (padding[0], padding[1], padding[0], padding[1])
    if len(padding) == 4:
        return padding
    return (0, 0, 0, 0)


@dataclass(frozen=True)
class PadToTensorCore(Rule):
    """Legalize's ``pad_to_tensorcore``: pad (M, K, N) up to a WMMA multiple when that adds at
    most ``PAD_LIMIT`` times the original work (tensorcore_alter_op.py 230-262).
    """

    ops: frozenset[str]
    dims: tuple[str, str, str]
    name: str = "pad_to_tensorcore"
    kind: ClassVar[str] = "pad_to_tensorcore"

    def check(self, node: OpNode) -> Verdict | None:
        data = data_type(node)
        if data is None or data.dtype not in PADDED_DTYPES:
            dtype = data.dtype if data is not None else "unknown"
            return self.reject(f"{self.name}: Legalize pads only {', '.join(sorted(PADDED_DTYPES))} "
                               f"{node.op}, this one is {dtype}")
        if node.op in CONV and tuple(attr(node, "dilation")) != (1, 1):
            return self.reject(f"{self.name}: Legalize does not pad dilated convs")
        sizes = tuple(dimension(node, d) for d in self.dims)
        if None in sizes:
            return self.reject(f"{self.name}: cannot read {', '.join(self.dims)}")
        pad, ratio = pad_to_tensorcore(*sizes)
        padded = tuple(s + p for s, p in zip(sizes, pad, strict=True))
        shown = f"({', '.join(map(str, sizes))}) to ({', '.join(map(str, padded))})"
        if ratio <= PAD_LIMIT:
            return self.accept(f"{self.name}: padding {shown} adds {ratio:.2f}x the work "
                               f"(Legalize pads up to {PAD_LIMIT:g}x)")
        return self.reject(f"{self.name}: padding {shown} would add {ratio:.2f}x the work; "
                           f"Legalize pads only up to {PAD_LIMIT:g}x")

    def describe(self) -> str:
        return (f"{self.name} ({', '.join(sorted(self.ops))}): pad ({', '.join(self.dims)}) to a "
                f"Tensor Core multiple when it adds at most {PAD_LIMIT:g}x the work")


def pad_to_tensorcore(m: int, k: int, n: int) -> tuple[tuple[int, int, int], float]:
    """TVM's ``pad_to_tensorcore``: the padding with the fewest extra FLOPs, and extra/original.

    >>> pad_to_tensorcore(1, 64, 64)
    ((7, 0, 0), 7.0)
    >>> pad_to_tensorcore(8, 2048, 1000)[0]
    (0, 0, 24)
    """
    best, best_extra = (0, 0, 0), float("inf")
    for cm, ck, cn in PAD_CANDIDATES:
        pad = (-m % cm, -k % ck, -n % cn)
        extra = (m + pad[0]) * (k + pad[1]) * (n + pad[2]) - m * k * n
        if extra < best_extra:
            best, best_extra = pad, extra
    return best, best_extra / (m * k * n)
