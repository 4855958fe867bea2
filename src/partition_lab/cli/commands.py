"""The ``partition-lab`` commands: one ``run_<command>(args)`` each, returning the exit status."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .._io import check_regular_file
from .._optional import relax_only, require_tvm
from .._outputs import check_outputs, input_files, write_together
from .._stages import stage
from ..errors import PartitionLabError
from ..progress import Progress
from ..targets import available_targets, get_platform
from ..targets.bundled import FOLDER as EXAMPLES_FOLDER
from ..targets.bundled import PREFIX as EXAMPLE_PREFIX
from ..targets.bundled import example_specs
from .jobs import (
    MODEL_HELP,
    PROG,
    Job,
    UsageError,
    check_gate,
    check_not_a_zoo_typo,
    gate_status,
    is_zoo_model,
    load,
    model_file,
    model_label,
    parse_compiler,
    parse_input_shapes,
    parse_options,
    parse_strategies,
    resolve_job,
    run_partition_job,
    tvm_family,
    zoo_name,
)


def _check_output(path: Path, suffixes: Sequence[str]) -> None:
    if path.suffix.lower() not in suffixes:
        raise UsageError(f"cannot write {path}: unknown suffix {path.suffix!r} "
                         f"(use one of {', '.join(suffixes)})")
    if not path.parent.is_dir():
        raise PartitionLabError(f"cannot write {path}: directory {path.parent} does not exist")


# ---------------------------------------------------------------------------------- commands
def run_viz(args: argparse.Namespace) -> int:
    """``partition-lab viz``: partition a model and draw it."""
    from .. import render

    job = resolve_job(args, default_model=True)
    limit = check_gate(args)
    output = Path(args.output or _default_drawing_name(job))
    _check_output(output, sorted(render.FORMATS))
    check_outputs([output], input_files(model_file(job.model), job.target, job.profile_cache))
    result = run_partition_job(job, args)
    with job.progress.step(f"rendering {output}"), stage("render"):
        render.write(result.plan, output, result.cost, collapse=args.collapse)
    print(f"wrote {output}")
    print(result.plan.summary().splitlines()[0])
    if result.cost is not None:
        print(f"predicted total: {render.format_time(result.cost.total)} ({result.cost.model})")
    return gate_status(result.plan, limit)


def _default_drawing_name(job: Job) -> str:
    stem = model_label(job.model).replace(" (small)", "-small").replace(":", "_")
    target = Path(job.target).stem if job.target.endswith((".toml", ".json")) else \
        job.target.removeprefix(EXAMPLE_PREFIX)  # no colon in the file name
    return f"{stem}.{target}.{job.strategy}.svg"


def run_partition(args: argparse.Namespace) -> int:
    """``partition-lab partition``: print the summary; with -o, write the plan JSON and the
    partitioned module's text beside it (Relay text, or TVMScript with apache-tvm)."""
    job = resolve_job(args)  # with apache-tvm, refuses --export (Relay text) among others
    limit = check_gate(args)
    parse_compiler(args.compiler)  # a malformed --compiler fails before loading
    text_suffix, module_text = _module_text()
    output = Path(args.output) if args.output else None
    if output is not None:
        _check_output(output, [".json"])
    export = Path(args.export) if args.export else None
    if export is not None:
        _check_export(export)
    planned = [output, output.with_suffix(text_suffix)] if output is not None else []
    check_outputs(planned + ([export] if export is not None else []),
                  input_files(model_file(job.model), job.target, job.profile_cache))
    result = run_partition_job(job, args)
    print(result.summary())
    # Every text is built before any file is written, and the files are written as one unit.
    files: dict[Path, bytes] = {}
    if output is not None:
        files[output] = result.to_json().encode("utf-8") + b"\n"
        files[output.with_suffix(text_suffix)] = module_text(result.mod).encode("utf-8")
    if export is not None:
        files[export] = _exported_text(result.mod, model_label(job.model)).encode("utf-8")
    if files:
        write_together(files)
    if output is not None:
        print(f"wrote {output} and {output.with_suffix(text_suffix)}")
    if export is not None:
        print(f"wrote {export} (the partitioned module with its weights)")
    return gate_status(result.plan, limit)


