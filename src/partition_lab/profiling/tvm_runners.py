"""Runners that time ops with TVM: locally with the ``llvm`` backend, or on remote boards through
TVM's RPC tracker and servers.

An op signature is rebuilt as a one-call Relay function from its :class:`OpNode` alone (op
name, argument types, attributes: :func:`single_op_module`), so a graph read from a bundle
profiles as well as one converted here. Each is built with ``relay.build`` (the configuration
of :func:`partition_lab.relay.runtime.build_for_cpu`, what the CPU islands and the region
executor use) and timed with the graph executor's ``time_evaluator``: ``repeat`` samples, each
the mean of ``number`` calls (raised until a sample takes ``min_repeat_ms``).

:class:`TvmRpcRunner` is TVM's own fleet infrastructure: ``python -m tvm.exec.rpc_tracker``
somewhere, ``python -m tvm.exec.rpc_server --tracker HOST:PORT --key KEY`` on every board. Each
op is built here for the board's target, exported as a shared library (with
``cross_compiler`` for another architecture), uploaded to a server that the tracker hands out
for ``key``, loaded there and timed there. Several runners (one per key) profile several
kinds of boards at once; ``sessions`` > 1 times one kind's ops on that many boards in parallel.
"""

from __future__ import annotations

import contextlib
import math
import queue
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import tvm
from tvm import relay
from tvm.contrib import graph_executor

from ..core.graph import OpNode, TensorType
from ..core.ops import TUPLE_ARG_OPS
from ..errors import ProfileError
from ..relay.runtime import BUILD_CONFIG
from .runners import ProgressFn, Runner, Timing, cpu_name

_HALF = ("float16", "bfloat16")
#: Ops whose further outputs only matter in training: a graph reads output 0 alone, and so does
#: the timed function (TVM's SimplifyInference then lowers batch norm as the graph's build does).
_FIRST_OUTPUT_ONLY = frozenset({"nn.batch_norm", "nn.dropout"})


# ---------------------------------------------------------------------------- one op as Relay
def relay_text(node: OpNode, *, float32: bool = False) -> str:
    """The Relay text of a function calling ``node``'s op once on fresh parameters.

    ``float32``: half tensors and ``dtype``/``out_dtype`` attributes become float32 (an op of a
    plan device that computes in float32, the ``tensorcore`` host).
    """
    dtype = _dtype_map(float32)
    params = [f"%a{i}: {_tensor_type(t, dtype)}" for i, t in enumerate(node.args)]
    body = _call_text(node, [f"%a{i}" for i in range(len(node.args))], float32)
    if node.op in _FIRST_OUTPUT_ONLY:
        body = f"%0 = {body};\n  %0.0"
    return f'#[version = "0.0.5"]\ndef @main({", ".join(params)}) {{\n  {body}\n}}\n'


def unit_relay_text(unit: Any, *, float32: bool = False) -> str:
    """The Relay text of a function running a pattern's unit once (a
    :class:`~partition_lab.executors.benchmark.UnitBinding`): one parameter per tensor it reads
    from outside and per weight, its ops in order, each intermediate passed to the next. TVM
    builds it as it builds a region holding the unit, fusing what it can."""
    dtype = _dtype_map(float32)
    params: dict[str, str] = {}  # outside tensor key or weight slot -> parameter
    types: list[str] = []
    made: dict[str, str] = {}    # tensor key a member produces -> its Relay value
    lines = []

    def parameter(key: str, spec: TensorType) -> str:
        if key not in params:
            params[key] = f"%a{len(params)}"
            types.append(f"{params[key]}: {_tensor_type(spec, dtype)}")
        return params[key]

    for index, (node, refs) in enumerate(zip(unit.members, unit.refs, strict=True)):
        args = []
        for position, (spec, ref) in enumerate(zip(node.args, refs, strict=True)):
            if ref.kind == "weight":
                args.append(parameter(f"w{index}.{position}", spec))
            else:
                args.append(made.get(ref.key) or parameter(ref.key, spec))
        lines.append(f"%{index} = {_call_text(node, args, float32)};")
        outputs = 1 if node.op in _FIRST_OUTPUT_ONLY else len(node.outputs)
        for out in range(outputs):
            made[f"{node.name}:{out}"] = f"%{index}" + (
                f".{out}" if len(node.outputs) > 1 else "")
    last = unit.members[-1]
    result = made[f"{last.name}:0"]
    body = "\n  ".join(lines + [result])
    return f'#[version = "0.0.5"]\ndef @main({", ".join(types)}) {{\n  {body}\n}}\n'


