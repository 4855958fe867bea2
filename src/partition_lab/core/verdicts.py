"""Verdicts: one device's answer for one op, and the op rules that give it.

A device answers through its :class:`Target` (one device's op rules: an op table plus rules, a
:class:`~partition_lab.targets.TargetSpec` for the built-ins and target files). The answer for one
op is a :class:`Verdict`. :class:`AcceptsAll` is the target of a device without rules (the host,
the devices of a plan read without its platform). Every (op, device) verdict of a platform is a
:class:`~.support.Support`, one floor up: it needs the platform, whose devices need targets.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from .graph import OpGraph, OpNode
    from .patterns import Unit


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
