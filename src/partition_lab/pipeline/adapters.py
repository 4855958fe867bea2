"""The IR adapters: what the pipeline needs from an IR, and which adapter takes which module.

The pipeline (:mod:`.run`) is written once; everything IR-specific sits behind
:class:`IRAdapter`, one implementation per IR (``partition_lab.relay.adapter``,
``partition_lab.relax.adapter``). An adapter never imports the pipeline: it takes and returns
TVM objects and the TVM-free core's types (``OpGraph`` inside its graph, ``PartitionPlan``,
``NumericHazard``), so the floors run one way (``tests/project/test_layers.py``).

Adding an IR is one folder with an adapter object plus one line in :data:`ADAPTERS` (or one
:func:`register_adapter` call, as ``tests/pipeline/test_adapters.py`` does with a made-up IR).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ..core.graph import OpGraph
from ..core.hazards import NumericHazard
from ..core.plan import PartitionPlan
from ..errors import ArgumentError


class IRGraph(Protocol):
    """An adapter's reading of a prepared module: the OpGraph plus whatever the adapter needs
    to outline a plan back into its IR (``RelayGraph``, ``RelaxGraph``)."""

    graph: OpGraph


@runtime_checkable
class IRAdapter(Protocol):
    """What the pipeline asks of an IR. Every method raises our own errors with one-line
    messages (:class:`~partition_lab.errors.PartitionLabError` and its kinds)."""

    #: Short name, as in :data:`ADAPTERS` ("relay", "relax").
    name: str

    def check(self, mod: Any) -> None:
        """:class:`ArgumentError` unless ``mod`` is a module this adapter can partition."""

    def module_name(self, mod: Any) -> str:
        """The model's name recorded on ``mod`` ("" if none)."""

    def bind_params(self, mod: Any, params: Mapping[str, Any] | None) -> Any:
        """``mod`` with ``params`` bound as constants (a name ``main`` lacks is an error)."""

    def prepare(self, mod: Any, params: Mapping[str, Any] | None, steps: Sequence[str],
                keep_fp32: bool, hazards: list[NumericHazard]) -> tuple[Any, Any]:
        """``(prepared module, context for read_graph)``: weights bound, the platform's
        preparation steps run (names from ``core.platform.PREPARE_STEPS``), constants folded;
        each op left using a constant that overflowed its new dtype appended to ``hazards``."""

    def read_graph(self, prepared: Any, context: Any, name: str) -> IRGraph:
        """The OpGraph of the prepared module, with the links back to its IR."""

    def outline(self, ir: Any, plan: PartitionPlan) -> tuple[Any, dict[str, Any]]:
        """``(partitioned module, {symbol: outlined function record})`` for a validated plan."""

    def choice_runner(self, ir: Any, device: str, seconds: float,
                      shares: tuple[float, float]) -> tuple[str, Callable[[], dict[str, Any]]]:
        """``(device key, make)`` for the measured choice on ``device``: ``make()`` returns the
        timing arguments of :func:`partition_lab.choice.choose` (``bindings``/``device``/
        ``max_seconds`` for the PyTorch executor, or ``timer``/``confirm_timer``) and its
        ``runner`` label; it is called only when no kept decision is reused."""


@dataclass(frozen=True)
class AdapterEntry:
    """One line of the registry: an adapter's name, where its object lives
    (``"package.module:attribute"``, imported only when a module of that IR comes), and a
    cheap test of whether a module is of that IR (it must not import the adapter)."""

    name: str
    location: str
    claims: Callable[[Any], bool]

    def load(self) -> IRAdapter:
        module, _, attribute = self.location.partition(":")
        adapter = getattr(importlib.import_module(module), attribute)
        if not isinstance(adapter, IRAdapter):
            raise TypeError(f"{self.location} is not an IRAdapter")
        return adapter


def main_function_module(mod: Any) -> str:
    """The Python module of ``mod["main"]``'s class ("tvm.relay.function", "tvm.relax.expr"),
    or "" when ``mod`` has no ``main``."""
    try:
        main = mod["main"]
    except (KeyError, TypeError, ValueError, AttributeError, RuntimeError, IndexError):
        return ""
    return type(main).__module__


def _relay_claims(mod: Any) -> bool:
    # The command line's converted-model cache hands over a Deferred entry, read when needed.
    kind = type(mod)
    if kind.__name__ == "Deferred" and kind.__module__.startswith("partition_lab.relay"):
        return True
    return main_function_module(mod).startswith("tvm.relay")


def _relax_claims(mod: Any) -> bool:
    return main_function_module(mod).startswith("tvm.relax")


#: The registry, first match wins.
ADAPTERS: list[AdapterEntry] = [
    AdapterEntry("relay", "partition_lab.relay.adapter:ADAPTER", _relay_claims),
    AdapterEntry("relax", "partition_lab.relax.adapter:ADAPTER", _relax_claims),
]

_loaded: dict[str, IRAdapter] = {}


def register_adapter(entry: AdapterEntry) -> None:
    """Add (or replace, by name) an adapter; checked before the built-in ones."""
    ADAPTERS[:] = [entry] + [e for e in ADAPTERS if e.name != entry.name]
    _loaded.pop(entry.name, None)


def unregister_adapter(name: str) -> None:
    """Remove the adapter ``name`` (tests that registered one clean up with this)."""
    ADAPTERS[:] = [e for e in ADAPTERS if e.name != name]
    _loaded.pop(name, None)


def adapter_for(mod: Any) -> IRAdapter:
    """The adapter of the first registry entry that claims ``mod``; an :class:`ArgumentError`
    naming what was passed when none does."""
    for entry in ADAPTERS:
        if entry.claims(mod):
            if entry.name not in _loaded:
                _loaded[entry.name] = entry.load()
            return _loaded[entry.name]
    raise ArgumentError(_unclaimed(mod))


def _unclaimed(mod: Any) -> str:
    names = ", ".join(e.name for e in ADAPTERS)
    if type(mod).__name__ != "IRModule":
        return (f"mod must be a tvm.IRModule (as load_model returns it), not "
                f"{type(mod).__name__}; load the model first: mod, params = "
                "partition_lab.load_model(path)")
    found = main_function_module(mod)
    if not found:
        return "mod has no 'main' function; partition_lab partitions main"
    return f"mod's main is a {found} function, which no IR adapter takes ({names})"
