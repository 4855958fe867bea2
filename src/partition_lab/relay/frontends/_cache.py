"""The converted-model cache: a model file's Relay module and weights, kept for the next run.

TVM's import is most of a command's time (25 s of a 500-op ONNX's 28 s here), and the same
again on every run of the same file. :func:`cached_load` keeps what the conversion returned
under ``$PARTITION_LAB_CACHE/converted/`` (default ``~/.cache/partition_lab/converted/``), keyed
by everything the conversion depends on:

- the model file's content (SHA-256), and that of each file it read besides (an ONNX model's
  external data, recorded while it converts and checked again on every hit);
- the input shapes, the frontend (the suffix's kind) and the options that change conversion
  (``check_onnx``);
- the versions of partition_lab, TVM and onnx, and :data:`CACHE_FORMAT`.

Any change of these is another key, so a stale entry is never found. An entry is one file:
a header (JSON: lengths, the SHA-256 of the payload, the files read), the module as TVM's
JSON (``tvm.ir.save_json``: spans, attributes and constants round-trip exactly, unlike Relay
text, whose parser rejects some printed attributes) and the weights' raw bytes (their names,
dtypes and shapes in the header; ``relay.load_param_dict`` was 10x slower to read back).
It is written atomically (``_io.write_atomic``); an entry that does not read back whole and
matching its checksum is removed and the model converted again: it is never trusted. MXNet
symbol files and in-memory sources are not cached.

The prepared module (:func:`cached_prepare`) is kept too, under ``prepared/``: on
``tensorcore`` preparation (ConvertLayout, ToMixedPrecision, weight folding) took as long as
the conversion. Its key is the converted entry's key, the platform's preparation steps, the
``keep_fp32_on_overflow`` option and the versions; it is used only for a module and weights
this process took from (or put in) the converted cache, recognised by identity: the very
``main`` function and weight arrays :func:`cached_load` returned. A module rewritten since
(any pass makes a new ``main``) or other weights are prepared again and not stored. Weights
changed in place (``NDArray.copyfrom``) are not noticed: pass ``cache=False`` to
``load_model`` for that. An entry holds the prepared ``main`` with its constants lifted out
as raw bytes (TVM's JSON would base64 them: 5 s to read back SimplePose's; each constant's span
kept on its parameter), the module's attributes and the numeric hazards found while
preparing. It is written and checked like a converted entry.

Whatever an entry holds reads back as it was computed: a warm run's plan is a cold run's, byte
for byte (``tests/relay/frontends/test_cache_identity.py``). Weights keep their shape (0-d stays 0-d, where
``np.ascontiguousarray`` would store them as ``[1]``), dtype and name. Reading an
entry checks each weight against its parameter's type; one that disagrees is a bug of this
module: the entry is dropped with a :class:`CacheMismatchWarning` and the model converted or
prepared again. With ``PARTITION_LAB_VERIFY_CACHE=1`` (the test suite sets it) every entry is
read back as soon as it is written and compared with what was computed, and any difference
raises :class:`CacheMismatchError`.

The command line does not read the converted module when the prepared one is there:
``cached_load(lazy=True)`` returns a :class:`Deferred` (the converted key, the module read on
demand) once the converted entry's header reads back, the file is as long as it says and the
files the conversion read are unchanged (:func:`peek_entry`). :func:`cached_prepare` takes
the prepared entry by that key, and reads the converted module (its checksum checked, a
damaged one converted again) only on a miss. ``load_model`` never returns a Deferred.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import os
import struct
import warnings
import weakref
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import tvm
from tvm import relay

from ... import _cache_store
from ..._io import special_file_kind, write_atomic
from ..._stages import stage
from ...core.hazards import NumericHazard
from ..relay_graph import array_items, object_key
from ._cache_checks import (  # noqa: F401 - VERIFY_ENV and the two Mismatch types: re-exported
    VERIFY_ENV,
    CacheMismatchError,
    CacheMismatchWarning,
    _check_types,
    _dims,
    _Mismatch,
    _mismatch,
    _plain_file_inside,
    _raw,
    _same_module,
    _same_weights,
    _Stale,
    _verifying,
    file_digest,
    versions,
)

CACHE_FORMAT = 4  # 2: warnings said again; 3: 0-d weights stay 0-d; 4: the exporter on main
"""Bump when what an entry holds, or how a conversion turns out, changes."""
PREPARED_FORMAT = 5  # 2: 0-d constants stay 0-d, spans, module attrs; 3: names kept through steps;
#                     4: einsums that are batched matrix products become nn.batch_matmul;
#                     5: every call on constants folds (TVM evaluates those numpy does not)
"""Bump when a prepared entry's content, or how preparation turns out, changes."""
MAGIC = b"partition_lab converted model\n"
PREPARED_MAGIC = b"partition_lab prepared model\n"
_LIFTED = "__partition_lab_constant_"  # the names of a prepared entry's lifted constants
_LENGTH = struct.Struct("<Q")  # the header's length, before it