def _check_export(export: Path) -> None:
    """``--export``'s file: ``.relay`` (Relay text), or ``.relax`` (TVMScript) with apache-tvm."""
    if relax_only():
        from . import relax

        relax.check_export(export)
        _check_output(export, [relax.TEXT_SUFFIX])
        return
    from ..relay.export import SUFFIX

    _check_output(export, [SUFFIX])


def _exported_text(mod: Any, label: str) -> str:
    """The partitioned module with its weights: Relay text with its metadata section, or the
    Relax module's TVMScript with its metadata with apache-tvm."""
    if relax_only():
        from . import relax

        return relax.exported_text(mod, label)
    from ..relay.export import partitioned_text

    return partitioned_text(mod)


def _module_text() -> tuple[str, Callable[[Any], str]]:
    """The suffix and the printer of the partitioned module's text for reading (weights elided):
    Relay text (``.relay``), or the Relax module's TVMScript (``.relax``) with apache-tvm."""
    if relax_only():
        from . import relax

        return relax.TEXT_SUFFIX, relax.module_text
    from ..relay.export import relay_text

    return ".relay", relay_text


def run_compare(args: argparse.Namespace) -> int:
    """``partition-lab compare``: the strategies table (or JSON) for one model and target.

    The model is prepared and its support verdicts computed once (``api.analyze``); each
    strategy then runs on that graph (``compare.compare_plans``).
    """
    from ..comparison import compare_plans

    args.strategy = None
    job = resolve_job(args)  # first: without TVM it says which extra to install
    from ..api import analyze
    names = parse_strategies(args.strategies)
    mod, params = load(job, args.frontend, getattr(args, "debug", False))
    from .._tvm_logs import quiet_tvm_logs

    with job.progress.step(f"preparing for {job.target}"), \
            quiet_tvm_logs(not getattr(args, "debug", False)):
        analysis = analyze(mod, job.platform, params=params, name=model_label(job.model),
                           excl_node_names=tuple(args.exclude_node),
                           exclude_ops=tuple(args.exclude_op), cost_model=job.profile,
                           profile_cache=job.profile_cache, shipped_profile=job.shipped_profile,
                           debug=getattr(args, "debug", False))
    with job.progress.step(f"comparing {len(names) if names else 'all'} strategies"):
        comparison = compare_plans(analysis.graph, analysis.support, strategies=names,
                                   cost_model=analysis.cost_model)
    if args.json:
        print(comparison.to_json())
    elif sys.stdout.isatty():  # rich's box and colours; plain, stable text for pipes and files
        from rich.console import Console

        comparison.print_to(Console(highlight=False))
    else:
        print(comparison.to_table())
    return 0


