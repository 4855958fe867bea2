"""The op and attribute names a target file may use: those of the Relay ops the frontends emit.

A target that lists ``nn.conv2dd`` loads fine and then runs nothing on the accelerator, and
nothing says why. The frontends produce Relay ops, so TVM's op registry is the vocabulary:
an op name must be a registered Relay op and an ``attr_in`` attribute a field of its ops'
attributes; a miss is a :class:`~partition_lab.errors.TargetSpecError` with a did-you-mean.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

from .._text import did_you_mean
from ..errors import TargetSpecError

RESERVED_DEVICE_NAMES = ("cpu", "host", "llvm")
"""Names a target may not take: the host is ``cpu`` (TVM's ``llvm``), and a target of that
name would silently merge with it."""


@functools.cache
def relay_op_names() -> frozenset[str] | None:
    """Every Relay op TVM has registered (TIR intrinsics left out); None without TVM (a bundle
    profiled on a machine with only torch), where names cannot be checked."""
    try:
        import tvm
    except ImportError:
        return None
    names = frozenset(name for name in tvm.ir.Op.list_op_names() if not name.startswith("tir."))
    # apache-tvm >= 0.20 has no Relay ops (only relax.*): target files keep Relay's names
    # (partition_lab.relax maps onto them), which that TVM cannot check.
    return names if "nn.conv2d" in names else None


@functools.cache
def op_attribute_names(op: str) -> frozenset[str]:
    """The attribute fields of ``op`` (empty for an op without attributes)."""
    import tvm

    key = tvm.ir.Op.get(op).attrs_type_key
    if not key:
        return frozenset()
    try:
        return frozenset(tvm.ir.make_node(key).keys())
    except (tvm.TVMError, ValueError, AttributeError):  # attrs that cannot be default-built
        return frozenset()


def check_op_names(names: Iterable[str], where: str) -> None:
    """:class:`TargetSpecError` for the first name in ``names`` that is not a Relay op."""
    known = relay_op_names()
    if known is None:
        return
    for name in names:
        if name not in known:
            raise TargetSpecError(f"{where}: {name!r} is not a Relay op{did_you_mean(name, known)}; "
                                  "op names are Relay's, e.g. nn.conv2d, add, nn.relu")


def check_attribute_name(attr: str, ops: Iterable[str], where: str) -> None:
    """:class:`TargetSpecError` unless some op of ``ops`` (every Relay op if empty) has the
    attribute ``attr``."""
    known = relay_op_names()
    if known is None:
        return
    ops = sorted(ops) or sorted(known)
    fields = frozenset().union(*(op_attribute_names(op) for op in ops))
    if attr not in fields:
        owner = f"{', '.join(ops)}" if len(ops) <= 3 else f"{len(ops)} ops"
        listing = f"; it has {', '.join(sorted(fields))}" if fields and len(ops) <= 3 else ""
        raise TargetSpecError(f"{where}: {owner} has no attribute {attr!r}"
                              f"{did_you_mean(attr, fields)}{listing}")


def check_device_name(name: str, where: str) -> None:
    """:class:`TargetSpecError` if ``name`` is one the host already uses."""
    if name.strip().lower() in RESERVED_DEVICE_NAMES:
        raise TargetSpecError(f"{where}: {name!r} is the host's name and would merge the target "
                              f"with the CPU; choose another name (reserved: "
                              f"{', '.join(RESERVED_DEVICE_NAMES)})")

