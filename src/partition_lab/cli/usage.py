"""What both the Relay and the Relax job paths of the command line need (``jobs`` imports
``relax`` when apache-tvm is installed, so this lives below both)."""

from __future__ import annotations

from ..errors import PartitionLabError


class UsageError(PartitionLabError):
    """A command-line usage error (argparse's), reported like every other error."""


def is_zoo_model(model: str) -> bool:
    """Whether MODEL names a zoo model (``zoo:NAME``, ``tv:NAME``, ``hf:NAME``), not a file."""
    from ..zoo import is_spec

    return is_spec(model)


def zoo_name(model: str) -> tuple[str, bool]:
    """``(zoo name, small)``: ``zoo:NAME`` is ``NAME``, ``tv:NAME`` is ``tv:NAME`` (and
    ``hf:NAME`` is ``hf:NAME``)."""
    from ..zoo import SPEC_FORM, parse_spec

    parsed = parse_spec(model)
    if parsed is None:
        raise UsageError(f"bad model {model!r}: {SPEC_FORM}")
    return parsed
