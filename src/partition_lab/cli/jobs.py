"""What a model command resolved from its arguments, checked before any slow step: the
target's platform, the strategy and its options, shapes, the model (a file or a zoo name)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import strategies
from .._optional import relax_only, require_tvm
from ..core.platform import HOST, Platform
from ..cost_models import available_profiles, get_cost_model, load_profile
from ..errors import InputShapeError, ModelNotFoundError, ProfileError, TargetSpecError
from ..progress import Progress
from ..targets import get_platform
from .usage import UsageError, is_zoo_model, zoo_name  # noqa: F401 - is_zoo_model: used by commands

PROG = "partition-lab"
DEFAULT_MODEL = "zoo:simple_pose_resnet152_v1b"
"""What ``partition-lab viz`` draws without a model: the report's SimplePose, whose
Deconvolutions split it on neuron@2020 and whose BatchNorm+ReLU regions the cost strategy
moves back to the CPU."""
DEFAULT_MODEL_WITHOUT_MXNET = "tv:simple_pose_resnet152"
"""The default where MXNet does not import (Python 3.12+): the same architecture built with
torchvision (see :func:`default_model_name`)."""
DEFAULT_MODEL_TARGET = "neuron@2020"
DEFAULT_MODEL_STRATEGY = "cost"
DEFAULT_TARGET = "neuron"
DEFAULT_STRATEGY = "greedy"
EXIT_FALLBACK = 3
"""Exit status when --fail-on-fallback / --max-host-ops find more ops on the host than allowed
(the plan and drawing are still written): a CI gate, distinct from errors (2)."""


MODEL_HELP = ("an .onnx file, a PyTorch .pt2 file (torch.export.save), an MXNet -symbol.json "
              "(its .params beside it), or zoo:NAME / tv:NAME / hf:NAME "
              "(:small for the small variant; see 'partition-lab zoo'). A model file is data: "
              "loading runs no code from it, and a .pt2 with pickles or compiled code is "
              "refused")





def parse_input_shapes(specs: Sequence[str]) -> dict[str, tuple[int, ...]]:
    """``["data=1,3,224,224"]`` -> ``{"data": (1, 3, 224, 224)}``; InputShapeError if malformed."""
    shapes: dict[str, tuple[int, ...]] = {}
    for spec in specs:
        name, sep, dims = spec.partition("=")
        try:
            shape = tuple(int(d) for d in dims.replace("x", ",").split(","))
        except ValueError:
            shape = ()
        if not sep or not name or not shape or any(d <= 0 for d in shape):
            raise InputShapeError(f"bad --input-shape {spec!r}: expected NAME=D1,D2,... with "
                                  "positive integers, e.g. data=1,3,224,224")
        shapes[name] = shape
    return shapes


def tvm_family(name: object) -> None:
    """Register the ``tvm:<backend>`` targets (:mod:`partition_lab.relax.byoc`) where the Relax
    stack is installed and ``name`` may need them: a ``tvm:`` name, or a target or platform file
    (which may name one)."""
    text = str(name or "")
    if not (text.startswith("tvm:") or Path(text).suffix in (".toml", ".json")) or \
            not relax_only():
        return
    from ..relax import byoc  # noqa: F401 - registers the tvm: family


def parse_options(specs: Sequence[str]) -> dict[str, Any]:
    """``["min_size=3", "fp32=true"]`` -> ``{"min_size": 3, "fp32": True}``."""
    options: dict[str, Any] = {}
    for spec in specs:
        key, sep, text = spec.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"bad --option {spec!r}: expected KEY=VALUE, e.g. min_size=3")
        options[key.strip().replace("-", "_")] = _option_value(text.strip())
    return options


def parse_strategies(text: str | None) -> list[str] | None:
    """``"greedy, cost"`` -> ``["greedy", "cost"]``; None (the flag not given) stays None.

    An empty list or name is an error rather than "all strategies": ``--strategies ''`` or
    ``greedy,`` is a mistake (an unset shell variable, say), not a way to ask for every one.
    Raises UsageError for that and UnknownStrategyError for a name that is not registered.
    """
    if text is None:
        return None

    names = [name.strip() for name in text.split(",")]
    if not all(names):
        raise UsageError(f"bad --strategies {text!r}: expected comma-separated strategy names, "
                         f"e.g. greedy,cost; available: "
                         f"{', '.join(strategies.available_strategies())}")
    for name in names:
        strategies.get_strategy(name)  # fail before loading on an unknown name
    return list(dict.fromkeys(names))


def _option_value(text: str) -> Any:
    lowered = text.lower()
    if lowered in ("true", "yes", "on"):
        return True
    if lowered in ("false", "no", "off"):
        return False
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


@dataclass
class Job:
    """What a model command resolved from its arguments, checked before any slow step."""

    model: str
    target: str  # as the user wrote it (a name or a file), for messages and file names
    platform: Platform  # what it names, with the target options applied
    strategy: str
    strategy_options: dict[str, Any]
    input_shapes: dict[str, tuple[int, ...]]
    profile: str | None
    progress: Progress
    profile_cache: str | None = None
    onnx_check: bool = True
    model_cache: bool = True  # the converted-model cache (--no-model-cache: off)
    shipped_profile: bool = True  # a built-in platform's shipped profile (--no-shipped-profile)


def resolve_job(args: argparse.Namespace, *, default_model: bool = False) -> Job:
    """Check target, strategy, options and shapes up front, so bad input fails in milliseconds."""
    model = args.model
    # `pip install .` alone has no TVM (each stack is an extra): say which to add, in one line
    require_tvm(f"partition-lab {args.command}" if getattr(args, "command", None) else
                "partitioning a model")
    if relax_only():  # apache-tvm >= 0.20: what needs Relay is refused before anything loads
        from . import relax

        relax.check_job(args, model)
    target_name, strategy = args.target, getattr(args, "strategy", None)
    if model is None and default_model:
        model = default_model_name()
        target_name = target_name or DEFAULT_MODEL_TARGET
        strategy = strategy or DEFAULT_MODEL_STRATEGY
    target_name = target_name or DEFAULT_TARGET
    tvm_family(target_name)
    options = parse_options(args.option)
    shipped = getattr(args, "shipped_profile", True)
    if strategy is None:  # cost where the prices are measured, which the platform decides
        bare = get_platform(target_name)  # raises UnknownTargetError
        strategy = strategies.default_strategy(profiled=measured_prices(args, bare, shipped))
    strategy_fields = {field[0] for field in strategies.option_fields(strategy)}
    strategy_options = {k: v for k, v in options.items() if k in strategy_fields}
    target_options = {k: v for k, v in options.items() if k not in strategy_fields}
    platform = get_platform(target_name, **target_options)  # raises TargetSpecError
    strategies.get_strategy(strategy, **strategy_options)  # raises UnknownStrategyError
    if not args.profile:
        check_cost_profiles(platform)  # a target file without default_profile
    if args.profile:
        load_profile(args.profile)  # raises ProfileError listing the profiles
    cache = getattr(args, "profile_cache", None)
    if cache:
        from ..cost_models.profiled import read_profile_cache

        read_profile_cache(cache)  # raises ProfileError naming what is wrong with the file
    shapes = parse_input_shapes(args.input_shape)
    if is_zoo_model(model):
        from .. import zoo

        name, small = zoo_name(model)
        zoo.info(name)  # raises UnknownModelError listing the bundled models
        # Only PyTorch builds take other shapes (exported again); InputShapeError says why not.
        zoo.check_input_shapes(name, shapes, small=small)
    elif not Path(model).exists():
        check_not_a_zoo_typo(model)
    return Job(model, target_name, platform, strategy, strategy_options, shapes,
               args.profile, Progress(True if args.progress else None), cache,
               args.onnx_check, getattr(args, "model_cache", True), shipped)


def measured_prices(args: argparse.Namespace, platform: Platform, shipped: bool) -> bool:
    """Whether the job prices from measurements: a profile cache, or the platform's shipped
    profile (not with ``--profile NAME``, a hardware profile for the roofline, nor with
    ``--no-shipped-profile``)."""
    if getattr(args, "profile_cache", None):
        return True
    from ..cost_models import prices_from_shipped_profile

    return prices_from_shipped_profile(platform, args.profile or None, shipped=shipped)


def load(job: Job, frontend: str | None, debug: bool = False,
         deferred: bool = False) -> tuple[Any, Any]:
    """Load MODEL (a file, zoo:NAME[:small], tv:NAME[:small] or hf:NAME[:small]) as
    ``(IRModule, params)``; ``frontend`` None is the zoo model's own first frontend; the job's
    input shapes re-export a tv:/hf: model at those shapes.

    ``deferred`` (for ``partition``, which takes a prepared module from the cache without
    reading the converted one): a model the converted-model cache holds comes back as
    ``(Deferred, None)``, its module read only when needed."""
    with job.progress.step(f"loading {job.model}"):
        if relax_only():  # an .onnx file or a tv:/hf: model (resolve_job refused the rest)
            from . import relax

            return relax.load(job.model, job.input_shapes, debug)
        if is_zoo_model(job.model):
            from .. import zoo

            name, small = zoo_name(job.model)
            if deferred and job.model_cache and frontend in (None, "onnx") and \
                    zoo.default_frontend(name) == "onnx":
                return zoo.load_deferred(name, small=small,
                                         input_shapes=job.input_shapes or None)
            return zoo.load(name, frontend=frontend, small=small,  # type: ignore[arg-type]
                            input_shapes=job.input_shapes or None, cache=job.model_cache)
        if deferred and job.model_cache:
            from ..relay.frontends import load_deferred
            from ..relay.frontends._cache import Deferred

            found = load_deferred(job.model, job.input_shapes or None,
                                  check_onnx=job.onnx_check, debug=debug)
            return (found, None) if isinstance(found, Deferred) else found
        from .. import load_model

        return load_model(job.model, input_shapes=job.input_shapes or None,
                          check_onnx=job.onnx_check, debug=debug, cache=job.model_cache)


def model_label(model: str) -> str:
    """A short name for a model in titles and file names: the zoo name or the file's stem."""
    if is_zoo_model(model):
        name, small = zoo_name(model)
        return f"{name} (small)" if small else name
    stem = Path(model).name
    for suffix in (".onnx", ".pt2", "-symbol.json", ".json"):
        stem = stem.removesuffix(suffix)
    return stem


