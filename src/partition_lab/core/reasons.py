"""Reasons as data: why each node is on its device, in codes a program reads and words a user reads.

A :class:`Reason` carries a :class:`ReasonCode`, the rule that decided, the device whose rule or
region it was and the numbers behind a cost decision; strategies build them, the plan records one
per node in a :class:`Decision`, and summaries and drawings group nodes by them
(:class:`ReasonGroup`). :func:`default_reason_for` is the reason of a node a strategy left where
support put it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from ..errors import PlanError
from .platform import HOST
from .support import Support, Verdict


class ReasonCode(StrEnum):
    """Why a node is where it is, most common first (a ``str``: it serialises as its value)."""

    PREFERRED = "preferred"
    REJECTED = "rejected"
    NO_ANCHOR = "no-anchor"
    MIN_SIZE = "min-size"
    NO_MAC = "no-mac"
    REGION_EXCLUDED = "region-excluded"
    MOVED = "moved"
    SINGLE_DEVICE = "single-device"
    OPTIMUM = "optimum"
    BASELINE = "baseline"
    STRATEGY = "strategy"

    @property
    def meaning(self) -> str:
        """The code in words (what a group of ops with this code shares)."""
        return _MEANINGS[self]


_MEANINGS = {
    ReasonCode.PREFERRED: "on the most preferred device that supports it",
    ReasonCode.REJECTED: "a more preferred device's rule rejects it",
    ReasonCode.NO_ANCHOR: "its group holds no anchor op of the anchored device, so it fell back",
    ReasonCode.MIN_SIZE: "its region was smaller than min_ops (min_size)",
    ReasonCode.NO_MAC: "its region did no multiply-accumulate work (no_mac)",
    ReasonCode.REGION_EXCLUDED: "the cost model predicted its region cheaper on the fallback device",
    ReasonCode.MOVED: "the cost model predicted this op alone cheaper on another device",
    ReasonCode.SINGLE_DEVICE: "the cost model predicted every op on one device cheapest",
    ReasonCode.OPTIMUM: "the optimum (optimal) keeps it there",
    ReasonCode.BASELINE: "a baseline strategy (all_cpu) put it there",
    ReasonCode.STRATEGY: "the strategy put it there",
}

@dataclass(frozen=True)
class Reason:
    """Why a node is on its device, as data: a code, the rule that decided, the numbers.

    ``code`` is a :class:`ReasonCode` (a code's value is converted); ``rule`` names the support rule (``op-table``,
    ``tensorcore-shape``, ``excluded-by-name``) or the strategy rule (``min_ops=3``) that decided;
    ``device`` the device whose rule or region it was (the one that rejected the op, or the one
    it left); ``numbers`` the predicted seconds behind a cost decision. ``text`` renders it for
    people and never names a region label (labels belong to one plan's drawing).
    """

    code: ReasonCode
    text: str
    rule: str = ""
    device: str = ""
    numbers: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.code, ReasonCode):
            try:
                object.__setattr__(self, "code", ReasonCode(self.code))
            except ValueError:
                known = ", ".join(code.value for code in ReasonCode)
                raise PlanError(f"unknown reason code {self.code!r}; known: {known}") from None

    def __str__(self) -> str:
        return self.text

    def group_key(self) -> tuple[str, str, str]:
        """What a summary or drawing groups by: ops with one key share one explanation."""
        return self.code, self.device, self.rule or self.text

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "text": self.text, "rule": self.rule, "device": self.device,
                "numbers": dict(self.numbers)}


@dataclass(frozen=True)
class Decision:
    """Where one node went and why (the reason a user reads when asking "why is this on the CPU?").

    ``reason`` is the rendered text; ``why`` the same as data (:class:`Reason`).
    """

    node: int
    device: str
    region: int
    reason: str
    why: Reason | None = None

    @property
    def code(self) -> ReasonCode:
        return self.why.code if self.why else ReasonCode.STRATEGY


@dataclass(frozen=True)
class ReasonGroup:
    """Ops on one device for one structured reason (code, deciding device, rule).

    ``details`` splits them by their exact text, largest first, as ``(text, decisions)``;
    ``headline`` is what the whole group shares: the text when there is one, else the
    reason code or the rejecting rule in words.
    """

    device: str
    why: Reason
    decisions: tuple[Decision, ...]
    details: tuple[tuple[str, tuple[Decision, ...]], ...]

    @classmethod
    def of(cls, decisions: Sequence[Decision]) -> ReasonGroup:
        """The group of ``decisions`` (which share their device and reason key)."""
        texts: dict[str, list[Decision]] = {}
        for d in decisions:
            texts.setdefault(d.reason, []).append(d)
        details = sorted(texts.items(), key=lambda kv: (-len(kv[1]), kv[1][0].node))
        first = decisions[0]
        return cls(first.device, first.why or Reason(ReasonCode.STRATEGY, first.reason), tuple(decisions),
                   tuple((text, tuple(ds)) for text, ds in details))

    @property
    def headline(self) -> str:
        if len(self.details) == 1:
            return self.details[0][0]
        if self.why.code == ReasonCode.REJECTED and self.why.rule:
            return f"rule {self.why.rule} of {self.why.device} rejects them"
        return self.why.code.meaning

    def to_dict(self) -> dict[str, Any]:
        return {"device": self.device, "code": self.why.code, "rule": self.why.rule,
                "decided_by": self.why.device, "text": self.headline,
                "nodes": [d.node for d in self.decisions],
                "details": [{"text": text, "nodes": [d.node for d in ds]}
                            for text, ds in self.details]}


def default_reason_for(support: Support, node: int, device: str) -> Reason:
    """The reason recorded for a node when a strategy gives none.

    On its preferred device: the device's own verdict, after why each more preferred device
    did not take it (its rule). On a less preferred one: that the strategy chose so.
    """
    platform = support.platform
    index = platform.index(device)
    verdict = support.verdict(node, index)
    rejecting = _first_rejection(support, node, min(index, support.preferred(node)))
    if index == support.preferred(node):
        if rejecting is not None:
            name, rejection = rejecting
            if device == HOST:
                return Reason(ReasonCode.REJECTED, _all_rejections(support, node, index) or
                              rejection.reason, rejection.rule, name)
            accepted = f"supported by {device}: {verdict.reason}" if verdict.reason else \
                f"supported by {device}"
            return Reason(ReasonCode.REJECTED, f"{rejection.reason}; {accepted}", rejection.rule, name)
        text = f"supported by {device}: {verdict.reason}" if verdict.reason else \
            f"supported by {device}"
        return Reason(ReasonCode.PREFERRED, verdict.reason if device == HOST else text, verdict.rule, device)
    better = platform.names[support.preferred(node)]
    prefix = f"{rejecting[1].reason}; " if rejecting else ""
    where = "kept it on the CPU" if device == HOST else f"put it on {device}"
    return Reason(ReasonCode.STRATEGY, f"{prefix}supported by {better}, but the strategy {where}",
                  "", better)


def _first_rejection(support: Support, node: int, before: int) -> tuple[str, Verdict] | None:
    """The most preferred device (index < ``before``) that rejects ``node``, with its verdict."""
    for d in range(before):
        verdict = support.verdict(node, d)
        if not verdict.supported:
            return support.platform.names[d], verdict
    return None


def _all_rejections(support: Support, node: int, before: int) -> str:
    """``"npu: <reason>; dsp: <reason>"`` when more than one device rejects ``node``."""
    rejections = [(support.platform.names[d], support.verdict(node, d)) for d in range(before)
                  if not support.verdict(node, d).supported]
    if len(rejections) < 2:
        return ""
    return "; ".join(f"{name}: {verdict.reason}" for name, verdict in rejections)


def reason_from_dict(node: Mapping[str, Any]) -> Reason:
    why = node.get("why")
    if isinstance(why, Mapping):
        return Reason(str(why.get("code", ReasonCode.STRATEGY)), str(why.get("text", node["reason"])),
                      str(why.get("rule", "")), str(why.get("device", "")),
                      dict(why.get("numbers", {})))
    return Reason(ReasonCode.STRATEGY, node["reason"])
