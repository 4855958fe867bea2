"""Support: which devices of a platform can run each op, and why (every (op, device) verdict).

Each device of a platform answers for each op with a :class:`~.verdicts.Verdict` (through its
:class:`~.verdicts.Target`); :class:`Support` holds the answers of every device for every op of
a graph, in the platform's preference order, and says which devices may take a node.
``Verdict`` and ``host_verdict`` live in :mod:`.verdicts` (below the platform, whose devices
carry targets) and are importable from here too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ..errors import PartitionLabError
from .verdicts import Verdict, host_verdict

if TYPE_CHECKING:
    from .patterns import Unit
    from .platform import Platform

__all__ = ["Support", "Verdict", "host_verdict"]


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
