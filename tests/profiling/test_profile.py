"""Profiling as a step of its own: the profile cache, the runners and ``partition-lab profile``.

The RPC runner is tested the way a team would use it, on localhost: a real TVM RPC tracker and a
real RPC server process (started here, torn down after), ops built here, uploaded, timed there.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from partition_lab.core.graph import OpGraph, OpGraphBuilder, TensorType
from partition_lab.core.plan import PartitionPlan
from partition_lab.core.support import Support, Verdict
from partition_lab.cost_models.signatures import op_signature
from partition_lab.errors import ProfileError
from partition_lab.executors.graph_io import ArgRef, Bundle, write_bundle
from partition_lab.profiling.cache import SCHEMA, DeviceEntry, OpStats, ProfileCache
from partition_lab.profiling.runners import Runner, Timing
from partition_lab.targets import get_platform
from repo_paths import REPO_ROOT

HAS_TORCH = importlib.util.find_spec("torch") is not None
REQUIRE_TORCH = os.environ.get("PARTITION_LAB_REQUIRE_TORCH") == "1"
needs_torch = pytest.mark.skipif(not HAS_TORCH and not REQUIRE_TORCH,
                                 reason="torch is not installed")
REPO_ROOT = REPO_ROOT
ZOO_SMALL = "zoo:tiny_yolo_v2:small"
FAST_TORCH = {"repeats": 3, "batch_s": 0.001}
FAST_TVM = {"number": 2, "repeat": 3, "min_repeat_ms": 0}


# ---------------------------------------------------------------------------- helpers
def stats(median: float, *, runs: int = 5, at: str = "2025-01-01T00:00:00+00:00",
          models: tuple[str, ...] = ("a",)) -> OpStats:
    return OpStats(median, median * 0.9, median * 1.1, runs, "nn.relu", "vector", 16.0, 128.0,
                   "float32", list(models), at)


def entry(key: str = "torch-cpu|X|torch 2|threads 1", **ops: OpStats) -> DeviceEntry:
    return DeviceEntry(key, "torch", "cpu", "X", {"torch": "2"}, dict(ops),
                       {"host->gpu": [(256.0, 1e-5), (1024.0, 2e-5)]},
                       {"region_s": 1e-6, "per_op_s": 2e-6, "island_wakeup_s": 0.0})


def small_graph() -> tuple[OpGraph, tuple[tuple[ArgRef, ...], ...]]:
    """A dense layer large enough to time (64 x 256 x 256), a tiny relu, a conv with its weight,
    an add of two activations: four signatures, activations and weights in call order."""
    b = OpGraphBuilder("tiny_profile")
    x = b.input("x", TensorType((64, 256), "float32"))
    dense = b.op("nn.dense", [x], weights=[TensorType((256, 256), "float32")],
                 outputs=[TensorType((64, 256), "float32")], flops=2 * 64 * 256 * 256,
                 attrs={"units": 256, "out_dtype": ""})
    relu = b.op("nn.relu", [b.input("r", TensorType((16,), "float32"))])
    image = b.input("img", TensorType((1, 4, 8, 8), "float32"))
    conv = b.op("nn.conv2d", [image], weights=[TensorType((8, 4, 3, 3), "float32")],
                outputs=[TensorType((1, 8, 8, 8), "float32")],
                attrs={"padding": (1, 1, 1, 1), "channels": 8, "kernel_size": (3, 3)})
    added = b.op("add", [dense, dense])
    graph = b.build(outputs=[added, relu, conv])
    bindings = (
        (ArgRef("tensor", key="input:x"), ArgRef("weight", index=0)),
        (ArgRef("tensor", key="input:r"),),
        (ArgRef("tensor", key="input:img"), ArgRef("weight", index=0)),
        (ArgRef("tensor", key=f"{graph[0].name}:0"), ArgRef("tensor", key=f"{graph[0].name}:0")),
    )
    return graph, bindings


def small_bundle(platform_name: str = "tensorcore") -> Bundle:
    """``small_graph`` with a plan: the relu rejected by every accelerator (host only)."""
    graph, bindings = small_graph()
    platform = get_platform(platform_name)
    verdicts = {d: [Verdict(d == "cpu" or n.op != "nn.relu", "test") for n in graph.nodes]
                for d in platform.names}
    support = Support(platform, verdicts)
    devices = [support.platform.devices[support.preferred(n)].name for n in range(len(graph))]
    plan = PartitionPlan.from_devices(graph, support, "greedy", devices)
    return Bundle(graph, bindings, {"greedy": plan}, {"model": "tiny_profile"})


def ops_of(graph: OpGraph) -> dict[str, Any]:
    return {op_signature(n): n for n in graph.nodes}


def check_timing(timing: Any) -> None:
    assert 0 < timing.p10_s <= timing.median_s <= timing.p90_s
    assert timing.runs >= 3


# ---------------------------------------------------------------------------- the cache
def test_cache_round_trip(tmp_path: Path) -> None:
    cache = ProfileCache({"k": entry("k", **{"nn.relu(float32[16])": stats(2e-6)})},
                         {"tensorcore": {"tensorcore": "k", "cuda": "k", "cpu": "k"}})
    path = cache.save(tmp_path / "cache.json")
    raw = json.loads(path.read_text())
    assert raw["schema"] == SCHEMA
    assert raw["devices"]["k"]["ops"]["nn.relu(float32[16])"]["class"] == "vector"
    back = ProfileCache.load(path)
    assert back.to_dict() == cache.to_dict()
    assert back.lookup("k", "nn.relu(float32[16])").median_s == 2e-6
    assert back.lookup("k", "nn.relu(float32[32])") is None
    assert back.op_stats("tensorcore", "cuda", "nn.relu(float32[16])").runs == 5
    assert set(back.entries_for("tensorcore")) == {"tensorcore", "cuda", "cpu"}
    with pytest.raises(ProfileError, match="no binding for platform 'neuron'.*tensorcore"):
        back.binding("neuron")


def test_merge_keeps_more_runs_or_newer_and_unions_models() -> None:
    sig = "nn.relu(float32[16])"
    old = ProfileCache({"k": entry("k", **{sig: stats(1e-6, runs=5, models=("a",))})},
                       {"p": {"cpu": "k"}})
    fewer_older = ProfileCache({"k": entry("k", **{sig: stats(9e-6, runs=3, models=("b",),
                                                              at="2024-01-01T00:00:00+00:00")})})
    old.merge(fewer_older)
    assert old.lookup("k", sig).median_s == 1e-6  # kept: fewer runs and older
    assert old.lookup("k", sig).models == ["a", "b"]
    newer = ProfileCache({"k": entry("k", **{sig: stats(3e-6, runs=5, models=("c",),
                                                        at="2025-06-01T00:00:00+00:00")})})
    old.merge(newer)
    assert old.lookup("k", sig).median_s == 3e-6  # replaced: same runs, newer
    assert old.lookup("k", sig).models == ["a", "b", "c"]
    more_runs = ProfileCache({"k": entry("k", **{sig: stats(5e-6, runs=20, models=("a",),
                                                            at="2020-01-01T00:00:00+00:00")})})
    old.merge(more_runs)
    assert old.lookup("k", sig).median_s == 5e-6  # replaced: more runs, though older
    other = entry("k")
    other.copies = {"host->gpu": [(256.0, 7e-6), (2048.0, 9e-6)]}
    other.overheads = {"region_s": 4e-6}
    old.merge(ProfileCache({"k": other}, {"p": {"cpu": "k", "npu": "k"}}))
    assert old.devices["k"].copies["host->gpu"] == [(256.0, 7e-6), (2048.0, 9e-6)]
    assert old.devices["k"].overheads == {"region_s": 4e-6, "per_op_s": 2e-6,
                                          "island_wakeup_s": 0.0}
    assert old.binding("p") == {"cpu": "k", "npu": "k"}


def test_save_merges_with_what_another_profiler_wrote(tmp_path: Path) -> None:
    path = tmp_path / "shared.json"
    sig = "nn.relu(float32[16])"
    ProfileCache({"a": entry("a", **{sig: stats(1e-6, models=("m1",))})}).save(path)
    second = ProfileCache({"b": entry("b", **{sig: stats(2e-6, models=("m2",))}),
                           "a": entry("a", **{sig: stats(1e-6, models=("m3",))})})
    held = second.devices["b"]  # a profiler keeps filling the entry it holds between saves
    second.save(path)
    on_disk = ProfileCache.load(path)
    assert set(on_disk.devices) == {"a", "b"}
    assert on_disk.lookup("a", sig).models == ["m1", "m3"]
    assert set(second.devices) == {"a", "b"}  # the saving object holds the merged content
    held.overheads["region_s"] = 9e-6
    second.save(path)
    assert ProfileCache.load(path).devices["b"].overheads["region_s"] == 9e-6


def test_save_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "cache.json"
    ProfileCache({"a": entry("a")}).save(path)
    before = path.read_text()

    def broken(src: Any, dst: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken)
    with pytest.raises(OSError, match="disk full"):
        ProfileCache({"b": entry("b")}).save(path)
    assert path.read_text() == before
    # No temporary file; the lock file stays, hidden (see profiling.cache._locked for why).
    assert sorted(p.name for p in tmp_path.iterdir()) == [".cache.json.lock", "cache.json"]


def _valid() -> dict[str, Any]:
    return ProfileCache({"k": entry("k", **{"s": stats(1e-6)})}, {"p": {"cpu": "k"}}).to_dict()


def _set(data: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    target = data
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return data


@pytest.mark.parametrize(("edit", "message"), [
    (lambda d: _set(d, ("schema",), "partition_lab.gpu_profile/1"), "'schema' must be"),
    (lambda d: _set(d, ("devices", "k", "ops", "s", "median_s"), -1.0),
     r"devices\['k'\]\.ops\['s'\]\.median_s must be a positive number"),
    (lambda d: _set(d, ("devices", "k", "ops", "s", "p10_s"), 1.0), "p10_s <= median_s"),
    (lambda d: _set(d, ("devices", "k", "ops", "s", "runs"), 0), "runs must be a positive"),
    (lambda d: _set(d, ("devices", "k", "ops", "s", "class"), "tensor"), "class must be one of"),
    (lambda d: _set(d, ("devices", "k", "ops", "s", "measured_at"), "yesterday"),
     "measured_at must be an ISO date"),
    (lambda d: _set(d, ("devices", "k", "runner"), "onnxruntime"), "runner must be one of"),
    (lambda d: _set(d, ("devices", "k", "copies", "host->gpu"), [[256, 0]]),
     "every point must be"),
    (lambda d: _set(d, ("devices", "k", "overheads", "region_s"), -1e-6),
     "overheads.region_s must be a non-negative"),
    (lambda d: _set(d, ("bindings", "p", "npu"), "missing-key"), "which has no entry"),
])
def test_bad_cache_files_are_clear_errors(tmp_path: Path, edit: Any, message: str) -> None:
    path = tmp_path / "cache.json"
    path.write_text(json.dumps(edit(_valid())))
    with pytest.raises(ProfileError, match=message):
        ProfileCache.load(path)


def test_missing_and_unreadable_cache_files(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="does not exist"):
        ProfileCache.load(tmp_path / "none.json")
    assert ProfileCache.load(tmp_path / "none.json", missing_ok=True).devices == {}
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ProfileError, match="is not valid JSON"):
        ProfileCache.load(tmp_path / "bad.json", missing_ok=True)


# ---------------------------------------------------------------------------- what to measure
def test_signatures_every_supported_placement_or_the_plans() -> None:
    from partition_lab.profiling import signatures_per_device

    bundle = small_bundle()
    plan = bundle.plans["greedy"]
    every = signatures_per_device(bundle.graph, plan.support, refs=bundle.bindings)
    relu = op_signature(bundle.graph[1])
    assert relu not in every["tensorcore"] and relu not in every["cuda"]
    assert set(every["cpu"]) == set(ops_of(bundle.graph))  # the host runs every op
    assert len(every["tensorcore"]) == 3
    assert every["cpu"][relu][1] == bundle.bindings[1]
    planned = signatures_per_device(bundle.graph, plan.support, [plan])
    assert set(planned["cpu"]) == {relu}  # greedy keeps only the relu on the host
    assert len(planned["tensorcore"]) == 3 and planned["cuda"] == {}


# ---------------------------------------------------------------------------- the torch runner
@needs_torch
def test_torch_runner_times_every_signature_on_the_cpu() -> None:
    from partition_lab.profiling import TorchRunner

    graph, bindings = small_graph()
    runner = TorchRunner("cpu", **FAST_TORCH)
    ops = ops_of(graph)
    refs = {op_signature(n): bindings[n.id] for n in graph.nodes}
    seen: list[tuple[int, int]] = []
    times = runner.measure_ops(ops, refs=refs, progress=lambda d, t, w: seen.append((d, t)))
    assert set(times) == set(ops)
    for timing in times.values():
        check_timing(timing)
    dense, relu = op_signature(graph[0]), op_signature(graph[1])
    # 8.4 MFLOP against 16 elements: a timer that measured nothing would not order them.
    assert times[dense].median_s > 5 * times[relu].median_s
    assert seen[0] == (0, 4) and seen[-1] == (4, 4)
    key = runner.device_key()
    assert key.startswith("torch-cpu|") and "|torch " in key and "|threads " in key
    assert runner.describe()["kind"] == "cpu"
    assert runner.measure_copies("host", "gpu") == {}  # the executor copies nothing on the CPU


@needs_torch
def test_torch_runner_reports_an_op_without_a_kernel() -> None:
    from partition_lab.profiling import TorchRunner

    b = OpGraphBuilder("unknown")
    x = b.input("x", TensorType((1, 4, 8, 8), "float32"))
    graph = b.build(outputs=[b.op("test.no_such_op", [x]), b.op("nn.relu", [x])])
    runner = TorchRunner("cpu", **FAST_TORCH)
    errors: dict[str, str] = {}
    times = runner.measure_ops(ops_of(graph), errors=errors)
    assert list(times) == [op_signature(graph[1])]  # the others are still timed
    assert list(errors.values()) == ["test.no_such_op: no PyTorch translation for "
                                     "test.no_such_op"]
    with pytest.raises(ProfileError, match="no PyTorch translation for test.no_such_op"):
        runner.measure_ops(ops_of(graph))


@needs_torch
def test_torch_runner_overheads() -> None:
    from partition_lab.profiling import TorchRunner

    overheads = TorchRunner("cpu", **FAST_TORCH).measure_overheads(length=16)
    assert set(overheads) == {"region_s", "per_op_s", "island_wakeup_s", "op_floor_s"}
    assert all(v >= 0 for v in overheads.values())
    # A chain of executor steps takes at least its ops' own bookkeeping per op.
    assert overheads["op_floor_s"] >= overheads["per_op_s"] > 0


def test_refs_inferred_from_types() -> None:
    from partition_lab.profiling.runners import infer_refs

    graph, bindings = small_graph()
    for node, refs in zip(graph.nodes, bindings, strict=True):
        assert [r.kind for r in infer_refs(node)] == [r.kind for r in refs]


# ---------------------------------------------------------------------------- TVM llvm
def test_relay_text_rebuilds_every_op_of_a_zoo_model() -> None:
    from partition_lab import zoo
    from partition_lab.api import analyze
    from partition_lab.profiling.tvm_runners import single_op_module

    mod, params = zoo.load("bert_encoder", small=True)
    analysis = analyze(mod, "tensorcore", params=params)
    checked = 0
    for node, call in zip(analysis.graph.nodes, analysis.relay.calls, strict=True):
        rebuilt = single_op_module(node)["main"].body
        rebuilt = rebuilt.tuple_value if node.op == "nn.batch_norm" else rebuilt
        assert rebuilt.op.name == node.op
        if call.attrs is not None:
            import tvm

            assert tvm.ir.structural_equal(rebuilt.attrs, call.attrs), node.op
        checked += 1
    assert checked == len(analysis.graph)


def test_relay_text_float32_for_a_float32_device() -> None:
    from partition_lab.profiling.tvm_runners import relay_text

    b = OpGraphBuilder("half")
    x = b.input("x", TensorType((2, 3), "float16"))
    graph = b.build(outputs=[b.op("cast", [x], attrs={"dtype": "float16"})])
    assert "float16" in relay_text(graph[0])
    assert "float16" not in relay_text(graph[0], float32=True)


def test_tvm_llvm_runner_times_ops() -> None:
    from partition_lab.profiling import TvmLlvmRunner

    graph, _ = small_graph()
    ops = {op_signature(n): n for n in graph.nodes if n.op in ("nn.dense", "nn.relu")}
    runner = TvmLlvmRunner(**FAST_TVM)
    times = runner.measure_ops(ops)
    assert set(times) == set(ops)
    for timing in times.values():
        check_timing(timing)
    assert times[op_signature(graph[0])].median_s > 5 * times[op_signature(graph[1])].median_s
    assert runner.device_key().startswith("tvm-llvm|")
    assert TvmLlvmRunner(precision="float32").device_key().endswith("|float32")


# ---------------------------------------------------------------------------- TVM RPC
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)  # its own session: the server's forks too
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.fixture(scope="module")
def rpc_tracker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """A real TVM RPC tracker and one real server under key ``test``, as subprocesses."""
    from tvm import rpc

    logs = tmp_path_factory.mktemp("rpc")
    port = _free_port()
    started: list[subprocess.Popen[bytes]] = []

    def start(*args: str, log: str) -> subprocess.Popen[bytes]:
        with open(logs / log, "wb") as out:
            process = subprocess.Popen([sys.executable, "-m", *args], stdout=out,
                                       stderr=subprocess.STDOUT, start_new_session=True)
        started.append(process)
        return process

    def wait_for(ready: Any, what: str) -> None:
        for _ in range(600):  # a guard against a hang, not a timing assertion
            if ready():
                return
            if any(p.poll() is not None for p in started):
                break
            time.sleep(0.1)
        logs_text = "\n".join(f.read_text()[-2000:] for f in logs.iterdir())
        pytest.fail(f"{what} did not come up:\n{logs_text}")

    def tracker_summary() -> Any:
        try:  # a plain connection first: TVM's client would retry a closed port for seconds
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
            return rpc.connect_tracker("127.0.0.1", port).summary()
        except OSError:  # not listening yet
            return None

    try:
        start("tvm.exec.rpc_tracker", "--host", "127.0.0.1", "--port", str(port),
              "--port-end", str(port + 1), "--silent", log="tracker.log")
        wait_for(lambda: tracker_summary() is not None, "the RPC tracker")
        server_port = _free_port()
        start("tvm.exec.rpc_server", "--host", "127.0.0.1", "--port", str(server_port),
              "--port-end", str(server_port + 1), "--tracker", f"127.0.0.1:{port}",
              "--key", "test", "--silent", log="server.log")
        wait_for(lambda: (tracker_summary() or {}).get("queue_info", {}).get("test", {})
                 .get("free", 0) >= 1, "the RPC server")
        yield "127.0.0.1", port
    finally:
        for process in reversed(started):
            _stop(process)


def test_rpc_runner_times_ops_on_a_server(rpc_tracker: tuple[str, int]) -> None:
    from partition_lab.profiling import TvmRpcRunner

    host, port = rpc_tracker
    graph, _ = small_graph()
    ops = {op_signature(n): n for n in graph.nodes if n.op in ("nn.dense", "nn.relu")}
    runner = TvmRpcRunner(host, port, "test", **FAST_TVM)
    try:
        runner.check()
        seen: list[int] = []
        times = runner.measure_ops(ops, progress=lambda d, t, w: seen.append(d))
        overheads = runner.measure_overheads(length=8)
    finally:
        runner.close()
    assert set(times) == set(ops)
    for timing in times.values():
        check_timing(timing)
    assert times[op_signature(graph[0])].median_s > 5 * times[op_signature(graph[1])].median_s
    assert seen[-1] == 2
    assert set(overheads) == {"region_s", "per_op_s", "island_wakeup_s"}
    assert overheads["region_s"] > 0
    assert runner.device_key() == f"tvm-rpc|test|tvm {__import__('tvm').__version__}|target llvm"


def test_rpc_runner_unknown_key_and_unreachable_tracker(rpc_tracker: tuple[str, int]) -> None:
    from partition_lab.profiling import TvmRpcRunner

    host, port = rpc_tracker
    with pytest.raises(ProfileError, match=r"no RPC server is registered under key 'rasp4'.*"
                                           r"keys there: test"):
        TvmRpcRunner(host, port, "rasp4").check()
    with pytest.raises(ProfileError, match="cannot reach the TVM RPC tracker"):
        TvmRpcRunner(host, _free_port(), "test").check()


def test_profile_a_bundle_over_rpc(rpc_tracker: tuple[str, int], tmp_path: Path) -> None:
    from partition_lab.profiling import profile

    host, port = rpc_tracker
    path = write_bundle(tmp_path / "tiny.json.gz", small_bundle("cpu"))
    result = profile(path, runner="tvm-rpc", tracker=f"{host}:{port}", key="test",
                     cache=tmp_path / "cache.json", runner_options=FAST_TVM)
    key = result.bindings["cpu"]
    assert key.startswith("tvm-rpc|test|")
    cache = ProfileCache.load(tmp_path / "cache.json")
    assert set(cache.devices[key].ops) == set(ops_of(small_bundle("cpu").graph))
    assert cache.devices[key].ops[op_signature(small_graph()[0][0])].models == ["tiny_profile"]
    assert set(cache.devices[key].overheads) >= {"region_s", "per_op_s", "island_wakeup_s"}


# ---------------------------------------------------------------------------- profile() and CLI
@needs_torch
def test_profile_a_bundle_with_torch(tmp_path: Path) -> None:
    from partition_lab.profiling import TorchRunner, profile

    bundle = small_bundle()
    cache = tmp_path / "cache.json"
    first = profile(bundle, "tensorcore", device="cpu", cache=cache, runner_options=FAST_TORCH,
                    name="m1")
    key = first.bindings["cpu"]
    assert first.bindings == {"tensorcore": key, "cuda": key, "cpu": key}
    assert first.entries[0].measured == 4 and first.entries[0].reused == 0
    assert any("stand-in" in note for note in first.notes)
    second = profile(bundle, None, device="cpu", cache=cache, runner_options=FAST_TORCH,
                     name="m2", strategies=["greedy"])
    assert second.entries[0].measured == 0 and second.entries[0].reused == 4
    assert all(s.models == ["m1", "m2"] for s in ProfileCache.load(cache).devices[key].ops.values())
    class OtherCpu(TorchRunner):  # a second device key on this one CPU: two cache entries
        def device_key(self) -> str:
            return super().device_key() + "|other"

    accel, host = TorchRunner("cpu", **FAST_TORCH), OtherCpu("cpu", **FAST_TORCH)
    third = profile(bundle, cache=cache, name="m3",
                    runner={"tensorcore": accel, "cuda": accel, "cpu": host})
    assert [(e.measured, e.reused) for e in third.entries] == [(0, 3), (4, 0)]
    on_disk = ProfileCache.load(cache)
    for entry in (on_disk.devices[key], on_disk.devices[key + "|other"]):
        assert {"region_s", "per_op_s", "island_wakeup_s"} <= set(entry.overheads)
    assert on_disk.binding("tensorcore")["cpu"] == key + "|other"
    with pytest.raises(ProfileError, match="exported for platform 'tensorcore', not 'neuron'"):
        profile(bundle, "neuron", device="cpu", cache=cache)
    with pytest.raises(ProfileError, match="no 'optimal' plan"):
        profile(bundle, device="cpu", cache=cache, strategies=["optimal"])


class FakeGpu(Runner):
    """A runner standing in for a GPU (CI has none): fixed times, records what it was asked."""

    runner, kind = "torch", "cuda"

    def __init__(self) -> None:
        self.copied: list[tuple[str, str, str]] = []

    def device_key(self) -> str:
        return "torch-cuda|Fake GPU|torch 0|cudnn 0"

    def describe(self) -> dict[str, Any]:
        return {"runner": "torch", "kind": "cuda", "name": "Fake GPU", "software": {}}

    def measure_ops(self, ops: Any, **kwargs: Any) -> dict[str, Timing]:
        return {sig: Timing(1e-5, 9e-6, 2e-5, 3) for sig in ops}

    def measure_copies(self, host: str, memory: str, *, dtype: str = "float32",
                       sizes: Any = ()) -> Any:
        self.copied.append((host, memory, dtype))
        return {f"{host}->{memory}": [(256.0, 1e-5), (1e6, 1e-4)],
                f"{memory}->{host}": [(256.0, 2e-5), (1e6, 3e-4)]}

    def measure_overheads(self) -> dict[str, float]:
        return {"region_s": 5e-6, "per_op_s": 1e-6, "island_wakeup_s": 0.0}


@needs_torch
def test_profile_copies_once_per_link_with_domain_keys(tmp_path: Path) -> None:
    from partition_lab.profiling import TorchRunner, profile

    gpu = FakeGpu()
    host = TorchRunner("cpu", **FAST_TORCH)
    runners = {"tensorcore": gpu, "cuda": gpu, "cpu": host}
    cache = tmp_path / "cache.json"
    profile(small_bundle(), cache=cache, runner=runners)
    profile(small_bundle(), cache=cache, runner=runners)
    assert gpu.copied == [("host", "gpu", "float32")]  # the graph's dtype, measured once
    copies = ProfileCache.load(cache).devices[gpu.device_key()].copies
    # tensorcore's host computes in float32: the crossing as made is copy+cast, said by domain
    assert copies["host:float32->gpu:as-prepared"] == copies["host->gpu"]
    assert copies["gpu:as-prepared->host:float32"] == copies["gpu->host"]
    assert ProfileCache.load(cache).devices[host.device_key()].copies == {}


@needs_torch
def test_cli_profile_zoo_model_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                          ) -> None:
    from partition_lab import zoo
    from partition_lab.api import analyze
    from partition_lab.cli import main

    cache = tmp_path / "cache.json"
    argv = ["profile", ZOO_SMALL, "--platform", "tensorcore", "--device", "cpu",
            "--cache", str(cache)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    mod, params = zoo.load("tiny_yolo_v2", small=True)
    graph = analyze(mod, "tensorcore", params=params).graph
    wanted = ops_of(graph)
    assert f"{len(wanted)} op signatures: {len(wanted)} measured now, 0 from the cache" in out
    data = ProfileCache.load(cache)
    key = data.binding("tensorcore")["cpu"]
    assert set(data.devices[key].ops) == set(wanted)
    assert {"region_s", "per_op_s", "island_wakeup_s"} <= set(data.devices[key].overheads)
    assert main([*argv, "--json", "--bind-as", "tensorcore@ci"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["entries"][0]["measured"] == 0
    assert again["entries"][0]["reused"] == len(wanted)
    assert ProfileCache.load(cache).binding("tensorcore@ci") == data.binding("tensorcore")


@needs_torch
def test_cli_profile_bundle_without_tvm(tmp_path: Path) -> None:
    """Where the devices are there is no TVM: a bundle profiles with torch alone."""
    bundle = write_bundle(tmp_path / "tiny.json.gz", small_bundle())
    cache = tmp_path / "cache.json"
    code = ("import sys; sys.modules['tvm'] = None; from partition_lab.cli import main; "
            f"sys.exit(main(['profile', {str(bundle)!r}, '--device', 'cpu', "
            f"'--cache', {str(cache)!r}]))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO_ROOT, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "4 op signatures: 4 measured now" in proc.stdout
    assert ProfileCache.load(cache).binding("tensorcore")


@pytest.mark.parametrize(("argv", "message"), [
    (["--runner", "tvm-rpc", "--key", "k", "--tracker", "nohost"], "bad --tracker 'nohost'"),
    (["--runner", "tvm-rpc", "--tracker", "127.0.0.1:9190"], "needs --key"),
    (["--key", "k"], "apply to --runner tvm-rpc"),
    (["--device", "tpu"], "bad --device 'tpu'"),
    (["--runner", "tvm-llvm", "--device", "cuda:0"], "--device applies to the torch runner"),
])
def test_cli_profile_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                  argv: list[str], message: str) -> None:
    from partition_lab.cli import main

    bundle = write_bundle(tmp_path / "tiny.json.gz", small_bundle())
    assert main(["profile", str(bundle), "--cache", str(tmp_path / "c.json"), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "c.json").exists()


def test_cli_profile_keeps_a_corrupt_cache(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    from partition_lab.cli import main

    bundle = write_bundle(tmp_path / "tiny.json.gz", small_bundle())
    cache = tmp_path / "c.json"
    cache.write_text("{broken")
    assert main(["profile", str(bundle), "--device", "cpu", "--cache", str(cache)]) == 2
    assert "is not valid JSON" in capsys.readouterr().err
    assert cache.read_text() == "{broken"
    assert main(["profile", str(tmp_path / "none.json.gz"), "--cache", str(cache)]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_cli_profile_help_examples_parse(capsys: pytest.CaptureFixture[str]) -> None:
    from partition_lab.cli import build_parser, main

    assert main(["profile", "--help"]) == 0
    help_text = capsys.readouterr().out
    assert "partition_lab.profile_cache/1" in help_text
    examples = [line.split()[1:] for line in help_text.split("examples:\n")[1].splitlines()
                if line.strip().startswith("partition-lab")]
    assert len(examples) == 3
    for argv in examples:
        args = build_parser().parse_args(argv)  # raises UsageError on a flag that does not exist
        assert args.command == "profile"


# ---------------------------------------------------------------------------- whole graphs
def test_in_graph_times_round_trip_and_merge_per_model() -> None:
    first = entry(relu=stats(1e-5, models=("a",)))
    first.ops["relu"].in_graph = {"a": 3e-5}
    first.graphs = {"a": {"total_s": 1e-3, "ops": 4, "runs": 5}}
    second = entry(relu=stats(1e-5, runs=9, models=("b",)))
    second.ops["relu"].in_graph = {"b": 4e-5}
    second.graphs = {"b": {"total_s": 2e-3, "ops": 4, "runs": 5}}
    cache = ProfileCache({first.key: first})
    cache.merge(ProfileCache({second.key: second}))
    merged = cache.devices[first.key]
    assert merged.ops["relu"].runs == 9  # the newer measurement replaced the old one...
    assert merged.ops["relu"].in_graph == {"a": 3e-5, "b": 4e-5}  # ...but no model's graph time
    assert set(merged.graphs) == {"a", "b"}
    again = ProfileCache.from_dict(json.loads(json.dumps(cache.to_dict())))
    assert again.devices[first.key].ops["relu"].in_graph == {"a": 3e-5, "b": 4e-5}
    assert again.devices[first.key].graphs["b"]["total_s"] == 2e-3
    bad = cache.to_dict()
    bad["devices"][first.key]["ops"]["relu"]["in_graph_s"] = {"a": -1.0}
    with pytest.raises(ProfileError, match=r"in_graph_s"):
        ProfileCache.from_dict(bad)


@needs_torch
def test_torch_runner_times_a_whole_graph_and_each_op_inside_it() -> None:
    from partition_lab.profiling import TorchRunner

    graph, bindings = small_graph()
    timing = TorchRunner("cpu", **FAST_TORCH).measure_graph(graph, bindings, runs=3)
    assert timing.runs == 3 and timing.ops == len(graph)
    assert set(timing.in_graph_s) == {op_signature(n) for n in graph.nodes}
    assert all(t > 0 for t in timing.in_graph_s.values())
    # each op's slot is a share of one run: together no more than the run itself
    assert sum(timing.in_graph_s.values()) <= timing.total_s * 1.2
    # the dense layer (8 MFLOP) takes longer inside the graph than the 16-float relu
    dense, relu = (op_signature(graph[i]) for i in (0, 1))
    assert timing.in_graph_s[dense] > timing.in_graph_s[relu]


@needs_torch
def test_profile_keeps_the_whole_graph_run(tmp_path: Path) -> None:
    from partition_lab.profiling import profile

    cache = tmp_path / "cache.json"
    result = profile(small_bundle(), device="cpu", cache=cache, runner_options=FAST_TORCH,
                     name="m1")
    key = result.bindings["cpu"]
    stored = ProfileCache.load(cache).devices[key]
    assert set(stored.graphs) == {"m1|tensorcore"} and stored.graphs["m1|tensorcore"]["ops"] == 4
    assert all(set(s.in_graph) == {"m1"} for s in stored.ops.values())
    assert "the whole graph run on this device" in result.summary()
    skipped = profile(small_bundle(), device="cpu", cache=tmp_path / "other.json",
                      runner_options=FAST_TORCH, name="m2", graphs=False)
    assert not skipped.cache.devices[key].graphs
    assert all(not s.in_graph for s in skipped.cache.devices[key].ops.values())
