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

The Hugging Face builds (:func:`transformers_names`: ``hf:bert_base``, ``hf:distilbert``) are
made the same way from ``transformers`` configs (random weights, nothing downloaded); they take
``input_ids`` (int64) and need ``transformers`` to build (the ``[hf]`` extra), which is not a
dependency of the package.

Models built from PyTorch modules load at other input shapes too: ``input_shapes`` exports the
module again at those shapes (a batch of 32, a longer sequence), cached beside the default file.

>>> mod, params = zoo.load("tv:vit_b_16", input_shapes={"data": (32, 3, 224, 224)})  # doctest: +SKIP
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

import numpy as np

from .. import _cache_store
from .._audience import option, shapes_hint
from .._io import CACHE_ENV  # noqa: F401  (tests and docs name it here)
from .._optional import MissingDependencyError, is_installed, relax_only, require_mxnet
from ..errors import InputShapeError, ModelFormatError, UnsupportedOperatorError
from ._build import discard, is_intact, remove_stale_parts
from ._catalog import ENTRIES, NEEDS, TORCHVISION_TWINS, ZooEntry, entry

__all__ = [
    "ZooEntry", "cache_dir", "check_input_shapes", "default_frontend", "evaluation_names",
    "example_spec", "info", "is_spec", "load", "missing_packages", "mxnet_installed",
    "mxnet_paths", "names",
    "onnx_path", "parse_spec", "reference_outputs", "sample_inputs", "torchvision_names",
    "torchvision_twin", "transformers_names",
]

#: Model arguments that name zoo models: ``zoo:NAME`` (gluoncv builds, and the others),
#: ``tv:NAME`` (torchvision builds) and ``hf:NAME`` (Hugging Face builds), each with an optional
#: ``:small``.
SPEC_PREFIXES = ("zoo:", "tv:", "hf:")
SPEC_FORM = "expected zoo:NAME, tv:NAME or hf:NAME, optionally followed by :small"

#: Bump when a model definition, the seeding or the export changes: old cache entries are ignored.
ZOO_VERSION = 1
#: The same for the torchvision builds (their module definitions, seeding, export and naming).
TORCH_ZOO_VERSION = 1
Frontend = Literal["mxnet", "onnx"]


def is_spec(model: object) -> bool:
    """Whether a model argument names a zoo model (``zoo:NAME``, ``tv:NAME``), not a file."""
    return isinstance(model, str) and model.startswith(SPEC_PREFIXES)


def parse_spec(model: str) -> tuple[str, bool] | None:
    """``(zoo name, small)`` of ``zoo:NAME[:small]`` (name ``NAME``), ``tv:NAME[:small]`` or
    ``hf:NAME[:small]`` (name ``tv:NAME``/``hf:NAME``, as :func:`load` takes it); None if it is
    not of that form."""
    prefix, _, rest = model.partition(":")
    name, _, size = rest.partition(":")
    if f"{prefix}:" not in SPEC_PREFIXES or not name or size not in ("", "small"):
        return None
    return (name if prefix == "zoo" else f"{prefix}:{name}"), size == "small"


def names() -> list[str]:
    """Names of the zoo models, in the order of the field reports (no evaluation models, no
    torchvision builds: both frontends load each of these)."""
    return [name for name, zoo_entry in ENTRIES.items()
            if not zoo_entry.evaluation and zoo_entry.built_with == "mxnet"]


def evaluation_names() -> list[str]:
    """Names of the evaluation models: gluoncv models, not written here."""
    return [name for name, zoo_entry in ENTRIES.items() if zoo_entry.evaluation]


def torchvision_names() -> list[str]:
    """Names of the torchvision builds (``tv:resnet50``...): counterparts of zoo models that
    need torch and torchvision instead of MXNet, loaded through the ONNX frontend."""
    return [name for name, zoo_entry in ENTRIES.items() if zoo_entry.built_with == "torch"]


def transformers_names() -> list[str]:
    """Names of the Hugging Face builds (``hf:bert_base``, ``hf:distilbert``): built from
    ``transformers`` configs, loaded through the ONNX frontend."""
    return [name for name, zoo_entry in ENTRIES.items() if zoo_entry.built_with == "transformers"]