def run_profile(args: argparse.Namespace) -> int:
    """``partition-lab profile``: measure into the profile cache; print what was done."""
    import json

    from .._tvm_logs import quiet_tvm_logs  # the bar draws through sys.stderr: it stays live
    from ..profiling import ProfileCache, default_cache_path, profile
    from ..profiling.profile import is_bundle_path, parse_tracker, progress_bar

    model = args.model
    bundle = is_bundle_path(model)
    check_regular_file(model, "bundle" if bundle else "model", PartitionLabError)
    if bundle and not Path(model).is_file():
        raise PartitionLabError(f"bundle {model} does not exist")
    if not bundle:  # a bundle needs no TVM
        require_tvm(f"profile of a model ({model})")
    if relax_only():  # the TVM runners build ops through Relay: the torch runner here
        from . import relax

        relax.check_profile(args, bundle)
    if not bundle and not is_zoo_model(model) and not Path(model).exists():
        check_not_a_zoo_typo(model)  # resnet50: did you mean tv:resnet50?
        raise PartitionLabError(f"model {model} does not exist ({MODEL_HELP})")
    if is_zoo_model(model):
        from .. import zoo

        zoo.info(zoo_name(model)[0])  # raises UnknownModelError listing the bundled models
    if not bundle and not args.platform:
        raise UsageError("--platform is required for a model (a bundle carries its own)")
    options = parse_options(args.option)
    model_only = [flag for flag, given in (("--option", options),
                                           ("--input-shape", args.input_shape)) if given]
    if bundle and model_only:
        verb = "applies" if len(model_only) == 1 else "apply"
        raise UsageError(f"{' and '.join(model_only)} {verb} to a model, not a bundle: its plans "
                         "were made with the shapes and options it was exported with")
    if args.platform and not bundle:
        get_platform(args.platform, **options)  # raises UnknownTargetError
    shapes = parse_input_shapes(args.input_shape)
    if args.runner == "tvm-rpc":
        host, port = parse_tracker(args.tracker)
        if not args.key:
            raise UsageError("--runner tvm-rpc needs --key (the boards' device key)")
        from ..profiling.tvm_runners import TvmRpcRunner

        TvmRpcRunner(host, port, args.key).check()  # the tracker and the key, before loading
    elif args.tracker or args.key:
        raise UsageError("--tracker and --key apply to --runner tvm-rpc")
    if args.device is not None and args.device != "cpu" and not args.device.startswith("cuda"):
        raise UsageError(f"bad --device {args.device!r}: expected cpu or cuda[:N]")
    cache = Path(args.cache) if args.cache else default_cache_path()
    check_outputs([cache], [model] if not is_zoo_model(model) else [])
    ProfileCache.load(cache, missing_ok=True)  # a corrupt cache fails before any measuring
    runner_options: dict[str, Any] = {}
    if args.runner == "tvm-rpc":
        runner_options = {"target": args.rpc_target, "sessions": args.sessions}
    strategies = parse_strategies(args.strategies)
    progress = Progress(True if args.progress else None)
    with quiet_tvm_logs(not getattr(args, "debug", False)), progress_bar(progress.enabled) as step:
        result = profile(model, args.platform, device=args.device, cache=cache,
                         strategies=strategies, runner=args.runner, name=args.name,
                         tracker=args.tracker, key=args.key, runner_options=runner_options,
                         force=args.force, budget_s=args.budget, input_shapes=shapes or None,
                         bind_as=args.bind_as, progress=step, **options)
    print(json.dumps(result.to_dict(), indent=1) if args.json else result.summary())
    return 0


def run_targets(args: argparse.Namespace) -> int:
    """``partition-lab targets [NAME]``: one line per built-in platform, or one platform (a name
    or a file) with its devices and every rule of each."""
    if args.name:
        tvm_family(args.name)
        platform = get_platform(args.name)  # raises UnknownTargetError listing the names
        print(platform.describe())
        for device in platform.accelerators:
            print(device.target.describe())
        return 0
    names, examples = available_targets(), example_specs()
    width = max(map(len, names + examples))
    for name in names:
        _target_line(name, width)
    print(f"\nbundled example files (in {EXAMPLES_FOLDER}; copy one to start your own):")
    for name in examples:
        _target_line(name, width)
    print(f"\n'{PROG} targets NAME' shows a target's devices and rules; a TOML/JSON target or "
          "platform file works wherever a name does")
    return 0


def _target_line(name: str, width: int) -> None:
    """One platform: its name, its devices and what each accelerator is."""
    platform = get_platform(name)
    # The first clause of each accelerator's description says what it is (neuron-cc's
    # release); the rest is its op list, which 'targets NAME' shows.
    what = "; ".join(d.target.description.split(":")[0].split(";")[0]
                    for d in platform.accelerators)
    print(f"{name:<{width}}  {', '.join(platform.names)}" + (f": {what}" if what else ""))


