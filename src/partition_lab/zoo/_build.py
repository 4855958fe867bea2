"""Build a zoo model's files: MXNet symbol + params, and ONNX (opset 13) exported from them;
or, for the torchvision builds, ONNX (opset 18) exported by torch.onnx.

Weights are random but reproducible: MXNet's and NumPy's generators are seeded before the
block is initialised. Every file is written under a temporary name and moved into place with
``os.replace``, so an interrupted build never leaves a half-written model in the cache.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from .._io import _umask
from ._catalog import BUILDERS, ZooEntry

SEED = 0
ONNX_OPSET = 13
# MXNet dtype codes for a variable's __dtype__ attribute.
_MXNET_DTYPE_CODES = {"float32": "0", "float64": "1", "float16": "2", "uint8": "3", "int32": "4"}


def build_mxnet_files(entry: ZooEntry, small: bool, symbol_path: Path, params_path: Path) -> None:
    """Build the block, initialise it with seeded random weights and write its two files.

    The symbol comes from calling the block on symbols, not from ``HybridBlock.export``, which
    needs a forward pass: MXNet has no fp16 ``batch_dot`` on the CPU.
    """
    import mxnet as mx

    from . import _gluoncv_import  # noqa: F401  (gluoncv beside torch; before any builder runs)

    shapes = entry.shapes(small)
    with mx.name.NameManager():  # fresh name counters: node names do not depend on history
        block = BUILDERS[entry.name](small)
        _initialise(block, entry, shapes)
        outputs = block(*[mx.sym.var(name) for name in shapes])
    symbol = mx.sym.Group(list(outputs)) if isinstance(outputs, list | tuple) else outputs
    graph = json.loads(symbol.tojson())
    _declare_input_dtypes(graph, list(shapes), entry.dtype)
    arrays = _checkpoint_arrays(block, symbol)
    with _temporary_file(params_path) as scratch:
        mx.nd.save(str(scratch), arrays)
        os.chmod(scratch, 0o666 & ~_umask())  # mx.nd.save may have created the file anew
        os.replace(scratch, params_path)
    record_hash(params_path)
    # The params go first: a symbol file in the cache means both are complete.
    write_atomically(symbol_path, json.dumps(graph, indent=2).encode())


def build_torch_onnx_file(entry: ZooEntry, small: bool, onnx_path: Path,
                          input_shapes: Mapping[str, tuple[int, ...]] | None = None) -> None:
    """Build the PyTorch module (torchvision or transformers) with seeded weights and write it as
    ONNX exported at its input shapes (or ``input_shapes``), its nodes named by module path (what
    ``load_model`` does with a module, written to the cache)."""
    from .._torch_onnx import module_to_onnx

    torch = _require_builders(entry)
    module = seeded_torch_module(entry, small)
    shapes = input_shapes or entry.shapes(small)
    dtype = getattr(torch, entry.dtype)
    examples = tuple(torch.zeros(shape, dtype=dtype) for shape in shapes.values())
    with _logger_off("torch._subclasses.fake_tensor"):
        model = module_to_onnx(module, examples, list(shapes))
    write_atomically(onnx_path, model.SerializeToString())


@contextmanager
def _logger_off(name: str) -> Iterator[None]:
    """Silence one logger inside the block. torch's fake-tensor logger prints the traceback of
    an op that fails at the shapes asked for (BERT past its positions) before torch.export
    raises; the error raised names that failure in one line."""
    log = logging.getLogger(name)
    level = log.level
    log.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        log.setLevel(level)


def seeded_torch_module(entry: ZooEntry, small: bool) -> Any:
    """The PyTorch build's module with the weights its ONNX file holds (seeded; eval mode)."""
    torch = _require_builders(entry)
    torch.manual_seed(SEED)
    module = BUILDERS[entry.name](small)
    _seed_batch_norms(module, torch)
    return module.eval()


