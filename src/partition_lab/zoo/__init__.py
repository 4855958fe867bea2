"""The model zoo: the field reports' models, built offline with random weights, cached on disk.

>>> from partition_lab import zoo
>>> zoo.names()[:3]
['resnet152_v1', 'resnet50_v1', 'resnet50_v1_b32']
>>> zoo.evaluation_names()[:2]
['ssd_512_resnet50_v1_voc', 'yolo3_darknet53_voc']
>>> mod, params = zoo.load("fcn_resnet101_ade", small=True)          # doctest: +SKIP
>>> onnx_file = zoo.onnx_path("simple_pose_resnet152_v1b")             # doctest: +SKIP

Every model exists as MXNet files (``*-symbol.json`` + ``*-0000.params``) and as an ONNX file
exported from them (``mx.onnx``, opset 13), so both frontends see the same weights. Files live
in ``$PARTITION_LAB_CACHE/<version key>/`` (default ``~/.cache/partition_lab/zoo/<version
key>/``) and are built on first use. The small variants keep what tests look at (the two
resizes, the three deconvolutions, batch_dot with transpose_b) at a fraction of the size.

Each cache file has its SHA-256 beside it (``<file>.sha256``, written after the file): a file
that does not match (cut short, corrupted, or left by a build that was killed) is built again,
and the ``.part`` files of killed builds are removed. Files get the usual permissions, so one
cache can be shared between users.

Besides the field reports' models, the zoo holds evaluation models (:func:`evaluation_names`): gluoncv detectors, a segmenter, a pose model and a self-attention
segmenter, built the same way (random weights, nothing downloaded), on which partition plans are
checked. :func:`names` leaves them out, so that code iterating over the zoo (tests, benches)
does not build their full-size versions by accident; :func:`load` and the rest take both.

Where MXNet does not install (Python 3.12 and later), the torchvision builds
(:func:`torchvision_names`: ``tv:resnet50``, ``tv:simple_pose_resnet152``...) stand in for the
gluoncv models: the same architectures from torchvision (SimplePose's deconvolution head written
here), seeded random weights, exported by ``torch.onnx`` with PyTorch module paths as node names
and cached the same way in a folder keyed by the torch, torchvision and onnxscript versions.
They load through the ONNX frontend only; building them needs torch, torchvision and
onnxscript, loading a cached file does not. The command line's default model is
``tv:simple_pose_resnet152`` there.

>>> zoo.torchvision_names()[:2]
['tv:resnet50', 'tv:resnet152']
>>> mod, params = zoo.load("tv:simple_pose_resnet152", small=True)   # doctest: +SKIP
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

import numpy as np

from .._audience import option
from .._optional import require_mxnet
from ..errors import UnsupportedOperatorError
from ._build import discard, is_intact, remove_stale_parts
from ._catalog import ENTRIES, ZooEntry, entry

__all__ = [
    "ZooEntry", "cache_dir", "evaluation_names", "info", "is_spec", "load", "mxnet_paths",
    "names", "onnx_path", "parse_spec", "reference_outputs", "sample_inputs",
    "torchvision_names",
]

#: Model arguments that name zoo models: ``zoo:NAME`` (gluoncv builds, and the others) and
#: ``tv:NAME`` (torchvision builds), each with an optional ``:small``.
SPEC_PREFIXES = ("zoo:", "tv:")
SPEC_FORM = "expected zoo:NAME or tv:NAME, optionally followed by :small"

#: Bump when a model definition, the seeding or the export changes: old cache entries are ignored.
ZOO_VERSION = 1
#: The same for the torchvision builds (their module definitions, seeding, export and naming).
TORCH_ZOO_VERSION = 1
CACHE_ENV = "PARTITION_LAB_CACHE"
Frontend = Literal["mxnet", "onnx"]


def is_spec(model: object) -> bool:
    """Whether a model argument names a zoo model (``zoo:NAME``, ``tv:NAME``), not a file."""
    return isinstance(model, str) and model.startswith(SPEC_PREFIXES)


def parse_spec(model: str) -> tuple[str, bool] | None:
    """``(zoo name, small)`` of ``zoo:NAME[:small]`` (name ``NAME``) or ``tv:NAME[:small]``
    (name ``tv:NAME``, as :func:`load` takes it); None if it is not of that form."""
    prefix, _, rest = model.partition(":")
    name, _, size = rest.partition(":")
    if f"{prefix}:" not in SPEC_PREFIXES or not name or size not in ("", "small"):
        return None
    return (f"tv:{name}" if prefix == "tv" else name), size == "small"


def names() -> list[str]:
    """Names of the zoo models, in the order of the field reports (no evaluation models, no
    torchvision builds: both frontends load each of these)."""
    return [name for name, zoo_entry in ENTRIES.items()
            if not zoo_entry.evaluation and zoo_entry.built_with == "mxnet"]


def evaluation_names() -> list[str]:
    """Names of the evaluation models (issue 11): gluoncv models, not written here."""
    return [name for name, zoo_entry in ENTRIES.items() if zoo_entry.evaluation]


def torchvision_names() -> list[str]:
    """Names of the torchvision builds (``tv:resnet50``...): counterparts of zoo models that
    need torch and torchvision instead of MXNet, loaded through the ONNX frontend."""
    return [name for name, zoo_entry in ENTRIES.items() if zoo_entry.built_with == "torch"]


def info(name: str) -> ZooEntry:
    """What the model is, its input shapes and dtype, where it comes from and why it is here.

    Raises :class:`~partition_lab.errors.UnknownModelError` for a name not in :func:`names`.
    """
    return entry(name)


def cache_dir(built_with: str = "mxnet") -> Path:
    """The versioned directory holding the files of the zoo's models built with MXNet (or, with
    ``built_with="torch"``, of the torchvision builds); not created here."""
    root = os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "partition_lab" / "zoo"
    key = _torch_version_key() if built_with == "torch" else _version_key()
    return Path(root).expanduser() / key


def mxnet_paths(name: str, *, small: bool = False) -> tuple[Path, Path]:
    """``(symbol_json, params)`` of the model, built and cached on first use."""
    zoo_entry = entry(name)
    if "mxnet" not in zoo_entry.frontends:
        raise UnsupportedOperatorError(f"{name} has no MXNet files ({zoo_entry.frontend_note}); "
                                       "use its ONNX file (onnx_path)")
    folder = _model_dir(name, small)
    symbol_path = folder / f"{name}-symbol.json"
    params_path = folder / f"{name}-0000.params"
    if not (is_intact(symbol_path) and is_intact(params_path)):
        discard(symbol_path, params_path)  # cut, corrupted or left half-built: build again
        require_mxnet(f"the zoo model {name!r}", gluoncv=True)
        from ._build import build_mxnet_files

        build_mxnet_files(zoo_entry, small, symbol_path, params_path)
    return symbol_path, params_path


def onnx_path(name: str, *, small: bool = False) -> Path:
    """The model's ONNX file (exported from its MXNet files, or by torch.onnx for a torchvision
    build), built and cached on first use."""
    zoo_entry = entry(name)
    path = _model_dir(name, small) / f"{_file_stem(name)}.onnx"
    if not is_intact(path):
        discard(path)
        if zoo_entry.built_with == "torch":
            from ._build import build_torch_onnx_file

            build_torch_onnx_file(zoo_entry, small, path)
            return path
        from ._build import build_onnx_file

        symbol_path, params_path = mxnet_paths(name, small=small)
        build_onnx_file(zoo_entry, small, symbol_path, params_path, path)
    return path


def load(name: str, *, frontend: Frontend | None = None,
         small: bool = False) -> tuple[Any, dict]:
    """The model as ``(tvm.IRModule, params)`` through ``frontend`` ("mxnet" or "onnx"; default
    the model's first, which is "mxnet" for the gluoncv builds and "onnx" for torchvision's).

    Both go through :func:`partition_lab.relay.frontends.load_model`, so every call carries its source
    node name. Results are cached in memory; each call returns a new IRModule (sharing the
    immutable functions) and a new params dict, so that assigning ``mod["main"] = ...`` does not
    change what the next caller gets.
    """
    zoo_entry = entry(name)
    frontend = frontend or zoo_entry.frontends[0]  # type: ignore[assignment]  # one of the two
    if frontend not in ("mxnet", "onnx"):
        raise ValueError(f"frontend must be 'mxnet' or 'onnx', not {frontend!r}")
    if frontend not in zoo_entry.frontends:
        other = zoo_entry.frontends[0]
        raise UnsupportedOperatorError(
            f"{name} does not load through the {frontend} frontend ({zoo_entry.frontend_note}); "
            f"use {option(f'frontend={other!r}', f'--frontend {other}')}")
    import tvm

    mod, params = _load_cached(name, frontend, small)  # type: ignore[arg-type]  # checked above
    fresh = tvm.IRModule(dict(mod.functions), dict(mod.type_definitions))
    # partition() and the drawings title the model by this attribute.
    label = f"{name}:small" if small else name
    return fresh.with_attr("partition_lab.name", label), dict(params)


def sample_inputs(name: str, *, small: bool = False, seed: int = 0) -> dict[str, np.ndarray]:
    """Standard-normal inputs of the model's shapes and dtype, reproducible from ``seed``."""
    zoo_entry = entry(name)
    rng = np.random.default_rng(seed)
    return {
        input_name: rng.standard_normal(shape).astype(zoo_entry.dtype)
        for input_name, shape in zoo_entry.shapes(small).items()
    }