Loaded = tuple[tvm.IRModule, dict[str, tvm.nd.NDArray]]
#: The files a conversion read besides the model (set while one runs, see :func:`note_read`).
_reads: contextvars.ContextVar[list[Path] | None] = contextvars.ContextVar("reads", default=None)


def cache_dir(kind: str = "converted") -> Path:
    """Where entries live: ``$PARTITION_LAB_CACHE/converted`` (``prepared`` for the prepared
    modules; default in the user cache folder, :func:`partition_lab._cache_store.cache_home`;
    not created here)."""
    return _cache_store.KINDS[kind].root()


def _entry_path(kind: str, key: str) -> Path:
    return cache_dir(kind) / key[:2] / f"{key}.tvm"


def note_read(path: Path) -> None:
    """Record that the conversion running now read ``path`` (an ONNX model's external data):
    its content becomes part of the entry's validity."""
    reads = _reads.get()
    if reads is not None:
        reads.append(Path(path))


def cached_load(path: Path, kind: str, input_shapes: Mapping[str, object] | None,
                options: Mapping[str, Any], convert: Callable[[], Loaded],
                lazy: bool = False) -> Loaded | Deferred:
    """``convert()``'s result for the model file at ``path``, from the cache when an entry of
    the same key is there and intact; otherwise converted and stored.

    ``lazy``: an entry whose header reads back (its files read unchanged) is returned as a
    :class:`Deferred`, its module and weights not read until asked for (:func:`cached_prepare`
    takes a prepared hit without them)."""
    if special_file_kind(path) is not None:  # a pipe or device: the loader refuses it in one line
        return convert()
    with stage("load"):
        key = entry_key(path, kind, input_shapes, options)
        entry = _entry_path("converted", key)
        if lazy:
            header = peek_entry(entry, path.parent)
            if header is not None:
                _say_again([str(m) for m in header.get("warnings", [])])
                return Deferred(key, lambda: _load_entry(entry, path.parent, key, convert))
        loaded = read_entry(entry, path.parent)
    if loaded is not None:
        return _remember(loaded, key)
    return _convert_and_store(entry, path.parent, key, convert)


def _convert_and_store(entry: Path, folder: Path, key: str,
                       convert: Callable[[], Loaded]) -> Loaded:
    with _recording() as reads, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = convert()
    said = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
    _say_again(said)  # recorded to be kept with the entry; the caller still sees them
    with contextlib.suppress(OSError):  # a cache that cannot be written only costs time
        write_entry(entry, result, [p for p in reads], folder, said)
    return _remember(result, key)


def _load_entry(entry: Path, folder: Path, key: str, convert: Callable[[], Loaded]) -> Loaded:
    """A :class:`Deferred`'s module and weights: the entry read whole and checked (its
    warnings were said when it was found), or, when it does not read back, converted again."""
    with stage("load"):
        loaded = _read(entry, lambda data: _decode(data, folder, say=False))
    if loaded is not None:
        return _remember(loaded, key)
    return _convert_and_store(entry, folder, key, convert)


class Deferred:
    """A converted entry found in the cache (``lazy``), its module and weights not read yet:
    ``key`` names it for :func:`cached_prepare`, :meth:`load` reads them (once) when anything
    else needs them. ``name`` is the model's name (``partition_lab.name`` of the module)."""

    def __init__(self, key: str, read: Callable[[], Loaded], name: str = "") -> None:
        self.key = key
        self.name = name
        self._read = read
        self._loaded: Loaded | None = None

    def then(self, finish: Callable[[Loaded], Loaded], name: str) -> Deferred:
        """This entry, ``finish`` applied to what it loads (naming the module), named ``name``."""
        return Deferred(self.key, lambda: finish(self.load()), name)

    def load(self) -> Loaded:
        if self._loaded is None:
            self._loaded = self._read()
        return self._loaded

    def __repr__(self) -> str:
        return f"Deferred({self.name or self.key[:12]!r})"