def run_zoo(args: argparse.Namespace) -> int:
    """``partition-lab zoo``: the bundled models, their inputs and the story each tells."""
    from .. import zoo
    from .._optional import relax_only, torch_fix, transformers_fix

    pytorch_built = zoo.torchvision_names() + zoo.transformers_names()
    mxnet = zoo.mxnet_installed()
    relax = relax_only()
    if relax:  # the gluoncv builds go through Relay's MXNet frontend; the rest through ONNX
        print("here: apache-tvm (Relax) is installed: the tv: and hf: models load through their "
              "ONNX export (building one needs torch), the gluoncv builds (zoo:) need MXNet and "
              "the Relay stack\n")
    # What works here first: without MXNet the gluoncv builds come last, each naming its twin.
    for name in zoo.names() + pytorch_built if mxnet and not relax else \
            pytorch_built + zoo.names():
        entry = zoo.info(name)
        shapes = ", ".join(f"{k}={','.join(map(str, v))}" for k, v in entry.input_shapes.items())
        print(f"{name}\n  {entry.description}\n  inputs: {shapes}\n  needs: "
              f"{', '.join(entry.needs)} (to build; {', '.join(entry.frontends)} frontend)")
        if getattr(entry, "story", None):
            print(f"  story: {entry.story}")
        if entry.built_with == "mxnet" and (relax or not mxnet):
            twin = zoo.torchvision_twin(name)
            why = "it needs MXNet and the Relay stack" if relax else "MXNet is not installed"
            print(f"  here: {why}" + (f"; use {twin}" if twin else ""))
        missing = zoo.missing_packages(name)
        if missing:  # found without importing them: transformers alone takes a second
            fix = transformers_fix() if "transformers" in missing else torch_fix()
            verb = "is" if len(missing) == 1 else "are"
            print(f"  here: building it needs {' and '.join(missing)}, which {verb} not "
                  f"installed: {fix}")
    return 0


def run_cache(args: argparse.Namespace) -> int:
    """``partition-lab cache [info|clear] [--kind K]``: where the user cache is, its bound and
    its size per kind; or remove its entries (all evictable kinds, or one kind)."""
    from .. import _cache_store as store

    names = [args.kind] if args.kind else list(store.KINDS)
    if args.action == "clear":
        _clear_cache(store, names, every=not args.kind)
    else:
        _show_cache(store, names)
    return 0


def _show_cache(store: Any, names: list[str]) -> None:
    from .._io import CACHE_ENV
    from .._units import format_bytes

    limit = store.max_bytes()
    bound = "none" if limit is None else format_bytes(limit)
    print(f"cache: {store.cache_home()} (${CACHE_ENV} sets it)")
    print(f"bound: {bound} (${store.MAX_BYTES_ENV}; 0 or none: no bound); past it the least "
          "recently used entries are removed after each write")
    rows = [(name, store.entries(name)) for name in names]
    print(f"{'kind':<10} {'entries':>7} {'size':>9}  where")
    for name, found in rows:
        root = store.KINDS[name].root()
        where = root / store.PROFILE_FILE if name == "profile" else root
        note = "" if store.KINDS[name].evictable else "  (never evicted)"
        print(f"{name:<10} {len(found):>7} {format_bytes(sum(e.size for e in found)):>9}  "
              f"{where}{note}")
    total = sum(e.size for _, found in rows for e in found)
    print(f"{'total':<10} {sum(len(found) for _, found in rows):>7} {format_bytes(total):>9}")


def _clear_cache(store: Any, names: list[str], every: bool) -> None:
    """Remove the entries of ``names``; without --kind, the measurements (profile) stay."""
    from .._units import counted, format_bytes

    if every:
        names = [name for name in names if store.KINDS[name].evictable]
    removed, kept = store.clear(names)
    for name in names:
        gone = [e for e in removed if e.kind == name]
        print(f"removed {counted(len(gone), f'{name} entry', f'{name} entries')} "
              f"({format_bytes(sum(e.size for e in gone))})")
    for entry in kept:
        print(f"kept {entry.path}: a running process holds it")
    if every and store.entries("profile"):
        print(f"kept the profile cache {store.profile_path()} (measurements: "
              f"'{PROG} cache clear --kind profile' removes it)")