def _require_builders(entry: ZooEntry) -> Any:
    """torch (and transformers for an hf: model), or a one-line MissingDependencyError."""
    from .._optional import require_transformers
    from .._torch_onnx import require_torch

    torch = require_torch(f"building the zoo model {entry.name!r}")
    if entry.built_with == "transformers":
        require_transformers(f"building the zoo model {entry.name!r}")
    elif importlib.util.find_spec("torchvision") is None:
        from .._optional import MissingDependencyError, torch_fix

        raise MissingDependencyError(f"building the zoo model {entry.name!r} needs torchvision, "
                                     f"which is not installed; {torch_fix()}",
                                     name="torchvision")
    return torch


def _seed_batch_norms(module: Any, torch: Any) -> None:
    """Batch-norm statistics and affine parameters drawn as :func:`_initialise` draws Gluon's:
    a numerics test must not pass only because every batch norm is the identity."""
    rng = np.random.default_rng(SEED)
    for layer in module.modules():
        if isinstance(layer, torch.nn.modules.batchnorm._BatchNorm):
            shape = layer.running_mean.shape
            with torch.no_grad():
                layer.running_mean.copy_(torch.from_numpy(rng.normal(0.0, 0.1, shape)))
                layer.bias.copy_(torch.from_numpy(rng.normal(0.0, 0.1, shape)))
                layer.running_var.copy_(torch.from_numpy(rng.uniform(0.5, 1.5, shape)))
                layer.weight.copy_(torch.from_numpy(rng.uniform(0.5, 1.5, shape)))


def _checkpoint_arrays(block: Any, symbol: Any) -> dict[str, Any]:
    """Parameters keyed ``arg:<name>``/``aux:<name>``, as ``save_checkpoint`` writes them."""
    aux_names = set(symbol.list_auxiliary_states())
    arg_names = set(symbol.list_arguments())
    arrays = {}
    for name, param in block.collect_params().items():
        if name in aux_names:
            arrays[f"aux:{name}"] = param.data()
        elif name in arg_names:
            arrays[f"arg:{name}"] = param.data()
    return arrays


def build_onnx_file(
    entry: ZooEntry, small: bool, symbol_path: Path, params_path: Path, onnx_path: Path
) -> None:
    """Export the MXNet files to ONNX at opset 13 with static input shapes."""
    import onnx

    from ..relay.frontends._mxnet import read_params_file, read_symbol_json, symbol_from_json

    symbol = symbol_from_json(read_symbol_json(symbol_path), symbol_path)
    arg_params, aux_params = read_params_file(params_path, symbol)
    model = export_onnx(symbol, {**arg_params, **aux_params}, entry.shapes(small), entry.dtype)
    onnx.checker.check_model(model)
    write_atomically(onnx_path, model.SerializeToString())


def export_onnx(symbol: Any, params: Mapping[str, Any], shapes: Mapping[str, tuple[int, ...]],
                dtype: str) -> Any:
    """``mx.onnx.export_model`` without its two surprises: opset and dynamic shapes.

    ``export_model`` stamps the newest opset of the installed onnx (23 for onnx 1.18) while its
    translators target 13, and exports dynamic input dims by default; the converter it wraps
    takes both as arguments. It also checks the bare graph against the newest opset, which
    rejects valid opset-13 nodes (``ReduceMean`` with an ``axes`` attribute, from LayerNorm), so
    that check is skipped here and the caller checks the finished opset-13 model instead.
    Finally, its ``batch_dot`` translation computes reshape targets at run time
    (Shape/Slice/Concat/Reshape), which TVM imports as dynamic reshapes (minutes of
    DynamicToStatic for the 100-step matmul); :func:`_static_batch_dot` writes Transpose+MatMul.
    """
    from mxnet.onnx.mx2onnx._export_onnx import MXNetGraph
    from onnx import helper

    in_types = [helper.np_dtype_to_tensor_dtype(np.dtype(dtype)) for _ in shapes]
    with _graph_check_deferred(), _static_batch_dot():
        graph = MXNetGraph().create_onnx_graph_proto(
            symbol, dict(params), list(shapes.values()), in_types,
            opset_version=ONNX_OPSET, dynamic=False,
        )
    _name_unnamed_nodes(graph)
    # mxnet.onnx lists every weight as a graph input too (pre-IR-4 style); onnxruntime then
    # warns that it cannot fold them, and they are not inputs anyone should feed.
    weights = {init.name for init in graph.initializer}
    inputs = [value for value in graph.input if value.name not in weights]
    del graph.input[:]
    graph.input.extend(inputs)
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", ONNX_OPSET)],
        producer_name="partition_lab.zoo (mxnet.onnx)",
    )