def _dtype_map(float32: bool) -> Callable[[str], str]:
    return lambda name: "float32" if float32 and name in _HALF else name


def _call_text(node: OpNode, args: list[str], float32: bool) -> str:
    """``op(args, attrs)`` of ``node`` in Relay text."""
    if node.op in TUPLE_ARG_OPS:
        args = ["(" + ", ".join(args) + ("," if len(args) == 1 else "") + ")"]
    attrs = []
    for key, value in node.attrs.items():
        if float32 and key in ("dtype", "out_dtype") and value in _HALF:
            value = "float32"
        attrs.append(f"{key}={_attr_text(value)}")
    return f"{node.op}({', '.join(args + attrs)})"


def single_op_module(node: OpNode, *, float32: bool = False, unit: Any = None
                     ) -> tvm.IRModule:
    """A type-checked IRModule whose ``main`` calls ``node``'s op once (see :func:`relay_text`),
    or runs ``unit`` (a :class:`~partition_lab.executors.benchmark.UnitBinding`, for a
    pattern's composite node: :func:`unit_relay_text`).

    Raises
    ------
    ProfileError
        If TVM cannot rebuild the call (an attribute value it does not accept).
    """
    text = unit_relay_text(unit, float32=float32) if unit is not None else \
        relay_text(node, float32=float32)
    try:
        parse = getattr(relay, "fromtext", None) or tvm.parser.parse
        return relay.transform.InferType()(parse(text))
    except Exception as err:  # noqa: BLE001 - TVM raises its errors as many Python types
        last = [line for line in str(err).splitlines() if line.strip()][-1:]
        raise ProfileError(f"cannot rebuild {node.op} ({node.name}) as a Relay call: "
                           f"{' '.join(last)}") from None


def _tensor_type(spec: TensorType, dtype: Callable[[str], str]) -> str:
    dims = ", ".join(str(d) for d in spec.shape) + ("," if len(spec.shape) == 1 else "")
    return f"Tensor[({dims}), {dtype(spec.dtype)}]"


def _attr_text(value: Any) -> str:
    if value is None:  # as TVM prints it: a required field left unset (a dense's units)
        return "None"
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isinf(value):
            return ("-" if value < 0 else "") + "inff"
        return f"{value!r}f"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(_attr_text(v) for v in value) + "]"
    raise ProfileError(f"attribute value {value!r} ({type(value).__name__}) has no Relay text")


