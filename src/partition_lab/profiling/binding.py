"""Which runner times which device of a platform: ``torch`` (a CUDA device, or the CPU for the
host's memory), ``tvm-llvm`` (every device here), ``tvm-rpc`` (boards behind a TVM RPC tracker),
a :class:`~.runners.Runner` for every device, or a mapping ``{platform device: Runner}``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.platform import Platform
from ..errors import PartitionLabError, ProfileError
from .runners import Runner

RUNNER_NAMES = ("torch", "tvm-llvm", "tvm-rpc")


def bind_runners(platform: Platform, runner: Any, device: str | None, tracker: str | None,
                  key: str | None, options: Mapping[str, Any]) -> dict[str, Runner]:
    """``{platform device: Runner}``; one runner object per distinct configuration."""
    if isinstance(runner, Runner):
        return dict.fromkeys(platform.names, runner)
    if isinstance(runner, Mapping):
        missing = [d for d in platform.names if d not in runner]
        unknown = sorted(set(runner) - set(platform.names))
        if missing or unknown:
            raise ProfileError(f"the runner mapping must name every device of {platform.name} "
                               f"({', '.join(platform.names)}): missing {missing}, "
                               f"unknown {unknown}")
        return dict(runner)
    if runner not in RUNNER_NAMES:
        raise ProfileError(f"unknown runner {runner!r}; choose one of {', '.join(RUNNER_NAMES)}")
    if device is not None and runner != "torch":
        raise ProfileError(f"--device applies to the torch runner, not {runner}")
    if runner != "tvm-rpc" and (tracker or key):
        raise ProfileError("--tracker and --key apply to the tvm-rpc runner")
    made: dict[tuple[Any, ...], Runner] = {}
    bound: dict[str, Runner] = {}
    if runner == "torch":
        from .runners import TorchRunner

        accel = device or _default_torch_device()
        for d in platform.devices:
            where = "cpu" if d.memory == platform.host.memory else accel
            config = (where, d.precision if where != "cpu" else "as-prepared")
            if config not in made:
                made[config] = TorchRunner(where, precision=config[1], **options)
            bound[d.name] = made[config]
        return bound
    if runner == "tvm-llvm":
        from .tvm_runners import TvmLlvmRunner

        for d in platform.devices:
            if d.precision not in made:
                made[d.precision] = TvmLlvmRunner(precision=d.precision, **options)
            bound[d.name] = made[d.precision]
        return bound
    from .tvm_runners import TvmRpcRunner

    host, port = parse_tracker(tracker)
    if not key:
        raise ProfileError("the tvm-rpc runner needs --key (the device key the boards "
                           "registered with the tracker)")
    for d in platform.devices:
        if d.precision not in made:
            made[d.precision] = TvmRpcRunner(host, port, key, precision=d.precision, **options)
        bound[d.name] = made[d.precision]
    return bound


def parse_tracker(text: str | None) -> tuple[str, int]:
    """``"host:port"`` -> ``(host, port)``; ProfileError if missing or malformed."""
    if not text:
        raise ProfileError("the tvm-rpc runner needs --tracker HOST:PORT (the TVM RPC tracker)")
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ProfileError(f"bad --tracker {text!r}: expected HOST:PORT, e.g. 127.0.0.1:9190")
    return host, int(port)


def _default_torch_device() -> str:
    try:
        import torch
    except ImportError:
        from .._optional import relax_only, torch_fix

        # the TVM runners build ops through Relay: with apache-tvm (Relax) only torch is left
        other = "" if relax_only() else ", or use --runner tvm-llvm"
        raise PartitionLabError(f"the torch runner needs PyTorch ({torch_fix()}){other}") \
            from None
    return "cuda:0" if torch.cuda.is_available() else "cpu"


def runner_notes(platform: Platform, runners: Mapping[str, Runner]) -> list[str]:
    host_memory = platform.host.memory
    stand_in = [d.name for d in platform.devices if d.memory != host_memory
                and getattr(runners[d.name], "kind", "cpu") == "cpu"]
    if not stand_in:
        return []
    return [f"{', '.join(stand_in)} timed on a CPU ({runners[stand_in[0]].runner} runner), a "
            "stand-in for that hardware" + (" (no CUDA device asked for or seen)"
                                            if runners[stand_in[0]].runner == "torch" else "")]