@contextmanager
def _static_batch_dot() -> Iterator[None]:
    """Translate 3-D ``batch_dot`` as [Transpose] + MatMul while exporting.

    Every ``batch_dot`` in the zoo is 3-D (batch, rows, cols), so swapping the last two axes is
    the whole of ``transpose_a``/``transpose_b``.
    """
    from mxnet.onnx.mx2onnx._export_onnx import MXNetGraph

    registry = MXNetGraph.registry_.setdefault(ONNX_OPSET, {})
    previous = registry.get("batch_dot")
    registry["batch_dot"] = _translate_batch_dot
    try:
        yield
    finally:
        if previous is None:
            registry.pop("batch_dot", None)
        else:
            registry["batch_dot"] = previous


def _translate_batch_dot(node: dict[str, Any], **kwargs: Any) -> list[Any]:
    from mxnet.onnx.mx2onnx._op_translations._op_translations_opset12 import get_inputs
    from onnx.helper import make_node

    name, (lhs, rhs), attrs = get_inputs(node, kwargs)
    nodes = []
    for side, flag in (("lhs", "transpose_a"), ("rhs", "transpose_b")):
        if str(attrs.get(flag, "False")) in ("True", "true", "1"):
            operand = lhs if side == "lhs" else rhs
            transposed = f"{name}_{side}_t"
            nodes.append(make_node("Transpose", [operand], [transposed], name=transposed,
                                   perm=[0, 2, 1]))
            lhs, rhs = (transposed, rhs) if side == "lhs" else (lhs, transposed)
    nodes.append(make_node("MatMul", [lhs, rhs], [name], name=name))
    return nodes


@contextmanager
def _graph_check_deferred() -> Iterator[None]:
    import onnx.checker

    original = onnx.checker.check_graph
    onnx.checker.check_graph = lambda *args, **kwargs: None
    try:
        yield
    finally:
        onnx.checker.check_graph = original


def write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same directory, then its
    content hash beside it (see :func:`is_intact`)."""
    with _temporary_file(path) as scratch:
        scratch.write_bytes(data)
        os.replace(scratch, path)
    record_hash(path)


HASH_SUFFIX = ".sha256"
"""A cache file's SHA-256 lives beside it as ``<file>.sha256``, written after the file."""

STALE_PART_S = 3600.0
"""A temporary ``.part`` file of a build whose process is gone, or this old, is removed."""


def record_hash(path: Path) -> None:
    """Write ``path``'s content hash beside it; from then on the file counts as complete."""
    sidecar = path.with_name(path.name + HASH_SUFFIX)
    with _temporary_file(sidecar) as scratch:
        scratch.write_text(_sha256(path) + "\n", encoding="ascii")
        os.replace(scratch, sidecar)


def is_intact(path: Path) -> bool:
    """Whether ``path`` exists and matches the hash recorded when it was written.

    A file cut short, overwritten with garbage of the same size, or left by a build that died
    before recording its hash is not intact; the zoo then builds it again.
    """
    sidecar = path.with_name(path.name + HASH_SUFFIX)
    try:
        recorded = sidecar.read_text(encoding="ascii").strip()
        return path.is_file() and recorded == _sha256(path)
    except (OSError, UnicodeDecodeError):
        return False