def model_file(model: str) -> str | None:
    """The model argument if it names a file, None for a zoo model."""
    return None if is_zoo_model(model) else model


def check_not_a_zoo_typo(model: str) -> None:
    """A ModelNotFoundError naming the zoo model that ``model``, not a file, is close to
    (``resnet50``, ``mx:resnet50``: did you mean ``tv:resnet50``?); otherwise nothing, and the
    loader says the file is missing."""
    from ..zoo._catalog import ENTRIES
    from ..zoo._typos import close_model_hint

    hint = close_model_hint(model, ENTRIES)
    if hint:
        raise ModelNotFoundError(f"model file {model!r} does not exist{hint}")


def default_model_name() -> str:
    """:data:`DEFAULT_MODEL`, or its torchvision build where MXNet or gluoncv does not import
    (they install on Python 3.11 only)."""
    from .._optional import MissingDependencyError, require_mxnet

    try:
        require_mxnet("the default model", gluoncv=True)
    except MissingDependencyError:
        return DEFAULT_MODEL_WITHOUT_MXNET
    return DEFAULT_MODEL


def run_partition_job(job: Job, args: argparse.Namespace) -> Any:
    """Load and partition; returns the PartitionResult."""
    from .. import partition
    from .._tvm_logs import quiet_tvm_logs

    choose = _choose_options(args)
    mod, params = load(job, args.frontend, getattr(args, "debug", False), deferred=True)
    how = f"timing the best {choose['choose']} plans and greedy's" if choose else job.strategy
    with job.progress.step(f"partitioning for {job.target} ({how})"), \
            quiet_tvm_logs(not getattr(args, "debug", False)):
        return partition(mod, job.platform, params=params,
                         strategy=None if choose else job.strategy,
                         name=model_label(job.model),
                         excl_node_names=tuple(args.exclude_node),
                         exclude_ops=tuple(args.exclude_op), cost_model=job.profile,
                         profile_cache=job.profile_cache, shipped_profile=job.shipped_profile,
                         strategy_options=job.strategy_options or None,
                         compiler=parse_compiler(getattr(args, "compiler", [])),
                         debug=getattr(args, "debug", False), **choose)


