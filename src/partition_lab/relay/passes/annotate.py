"""Support verdicts per (node, device): moved to :mod:`partition_lab.core.annotate` (TVM-free,
shared with the Relax adapter); re-exported here for existing imports."""

from ...core.annotate import support_table, support_verdicts

__all__ = ["support_table", "support_verdicts"]
