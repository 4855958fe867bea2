"""Errors raised by partition_lab.

Every error a user can cause is a :class:`PartitionLabError` subclass whose message says what was
wrong and what to do about it. The command line prints the message as one line and exits with
status 2.
"""

from __future__ import annotations


class PartitionLabError(Exception):
    """Base class of every error partition_lab raises on bad input."""


class ModelNotFoundError(PartitionLabError, FileNotFoundError):
    """The model file (or a file it needs, such as MXNet ``.params``) does not exist."""


class ModelFormatError(PartitionLabError):
    """The file exists but is not a model this frontend can read (corrupt, truncated, wrong kind)."""


class UnsupportedOperatorError(PartitionLabError):
    """The frontend cannot convert an operator of the model to Relay."""


class InputShapeError(PartitionLabError):
    """An input shape is missing, dynamic or malformed."""


class SymbolicShapeError(InputShapeError):
    """A Relax module has a symbolic dimension (``batch_size``); the message names it and how to
    bind it (``tvm.relax.transform.BindSymbolicVars``, or a static shape when loading)."""


class UnknownTargetError(PartitionLabError):
    """No target of that name; the message lists the known ones."""


class TargetSpecError(PartitionLabError):
    """A user target file or TargetSpec is malformed."""


class UnknownStrategyError(PartitionLabError):
    """No strategy of that name; the message lists the known ones."""


class ExclusionError(PartitionLabError):
    """An exclusion (node name or op type) matches nothing in the model."""


class ProfileError(PartitionLabError):
    """A hardware profile is missing or malformed."""


class PlanError(PartitionLabError):
    """A partition plan failed validation (an internal invariant, reported with its evidence)."""


class UnknownModelError(PartitionLabError):
    """No zoo model of that name; the message lists the known ones."""
