"""Support verdicts per (node, device): moved to :mod:`partition_lab.targets.annotate` (TVM-free,
shared with the Relax adapter); re-exported here for existing imports."""

from ...targets.annotate import support_table, support_verdicts

__all__ = ["support_table", "support_verdicts"]