def reference_outputs(
    name: str,
    inputs: Mapping[str, np.ndarray],
    *,
    small: bool = True,
    frontend: Frontend | None = None,
) -> list[np.ndarray]:
    """Outputs of the model run by MXNet (``frontend="mxnet"``) or onnxruntime (``"onnx"``);
    by default the model's first frontend (onnxruntime for the torchvision builds).

    These run the same weights as :func:`load`, for numerics checks of the Relay modules.
    MXNet has no float16 ``batch_dot`` on the CPU, so for float16 models it computes in
    float32 and rounds the outputs to float16 (onnxruntime computes in float16).
    """
    frontend = frontend or entry(name).frontends[0]  # type: ignore[assignment]  # one of the two
    if frontend == "onnx":
        return _onnxruntime_outputs(onnx_path(name, small=small), inputs)
    if frontend == "mxnet":
        return _mxnet_outputs(*mxnet_paths(name, small=small), inputs)
    raise ValueError(f"frontend must be 'mxnet' or 'onnx', not {frontend!r}")


# ---------------------------------------------------------------------------- internals
@functools.lru_cache(maxsize=16)
def _load_cached(name: str, frontend: Frontend, small: bool) -> tuple[Any, dict]:
    from ..relay.frontends import load_model

    zoo_entry = entry(name)
    shapes = dict(zoo_entry.shapes(small))
    if frontend == "onnx":
        return load_model(onnx_path(name, small=small))
    symbol_path, params_path = mxnet_paths(name, small=small)
    return load_model(symbol_path, shapes, params=params_path)


