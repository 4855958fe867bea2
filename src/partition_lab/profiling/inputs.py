"""What :func:`~.profile.profile` measures a model from: a bundle, a model file or zoo name, or a
module (Relay, or Relax without argument bindings), resolved into one :class:`ModelToProfile`; and the
progress bar it draws."""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.graph import OpGraph
from ..core.plan import PartitionPlan
from ..core.platform import Platform
from ..core.support import Support
from ..errors import ProfileError

#: ``progress(what, done, total)``: called as each op is timed and at each phase.
StepFn = Callable[[str, int, int], None]


@dataclass
class ModelToProfile:
    """What profiling needs of a model: graph, argument bindings, support, plans."""

    graph: OpGraph
    refs: Sequence[Sequence[Any]] | None
    support: Support
    platform: Platform
    plans: dict[str, PartitionPlan]
    run_strategy: Callable[[str], PartitionPlan] | None = None
    notes: list[str] = field(default_factory=list)  # what this model's profile leaves out


@contextlib.contextmanager
def progress_bar(enabled: bool) -> Iterator[StepFn | None]:
    """A :data:`StepFn` drawing one bar per phase on stderr (None when not ``enabled``)."""
    if not enabled:
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(bar_width=24),
                  MofNCompleteColumn(), TimeElapsedColumn(),
                  console=Console(stderr=True)) as bar:
        tasks: dict[str, Any] = {}

        def step(what: str, done: int, total: int) -> None:
            phase = what.split(" (", 1)[0]
            if phase not in tasks:
                tasks[phase] = bar.add_task(phase, total=total)
            bar.update(tasks[phase], completed=done, total=total, description=what)

        yield step


def is_bundle_path(value: Any) -> bool:
    """Whether ``value`` names a bundle file (``.json.gz``, or gzip content)."""
    from ..zoo import is_spec

    if not isinstance(value, (str, Path)) or is_spec(value):
        return False
    path = Path(value)
    if str(path).endswith(".json.gz"):
        return True
    try:
        with open(path, "rb") as handle:
            return handle.read(2) == b"\x1f\x8b"
    except OSError:
        return False


def resolve_model(model: Any, platform: Any, params: Mapping[str, Any] | None,
                   input_shapes: Mapping[str, tuple[int, ...]] | None,
                   **target_options: Any) -> ModelToProfile:
    from ..executors.graph_io import Bundle, read_bundle

    if is_bundle_path(model):
        model = read_bundle(model)
    if isinstance(model, Bundle):
        return _from_bundle(model, platform, target_options)
    if platform is None:
        raise ProfileError("profile needs a platform (a name such as 'tensorcore', or a file)")
    if isinstance(model, (str, Path)):
        model, params = _load(str(model), params, input_shapes)
    elif isinstance(model, tuple) and len(model) == 2:
        model, params = model
    return _from_relay(model, platform, params, target_options)


def _load(spec: str, params: Mapping[str, Any] | None,
          input_shapes: Mapping[str, tuple[int, ...]] | None) -> tuple[Any, Any]:
    from .. import zoo

    if zoo.is_spec(spec):
        parsed = zoo.parse_spec(spec)
        if parsed is None:
            raise ProfileError(f"bad model {spec!r}: {zoo.SPEC_FORM}")
        return zoo.load(parsed[0], small=parsed[1], input_shapes=input_shapes)
    from .._optional import relax_only  # apache-tvm >= 0.20: the Relax loader

    loader = "relax" if relax_only() else "relay"
    load_model = importlib.import_module(f"partition_lab.{loader}.frontends").load_model

    mod, loaded = load_model(spec, input_shapes)
    return mod, params if params is not None else loaded


def _from_bundle(bundle: Any, platform: Any, target_options: Mapping[str, Any]) -> ModelToProfile:
    if target_options:
        raise ProfileError(f"target options {sorted(target_options)} do not apply to a bundle: "
                           "its plans were made with the options it was exported with")
    if not bundle.plans:
        raise ProfileError("the bundle has no plans, so which device supports which op is "
                           "unknown; export it with at least one plan, or profile the model")
    own = bundle.platform or next(iter(bundle.plans.values())).platform
    wanted = platform.name if isinstance(platform, Platform) else platform
    if wanted is not None and str(wanted) != own.name:
        raise ProfileError(f"the bundle was exported for platform {own.name!r}, not "
                           f"{wanted!r}; its plans say which ops each of {own.name}'s devices "
                           "supports")
    support = next(iter(bundle.plans.values())).support
    return ModelToProfile(bundle.graph, bundle.bindings, support, own, dict(bundle.plans))


#: What a Relax module's profile leaves out: the whole-graph run and the units need the argument
#: bindings only the Relay reader keeps.
RELAX_NOTE = ("a Relax module: each op timed alone, its arguments told apart by their types; the "
              "whole-graph run and the patterns' units are not measured")


def _from_relay(mod: Any, platform: Any, params: Mapping[str, Any] | None,
                target_options: Mapping[str, Any]) -> ModelToProfile:
    """The model of a Relay module, or of a Relax one without argument bindings."""
    from ..api import analyze, is_relax_module
    from ..strategies import get_strategy

    analysis = analyze(mod, platform, params=params, **target_options)

    def run(strategy: str) -> PartitionPlan:
        return get_strategy(strategy).run(analysis.graph, analysis.support,
                                          cost_model=analysis.cost_model)

    if is_relax_module(mod):
        return ModelToProfile(analysis.graph, None, analysis.support, analysis.platform, {}, run,
                      [RELAX_NOTE])
    from ..executors.graph_io import bindings_from_relay

    return ModelToProfile(analysis.graph, bindings_from_relay(analysis.relay), analysis.support,
                  analysis.platform, {}, run)