@dataclass(frozen=True)
class _Origin:
    """What :func:`cached_load` returned for the converted entry ``key``: its ``main`` (kept:
    it is small, the weights are apart) and weak references to its weight arrays."""

    key: str
    main: Any
    weights: dict[str, weakref.ref[Any]]


#: The latest loads through the cache (a few: a comparison loads one model, tests several).
_origins: deque[_Origin] = deque(maxlen=8)


def _remember(loaded: Loaded, key: str) -> Loaded:
    mod, params = loaded
    _origins.append(_Origin(key, mod["main"], {n: weakref.ref(a) for n, a in params.items()}))
    return loaded


def origin(mod: tvm.IRModule, params: Mapping[str, Any] | None) -> str | None:
    """The converted entry's key that ``mod`` and ``params`` are, unchanged, the result of
    (the very ``main`` function and weight arrays), or None."""
    if params is not None and not isinstance(params, Mapping):
        return None  # not what the cache returned; bind_params says what is wrong with it
    weights = dict(params or {})
    main = mod["main"] if "main" in [g.name_hint for g in mod.get_global_vars()] else None
    if main is None:
        return None
    for found in reversed(_origins):
        if found.main.same_as(main) and found.weights.keys() == weights.keys() and \
                all(ref() is weights[name] for name, ref in found.weights.items()):
            return found.key
    return None


def cached_prepare(mod: tvm.IRModule | Deferred, params: Mapping[str, Any] | None,
                   steps: Sequence[str], keep_fp32: bool, hazards: list[NumericHazard],
                   prepare: Callable[[tvm.IRModule, Mapping[str, Any] | None,
                                      list[NumericHazard]], tvm.IRModule]) -> tvm.IRModule:
    """``prepare(mod, params, found)``'s module (``params`` bound, ``steps`` run), from the
    cache when ``mod``/``params`` came from the converted cache (or ``mod`` is a
    :class:`Deferred`, whose module is then read only on a miss) and a prepared entry of the
    same key is intact; the numeric hazards found while preparing are appended to ``hazards``
    either way."""
    source = mod.key if isinstance(mod, Deferred) else origin(mod, params)
    if source is None:
        return prepare(mod, params, hazards)
    identity = {"format": PREPARED_FORMAT, "converted": source, "steps": list(steps),
                "keep_fp32": bool(keep_fp32), "versions": versions()}
    key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()
    entry = _entry_path("prepared", key)
    loaded = _read(entry, _decode_prepared)
    if loaded is not None:
        prepared, found = loaded
        hazards.extend(found)
        return prepared
    if isinstance(mod, Deferred):
        mod, params = mod.load()
        if origin(mod, params) != source:  # converted again (its entry damaged): other arrays
            return prepare(mod, params, hazards)
    found: list[NumericHazard] = []
    prepared = prepare(mod, params, found)
    hazards.extend(found)
    with contextlib.suppress(OSError):
        write_prepared(entry, prepared, found)
    return prepared


def write_prepared(entry: Path, mod: tvm.IRModule, hazards: Sequence[NumericHazard]) -> None:
    """Store a prepared module (its constants lifted out as raw bytes) and its hazards at
    ``entry``, atomically; nothing when the module is not one ``main`` whose parameters are
    free of the lifted constants' names, or holds more than dataflow (let, if)."""
    try:
        lifted = _lift_constants(mod)
    except _Mismatch as mismatch:
        _mismatch(entry, str(mismatch))
        return
    if lifted is None:
        return
    main, arrays = lifted
    attrs = mod.attrs  # (the model's name, partition_lab.name, when no pass dropped it)
    _write(entry, PREPARED_MAGIC, {"hazards": [h.to_dict() for h in hazards],
                                   "attrs": tvm.ir.save_json(attrs) if attrs else ""},
           tvm.ir.save_json(main).encode("utf-8"), arrays)
    if _verifying():
        _verify_prepared(entry, mod)