def mxnet_installed() -> bool:
    """Whether the MXNet distribution is installed (the ``[mxnet]`` extra, Python 3.11).

    Read from the installed distributions, not by importing or finding the module: this is
    asked while help texts are built, and an import would cost a second (and, under the tests'
    import guard, count as a use of MXNet).
    """
    try:
        metadata.distribution("mxnet")
    except metadata.PackageNotFoundError:
        return False
    return True


def missing_packages(name: str) -> list[str]:
    """The packages that build the PyTorch-built model ``name`` (``tv:``, ``hf:``) and are not
    installed here, found without importing them; empty for a gluoncv build (its MXNet is
    :func:`mxnet_installed`'s question). A build already in the cache loads without them."""
    zoo_entry = entry(name)
    if zoo_entry.built_with == "mxnet":
        return []
    return [package for package in zoo_entry.needs if not is_installed(package)]


def default_frontend(name: str) -> Frontend:
    """The frontend :func:`load` uses for ``name`` when none is given: ``"mxnet"`` for a gluoncv
    build where MXNet is installed, else ``"onnx"`` (the only one the other builds have, and the
    one a gluoncv build's cached ONNX file loads through without MXNet)."""
    frontends = entry(name).frontends
    if "mxnet" in frontends and ("onnx" not in frontends or mxnet_installed()):
        return "mxnet"
    return "onnx"


def torchvision_twin(name: str, *, small: bool = False) -> str | None:
    """How to ask for the torchvision build of the gluoncv model ``name``, in the reader's
    terms (``tv:resnet50:small``; ``tv:resnet50 --input-shape data=32,3,224,224`` for
    ``resnet50_v1_b32`` on the command line), or None where it has none."""
    twin = _twin(name, small)
    if twin is None:
        return None
    spec, shapes = twin
    return f"{spec} with {shapes_hint(shapes)}" if shapes else spec


def example_spec(name: str) -> str:
    """A zoo model argument for help examples that works here: ``zoo:NAME[:small]`` where MXNet
    is installed (or the model has no twin), else its torchvision twin, with ``--input-shape``
    flags where the twin's own shapes differ."""
    base, _, size = name.partition(":")
    twin = None if mxnet_installed() else _twin(base, bool(size))
    if twin is None:
        return f"zoo:{name}"
    spec, shapes = twin
    return " ".join([spec, *(f"--input-shape {k}={','.join(map(str, v))}"
                             for k, v in (shapes or {}).items())])


def _twin(name: str, small: bool) -> tuple[str, Mapping[str, tuple[int, ...]] | None] | None:
    """``(tv spec, the gluoncv model's shapes where the twin's own differ, else None)``."""
    twin = TORCHVISION_TWINS.get(name)
    if twin is None:
        return None
    own = entry(name).shapes(small)
    return twin + (":small" if small else ""), (None if own == entry(twin).shapes(small) else own)


def info(name: str) -> ZooEntry:
    """What the model is, its input shapes and dtype, where it comes from and why it is here.

    Raises :class:`~partition_lab.errors.UnknownModelError` for a name not in :func:`names`.
    """
    return entry(name)


def cache_dir(built_with: str = "mxnet") -> Path:
    """The versioned directory holding the files of the zoo's models built with MXNet (or, with
    ``built_with="torch"``/``"transformers"``, of the torchvision/Hugging Face builds); not
    created here."""
    root = _cache_store.zoo_root()
    key = _version_key() if built_with == "mxnet" else _torch_version_key(built_with)
    return root / key


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
        _require_mxnet_or_twin(name, small)
        from ._build import build_mxnet_files

        build_mxnet_files(zoo_entry, small, symbol_path, params_path)
        _cache_store.stored(folder)
    return symbol_path, params_path


def _require_mxnet_or_twin(name: str, small: bool) -> None:
    """:func:`require_mxnet` for a gluoncv model; its one-line error names the model's
    torchvision twin where it has one (the model that works without MXNet)."""
    try:
        require_mxnet(f"the zoo model {name!r}", gluoncv=True)
    except MissingDependencyError as exc:
        twin = torchvision_twin(name, small=small)
        if twin is None:
            raise
        raise MissingDependencyError(f"{exc}; or use its torchvision build, {twin}, which needs "
                                     "no MXNet", name=exc.name) from exc


