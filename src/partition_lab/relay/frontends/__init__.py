"""Frontends: one call turns a model file or object into a Relay module and its weights.

>>> mod, params = load_model("resnet50.onnx")                       # doctest: +SKIP
>>> mod, params = load_model("resnet50-symbol.json", {"data": (1, 3, 224, 224)})  # doctest: +SKIP
>>> mod, params = load_model(torchvision.models.resnet50(), torch.randn(1, 3, 224, 224))  # doctest: +SKIP
>>> mod, params = load_model("resnet50.pt2")                        # doctest: +SKIP

Every call in the returned ``main`` carries the name the source gave its node (ONNX node name,
MXNet node name, PyTorch module path such as ``layer1.0.conv1``) in
``call.span.source_name.name``; :func:`source_name` reads it and
:func:`calls_without_source_name` lists calls that lack one (none, for the supported sources).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tvm

from ..._optional import require_mxnet
from ..._stages import stage
from ..._tvm_logs import quiet_tvm_logs
from ...errors import InputShapeError, ModelFormatError
from ._common import existing_file
from ._diagnostics import captured
from ._spans import calls_without_source_name, span_name

Params = dict[str, tvm.nd.NDArray]
#: A ``torch.Tensor`` or a tuple of them (torch is imported only for PyTorch sources).
TorchInputs = Any

ONNX_SUFFIXES = (".onnx",)
MXNET_SUFFIXES = (".json",)
RELAY_TEXT_SUFFIXES = (".relay", ".txt")
TORCH_SUFFIXES = (".pt2",)

__all__ = ["Params", "calls_without_source_name", "load_model", "source_name"]


def load_model(
    source: str | os.PathLike[str] | Any,
    input_shapes: Mapping[str, tuple[int, ...]] | TorchInputs | None = None,
    *,
    params: str | os.PathLike[str] | None = None,
    input_dtypes: Mapping[str, str] | None = None,
    arg_params: Mapping[str, Any] | None = None,
    aux_params: Mapping[str, Any] | None = None,
    check_onnx: bool = True,
    example_inputs: TorchInputs | None = None,
    debug: bool = False,
    cache: bool = False,
) -> tuple[tvm.IRModule, Params]:
    """Load a model as a type-checked Relay module and its weights.

    Parameters
    ----------
    source
        A path to an ``.onnx`` file, an MXNet ``*-symbol.json`` (its ``*-NNNN.params`` or
        ``*.params`` is found beside it), or a Relay text file (``.relay``/``.txt``, as written
        by ``mod.astext()``), or a PyTorch program saved with ``torch.export.save`` (``.pt2``);
        or a Gluon ``HybridBlock``; or an ``mxnet.symbol.Symbol`` with
        ``arg_params``/``aux_params``; or a ``torch.nn.Module`` (exported in eval mode with
        ``torch.export``; its calls carry PyTorch module paths, see below).
    input_shapes
        ``{input name: shape}``. Overrides the shapes an ONNX model, a ``.pt2`` program or Relay
        text declares, and is required for what declares none (MXNet symbols, Gluon blocks:
        there it also names the block's inputs, in call order). For a ``torch.nn.Module`` it
        names the inputs in call order and, without ``example_inputs``, gives their shapes
        (float32 zeros are traced). For a module, the second positional argument may be the
        example inputs instead: ``load_model(module, torch.randn(1, 3, 224, 224))``.
    params
        Path of the MXNet ``.params`` file, when it is not beside the symbol file.
    input_dtypes
        ``{input name: dtype}`` for MXNet sources (default: the symbol's ``__dtype__``
        attribute, else float32).
    arg_params, aux_params
        Weights (``mx.nd`` arrays by name) of an ``mxnet.symbol.Symbol`` source.
    example_inputs
        A ``torch.nn.Module``'s positional arguments: a tensor or a tuple of tensors.
    check_onnx
        Reject an ONNX file that ``onnx.checker`` rejects or whose opset is missing or unknown
        (default); False converts it anyway, with a warning.
    debug
        Show TVM's C++ log lines and the exporters' warnings (onnxscript's "Evaluation
        failed: ...") on stderr; by default they are dropped (see :mod:`partition_lab._tvm_logs`).
    cache
        Keep the converted module and weights of an ONNX, ``.pt2`` or Relay text file in the
        converted-model cache (``$PARTITION_LAB_CACHE/converted``), and take them from there
        when the same file is loaded again with the same shapes and options (the command line
        does, unless ``--no-model-cache``). The entry is keyed by the file's content, the
        shapes, the options and the versions of partition_lab and TVM; see
        :mod:`partition_lab.relay.frontends._cache`.

    Returns
    -------
    (mod, params)
        ``mod["main"]`` takes the inputs and the weights as parameters; ``params`` maps weight
        names to arrays (bind them with ``relay.build_module.bind_params_by_name``). Relay text
        keeps its constants inside the module, so its ``params`` is empty.

        A PyTorch source's calls are named by module path: a call inside a leaf module (one
        that calls no other module) carries its path, ``layer1.0.conv1``; a call made in the
        ``forward`` of a module with submodules carries that module's path and the ATen op,
        ``layer1.0/add`` (``/view`` in the top-level ``forward``). A name that comes again (a
        module called three times) is ``layer1.0.relu``, ``layer1.0.relu#2``, ``#3``.

    Raises
    ------
    ModelNotFoundError
        The file (or the MXNet params file) does not exist.
    ModelFormatError
        The file is not a model of the kind its suffix says (corrupt, truncated, other format),
        or the suffix is not one of the supported ones.
    MissingDependencyError
        A PyTorch source, and torch or onnxscript is not installed; an MXNet source without
        MXNet.
    UnsupportedOperatorError
        TVM's frontend cannot convert one of the model's operators (named with its nodes).
    InputShapeError
        An input shape is missing, dynamic without an ``input_shapes`` entry, or malformed.

    Loading writes no file, unless ``cache``.
    """
    with quiet_tvm_logs(not debug):
        return _load(source, input_shapes, params, input_dtypes, arg_params, aux_params,
                     check_onnx, example_inputs, cache)


def load_deferred(source: str | os.PathLike[str], input_shapes: Any = None, *,
                  check_onnx: bool = True, debug: bool = False) -> Any:
    """``load_model(source, input_shapes, check_onnx=..., cache=True)``, or, when the
    converted-model cache has an intact entry for it, a :class:`._cache.Deferred` that reads
    the module and weights only when asked (``partition`` takes a prepared module from the
    cache without them). For the command line; ``load_model`` itself always returns modules."""
    path = existing_file(source)
    kind = _cached_kind(path)
    if kind is None:
        return load_model(source, input_shapes, check_onnx=check_onnx, debug=debug, cache=True)
    from ._cache import Deferred, cached_load

    def convert() -> tuple[tvm.IRModule, Params]:
        with captured(repr(path.name), bool(input_shapes)):
            return _load_file(path, input_shapes, None, None, check_onnx)

    with quiet_tvm_logs(not debug), captured(repr(path.name), bool(input_shapes)):
        loaded = cached_load(path, kind, input_shapes, {"check_onnx": check_onnx}, convert,
                             lazy=True)
    if isinstance(loaded, Deferred):
        return loaded.then(lambda found: _named(found, _stem(path)), _stem(path))
    return _named(loaded, _stem(path))


def _load(source: Any, input_shapes: Any, params: str | os.PathLike[str] | None,
          input_dtypes: Mapping[str, str] | None, arg_params: Mapping[str, Any] | None,
          aux_params: Mapping[str, Any] | None, check_onnx: bool,
          example_inputs: TorchInputs | None, cache: bool) -> tuple[tvm.IRModule, Params]:
    if isinstance(source, str | os.PathLike):
        path = existing_file(source)
        kind = _cached_kind(path) if cache else None
        with captured(repr(path.name), bool(input_shapes)):
            if kind is None:
                return _named(_load_file(path, input_shapes, params, input_dtypes, check_onnx),
                              _stem(path))
            from ._cache import cached_load

            return _named(cached_load(path, kind, input_shapes, {"check_onnx": check_onnx},
                                      lambda: _load_file(path, input_shapes, None, None,
                                                         check_onnx)), _stem(path))
    from ._torch import is_torch_module

    if is_torch_module(source):
        from ._torch import load_torch_module

        example, shapes = _torch_arguments(input_shapes, example_inputs)
        with captured(f"the PyTorch module {type(source).__name__}", bool(shapes)):
            # Named by its class: summaries and drawings title it "Segmenter on neuron", not
            # "graph on neuron".
            return _named(load_torch_module(source, example, shapes), type(source).__name__)
    kind = _mxnet_object_kind(source)
    if kind == "block":
        from ._mxnet import load_gluon_block

        return load_gluon_block(source, input_shapes, input_dtypes)
    if kind == "symbol":
        from ._mxnet import load_mxnet_symbol

        return load_mxnet_symbol(source, input_shapes, arg_params, aux_params, input_dtypes)
    if kind == "block-not-hybrid":
        raise ModelFormatError(
            "a Gluon Block that is not a HybridBlock has no symbolic graph to convert; derive it "
            "from mxnet.gluon.HybridBlock (hybrid_forward) and pass that"
        )
    raise ModelFormatError(
        "load_model takes a file path, a torch.nn.Module, a Gluon HybridBlock or an MXNet "
        f"Symbol; got {type(source).__name__}"
    )


def _named(loaded: tuple[tvm.IRModule, Params], name: str) -> tuple[tvm.IRModule, Params]:
    """The loaded module with the model's name (``partition_lab.name``, which ``partition``
    and the drawings use as its title)."""
    mod, params = loaded
    return mod.with_attr("partition_lab.name", name), params


def _stem(path: Path) -> str:
    """A model file's name without its suffix: ``resnet50`` for ``resnet50-symbol.json``."""
    name = path.name
    for suffix in ("-symbol.json", *ONNX_SUFFIXES, *RELAY_TEXT_SUFFIXES, *TORCH_SUFFIXES):
        if name.lower().endswith(suffix):
            return name[:-len(suffix)]
    return path.stem


