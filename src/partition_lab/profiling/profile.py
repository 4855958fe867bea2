"""``profile(model_or_bundle, platform)``: measure what a model's plans can use, into the cache.

Which op signatures are measured, per device of the platform: by default **every op on every
device that supports it** (the support table), not only the placements that some strategy's
final plan makes. Strategies that search (``cost``, ``optimal``, variants with exclusions) price
placements that no final plan keeps, and a cost model that knows only the winners' placements
cannot tell whether an alternative is better. It costs little: signatures repeat within and
across models, and devices bound to one cache entry share their measurements. ``strategies=[...]`` narrows it to the union of those strategies'
plans (a bundle's own plans, or the strategies run here), for a quick profile.

Devices are bound to runners (:mod:`partition_lab.profiling.runners`): with ``runner="torch"``
a host-memory device is timed by ``TorchRunner("cpu")`` and every other one by
``TorchRunner(device)`` (``cuda:0`` where torch sees a GPU), as the plan executor runs them; with
``"tvm-llvm"`` every device is timed with TVM's llvm backend here (the stand-in the region
executor uses), with ``"tvm-rpc"`` on the boards a TVM RPC tracker serves under ``key``; or
pass a :class:`~partition_lab.profiling.runners.Runner` (every device) or a mapping
``{platform device: Runner}``. Devices whose runners share a device key share one cache entry.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.graph import OpGraph, OpNode
from ..core.ops import op_class
from ..core.patterns import COMPOSITE_OP_PREFIX
from ..core.plan import PartitionPlan
from ..core.platform import Platform
from ..core.support import Support
from ..errors import ProfileError
from .binding import bind_runners, parse_tracker, runner_notes
from .cache import OVERHEAD_KEYS, DeviceEntry, OpStats, ProfileCache, default_cache_path, now_iso
from .inputs import ModelToProfile, StepFn, is_bundle_path, progress_bar, resolve_model
from .runners import Runner, Timing


@dataclass
class EntryReport:
    """What one profile did on one cache entry (device key)."""

    key: str
    runner: str
    devices: list[str]
    wanted: int
    measured: int = 0
    reused: int = 0
    failed: dict[str, str] = field(default_factory=dict)
    unmeasured: int = 0  # left out when the time budget ran out
    copies: list[str] = field(default_factory=list)
    overheads: dict[str, float] = field(default_factory=dict)
    graph_s: float | None = None  # the whole graph's run on this device, if made

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class ProfileResult:
    """What :func:`profile` returns: the merged cache, where it went, and what was done."""

    cache: ProfileCache
    cache_path: Path | None
    platform: str
    model: str
    selection: str
    bindings: dict[str, str]
    entries: list[EntryReport]
    notes: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0

    @property
    def failed(self) -> dict[str, str]:
        """Every signature that could not be timed, with why (over all entries)."""
        return {sig: msg for e in self.entries for sig, msg in e.failed.items()}

    def summary(self) -> str:
        lines = [f"profiled {self.model} on {self.platform} ({self.selection}) in "
                 f"{self.elapsed_s:.1f} s" + (f" -> {self.cache_path}" if self.cache_path else "")]
        for e in self.entries:
            lines.append(f"  {', '.join(e.devices)} -> {e.key}")
            counts = f"    {e.wanted} op signatures: {e.measured} measured now, {e.reused} from " \
                     "the cache"
            if e.failed:
                counts += f", {len(e.failed)} could not be timed"
            if e.unmeasured:
                counts += f", {e.unmeasured} left for lack of time"
            lines.append(counts)
            if e.copies:
                lines.append(f"    copies measured: {', '.join(e.copies)}")
            if e.overheads:
                lines.append("    overheads: " + ", ".join(
                    f"{k} {v * 1e6:.3g} us" for k, v in sorted(e.overheads.items())))
            if e.graph_s is not None:
                lines.append(f"    the whole graph run on this device: {e.graph_s * 1e3:.3g} ms "
                             "(each op's time inside it kept)")
            by_op = Counter(msg for msg in e.failed.values())
            for message, count in sorted(by_op.items()):
                lines.append(f"    not timed ({count}x): {message}")
        lines.extend(f"  note: {note}" for note in self.notes)
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"cache": str(self.cache_path) if self.cache_path else None,
                "platform": self.platform, "model": self.model, "selection": self.selection,
                "bindings": dict(self.bindings), "entries": [e.to_dict() for e in self.entries],
                "notes": list(self.notes), "elapsed_s": self.elapsed_s}


# ---------------------------------------------------------------------------- the API
def profile(
    model_or_bundle: Any,
    platform: Any = None,
    *,
    device: str | None = None,
    cache: str | Path | ProfileCache | None = None,
    strategies: Iterable[str] | None = None,
    runner: str | Runner | Mapping[str, Runner] = "torch",
    params: Mapping[str, Any] | None = None,
    name: str | None = None,
    tracker: str | None = None,
    key: str | None = None,
    runner_options: Mapping[str, Any] | None = None,
    force: bool = False,
    budget_s: float | None = None,
    bind_as: str | None = None,
    input_shapes: Mapping[str, tuple[int, ...]] | None = None,
    progress: StepFn | None = None,
    graphs: bool = True,
    **target_options: Any,
) -> ProfileResult:
    """Measure every op signature ``model_or_bundle``'s plans can use on each device of
    ``platform``, plus copies and overheads, and merge them into the profile cache.

    Parameters
    ----------
    model_or_bundle:
        A bundle (:class:`~partition_lab.executors.graph_io.Bundle` or the path of a
        ``.json.gz`` bundle file: needs no TVM), a Relay ``IRModule`` (with ``params``), an
        ``(IRModule, params)`` pair, or a model file / ``zoo:NAME[:small]`` / ``tv:NAME[:small]``
        (these need TVM).
    platform:
        A platform name, file or :class:`Platform` (for a bundle: default and must be the
        bundle's own).
    device:
        The torch device of the platform's non-host devices (``"cuda:0"``; default the first
        GPU torch sees, else ``"cpu"``). Only for the torch runner.
    cache:
        The cache file (default :func:`~partition_lab.profiling.cache.default_cache_path`) or
        a :class:`ProfileCache` to merge into in memory (nothing is written then).
    strategies:
        None: every op on every device that supports it (see the module docstring); a list of
        strategy names: only what those strategies' plans place on each device.
    runner:
        ``"torch"``, ``"tvm-llvm"``, ``"tvm-rpc"`` (with ``tracker="host:port"`` and ``key``),
        a Runner for every device, or ``{platform device: Runner}``. ``runner_options`` go to
        the runners built here (``repeats=``, ``batch_s=`` for torch; ``number=``,
        ``repeat=`` for TVM; ``target=``, ``sessions=`` for RPC).
    force:
        Measure again what the cache already has.
    budget_s:
        Stop timing ops after this many seconds (what was measured is kept).
    bind_as:
        The name the bindings are stored under (default the platform's name).
    input_shapes:
        Input shapes of a model file that does not fix them.
    progress:
        ``progress(what, done, total)`` as ops are timed.
    graphs:
        Also run the whole graph on each device whose runner can (the torch runner), and keep
        each op's time inside it (``in_graph_s``) and the run's total (``graphs``) in the
        cache: what an op costs inside a graph, which timing it alone misses. The cost model
        prices ops with these where it has them (:class:`~partition_lab.cost_models.profiled.ProfiledCostModel`).
    """
    start = time.perf_counter()
    model = resolve_model(model_or_bundle, platform, params, input_shapes, **target_options)
    label = name or model.graph.name or _stem(model_or_bundle) or "model"
    runners = bind_runners(model.platform, runner, device, tracker, key, runner_options or {})
    notes = runner_notes(model.platform, runners) + model.notes
    wanted, selection = _wanted(model, strategies)

    path: Path | None
    if isinstance(cache, ProfileCache):
        store, path = cache, None
    else:
        path = Path(cache) if cache is not None else default_cache_path()
        store = ProfileCache.load(path, missing_ok=True)

    groups: dict[str, list[str]] = {}
    by_key: dict[str, Runner] = {}
    for device_name, assigned in runners.items():
        device_key = assigned.device_key()
        groups.setdefault(device_key, []).append(device_name)
        by_key.setdefault(device_key, assigned)
    for device_key, assigned in by_key.items():
        check = getattr(assigned, "check", None)
        if check is not None:
            check()
        info = assigned.describe()
        fresh = DeviceEntry(device_key, info["runner"], info["kind"], info["name"],
                            dict(info["software"]))
        store.merge(ProfileCache({device_key: fresh}))
    binding = {d: runners[d].device_key() for d in model.platform.names}
    store.bind(bind_as or model.platform.name, binding)

    # The budget is for timing: loading and preparing the model came before it (counted in,
    # a slow load on a busy machine left no time to time a single op).
    deadline = time.perf_counter() + budget_s if budget_s is not None else None
    dtype = _payload_dtype(model.graph)
    reports = []
    for device_key, devices in groups.items():
        assigned = by_key[device_key]
        ops: dict[str, tuple[OpNode, Any]] = {}
        for device_name in devices:
            ops.update(wanted[device_name])
        if not assigned.times_units:  # its units stay priced op by op
            ops = {sig: job for sig, job in ops.items()
                   if not job[0].op.startswith(COMPOSITE_OP_PREFIX)}
        def checkpoint() -> None:
            if path is not None:
                store.save(path)

        report = _profile_entry(store, device_key, assigned, devices, ops, label, model.platform,
                                force=force, deadline=deadline, dtype=dtype, progress=progress,
                                checkpoint=checkpoint)
        if graphs and model.refs is not None:
            _profile_graph(store.devices[device_key], assigned, model, label, short_key(device_key),
                           deadline=deadline, progress=progress, report=report)
        reports.append(report)
        checkpoint()
    for assigned in by_key.values():
        assigned.close()
    if path is not None:
        store.save(path)
    return ProfileResult(store, path, model.platform.name, label, selection, binding, reports,
                         notes, time.perf_counter() - start)


def _profile_entry(store: ProfileCache, device_key: str, runner: Runner, devices: list[str],
                   ops: Mapping[str, tuple[OpNode, Any]], label: str,
                   platform: Platform, *, force: bool, deadline: float | None, dtype: str,
                   progress: StepFn | None, checkpoint: Callable[[], None]) -> EntryReport:
    entry = store.devices[device_key]
    report = EntryReport(device_key, runner.runner, list(devices), len(ops))
    todo = {}
    for sig, (node, _) in ops.items():
        known = entry.ops.get(sig)
        if known is not None and not force:
            if label not in known.models:
                known.models.append(label)
            report.reused += 1
        else:
            todo[sig] = node
    short = short_key(device_key)

    def step(done: int, total: int, what: str) -> None:
        if progress:
            progress(f"timing ops on {short}" + (f" ({what})" if what else ""), done, total)

    refs = {sig: r for sig, (_, r) in ops.items() if r is not None}
    timings = runner.measure_ops(todo, refs=refs, progress=step, errors=report.failed,
                                 deadline=deadline) if todo else {}
    measured_at = now_iso()
    for sig, timing in timings.items():
        entry_stats = _stats(todo[sig], timing, label, measured_at)
        old = entry.ops.get(sig)
        if old is not None:
            entry_stats.models = list(dict.fromkeys(old.models + entry_stats.models))
        entry.ops[sig] = entry_stats
    report.measured = len(timings)
    report.unmeasured = len(todo) - len(timings) - len(report.failed)
    checkpoint()  # the op times are kept even if a later phase fails

    host = platform.host
    memories = sorted({platform.device(d).memory for d in devices} - {host.memory})
    for memory in memories if runner.kind != "cpu" else ():
        h2d, d2h = f"{host.memory}->{memory}", f"{memory}->{host.memory}"
        if force or h2d not in entry.copies or d2h not in entry.copies:
            phase = f"timing copies {host.memory}<->{memory} on {short}"
            if progress:
                progress(phase, 0, 1)
            curves = runner.measure_copies(host.memory, memory, dtype=dtype)
            entry.copies.update(curves)
            report.copies.extend(sorted(curves))
            if progress:
                progress(phase, 1, 1)
        if h2d not in entry.copies or d2h not in entry.copies:
            continue
        # A crossing between precisions (the float32 host of tensorcore) is one copy+cast as
        # the executor makes it, and the curve measured it so: the executor's copies of half
        # tensors already include the cast to the CPU's float32. Domain keys say so to readers.
        for name in devices:
            d = platform.device(name)
            if d.memory == memory and d.precision != host.precision:
                entry.copies[f"{host.memory}:{host.precision}->{memory}:{d.precision}"] = \
                    list(entry.copies[h2d])
                entry.copies[f"{memory}:{d.precision}->{host.memory}:{host.precision}"] = \
                    list(entry.copies[d2h])
    if force or any(k not in entry.overheads for k in OVERHEAD_KEYS):
        if progress:
            progress(f"timing overheads on {short}", 0, 1)
        report.overheads = runner.measure_overheads()
        entry.overheads.update(report.overheads)
        if progress:
            progress(f"timing overheads on {short}", 1, 1)
    return report


def short_key(device_key: str) -> str:
    """A device key short enough for a progress line: runner and device name."""
    parts = device_key.split("|")
    return parts[0] + (" " + parts[1][:32] if len(parts) > 1 else "")


def _profile_graph(entry: DeviceEntry, runner: Runner, model: ModelToProfile, label: str, short: str,
                   *, deadline: float | None, progress: StepFn | None,
                   report: EntryReport) -> None:
    """Run the whole graph on ``runner``'s device; keep the run and each measured op's time
    inside it (signatures this entry did not time alone are not added)."""
    phase = f"running the whole graph on {short}"
    if progress:
        progress(phase, 0, 1)
    try:
        timing = runner.measure_graph(model.graph, model.refs, deadline=deadline)
    except Exception as err:  # noqa: BLE001 - the op times are kept; say why the run failed
        report.failed["<whole graph>"] = f"{type(err).__name__}: {str(err).strip()[:200]}"
        return
    if progress:
        progress(phase, 1, 1)
    if timing is None:
        return
    for sig, seconds in timing.in_graph_s.items():
        stats = entry.ops.get(sig)
        if stats is not None:
            stats.in_graph[label] = seconds
    platform = model.platform
    on = next((d for d in report.devices if not platform.device(d).is_host), platform.host.name)
    graph = model.graph
    entry.graphs[f"{label}|{platform.name}"] = {
        "model": label, "platform": platform.name, "device": on,
        "total_s": timing.total_s, "outside_s": timing.outside_s, "ops": timing.ops,
        "runs": timing.runs, "measured_at": now_iso(),
        # what crosses between the host and the device in that run, to price it as a plan would
        "inputs_bytes": [t.nbytes for t in graph.graph_inputs.values()],
        "outputs_bytes": [graph[n].outputs[i].nbytes for n, i in graph.outputs]}
    report.graph_s = timing.total_s


def _stats(node: OpNode, timing: Timing, label: str, measured_at: str) -> OpStats:
    dtype = (node.args or node.inputs or node.outputs)[0].dtype if (
        node.args or node.inputs or node.outputs) else "float32"
    return OpStats(timing.median_s, timing.p10_s, timing.p90_s, timing.runs, node.op,
                   op_class(node), float(node.flops), float(node.bytes_moved), dtype, [label],
                   measured_at)


def _stem(model: Any) -> str:
    from ..zoo import is_spec

    if not isinstance(model, (str, Path)) or is_spec(model):
        return ""
    stem = Path(model).name
    for suffix in (".json.gz", ".onnx", "-symbol.json", ".json"):
        stem = stem.removesuffix(suffix)
    return stem


def _payload_dtype(graph: OpGraph) -> str:
    """The float dtype most of the graph's tensors have (what its copies carry)."""
    counts = Counter(t.spec.dtype for t in graph.tensors if t.spec.dtype.startswith(("float",
                                                                                    "bfloat")))
    return counts.most_common(1)[0][0] if counts else "float32"


# ---------------------------------------------------------------------------- what to measure
def signatures_per_device(graph: OpGraph, support: Support,
                          plans: Iterable[PartitionPlan] | None = None,
                          refs: Sequence[Sequence[Any]] | None = None
                          ) -> dict[str, dict[str, tuple[OpNode, Any]]]:
    """``{platform device: {op signature: (node, its argument refs)}}``.

    Without ``plans``: every node on every device that supports it. With ``plans``: the
    device each plan puts each node on (the union over the plans).

    With ``refs`` (the graph's argument bindings), each unit of a pattern (``support.units``)
    is also wanted as one unit on a device that declares the pattern and would hold the whole
    unit: its composite node (:func:`~partition_lab.core.patterns.composite_node`), with a
    :class:`~partition_lab.executors.benchmark.UnitBinding` as its refs, so that a runner that
    can time units measures what the cost model prices (a unit as one op).
    """
    from ..cost_models.signatures import op_signature

    platform = support.platform
    found: dict[str, dict[str, tuple[OpNode, Any]]] = {d: {} for d in platform.names}
    signatures = [op_signature(node) for node in graph.nodes]

    def add(device: str, node_id: int) -> None:
        found[device].setdefault(signatures[node_id], (graph[node_id],
                                                       refs[node_id] if refs else None))

    if plans is None:
        for node in graph.nodes:
            for index in support.allowed(node.id):
                add(platform.devices[index].name, node.id)
    else:
        plans = list(plans)
        for plan in plans:
            for node in graph.nodes:
                add(plan.device_of(node.id), node.id)
    if refs:
        _add_units(found, graph, support, plans, refs)
    return found


def _add_units(found: dict[str, dict[str, tuple[OpNode, Any]]], graph: OpGraph,
               support: Support, plans: Sequence[PartitionPlan] | None,
               refs: Sequence[Sequence[Any]]) -> None:
    """Add each unit's composite node on every device that prices it whole and holds it (see
    :func:`signatures_per_device`)."""
    from ..core.patterns import composite_node
    from ..cost_models.base import priced_whole
    from ..cost_models.signatures import op_signature
    from ..executors.benchmark import UnitBinding

    platform = support.platform
    for unit in support.units:
        if plans is None:
            holders = {platform.devices[i].name
                       for i in set.intersection(*(set(support.allowed(n)) for n in unit.nodes))}
        else:
            holders = {plan.device_of(unit.output) for plan in plans
                       if len({plan.device_of(n) for n in unit.nodes}) == 1}
        nodes = sorted(unit.nodes)
        binding = UnitBinding(tuple(graph[n] for n in nodes), tuple(tuple(refs[n]) for n in nodes))
        composite = composite_node(graph, unit)
        for device in sorted(holders):
            if priced_whole(platform, device, [unit]):
                found[device].setdefault(op_signature(composite), (composite, binding))


def _wanted(model: ModelToProfile, strategies: Iterable[str] | None
            ) -> tuple[dict[str, dict[str, tuple[OpNode, Any]]], str]:
    if strategies is None:
        return (signatures_per_device(model.graph, model.support, refs=model.refs),
                "every op on every device that supports it")
    names = [s for s in strategies]
    if not names:
        raise ProfileError("strategies is empty: name at least one, or None for every "
                           "supported placement")
    plans = []
    for strategy in names:
        if strategy in model.plans:
            plans.append(model.plans[strategy])
        elif model.run_strategy is not None:
            plans.append(model.run_strategy(strategy))
        else:
            have = ", ".join(sorted(model.plans)) or "none"
            raise ProfileError(f"the bundle has no {strategy!r} plan (its plans: {have})")
    return (signatures_per_device(model.graph, model.support, plans, model.refs),
            f"the plans of {', '.join(names)}")


__all__ = ["EntryReport", "ProfileResult", "is_bundle_path", "parse_tracker", "profile",
           "progress_bar", "signatures_per_device"]