def onnx_path(name: str, *, small: bool = False,
              input_shapes: Mapping[str, Sequence[int]] | None = None) -> Path:
    """The model's ONNX file (exported from its MXNet files, or by torch.onnx for a PyTorch
    build), built and cached on first use; with ``input_shapes`` (a PyTorch build), the module
    exported at those shapes, cached apart (see :func:`check_input_shapes`)."""
    zoo_entry = entry(name)
    shapes = check_input_shapes(name, input_shapes, small=small)
    path = _model_dir(name, small) / f"{_file_stem(name)}{_shapes_suffix(shapes)}.onnx"
    if not is_intact(path):
        discard(path)
        if zoo_entry.exported_by_torch:
            from ._build import build_torch_onnx_file

            try:
                build_torch_onnx_file(zoo_entry, small, path, shapes)
            except ModelFormatError as exc:
                if shapes is None:
                    raise
                raise InputShapeError(
                    f"{_label(name, small)} cannot take {_shapes_text(shapes)}: exporting it at "
                    f"those shapes failed ({_cause(exc)}); its own inputs are "
                    f"{_shapes_text(zoo_entry.shapes(small))}") from exc
        else:
            from ._build import build_onnx_file

            symbol_path, params_path = mxnet_paths(name, small=small)
            build_onnx_file(zoo_entry, small, symbol_path, params_path, path)
        _cache_store.stored(path.parent)
    return path


def check_input_shapes(name: str, input_shapes: Mapping[str, Sequence[int]] | None, *,
                       small: bool = False) -> dict[str, tuple[int, ...]] | None:
    """The model's input shapes with ``input_shapes`` applied, or None where they are its own.

    Only a model built from a PyTorch module (``tv:``, ``hf:``) takes other shapes: it is
    exported again at them (by :func:`onnx_path`, which says in one line why when the module
    cannot take them). An input not named keeps its shape; each named one keeps its rank.

    Raises
    ------
    InputShapeError
        Shapes for a model built with MXNet (exported once, at fixed shapes), an input the model
        does not have, a shape of another rank, or a dimension that is not a positive integer.
    """
    zoo_entry = entry(name)
    own = dict(zoo_entry.shapes(small))
    if not input_shapes:
        return None
    label, inputs = _label(name, small), _shapes_text(own)
    unknown = sorted(set(input_shapes) - set(own))
    if unknown:
        raise InputShapeError(f"{label} has no input {', '.join(map(repr, unknown))}; its inputs "
                              f"are {inputs}")
    shapes = dict(own)
    for input_name, shape in input_shapes.items():
        dims = tuple(shape)
        if not all(isinstance(d, int | np.integer) and d > 0 for d in dims):
            raise InputShapeError(f"bad shape {dims} for {label}'s input {input_name!r}: expected "
                                  "positive integers")
        if len(dims) != len(own[input_name]):
            raise InputShapeError(
                f"{label}'s input {input_name} has {len(own[input_name])} dimensions "
                f"({_shapes_text({input_name: own[input_name]})}); got {len(dims)}")
        shapes[input_name] = tuple(int(d) for d in dims)
    if shapes == own:
        return None
    if not zoo_entry.exported_by_torch:
        raise InputShapeError(
            f"{label} has fixed input shapes ({inputs}): it is built with MXNet and exported "
            "once; other shapes work for tv:NAME and hf:NAME models (exported again) and for "
            "model files")
    return shapes