def _choose_options(args: argparse.Namespace) -> dict[str, Any]:
    """``partition``'s --choose options as :func:`partition_lab.partition` takes them."""
    k = getattr(args, "choose", None)
    if k is None:
        return {}
    if k < 1:
        raise UsageError(f"bad --choose {k}: expected 1 or more plans to try besides greedy's")
    if args.strategy is not None:
        raise UsageError("--choose picks among every strategy's plans by timing them: leave "
                         f"--strategy ({args.strategy}) out")
    device = args.choose_device
    if device != "cpu" and not (device == "cuda" or (device.startswith("cuda:")
                                                     and device[5:].isdigit())):
        raise UsageError(f"bad --choose-device {device!r}: expected cpu, cuda or cuda:N")
    if not args.choose_seconds > 0:
        raise UsageError(f"bad --choose-seconds {args.choose_seconds}: expected a positive "
                         "number")
    return {"choose": k, "choose_device": device, "choose_seconds": args.choose_seconds}


def parse_compiler(specs: Sequence[str]) -> str | dict[str, str] | None:
    """``--compiler`` values: one ``NAME``, or ``DEVICE=NAME`` per BYOC device; None if none."""
    if not specs:
        return None
    if len(specs) == 1 and "=" not in specs[0]:
        return specs[0]
    named: dict[str, str] = {}
    for spec in specs:
        device, sep, name = spec.partition("=")
        if not sep or not device or not name:
            raise UsageError(f"bad --compiler {spec!r}: with several, give DEVICE=NAME each")
        named[device] = name
    return named


