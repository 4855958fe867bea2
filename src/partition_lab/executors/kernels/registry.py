"""The kernel table itself: :class:`Kernel`, :data:`KERNELS`, the :func:`kernel` decorator that
fills it, and the checks that ask it whether nodes can run (:func:`check_kernels`).

Import these through :mod:`partition_lab.executors.kernels`: importing any part of that package
also imports the modules that register the kernels, so the table is always complete.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ...core.graph import OpNode
from ...errors import PartitionLabError

# Relay dtype name -> torch dtype; HALF_DTYPES are the half-precision ones.
TORCH_DTYPES = {
    "float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
    "float64": torch.float64, "int64": torch.int64, "int32": torch.int32, "int16": torch.int16,
    "int8": torch.int8, "uint8": torch.uint8, "bool": torch.bool,
}
HALF_DTYPES = ("float16", "bfloat16")


class UnsupportedKernelError(PartitionLabError):
    """Ops (or attribute values of them) that the PyTorch executor does not translate.

    ``missing`` maps each such op to ``{problem: [node names]}`` (empty when raised by a kernel
    at run time); executors raise it before running anything, listing every op at once.
    """

    def __init__(self, message: str, missing: Mapping[str, Mapping[str, list[str]]] | None = None
                 ) -> None:
        super().__init__(message)
        self.missing = {op: dict(problems) for op, problems in (missing or {}).items()}

    @classmethod
    def listing(cls, missing: Mapping[str, Mapping[str, list[str]]], what: str
                ) -> UnsupportedKernelError:
        no_kernel = sorted(op for op, problems in missing.items() if "no kernel" in problems)
        lines = [f"the PyTorch executor cannot run {len(missing)} op(s) of {what}; nothing was "
                 f"run. No PyTorch translation for: {', '.join(no_kernel) or 'none'}."]
        for op in sorted(missing):
            for problem, names in missing[op].items():
                lines.append(f"  {op}: {problem} ({_names(names)})")
        lines.append("Add a kernel with partition_lab.executors.kernels.kernel(...), or keep "
                     "these ops out of the graph.")
        return cls("\n".join(lines), missing)


@dataclass(frozen=True)
class Kernel:
    """One op's translation: ``run(node, args, prepared)`` returns a tensor or a tuple.

    ``args`` are the flattened call arguments in call order (activations and weights alike).
    ``prepare(node, args)``, if given, runs once when an executor is built, with the weights
    filled in and activations as None; what it returns is passed to every ``run`` (for example a
    kernel permuted to OIHW and held in channels-last memory, or batch norm folded to a scale
    and a shift), so the timed runs do no weight work. ``check(node)``, if given, returns why
    the kernel cannot run this node's attributes (None if it can): executors ask every node
    before they run anything (:func:`check_kernels`).
    """

    run: Callable[[OpNode, list[Any], Any], Any]
    prepare: Callable[[OpNode, list[Any]], Any] | None = None
    check: Callable[[OpNode], str | None] | None = None


KERNELS: dict[str, Kernel] = {}


def kernel(*ops: str, prepare: Callable[[OpNode, list[Any]], Any] | None = None,
           check: Callable[[OpNode], str | None] | None = None
           ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``run`` as the kernel of ``ops``."""
    def register(run: Callable[..., Any]) -> Callable[..., Any]:
        for op in ops:
            KERNELS[op] = Kernel(run, prepare, check)
        return run
    return register


def supported_ops() -> list[str]:
    """Relay op names the executor can run."""
    return sorted(KERNELS)


def node_problem(node: OpNode) -> str | None:
    """Why the executor cannot run ``node`` (no kernel for its op, or an attribute value its
    kernel does not translate), or None if it can."""
    kern = KERNELS.get(node.op)
    if kern is None:
        return "no kernel"
    return kern.check(node) if kern.check is not None else None


def unsupported_nodes(nodes: Sequence[OpNode]) -> dict[str, dict[str, list[str]]]:
    """``{op: {problem: [node names]}}`` for every node the executor cannot run."""
    found: dict[str, dict[str, list[str]]] = {}
    for node in nodes:
        problem = node_problem(node)
        if problem is not None:
            found.setdefault(node.op, {}).setdefault(problem, []).append(node.name)
    return found


def check_kernels(nodes: Sequence[OpNode], what: str = "the graph") -> None:
    """Raise :class:`UnsupportedKernelError` naming every op of ``nodes`` the executor cannot
    run, all at once (op, how many nodes, the first node names, and why), before anything runs.
    """
    found = unsupported_nodes(nodes)
    if found:
        raise UnsupportedKernelError.listing(found, what)


def _names(names: list[str], shown: int = 3) -> str:
    more = f", ... ({len(names)} nodes)" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


__all__ = [
    "HALF_DTYPES", "KERNELS", "Kernel", "TORCH_DTYPES", "UnsupportedKernelError",
    "check_kernels", "kernel", "node_problem", "supported_ops", "unsupported_nodes",
]