def _model_dir(name: str, small: bool) -> Path:
    stem = _file_stem(name)
    folder = cache_dir(entry(name).built_with) / (f"{stem}-small" if small else stem)
    folder.mkdir(parents=True, exist_ok=True)
    remove_stale_parts(folder)
    return folder


def _version_key() -> str:
    try:
        mxnet_version = metadata.version("mxnet")
    except metadata.PackageNotFoundError:
        mxnet_version = "none"
    return f"v{ZOO_VERSION}-mxnet{mxnet_version}-opset13"


def _torch_version_key() -> str:
    versions = []
    for package in ("torch", "torchvision", "onnxscript"):
        try:
            versions.append(f"{package}{metadata.version(package)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{package}none")
    return f"v{TORCH_ZOO_VERSION}-{'-'.join(versions)}-opset18"


def _file_stem(name: str) -> str:
    """``tv:resnet50`` -> ``tv_resnet50``: no colon in file names."""
    return name.replace(":", "_")


def _mxnet_outputs(
    symbol_path: Path, params_path: Path, inputs: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    require_mxnet("reference outputs through MXNet")
    import mxnet as mx

    from ..relay.frontends._mxnet import read_params_file, read_symbol_json, symbol_from_json

    graph = read_symbol_json(symbol_path)
    # MXNet has no float16 batch_dot on the CPU: compute in float32, return float16.
    half = any(array.dtype == np.float16 for array in inputs.values())
    if half:
        for node in graph["nodes"]:
            (node.get("attrs") or {}).pop("__dtype__", None)
    symbol = symbol_from_json(graph, symbol_path)
    arg_params, aux_params = read_params_file(params_path, symbol)
    if half:
        arg_params = {k: v.astype("float32") for k, v in arg_params.items()}
        aux_params = {k: v.astype("float32") for k, v in aux_params.items()}
    feeds = {k: mx.nd.array(v, dtype="float32" if half else v.dtype) for k, v in inputs.items()}
    executor = symbol.bind(
        mx.cpu(), args={**arg_params, **feeds}, aux_states=aux_params, grad_req="null"
    )
    outputs = [out.asnumpy() for out in executor.forward(is_train=False)]
    return [out.astype(np.float16) for out in outputs] if half else outputs


def _onnxruntime_outputs(path: Path, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1  # the test machine has two cores shared by many jobs
    session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return list(session.run(None, dict(inputs)))