def _random_inputs(mod: tvm.IRModule, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    values = {}
    for var in mod["main"].params:
        ty = var.type_annotation
        shape = [int(d) for d in ty.shape]
        values[var.name_hint] = (rng.standard_normal(shape).astype(ty.dtype)
                                 if "float" in ty.dtype else np.zeros(shape, dtype=ty.dtype))
    return values


def _chain_module(length: int) -> tvm.IRModule:
    """``length`` relus of 16 floats in a row (built unfused: one kernel each)."""
    x = relay.var("a0", shape=(16,), dtype="float32")
    y: relay.Expr = x
    for _ in range(length):
        y = relay.nn.relu(y)
    return relay.transform.InferType()(tvm.IRModule.from_expr(relay.Function([x], y)))


def _dense_module() -> tvm.IRModule:
    """A dense layer of 1 x 768 x 768 (a multi-threaded op for the wake-up probe)."""
    x = relay.var("a0", shape=(1, 768), dtype="float32")
    w = relay.var("a1", shape=(768, 768), dtype="float32")
    return relay.transform.InferType()(tvm.IRModule.from_expr(
        relay.Function([x, w], relay.nn.dense(x, w))))


# ---------------------------------------------------------------------------- shared machinery
class _TvmRunner(Runner):
    """Builds one-op modules and times them; subclasses say where (``_timer``). A pattern's
    unit is built as one module of its ops, fused as TVM fuses a region's ops."""

    kind = "cpu"
    times_units = True

    def __init__(self, *, target: str = "llvm", precision: str = "as-prepared",
                 number: int = 5, repeat: int = 9, min_repeat_ms: int = 2,
                 opt_level: int = 3, seed: int = 0) -> None:
        if repeat < 1 or number < 1:
            raise ProfileError("number and repeat must be at least 1")
        self.target = target
        self.precision = "float32" if precision == "float32" else "as-prepared"
        self.number, self.repeat, self.min_repeat_ms = number, repeat, int(min_repeat_ms)
        self.opt_level, self.seed = opt_level, seed

    def _build(self, mod: tvm.IRModule, *, fuse: bool = True) -> Any:
        config = dict(BUILD_CONFIG) | ({} if fuse else {"relay.FuseOps.max_depth": 1})
        with tvm.transform.PassContext(opt_level=self.opt_level, config=config):
            return relay.build(mod, target=tvm.target.Target(self.target, host=self.target))

    def _software(self) -> dict[str, str]:
        software = {"tvm": tvm.__version__, "target": self.target}
        llvm = tvm.support.libinfo().get("LLVM_VERSION")
        if llvm:
            software["llvm"] = str(llvm)
        if self.precision == "float32":
            software["precision"] = "float32"
        return software

    def _suffix(self) -> list[str]:
        parts = [] if self.target == "llvm" else [self.target]
        return parts + (["float32"] if self.precision == "float32" else [])

    def _modules(self, ops: Mapping[str, OpNode], errors: dict[str, str] | None,
                 refs: Mapping[str, Any] | None = None) -> dict[str, tvm.IRModule]:
        """One module per signature; a composite node with its UnitBinding runs the unit."""
        from ..executors.benchmark import UnitBinding

        modules = {}
        for sig, node in ops.items():
            unit = (refs or {}).get(sig)
            try:
                modules[sig] = single_op_module(
                    node, float32=self.precision == "float32",
                    unit=unit if isinstance(unit, UnitBinding) else None)
            except ProfileError as err:
                if errors is None:
                    raise
                errors[sig] = str(err)
        return modules


def _failure(node: OpNode, err: BaseException) -> str:
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    kind = type(err).__name__
    return f"{node.op}: {last}" if last.startswith(kind) else f"{node.op}: {kind}: {last}"


# ---------------------------------------------------------------------------- local llvm
class TvmLlvmRunner(_TvmRunner):
    """Times ops with TVM's ``llvm`` backend on this machine's CPU (what the CPU islands and
    :class:`~partition_lab.relay.runtime.RegionExecutor` run)."""

    runner = "tvm-llvm"

    def describe(self) -> dict[str, Any]:
        software = self._software()
        software["threads"] = str(_tvm_threads())
        return {"runner": self.runner, "kind": "cpu", "name": cpu_name(), "software": software}

    def device_key(self) -> str:
        info = self.describe()
        software = info["software"]
        parts = ["tvm-llvm", info["name"], f"tvm {software['tvm']}",
                 f"llvm {software.get('llvm', '?')}", f"threads {software['threads']}"]
        return "|".join(parts + self._suffix())

    def measure_ops(self, ops: Mapping[str, OpNode], *,
                    refs: Mapping[str, Sequence[Any]] | None = None,
                    progress: ProgressFn | None = None,
                    errors: dict[str, str] | None = None,
                    deadline: float | None = None) -> dict[str, Timing]:
        modules = self._modules(ops, errors, refs)
        times: dict[str, Timing] = {}
        total = len(ops)
        for done, (sig, mod) in enumerate(modules.items()):
            if deadline is not None and time.perf_counter() > deadline:
                break
            if progress:
                progress(done, total, ops[sig].op)
            try:
                times[sig] = self._time(self._build(mod), _random_inputs(mod, self.seed))
            except Exception as err:  # noqa: BLE001 - one op that TVM fails on is reported
                if errors is None:
                    raise ProfileError(f"could not time {sig} with TVM llvm: "
                                       f"{_failure(ops[sig], err)}") from err
                errors[sig] = _failure(ops[sig], err)
        if progress:
            progress(total, total, "")
        return times

    def _module(self, lib: Any, inputs: Mapping[str, np.ndarray]) -> Any:
        module = graph_executor.GraphModule(lib["default"](tvm.cpu()))
        for name, value in inputs.items():
            module.set_input(name, value)
        return module

    def _time(self, lib: Any, inputs: Mapping[str, np.ndarray], **kwargs: Any) -> Timing:
        module = self._module(lib, inputs)
        options = {"number": self.number, "repeat": self.repeat,
                   "min_repeat_ms": self.min_repeat_ms} | kwargs
        timer = module.module.time_evaluator("run", tvm.cpu(), **options)
        return Timing.from_samples(list(timer().results))

    def measure_overheads(self, *, length: int = 32) -> dict[str, float]:
        """Fixed costs as the region executor pays them with TVM's graph executor.

        ``per_op_s``: a kernel launch inside a compiled region: a chain of ``length`` tiny
        relus built unfused (one kernel each) minus a chain of one, per op. ``region_s``: one
        region run the way :class:`~partition_lab.relay.runtime.RegionExecutor` runs it from
        Python (set its inputs from NumPy, run, read the output back) for a one-relu region.
        ``island_wakeup_s``: a multi-threaded op (dense 1 x 768 x 768) after a 1 ms pause
        (``time_evaluator``'s cool-down between samples) minus the same op back to back.
        """
        chain = self._build(_chain_module(length), fuse=False)
        one = self._build(_chain_module(1), fuse=False)
        x = {"a0": np.ones(16, dtype="float32")}
        long_s = self._time(chain, x).median_s
        short_s = self._time(one, x).median_s
        module = self._module(one, x)
        samples = []
        for _ in range(7):
            start = time.perf_counter()
            for _ in range(50):
                module.set_input("a0", x["a0"])
                module.run()
                module.get_output(0).numpy()
            samples.append((time.perf_counter() - start) / 50)
        dense = self._build(_dense_module())
        inputs = _random_inputs(_dense_module(), self.seed)
        hot = self._time(dense, inputs).median_s
        cold = self._time(dense, inputs, number=1, repeat=20, min_repeat_ms=0,
                          cooldown_interval_ms=1).median_s
        return {"per_op_s": max((long_s - short_s) / (length - 1), 0.0),
                "region_s": float(np.median(samples)), "island_wakeup_s": max(cold - hot, 0.0)}


def _tvm_threads() -> int:
    num_threads = tvm.get_global_func("runtime.NumThreads", allow_missing=True)
    return int(num_threads()) if num_threads is not None else 0


# ---------------------------------------------------------------------------- RPC
class TvmRpcRunner(_TvmRunner):
    """Times ops on remote boards registered with a TVM RPC tracker under ``key``.

    ``target`` is the boards' TVM target (``"llvm"`` for the host's own architecture,
    ``"llvm -mtriple=aarch64-linux-gnu"`` for 64-bit Arm boards, with
    ``cross_compiler="aarch64-linux-gnu-g++"``). ``name`` is the boards' model name for the
    cache (default: the key). ``sessions``: how many boards of that key to time on at once.
    """

    runner = "tvm-rpc"

    def __init__(self, tracker_host: str, tracker_port: int, key: str, *,
                 target: str = "llvm", cross_compiler: str | None = None,
                 name: str | None = None, sessions: int = 1, session_timeout: float = 600.0,
                 priority: int = 1, **options: Any) -> None:
        super().__init__(target=target, **options)
        if not key:
            raise ProfileError("the RPC runner needs a device key (--key)")
        if sessions < 1:
            raise ProfileError("sessions must be at least 1")
        self.tracker_host, self.tracker_port, self.key = tracker_host, int(tracker_port), key
        self.cross_compiler, self.name = cross_compiler, name or key
        self.sessions, self.session_timeout, self.priority = sessions, session_timeout, priority
        self._workdir = tempfile.TemporaryDirectory(prefix="partition_lab_rpc_")
        self._build_lock = threading.Lock()

    def describe(self) -> dict[str, Any]:
        software = self._software() | {"rpc_key": self.key}
        return {"runner": self.runner, "kind": "cpu", "name": self.name, "software": software}

    def device_key(self) -> str:
        return "|".join(["tvm-rpc", self.key, f"tvm {tvm.__version__}",
                         f"target {self.target}"] + (["float32"] if self.precision == "float32"
                                                     else []))

    # ------------------------------------------------------------------ connection
    def _tracker(self) -> Any:
        from tvm import rpc

        try:
            # A plain connection first: TVM's own client retries an absent tracker for a minute.
            socket.create_connection((self.tracker_host, self.tracker_port), timeout=10).close()
            return rpc.connect_tracker(self.tracker_host, self.tracker_port)
        except (OSError, RuntimeError, tvm.TVMError) as err:
            raise ProfileError(f"cannot reach the TVM RPC tracker at {self.tracker_host}:"
                               f"{self.tracker_port}: {str(err).splitlines()[0]}") from None

    def free_servers(self) -> int:
        """How many servers are registered under ``key`` now (free or busy).

        Raises ProfileError if the tracker is unreachable or has no server for the key.
        """
        summary = self._tracker().summary()
        queues = summary.get("queue_info", {})
        servers = sum(1 for s in summary.get("server_info", [])
                      if str(s.get("key", "")).split(":", 1)[-1] == self.key)
        if self.key not in queues and not servers:
            keys = ", ".join(sorted(queues)) or "none"
            raise ProfileError(f"no RPC server is registered under key {self.key!r} at "
                               f"{self.tracker_host}:{self.tracker_port} (keys there: {keys})")
        return max(servers, int(queues.get(self.key, {}).get("free", 0)))

    def check(self) -> None:
        """Fail early, with one clear line, if the tracker or the key's servers are missing."""
        self.free_servers()

    def _session(self) -> Any:
        tracker = self._tracker()
        try:
            return tracker.request(self.key, priority=self.priority,
                                   session_timeout=self.session_timeout)
        except (OSError, RuntimeError, tvm.TVMError) as err:
            raise ProfileError(f"the RPC tracker at {self.tracker_host}:{self.tracker_port} gave "
                               f"no session for key {self.key!r}: "
                               f"{str(err).splitlines()[0]}") from None

    # ------------------------------------------------------------------ building
    def _export(self, mod: tvm.IRModule, stem: str, *, fuse: bool = True) -> Path:
        """Build ``mod`` for the target here and export it as a shared library."""
        with self._build_lock:
            lib = self._build(mod, fuse=fuse)
            path = Path(self._workdir.name) / f"{stem}.so"
            if self.cross_compiler:
                from tvm.contrib import cc

                lib.export_library(str(path), fcompile=cc.cross_compiler(self.cross_compiler))
            else:
                lib.export_library(str(path))
        return path

    def _remote_time(self, remote: Any, path: Path, inputs: Mapping[str, np.ndarray],
                     **kwargs: Any) -> Timing:
        remote.upload(str(path))
        rlib = remote.load_module(path.name)
        dev = remote.cpu()
        module = graph_executor.GraphModule(rlib["default"](dev))
        for name, value in inputs.items():
            module.set_input(name, tvm.nd.array(value, dev))
        options = {"number": self.number, "repeat": self.repeat,
                   "min_repeat_ms": self.min_repeat_ms} | kwargs
        timer = module.module.time_evaluator("run", dev, **options)
        results = list(timer().results)
        with contextlib.suppress(RuntimeError, tvm.TVMError):  # a server without remove
            remote.remove(path.name)
        return Timing.from_samples(results)

    # ------------------------------------------------------------------ measuring
    def measure_ops(self, ops: Mapping[str, OpNode], *,
                    refs: Mapping[str, Sequence[Any]] | None = None,
                    progress: ProgressFn | None = None,
                    errors: dict[str, str] | None = None,
                    deadline: float | None = None) -> dict[str, Timing]:
        modules = self._modules(ops, errors, refs)
        total = len(ops)
        work: queue.Queue[tuple[int, str]] = queue.Queue()
        for index, sig in enumerate(modules):
            work.put((index, sig))
        times: dict[str, Timing] = {}
        failures: dict[str, str] = {}
        fatal: list[BaseException] = []
        done = [0]
        lock = threading.Lock()

        def worker() -> None:
            try:
                remote = self._session()
            except ProfileError as err:
                fatal.append(err)
                return
            while not fatal:
                try:
                    index, sig = work.get_nowait()
                except queue.Empty:
                    return
                if deadline is not None and time.perf_counter() > deadline:
                    return
                node = ops[sig]
                with lock:
                    if progress:
                        progress(done[0], total, node.op)
                try:
                    path = self._export(modules[sig], f"op{index}")
                    timing = self._remote_time(remote, path,
                                               _random_inputs(modules[sig], self.seed))
                    path.unlink(missing_ok=True)
                except Exception as err:  # noqa: BLE001 - reported per op, or raised below
                    with lock:
                        failures[sig] = _failure(node, err)
                    if _session_lost(err):
                        try:
                            remote = self._session()
                        except ProfileError as lost:
                            fatal.append(lost)
                            return
                    continue
                with lock:
                    times[sig] = timing
                    done[0] += 1

        workers = min(self.sessions, max(len(modules), 1))
        threads = [threading.Thread(target=worker, daemon=True) for _ in range(workers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if fatal and not times:
            raise fatal[0]
        if failures:
            if errors is None:
                sig, message = next(iter(failures.items()))
                raise ProfileError(f"could not time {sig} over RPC ({self.key}): {message}")
            errors.update(failures)
        if progress:
            progress(total, total, "")
        return times

    def measure_overheads(self, *, length: int = 32) -> dict[str, float]:
        """Fixed costs on the board, with TVM's graph executor there.

        ``per_op_s``: a chain of ``length`` tiny relus built unfused minus a chain of one, per
        op. ``region_s``: the graph executor's run of a one-relu region on the board (what
        every region pays there; the RPC round trip is not part of it). ``island_wakeup_s``:
        a dense 1 x 768 x 768 after a 1 ms pause minus the same op back to back.
        """
        remote = self._session()
        x = {"a0": np.ones(16, dtype="float32")}
        long_s = self._remote_time(remote, self._export(_chain_module(length), "chain",
                                                        fuse=False), x).median_s
        short_s = self._remote_time(remote, self._export(_chain_module(1), "one", fuse=False),
                                    x).median_s
        dense = self._export(_dense_module(), "dense")
        inputs = _random_inputs(_dense_module(), self.seed)
        hot = self._remote_time(remote, dense, inputs).median_s
        cold = self._remote_time(remote, dense, inputs, number=1, repeat=20, min_repeat_ms=0,
                                 cooldown_interval_ms=1).median_s
        return {"per_op_s": max((long_s - short_s) / (length - 1), 0.0), "region_s": short_s,
                "island_wakeup_s": max(cold - hot, 0.0)}

    def close(self) -> None:
        self._workdir.cleanup()


def _session_lost(err: BaseException) -> bool:
    text = str(err).lower()
    return isinstance(err, (OSError, ConnectionError)) or "connection" in text or \
        "socket" in text


__all__ = ["TvmLlvmRunner", "TvmRpcRunner", "relay_text", "single_op_module"]
