"""Support: which devices of a platform can run each op, and why (every (op, device) verdict).

A device answers through its :class:`Target` (one device's op rules: an op table plus rules, a
:class:`~partition_lab.targets.TargetSpec` for the built-ins and target files). The answer for one
op is a :class:`Verdict`; :class:`Support` holds the answers of every device for every op of a
graph, in the platform's preference order, and says which devices may take a node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ..errors import PartitionLabError

if TYPE_CHECKING:
    from .graph import OpGraph, OpNode
    from .patterns import Unit
    from .platform import Platform


@dataclass(frozen=True)
class Verdict:
    """A target's answer for one op: can it run there, and why (or why not).

    ``rule`` names the rule that decided (``"op-table"``, ``"tensorcore-shape"``,
    ``"excluded-by-name"``...). ``anchor`` marks compute ops that a region must contain on
    targets where other ops only ride along (Tensor Core: conv2d/dense/batch_matmul).
    """

    supported: bool
    reason: str
    rule: str = ""
    anchor: bool = False


@runtime_checkable
class Target(Protocol):
    """One device's op rules, as the core needs them (a ``TargetSpec`` is one).

    ``check`` answers for one op; ``prepare_steps`` names the IR preparation the device needs
    (names from :data:`partition_lab.core.platform.PREPARE_STEPS`); ``supports_all`` says the
    device takes every op (the host), so there are no rules to check a stored plan against.
    """

    name: str
    description: str
    default_profile: str | None
    supports_all: bool

    def check(self, node: OpNode) -> Verdict: ...

    def check_graph(self, graph: OpGraph, units: Sequence[Unit] | None = None) -> list[Verdict]: ...

    def prepare_steps(self) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class AcceptsAll:
    """A target that runs every op, with no rules: the host, and the devices of a plan read
    from a file without its platform (their verdicts come from the file)."""

    name: str
    description: str = ""
    reason: str = "supported (no rules known)"
    default_profile: str | None = None
    supports_all: bool = True
    #: The patterns the device judged whole where the plan was made (cost models price their
    #: units as one op there).
    patterns: frozenset[str] = frozenset()

    def check(self, node: OpNode) -> Verdict:
        return Verdict(True, self.reason)

    def check_graph(self, graph: OpGraph, units: Sequence[Unit] | None = None) -> list[Verdict]:
        return [self.check(node) for node in graph]

    def prepare_steps(self) -> tuple[str, ...]:
        return ()


def host_verdict() -> Verdict:
    """The host's verdict for every op."""
    return Verdict(True, "runs on the host", "host")


class Support:
    """Every (op, device) verdict of a platform: ``of(device)[node]``.

    The host supports every op. ``allowed(node)`` lists the device indices that support a node,
    most preferred first (the platform's device order is its preference order). ``units`` are
    the pattern units found in the graph (:mod:`~.patterns`): strategies keep each on one device.
    """

    def __init__(self, platform: Platform, verdicts: Mapping[str, Sequence[Verdict]],
                 units: Sequence[Unit] = ()) -> None:
        self.platform = platform
        self.units: tuple[Unit, ...] = tuple(units)
        n = None
        table = []
        for device in platform.devices:
            if device.name not in verdicts:
                raise PartitionLabError(f"no verdicts for device {device.name!r} of platform "
                                        f"{platform.name!r}")
            row = tuple(verdicts[device.name])
            if n is not None and len(row) != n:
                raise PartitionLabError("every device needs one verdict per node")
            n = len(row)
            table.append(row)
        self.table: tuple[tuple[Verdict, ...], ...] = tuple(table)
        self.size = n or 0
        self._allowed = [tuple(d for d in range(len(table)) if table[d][v].supported)
                         for v in range(self.size)]
        # Computed once: plan validation asks per region, which was quadratic on long chains.
        self._anchored = tuple(any(v.anchor for v in row) for row in table)
        host = platform.host_index
        for v, allowed in enumerate(self._allowed):
            if host not in allowed:
                raise PartitionLabError(f"node {v}: the host must support every op")

    @classmethod
    def with_host(cls, platform: Platform, verdicts: Mapping[str, Sequence[Verdict]],
                  units: Sequence[Unit] = ()) -> Support:
        """Support from the accelerators' verdicts; the host's (every op) are filled in."""
        size = len(next(iter(verdicts.values()))) if verdicts else 0
        return cls(platform, {**verdicts, platform.host.name: [host_verdict()] * size}, units)

    def __len__(self) -> int:
        return self.size

    def of(self, device: str | int) -> tuple[Verdict, ...]:
        index = device if isinstance(device, int) else self.platform.index(device)
        return self.table[index]

    def verdict(self, node: int, device: str | int) -> Verdict:
        if isinstance(device, int):
            return self.table[device][node]
        return self.of(device)[node]

    def allowed(self, node: int) -> tuple[int, ...]:
        """Device indices that support ``node``, most preferred first (the host is last)."""
        return self._allowed[node]

    def preferred(self, node: int) -> int:
        return self._allowed[node][0]

    def fallback(self, node: int, device: int) -> int:
        """The next device after ``device`` (in preference order) that supports ``node``."""
        for d in self._allowed[node]:
            if d > device:
                return d
        return self.platform.host_index

    @property
    def primary(self) -> tuple[Verdict, ...]:
        """The verdicts of the most preferred accelerator (the host's on the cpu platform)."""
        return self.of(self.platform.primary.name)

    def anchored(self, device: int) -> bool:
        """Whether regions on ``device`` must hold an anchor op."""
        return self._anchored[device]