def load(name: str, *, frontend: Frontend | None = None, small: bool = False,
         input_shapes: Mapping[str, Sequence[int]] | None = None,
         cache: bool = False) -> tuple[Any, dict]:
    """The model as ``(tvm.IRModule, params)`` through ``frontend`` ("mxnet" or "onnx"; default
    the model's first, which is "mxnet" for the gluoncv builds and "onnx" for torchvision's).

    ``input_shapes`` (``{"data": (32, 3, 224, 224)}``) loads a model built from a PyTorch module
    (``tv:``, ``hf:``) exported again at those shapes, cached on disk per shape; other models,
    and shapes the module cannot take, raise :class:`~partition_lab.errors.InputShapeError`
    (see :func:`check_input_shapes`).

    Both go through :func:`partition_lab.relay.frontends.load_model`, so every call carries its source
    node name. With apache-tvm >= 0.20 (Relax, no Relay) the model's ONNX file goes through
    :func:`partition_lab.relax.load_model` instead (the MXNet frontend is Relay's). Results are cached in memory; each call returns a new IRModule (sharing the
    immutable functions) and a new params dict, so that assigning ``mod["main"] = ...`` does not
    change what the next caller gets. ``cache`` keeps an ONNX conversion in the converted-model
    cache for the next process (``load_model(cache=True)``; the command line does).
    """
    zoo_entry = entry(name)
    frontend = frontend or default_frontend(name)
    if frontend not in ("mxnet", "onnx"):
        raise ValueError(f"frontend must be 'mxnet' or 'onnx', not {frontend!r}")
    if frontend not in zoo_entry.frontends:
        other = zoo_entry.frontends[0]
        raise UnsupportedOperatorError(
            f"{name} does not load through the {frontend} frontend ({zoo_entry.frontend_note}); "
            f"use {option(f'frontend={other!r}', f'--frontend {other}')}")
    shapes = check_input_shapes(name, input_shapes, small=small)
    # partition() and the drawings title the model by this attribute.
    label = _label(name, small) + (f" ({_shapes_text(shapes)})" if shapes else "")
    if relax_only():  # apache-tvm >= 0.20: the ONNX file through the Relax ONNX frontend
        if frontend == "mxnet":
            raise UnsupportedOperatorError(
                f"{name} through the MXNet frontend needs the Relay stack (TVM 0.19): the MXNet "
                "frontend is Relay's; with apache-tvm (Relax) the zoo loads ONNX files")
        return _load_relax(name, small, shapes, label)
    import tvm

    key = tuple(shapes.items()) if shapes else None
    mod, params = _load_cached(name, frontend, small, key, cache)  # type: ignore[arg-type]
    fresh = tvm.IRModule(dict(mod.functions), dict(mod.type_definitions))
    return fresh.with_attr("partition_lab.name", label), dict(params)


def _load_relax(name: str, small: bool, shapes: Mapping[str, tuple[int, ...]] | None,
                label: str) -> tuple[Any, dict]:
    """:func:`load` with apache-tvm (Relax): the model's ONNX file (exported at ``shapes``)
    through :func:`partition_lab.relax.load_model`, weights bound as constants (params ``{}``).
    Not kept in memory: the Relax import is the conversion, done on each call."""
    from ..relax.frontends import load_model

    mod, params = load_model(onnx_path(name, small=small,
                                       input_shapes=dict(shapes) if shapes else None))
    return mod.with_attr("partition_lab.name", label), params


def load_deferred(name: str, *, small: bool = False,
                  input_shapes: Mapping[str, Sequence[int]] | None = None) -> tuple[Any, Any]:
    """:func:`load` of an ONNX-built model with ``cache=True`` for the command line: the
    converted-model cache's entry as a :class:`~partition_lab.relay.frontends._cache.Deferred`
    (its module read only when asked) and None for the params, when it has one; otherwise
    :func:`load`'s ``(mod, params)``."""
    if default_frontend(name) != "onnx":
        return load(name, small=small, input_shapes=input_shapes, cache=True)
    from ..relay.frontends import load_deferred as load_file
    from ..relay.frontends._cache import Deferred

    shapes = check_input_shapes(name, input_shapes, small=small)
    found = load_file(onnx_path(name, small=small, input_shapes=dict(shapes) if shapes else None))
    label = _label(name, small) + (f" ({_shapes_text(shapes)})" if shapes else "")

    def finish(loaded: tuple[Any, dict]) -> tuple[Any, dict]:  # as load() names it
        mod, params = loaded
        return mod.with_attr("partition_lab.name", label), dict(params)

    if isinstance(found, Deferred):
        return found.then(finish, label), None
    return finish(found)


