"""Numeric hazards: a constant whose value does not fit the dtype a device computes in.

A target that computes in float16 (``tensorcore``: ToMixedPrecision) casts every weight to
float16, whose largest finite value is 65504. A BatchNorm moving variance of 9.8e7 becomes
``inf`` there, and the op's output is NaN or zero from then on, silently. Preparation finds
these casts as it folds them (:mod:`partition_lab.relay.passes.fold`) and names the op that
uses the value; the plan reports them in its summary and its JSON (``"numeric_hazards"``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class NumericHazard:
    """A constant operand of one op that overflowed the dtype it was converted to.

    ``op`` and ``name`` are the op that uses it (``nn.batch_norm``, its source name or ""),
    ``value`` the largest magnitude that did not fit, ``dtype`` what it was converted to,
    ``device`` the device whose precision asked for that dtype, ``kept_fp32`` whether the op
    was kept in float32 (``keep_fp32_on_overflow``), ``node`` its OpGraph node id if known,
    ``remedy`` what to do about it where the default advice (the target option
    ``keep_fp32_on_overflow``) does not apply (the Relax adapter has no float32 fallback).
    """

    op: str
    name: str
    value: float
    dtype: str
    device: str = ""
    kept_fp32: bool = False
    node: int | None = None
    remedy: str = ""

    def text(self) -> str:
        """One line: which op, which value, which device, and what was done."""
        who = f"{self.name} ({self.op})" if self.name else self.op
        where = f" on {self.device}" if self.device else ""
        advice = self.remedy or ("keep it in float32 with the target option "
                                 "keep_fp32_on_overflow=true")
        done = ("kept in float32 (keep_fp32_on_overflow)" if self.kept_fp32 else
                f"its result will be inf or NaN; {advice}")
        return (f"{who}: a constant of {self.value:.4g} overflows {self.dtype}{where} "
                f"(becomes inf); {done}")

    def to_dict(self) -> dict[str, Any]:
        """The record of the plan JSON's ``numeric_hazards`` list (``remedy`` only when set)."""
        data = asdict(self)
        if not self.remedy:
            del data["remedy"]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> NumericHazard:
        return cls(str(data["op"]), str(data.get("name", "")), float(data["value"]),
                   str(data["dtype"]), str(data.get("device", "")),
                   bool(data.get("kept_fp32", False)), data.get("node"),
                   str(data.get("remedy", "")))