def _lift_constants(mod: tvm.IRModule) -> tuple[relay.Function, dict[str, np.ndarray]] | None:
    """``mod``'s ``main`` with each constant (each object once: a shared one stays shared)
    turned into a parameter, and those constants' values by parameter name."""
    if len(mod.functions) != 1 or "main" not in [g.name_hint for g in mod.get_global_vars()]:
        return None
    func = mod["main"]
    if any(p.name_hint.startswith(_LIFTED) for p in func.params):
        return None
    arrays: dict[str, np.ndarray] = {}
    lifted: list[relay.Var] = []
    # Rebuilt in TVM's post order (a C++ walk), keyed by object handle, and only where a
    # constant reaches (the rest is kept as it is), like fold_constant_calls: a recursive
    # ExprMutator hits Python's recursion limit on a chain of a few thousand ops (a 5,000-op
    # Relay text chain would end in RecursionError here, after its conversion succeeded).
    replaced: dict[int, relay.Expr] = {}
    unknown: list[str] = []

    def new(node: relay.Expr) -> relay.Expr:
        return replaced.get(object_key(node), node)

    def changed(nodes: Sequence[relay.Expr]) -> bool:
        return any(object_key(n) in replaced for n in nodes)

    def rebuild(node: relay.Expr) -> None:
        if isinstance(node, relay.Constant):
            data = node.data
            # The constant's span (its source name) kept on the parameter: the prepared
            # module's Relay text names it as a cold run's does.
            var = relay.var(f"{_LIFTED}{len(lifted)}", shape=data.shape, dtype=data.dtype,
                            span=node.span)
            arrays[var.name_hint] = _raw(data)
            lifted.append(var)
            replaced[object_key(node)] = var
        elif isinstance(node, relay.Call):
            args = array_items(node.args)
            if changed((node.op, *args)):
                replaced[object_key(node)] = relay.Call(
                    new(node.op), [new(a) for a in args], node.attrs, node.type_args, node.span)
        elif isinstance(node, relay.Tuple):
            fields = array_items(node.fields)
            if changed(fields):
                replaced[object_key(node)] = relay.Tuple([new(f) for f in fields], node.span)
        elif isinstance(node, relay.TupleGetItem):
            if changed((node.tuple_value,)):
                replaced[object_key(node)] = relay.TupleGetItem(
                    new(node.tuple_value), node.index, node.span)
        elif isinstance(node, relay.Function):  # a region function inline in main
            if changed((node.body,)):
                replaced[object_key(node)] = relay.Function(
                    list(node.params), new(node.body), node.ret_type, node.type_params,
                    node.attrs, node.span)
        elif not isinstance(node, (relay.Var, tvm.ir.Op, relay.GlobalVar)):
            unknown.append(type(node).__name__)  # let, if...: not what the frontends make

    relay.analysis.post_order_visit(func.body, rebuild)
    if unknown:
        return None  # such a module is not stored
    return relay.Function(list(func.params) + lifted, new(func.body), func.ret_type,
                          func.type_params, func.attrs, func.span), arrays


def _decode_prepared(data: bytes) -> tuple[tvm.IRModule, list[NumericHazard]]:
    header, module, weights = _unpack(data, PREPARED_MAGIC, PREPARED_FORMAT)
    func = tvm.ir.load_json(bytes(module).decode("utf-8"))
    if not isinstance(func, relay.Function):
        raise _Stale("not a function")
    constants = _params(header["params"], weights)
    if not set(constants) <= {p.name_hint for p in func.params}:
        raise _Stale("constants do not match the function")
    _check_types(func.params, constants)
    # Bound as bind_params_by_name does, each constant given back its span (kept on its var).
    bound = relay.bind(func, {p: relay.Constant(constants[p.name_hint], p.span)
                              for p in func.params if p.name_hint in constants})
    mod = relay.transform.InferType()(tvm.IRModule.from_expr(bound))
    if header["attrs"]:
        attrs = tvm.ir.load_json(header["attrs"])
        for name in attrs.keys():
            mod = mod.with_attr(name, attrs[name])
    return mod, [NumericHazard.from_dict(h) for h in header["hazards"]]


def _say_again(messages: list[str]) -> None:
    """Warn what the conversion warned (the checker's findings on an invalid ONNX converted
    anyway): a second load from the cache says the same as the first."""
    for message in messages:
        warnings.warn(message, UserWarning, stacklevel=3)