def source_name(call: Any) -> str | None:
    """The source node name a frontend attached to a Relay call, or None."""
    return span_name(call)


def _cached_kind(path: Path) -> str | None:
    """The frontend of a file the converted-model cache keeps ("onnx", "pt2", "relay"), or
    None (MXNet symbols: their weights are a second file)."""
    suffix = path.suffix.lower()
    for kind, suffixes in (("onnx", ONNX_SUFFIXES), ("pt2", TORCH_SUFFIXES),
                           ("relay", RELAY_TEXT_SUFFIXES)):
        if suffix in suffixes:
            return kind
    return None


def _load_file(
    path: Path,
    input_shapes: Mapping[str, object] | None,
    params_path: str | os.PathLike[str] | None,
    input_dtypes: Mapping[str, str] | None,
    check_onnx: bool = True,
) -> tuple[tvm.IRModule, Params]:
    suffix = path.suffix.lower()
    if suffix in ONNX_SUFFIXES:
        from ._onnx import load_onnx

        return load_onnx(path, input_shapes, check=check_onnx)  # times "load" and "convert"
    with stage("convert"):
        return _load_other(path, suffix, input_shapes, params_path, input_dtypes)


def _load_other(path: Path, suffix: str, input_shapes: Mapping[str, object] | None,
                params_path: str | os.PathLike[str] | None,
                input_dtypes: Mapping[str, str] | None) -> tuple[tvm.IRModule, Params]:
    if suffix in MXNET_SUFFIXES:
        require_mxnet(f"reading the MXNet model {path.name!r}")
        from ._mxnet import load_mxnet_symbol_file

        return load_mxnet_symbol_file(path, input_shapes, params_path, input_dtypes)
    if suffix in RELAY_TEXT_SUFFIXES:
        from ._relay_text import load_relay_text

        return load_relay_text(path, input_shapes)
    if suffix in TORCH_SUFFIXES:
        from ._pt2 import load_pt2_file

        return load_pt2_file(path, input_shapes)
    known = ", ".join(ONNX_SUFFIXES + ("-symbol.json",) + RELAY_TEXT_SUFFIXES + TORCH_SUFFIXES)
    raise ModelFormatError(
        f"cannot tell what kind of model {str(path)!r} is from its suffix {suffix or '(none)'!r}; "
        f"supported: {known}. Rename the file or convert the model"
    )


def _torch_arguments(input_shapes: Any, example_inputs: Any) -> tuple[Any, Any]:
    """``(example_inputs, input_shapes)`` of a module: the second positional argument of
    :func:`load_model` is the example inputs when it is not a mapping of shapes."""
    if input_shapes is not None and not isinstance(input_shapes, Mapping):
        if example_inputs is not None:
            raise InputShapeError("example inputs given twice (as the second argument and as "
                                  "example_inputs); pass them once")
        return input_shapes, None
    return example_inputs, input_shapes


def _mxnet_object_kind(source: object) -> str | None:
    """"block", "symbol", "block-not-hybrid" or None, without importing mxnet unless the object comes from it."""
    if not type(source).__module__.startswith(("mxnet", "gluoncv")) and not _is_gluon(source):
        return None
    import mxnet as mx

    if isinstance(source, mx.gluon.HybridBlock):
        return "block"
    if isinstance(source, mx.sym.Symbol):
        return "symbol"
    if isinstance(source, mx.gluon.Block):
        return "block-not-hybrid"
    return None


def _is_gluon(source: object) -> bool:
    # User-defined blocks live in user modules; look at the class hierarchy instead.
    return any(cls.__module__.startswith("mxnet.gluon") for cls in type(source).__mro__)