def discard(*paths: Path) -> None:
    """Remove cache files and their hashes (before rebuilding them)."""
    for path in paths:
        path.with_name(path.name + HASH_SUFFIX).unlink(missing_ok=True)
        path.unlink(missing_ok=True)


def remove_stale_parts(folder: Path) -> None:
    """Remove the ``.part`` files of builds that were killed (SIGTERM, SIGKILL, a crash).

    A temporary file's name carries its writer's pid; it is stale when that process is gone,
    or when it is older than :data:`STALE_PART_S` (names without a pid, pids reused).
    """
    import time

    for part in folder.glob(".*.part"):
        pid = part.name.rsplit(".part", 1)[0].split(".")[-2:-1]
        try:
            stale = (time.time() - part.stat().st_mtime > STALE_PART_S
                     or not (pid and pid[0].isdigit() and _alive(int(pid[0]))))
            if stale:
                part.unlink()
        except OSError:
            continue  # another process removed or finished it meanwhile


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    return True


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@contextmanager
def _temporary_file(path: Path) -> Iterator[Path]:
    """A temporary name beside ``path`` with the writer's pid in it and the usual permissions
    (``mkstemp`` makes files 0600, which breaks a cache shared between users)."""
    handle, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{os.getpid()}.",
                                    suffix=".part")
    os.fchmod(handle, 0o666 & ~_umask())
    os.close(handle)
    try:
        yield Path(name)
    finally:
        Path(name).unlink(missing_ok=True)


def _initialise(block: Any, entry: ZooEntry, shapes: Mapping[str, tuple[int, ...]]) -> None:
    import mxnet as mx

    mx.random.seed(SEED)
    np.random.seed(SEED)
    block.initialize(mx.init.Xavier(), force_reinit=True)
    params = block.collect_params()
    if any(p._data is None for p in params.values()):
        # Layers built without in_channels learn their shapes in the first forward pass; weight
        # shapes do not depend on the batch size, so a batch of one is enough.
        block(*[mx.nd.zeros((1, *shape[1:]), dtype=entry.dtype) for shape in shapes.values()])
    rng = np.random.default_rng(SEED)
    for name, param in params.items():
        if entry.name == "matmul_fp16_x100" and name.endswith("weight"):
            from .models import orthogonal

            param.set_data(orthogonal(param.shape[-1], SEED).astype(param.dtype))
        elif name.endswith(("running_mean", "beta")):
            # Non-trivial batch-norm statistics: a numerics test must not pass only because
            # every batch norm is the identity.
            param.set_data(mx.nd.array(rng.normal(0.0, 0.1, param.shape), dtype=param.dtype))
        elif name.endswith(("running_var", "gamma")):
            param.set_data(mx.nd.array(rng.uniform(0.5, 1.5, param.shape), dtype=param.dtype))


def _declare_input_dtypes(graph: dict[str, Any], inputs: list[str], dtype: str) -> None:
    """Record non-float32 input dtypes in the symbol, as ``mx.sym.var(dtype=...)`` would."""
    if dtype == "float32":
        return
    for node in graph["nodes"]:
        if node["op"] == "null" and node["name"] in inputs:
            node.setdefault("attrs", {})["__dtype__"] = _MXNET_DTYPE_CODES[dtype]


def _name_unnamed_nodes(graph: Any) -> None:
    """Name each unnamed ONNX node after its first output, which mxnet.onnx derives from the
    MXNet node name; TVM would otherwise call them ``Conv_0``... and the names of a conv would
    differ between the two frontends."""
    taken = {node.name for node in graph.node if node.name}
    for node in graph.node:
        if node.name or not node.output:
            continue
        name, suffix = node.output[0], 1
        while name in taken:
            name, suffix = f"{node.output[0]}_{suffix}", suffix + 1
        node.name = name
        taken.add(name)