def entry_key(path: Path, kind: str, input_shapes: Mapping[str, object] | None,
              options: Mapping[str, Any]) -> str:
    """The SHA-256 naming the entry of this conversion (see the module docstring)."""
    shapes = sorted((str(k), _dims(v)) for k, v in (input_shapes or {}).items())
    identity = {"format": CACHE_FORMAT, "file": file_digest(path), "kind": kind,
                "shapes": shapes, "options": {k: options[k] for k in sorted(options)},
                "versions": versions()}
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()


@contextlib.contextmanager
def _recording() -> Iterator[list[Path]]:
    reads: list[Path] = []
    token = _reads.set(reads)
    try:
        yield reads
    finally:
        _reads.reset(token)


def write_entry(entry: Path, loaded: Loaded, reads: list[Path], folder: Path,
                said: list[str] | None = None) -> None:
    """Store ``loaded`` at ``entry`` (atomically), with the digests of the files it read."""
    mod, params = loaded
    try:
        arrays = {name: _raw(array) for name, array in params.items()}
    except _Mismatch as mismatch:
        _mismatch(entry, str(mismatch))
        return
    _write(entry, MAGIC, {"format": CACHE_FORMAT,
                          "reads": {os.path.relpath(p, folder): file_digest(p) for p in reads},
                          "warnings": list(said or [])},
           tvm.ir.save_json(mod).encode("utf-8"), arrays)
    if _verifying():
        _verify_converted(entry, folder, loaded)


def _write(entry: Path, magic: bytes, fields: dict[str, Any], module: bytes,
           arrays: Mapping[str, np.ndarray]) -> None:
    """One entry file, atomically: ``magic``, the header (``fields``, the lengths, the weights'
    names, dtypes and shapes, the payload's SHA-256), the module, the weights' raw bytes."""
    weights = b"".join(array.tobytes() for array in arrays.values())
    header = {"format": PREPARED_FORMAT if magic == PREPARED_MAGIC else CACHE_FORMAT,
              **fields, "module_bytes": len(module), "params_bytes": len(weights),
              "params": [[name, array.dtype.str, list(array.shape)]
                         for name, array in arrays.items()],
              "sha256": _payload_digest(module, weights)}
    head = json.dumps(header, sort_keys=True).encode("utf-8")
    entry.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(entry, magic + _LENGTH.pack(len(head)) + head + module + weights)
    _cache_store.stored(entry)  # the cache's size bound: least recently used entries go