def check_gate(args: argparse.Namespace) -> int | None:
    """The host-op limit of --fail-on-fallback / --max-host-ops, or None when not asked."""
    limits = [0] if args.fail_on_fallback else []
    if args.max_host_ops is not None:
        if args.max_host_ops < 0:
            raise UsageError(f"bad --max-host-ops {args.max_host_ops}: expected 0 or more")
        limits.append(args.max_host_ops)
    return min(limits) if limits else None


def gate_status(plan: Any, limit: int | None) -> int:
    """0, or EXIT_FALLBACK (with one line on stderr) when more than ``limit`` ops are on the
    host CPU."""

    if limit is None:
        return 0
    host = [plan.graph[d.node].name for d in plan.decisions if d.device == HOST]
    if len(host) <= limit:
        return 0
    shown = ", ".join(host[:5]) + (f" and {len(host) - 5} more" if len(host) > 5 else "")
    print(f"{PROG}: {len(host)} op(s) on the host CPU, more than the {limit} allowed: {shown}",
          file=sys.stderr)
    return EXIT_FALLBACK


def check_cost_profiles(platform: Platform) -> None:
    """:class:`TargetSpecError` if the cost model cannot price a device of ``platform`` without
    ``--profile``, said in the CLI's terms and before the model loads (a target file without
    ``default_profile`` otherwise fails after the whole load)."""
    try:
        get_cost_model(platform)
    except ProfileError as error:
        names = ", ".join(d.name for d in platform.accelerators if not d.profile)
        if not names:  # every device names a profile: one of them is wrong, say which and why
            raise TargetSpecError(f"target {platform.name!r}: {error}; fix default_profile in the "
                                  "target file (profile in a platform file), or pass --profile"
                                  ) from None
        raise TargetSpecError(
            f"target {platform.name!r} names no hardware profile for {names}; pass --profile "
            f"with one of {', '.join(available_profiles())}, or set default_profile in the "
            "target file") from None