def sample_inputs(name: str, *, small: bool = False, seed: int = 0,
                  input_shapes: Mapping[str, Sequence[int]] | None = None,
                  ) -> dict[str, np.ndarray]:
    """Standard-normal inputs of the model's shapes (or ``input_shapes``, see :func:`load`) and
    dtype, reproducible from ``seed``; token ids (integer inputs) uniform below its vocabulary."""
    zoo_entry = entry(name)
    shapes = check_input_shapes(name, input_shapes, small=small) or zoo_entry.shapes(small)
    rng = np.random.default_rng(seed)
    if np.issubdtype(np.dtype(zoo_entry.dtype), np.integer):
        return {input_name: rng.integers(0, zoo_entry.vocabulary, shape).astype(zoo_entry.dtype)
                for input_name, shape in shapes.items()}
    return {
        input_name: rng.standard_normal(shape).astype(zoo_entry.dtype)
        for input_name, shape in shapes.items()
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
        # Inputs of other shapes run the file exported at those shapes (a PyTorch build).
        shapes = {input_name: array.shape for input_name, array in inputs.items()}
        return _onnxruntime_outputs(onnx_path(name, small=small, input_shapes=shapes), inputs)
    if frontend == "mxnet":
        return _mxnet_outputs(*mxnet_paths(name, small=small), inputs)
    raise ValueError(f"frontend must be 'mxnet' or 'onnx', not {frontend!r}")


# ---------------------------------------------------------------------------- internals
@functools.lru_cache(maxsize=16)
def _load_cached(name: str, frontend: Frontend, small: bool,
                 input_shapes: tuple[tuple[str, tuple[int, ...]], ...] | None,
                 cache: bool = False) -> tuple[Any, dict]:
    from ..relay.frontends import load_model

    zoo_entry = entry(name)
    shapes = dict(zoo_entry.shapes(small))
    if frontend == "onnx":
        return load_model(onnx_path(name, small=small,
                                    input_shapes=dict(input_shapes) if input_shapes else None),
                          cache=cache)
    symbol_path, params_path = mxnet_paths(name, small=small)
    return load_model(symbol_path, shapes, params=params_path)


def _model_dir(name: str, small: bool) -> Path:
    stem = _file_stem(name)
    folder = cache_dir(entry(name).built_with) / (f"{stem}-small" if small else stem)
    folder.mkdir(parents=True, exist_ok=True)
    # Held from here on (and its use recorded), so that no other process evicts the files
    # this one reads or builds; made again when an eviction took it meanwhile.
    _cache_store.used(folder)
    if not folder.is_dir():
        folder.mkdir(parents=True, exist_ok=True)
        _cache_store.hold(folder)
    remove_stale_parts(folder)
    return folder


def _version_key() -> str:  # "v<N>-...": the form _cache_store knows version folders by
    try:
        mxnet_version = metadata.version("mxnet")
    except metadata.PackageNotFoundError:
        mxnet_version = "none"
    return f"v{ZOO_VERSION}-mxnet{mxnet_version}-opset13"


def _torch_version_key(built_with: str = "torch") -> str:
    versions = []
    for package in NEEDS[built_with]:
        try:
            versions.append(f"{package}{metadata.version(package)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{package}none")
    return f"v{TORCH_ZOO_VERSION}-{'-'.join(versions)}-opset18"


def _file_stem(name: str) -> str:
    """``tv:resnet50`` -> ``tv_resnet50``: no colon in file names."""
    return name.replace(":", "_")


def _shapes_suffix(shapes: Mapping[str, tuple[int, ...]] | None) -> str:
    """``@data=32x3x224x224`` for a file exported at other shapes; empty for the model's own."""
    if not shapes:
        return ""
    return "@" + "@".join(f"{k}={'x'.join(map(str, v))}" for k, v in shapes.items())


def _shapes_text(shapes: Mapping[str, Sequence[int]]) -> str:
    """``data=1,3,224,224``, as --input-shape writes it."""
    return " ".join(f"{k}={','.join(map(str, v))}" for k, v in shapes.items())


def _label(name: str, small: bool) -> str:
    return f"{name}:small" if small else name


def _cause(exc: BaseException) -> str:
    """The first line of what the exporter said (``Wrong image height! Expected 224 but got
    32!``), not of our wrapper around it."""
    cause = exc.__cause__ or exc
    text = str(cause).strip()
    return text.splitlines()[0] if text else type(cause).__name__


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