def peek_entry(entry: Path, folder: Path) -> dict[str, Any] | None:
    """The header of the converted entry at ``entry`` when it reads back, the file is as long
    as it says and the files the conversion read are unchanged; None otherwise (the payload's
    checksum is checked when the module is read, :func:`read_entry`)."""
    try:
        with open(entry, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            start = handle.read(len(MAGIC) + _LENGTH.size)
            if not start.startswith(MAGIC) or len(start) != len(MAGIC) + _LENGTH.size:
                return None
            (head_length,) = _LENGTH.unpack_from(start, len(MAGIC))
            if head_length > size:
                return None
            header = json.loads(handle.read(head_length))
        if header["format"] != CACHE_FORMAT or size != len(start) + head_length + \
                header["module_bytes"] + header["params_bytes"]:
            return None
        for name, digest in header["reads"].items():
            if not _plain_file_inside(folder, folder / name) or \
                    file_digest(folder / name) != digest:
                return None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(header, dict):
        return None
    _cache_store.used(entry)
    return header


def read_entry(entry: Path, folder: Path) -> Loaded | None:
    """The module and weights stored at ``entry``, or None when there is none or it is not
    intact (then it is removed, and the caller converts again)."""
    return _read(entry, lambda data: _decode(data, folder))


def _read(entry: Path, decode: Callable[[bytes], Any]) -> Any:
    """``decode`` of the entry file's bytes; None when there is none, or when it fails (the
    entry is then removed, and the caller builds it again)."""
    try:
        data = entry.read_bytes()
    except OSError:
        return None
    try:
        decoded = decode(data)
    except _Mismatch as mismatch:  # read back whole, but not what was computed: a bug
        _forget(entry)
        _mismatch(entry, str(mismatch))
        return None
    except Exception:  # noqa: BLE001  (any failure to read back means: do not trust it)
        _forget(entry)
        return None
    _cache_store.used(entry)  # a hit: the entry is the most recently used, and held
    return decoded


def _verify_converted(entry: Path, folder: Path, loaded: Loaded) -> None:
    """(:data:`VERIFY_ENV`) The entry just written, read back: the same module
    (:func:`_same_module`) and the same weights as ``loaded``, or a mismatch."""
    found = _read(entry, lambda data: _unpacked_entry(data, folder, say=False))
    if found is None:
        _mismatch(entry, "does not read back")
        return
    what = _same_module(found[0], loaded[0]) or _same_weights(found[1], loaded[1])
    if what is not None:
        _forget(entry)
        _mismatch(entry, what)


def _verify_prepared(entry: Path, prepared: tvm.IRModule) -> None:
    """(:data:`VERIFY_ENV`) The prepared entry just written, read back: the same module as
    ``prepared`` (:func:`_same_module`), or a mismatch."""
    found = _read(entry, _decode_prepared)
    if found is None:
        _mismatch(entry, "does not read back")
        return
    what = _same_module(found[0], prepared)
    if what is not None:
        _forget(entry)
        _mismatch(entry, what)


def _forget(entry: Path) -> None:
    with contextlib.suppress(OSError):
        entry.unlink()


def _unpack(data: bytes, magic: bytes, form: int) -> tuple[dict[str, Any], memoryview,
                                                         memoryview]:
    """An entry's header, module and weights, checked whole against the header's checksum."""
    if not data.startswith(magic):
        raise _Stale("not an entry")
    start = len(magic) + _LENGTH.size
    (head_length,) = _LENGTH.unpack_from(data, len(magic))
    header = json.loads(data[start:start + head_length])
    body = start + head_length
    view = memoryview(data)  # no copies of the weights while they are checked
    module = view[body:body + header["module_bytes"]]
    weights = view[body + header["module_bytes"]:]
    if header["format"] != form or len(module) != header["module_bytes"] or \
            len(weights) != header["params_bytes"] or \
            _payload_digest(module, weights) != header["sha256"]:
        raise _Stale("cut short or garbled")
    return header, module, weights


def _decode(data: bytes, folder: Path, say: bool = True) -> Loaded:
    """A converted entry's module and weights, for use (:func:`_unpacked_entry`)."""
    return _unpacked_entry(data, folder, say)


def _unpacked_entry(data: bytes, folder: Path, say: bool) -> Loaded:
    """A converted entry's module and weights from its bytes, checked whole; its conversion's
    warnings said again when ``say``."""
    header, module, weights = _unpack(data, MAGIC, CACHE_FORMAT)
    for name, digest in header["reads"].items():
        if not _plain_file_inside(folder, folder / name) or file_digest(folder / name) != digest:
            raise _Stale(f"{name} changed")  # converting again puts it through the loader's checks
    mod = tvm.ir.load_json(bytes(module).decode("utf-8"))
    if not isinstance(mod, tvm.IRModule):
        raise _Stale("not a module")
    params = _params(header["params"], weights)
    if "main" in [g.name_hint for g in mod.get_global_vars()]:
        _check_types(mod["main"].params, params)
    loaded = relay.transform.InferType()(mod), params
    if say:
        _say_again([str(m) for m in header.get("warnings", [])])
    return loaded


def _params(records: list[list[Any]], weights: memoryview) -> dict[str, tvm.nd.NDArray]:
    """The weights from their raw bytes: one copy each into TVM (``relay.load_param_dict``
    took 4.9 s for SimplePose's 277 MB here, this a fraction of it)."""
    params: dict[str, tvm.nd.NDArray] = {}
    offset = 0
    for name, dtype, shape in records:
        kind = np.dtype(dtype)
        count = int(np.prod(shape, dtype=np.int64))
        array = np.frombuffer(weights, kind, count, offset).reshape(shape)
        params[str(name)] = tvm.nd.array(array)
        offset += count * kind.itemsize
    if offset != len(weights):
        raise _Stale("weights do not add up")
    return params


def _payload_digest(module: bytes | memoryview, weights: bytes | memoryview) -> str:
    digest = hashlib.sha256(module)
    digest.update(weights)
    return digest.hexdigest()
