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


class UnsafeModelError(ModelFormatError):
    """The model file holds something loading it would run as code (a pickle in a ``.pt2``), or
    points outside its folder (an ONNX external-data file); it is refused, not loaded."""


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


class CostModelError(PartitionLabError):
    """A cost model priced an op, copy or region at a time that is not a finite, non-negative
    number of seconds (the last check before such a price reaches a plan or a total)."""


class PlanError(PartitionLabError):
    """A partition plan failed validation (an internal invariant, reported with its evidence)."""


class ArgumentError(PartitionLabError):
    """An argument of the Python API has the wrong type, or names what the model does not have
    (a ``params`` key that is no parameter of ``main``)."""


class UnknownModelError(PartitionLabError):
    """No zoo model of that name; the message lists the known ones."""


class OutputSpaceError(PartitionLabError, OSError):
    """An output could not be written for lack of space or quota (the old file is unchanged);
    the message names the output and its directory. Also an OSError, so code that treats a
    failed write as an OSError still does."""
