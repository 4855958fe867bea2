"""The ``partition-lab`` command line: viz, partition, compare, profile, targets, zoo.

Every command exits 0 on success and 2 on any error, which it reports as one line
``partition-lab: error: <message>`` on stderr (``--debug`` adds the traceback), and 130 on
Ctrl-C; ``viz`` and ``partition`` exit 3 when ``--fail-on-fallback`` / ``--max-host-ops`` find
more ops on the host than allowed. TVM's C++ log lines are dropped unless ``--debug``. Outputs
are checked before the model loads (writable, not one of the inputs) and written as one unit: a
failed or interrupted command leaves the old files as they were. Progress goes to stderr, only when stderr
is a terminal or with ``--progress``. ``main(argv)`` returns the exit status instead of exiting,
so tests and other programs can call it.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from . import __version__, _signals, strategies
from ._audience import command_line
from ._outputs import check_outputs, input_files, write_together
from .core.platform import HOST, Platform
from .cost_models import available_profiles, get_cost_model, load_profile
from .errors import InputShapeError, PartitionLabError, ProfileError, TargetSpecError
from .progress import Progress
from .targets import available_targets, get_platform

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
              "(its .params beside it), or zoo:NAME / tv:NAME "
              "(:small for the small variant; see 'partition-lab zoo')")

COMPARE_JSON_DOC = """\
--json prints one object, schema "partition_lab.compare/2" (keys always present):
  {"schema": "partition_lab.compare/2", "graph": str, "target": str, "cost_model": str,
   "ops": int, "devices": [str],            # the platform's devices, most preferred first
   "best": str | null,                      # lowest predicted total among applicable rows
   "rows": [{"strategy": str, "applicable": bool,
             "accel_regions": int, "ops_on_accel": int,   # regions / ops off the host
             "ops_by_device": {device: int},
             "tensors_crossing": int, "bytes_crossing": float,
             "compute_cpu_s": float, "compute_accel_s": float, "transfer_s": float,
             "compute_by_device_s": {device: float},
             "total_sigma_s": float | null,           # the model's uncertainty, 1 sigma
             "ops_measured": int | null,              # ops timed, not estimated
             "overhead_s": float, "total_s": float,   # predicted seconds
             "partition_s": float,                    # wall time of the strategy itself
             "notes": [str]}]}
Numbers are null exactly when "applicable" is false (all_accel on a model with an
unsupported op). Keys are stable: new keys may be added, none renamed or removed. JSON Schema:
partition_lab/schemas/compare.schema.json.
"""


PLAN_JSON_DOC = """\
PLAN.json, schema "partition_lab.plan/2" (keys always present; seconds and bytes as floats):
  {"schema", "graph", "target", "strategy",
   "devices": [{"name", "role", "memory", "compiler", "precision", "preference", "colour"}],
   "options": {...}, "notes": [str],
   "regions": [{"id", "label", "device", "nodes": [int], "ops"}],
   "nodes": [{"id", "name", "op", "source_name", "device", "region", "reason",
              "inputs", "outputs", "weights": [{"shape": [int], "dtype"}],
              "flops", "time_s": float | null,     # predicted seconds on its device
              "why": {"code", "text", "rule", "device", "numbers": {name: float}},
              "support": {device: {"supported", "reason", "rule", "anchor"}}}],
   "reason_groups": [{"device", "code", "rule", "decided_by", "text", "nodes": [int],
                      "details": [{"text", "nodes": [int]}]}],   # ops off the top device
   "cost": {"model", "total_s", "compute_cpu_s", "compute_accel_s", "compute_by_device_s",
            "transfer_s", "transfer_bytes", "overhead_s",
            "regions": [{"region", "label", "device", "ops", "compute", "overhead", "total"}],
            "cuts": [{"tensor", "producer", "consumers", "src", "dst", "shape", "dtype",
                      "nbytes", "time"}]} | null}
Nodes are in id order (a topological order). Older plan/1 files (one accelerator + the host,
one verdict per node) still load. JSON Schemas of this file and of compare --json ship in the
package: partition_lab/schemas/plan.schema.json (partition_lab.schemas.load_schema).
"""


class UsageError(PartitionLabError):
    """A command-line usage error (argparse's), reported like every other error."""


class _Parser(argparse.ArgumentParser):
    """argparse with errors raised, so that main() reports them as one line and exit code 2."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help')")


# ---------------------------------------------------------------------------------- entry point
def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    os.environ.setdefault("TOPHUB_LOCATION", "NONE")  # TVM would otherwise retry a download
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    previous = _signals.install()  # Ctrl-C stops the run even when started ignoring SIGINT
    try:
        args = build_parser().parse_args(argv)
        with command_line():  # hints name the CLI's flags, not Python arguments
            status = args.handler(args)
        _signals.check()  # an interrupt that a library caught and swallowed still counts
        return status
    except SystemExit as exc:  # --help and --version exit through argparse
        return exc.code if isinstance(exc.code, int) else 0
    except BrokenPipeError:  # output piped into head or less that exited early: not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # every error becomes one line; the traceback only with --debug
        if _signals.interrupted():  # a library turned the interrupt into an error of its own
            print(f"{PROG}: interrupted", file=sys.stderr)
            return 130
        if debug:
            traceback.print_exc()
        print(f"{PROG}: error: {one_line(exc)}", file=sys.stderr)
        return 2
    finally:
        _signals.restore(previous)


def one_line(exc: BaseException) -> str:
    """The message of an exception as a single line.

    Our own errors are already written for users. Anything else (a TVM or MXNet failure) is
    prefixed with its type and pointed at ``--debug``; a message that embeds a traceback is
    reduced to its last line, where TVM puts the actual error.
    """
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if lines and lines[0].startswith("Traceback"):
        lines = lines[-1:]
    text = " ".join(lines[:3]) if isinstance(exc, PartitionLabError) else (lines or [""])[0]
    if isinstance(exc, PartitionLabError):
        return text
    return f"{type(exc).__name__}: {text} (rerun with --debug for the traceback)"


# ---------------------------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of every command (exposed for documentation and tests)."""

    parser = _Parser(prog=PROG, formatter_class=argparse.RawDescriptionHelpFormatter,
                     description="Split a network into accelerator subgraphs and CPU islands, "
                                 "explain every decision, and draw it.",
                     epilog=_examples("partition-lab viz", "partition-lab viz zoo:resnet50_v1 "
                                      "--target tensorcore -o resnet.svg",
                                      "partition-lab compare zoo:fcn_resnet101_ade:small"))
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    _add_common(parser, None)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add in (_add_viz, _add_partition, _add_compare, _add_profile, _add_targets, _add_zoo):
        add(commands)
    return parser


def _add_common(parser: argparse.ArgumentParser, default: Any) -> None:
    """--progress and --debug, accepted before or after the command name.

    On subcommands their default is SUPPRESS, so an option given before the command is not
    reset by the subcommand's default.
    """
    kwargs: dict[str, Any] = {} if default is None else {"default": default}
    parser.add_argument("--progress", action="store_true", help="show progress on stderr even "
                        "when it is not a terminal", **kwargs)
    parser.add_argument("--debug", action="store_true", help="print the traceback of an error "
                        "and TVM's own log lines", **kwargs)


def _subparser(commands: Any, name: str, summary: str, examples: list[str],
               handler: Callable[[argparse.Namespace], int], extra: str = "") -> argparse.ArgumentParser:
    sub = commands.add_parser(name, help=summary, description=summary,
                              formatter_class=argparse.RawDescriptionHelpFormatter,
                              epilog=extra + _examples(*examples))
    _add_common(sub, argparse.SUPPRESS)
    sub.set_defaults(handler=handler)
    return sub


def _examples(*lines: str) -> str:
    return "examples:\n" + "".join(f"  {line}\n" for line in lines)


def _choices_text() -> str:
    """The targets, strategies and strategy options, read from their registries."""
    lines = [f"targets: {', '.join(available_targets())} (or a TOML/JSON target file)",
             "strategies (options as --option KEY=VALUE, defaults shown):"]
    for name in strategies.available_strategies():
        options = ", ".join(f"{field}={default}"
                            for field, _, default, _ in strategies.option_fields(name))
        lines.append(f"  {name}" + (f" ({options})" if options else ""))
    return "\n".join(lines) + "\n\n"


def _add_model_options(sub: argparse.ArgumentParser, *, optional_model: bool = False,
                       strategy: bool = True) -> None:
    if optional_model:
        sub.add_argument("model", nargs="?", metavar="MODEL",
                         help=f"{MODEL_HELP}; default {DEFAULT_MODEL} ({DEFAULT_MODEL_WITHOUT_MXNET}"
                              f" without MXNet) on {DEFAULT_MODEL_TARGET} "
                              f"with the {DEFAULT_MODEL_STRATEGY} strategy")
    else:
        sub.add_argument("model", metavar="MODEL", help=MODEL_HELP)
    sub.add_argument("--target", "-t", metavar="T",
                     help=f"a target name (see 'partition-lab targets') or a target file; "
                          f"default {DEFAULT_TARGET}")
    if strategy:
        sub.add_argument("--strategy", "-s", metavar="S",
                         help=f"partition strategy; default {DEFAULT_STRATEGY}, or cost "
                              "with --profile-cache")
    sub.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                     help="a strategy option (e.g. min_ops=3 for min_size), or else a target option "
                          "(e.g. precision=fp32 for tensorcore); repeatable")
    sub.add_argument("--input-shape", action="append", default=[], metavar="NAME=1,3,224,224",
                     help="the shape of a model input (model files only); repeatable")
    sub.add_argument("--exclude-node", action="append", default=[], metavar="NAME",
                     help="keep the node with this source name on the CPU (like neuron-cc's "
                          "excl_node_names); repeatable")
    sub.add_argument("--exclude-op", action="append", default=[], metavar="OP",
                     help="keep every op of this Relay type (e.g. nn.batch_norm) on the CPU; "
                          "repeatable")
    sub.add_argument("--profile", metavar="NAME",
                     help="accelerator hardware profile of the cost model (default: the "
                          "target's own)")
    sub.add_argument("--profile-cache", metavar="FILE",
                     help="plan from measurements: a profile cache written by 'partition-lab "
                          "profile' (measured ops; a fitted model with its uncertainty for the "
                          "rest; devices it does not bind use the roofline)")
    sub.add_argument("--frontend", choices=("mxnet", "onnx"), default=None,
                     help="for zoo: models, which frontend converts them (default mxnet; onnx "
                          "for tv: models, which have no MXNet form)")
    sub.add_argument("--no-onnx-check", dest="onnx_check", action="store_false",
                     help="convert an ONNX file that onnx.checker rejects (or whose opset is "
                          "missing or unknown) anyway, with a warning")


def _add_viz(commands: Any) -> None:
    sub = _subparser(
        commands, "viz", "draw the partition of a model (SVG, PNG, PDF or DOT)",
        ["partition-lab viz",
         "partition-lab viz model.onnx --target neuron -o model.png",
         "partition-lab viz zoo:resnet50_v1_b32 --target tensorcore --option precision=fp32",
         "partition-lab viz resnet50-symbol.json --input-shape data=32,3,224,224 -t tensorcore",
         "partition-lab viz resnet50.pt2 --target neuron@2020 -o resnet50.svg",
         "partition-lab viz zoo:simple_pose_resnet152_v1b --target neuron@2020 "
         "--strategy greedy --expand -o pose.svg"],
        run_viz,
        extra="Accelerator regions are coloured clusters, CPU ops grey and dashed with the reason "
              "they are not\non the accelerator; red edges are copies between devices, labelled "
              "with shape, bytes and\npredicted time. Graphs over 150 ops are collapsed to one "
              "node per region unless --expand.\n\n" + _choices_text())
    _add_model_options(sub, optional_model=True)
    shape = sub.add_mutually_exclusive_group()
    shape.add_argument("--collapse", dest="collapse", action="store_true", default=None,
                       help="one summary node per region (default above 150 ops)")
    shape.add_argument("--expand", dest="collapse", action="store_false",
                       help="one node per op")
    sub.add_argument("-o", "--output", metavar="PATH",
                     help="output file; the suffix picks the format (.svg .png .pdf .dot); "
                          "default <model>.<target>.<strategy>.svg")
    _add_gate_options(sub)


def _add_partition(commands: Any) -> None:
    sub = _subparser(
        commands, "partition", "partition a model; print the summary, write the plan",
        ["partition-lab partition model.onnx --target neuron -o plan.json",
         "partition-lab partition zoo:simple_pose_resnet152_v1b --target neuron@2020 "
         "--exclude-node batchnormcudnnoff0_fwd -o pose.json"],
        run_partition,
        extra="With -o PLAN.json, writes the plan (every op's device, region and reason, and the "
              "predicted\ncost) and the partitioned Relay text beside it as PLAN.relay (for "
              "reading: weights\nare elided as meta[relay.Constant] references). --export "
              "FILE.relay writes the partitioned\nmodule with its weights for a BYOC codegen: "
              "partition_lab.load_model and tvm.relay.fromtext\nread it back, and relay.build "
              "hands each region to relay.ext.<Compiler> (see --compiler).\n\n"
              f"Exit status {EXIT_FALLBACK}: --fail-on-fallback or --max-host-ops found more ops "
              "on the host than allowed\n(outputs are written first); 2: an error.\n\n"
              + PLAN_JSON_DOC + "\n" + _choices_text())
    _add_model_options(sub)
    sub.add_argument("-o", "--output", metavar="PLAN.json", help="write the plan as JSON here "
                     "and the partitioned Relay text with suffix .relay")
    sub.add_argument("--export", metavar="FILE.relay", help="write the partitioned module with "
                     "its weights (Relay text with metadata) for a BYOC codegen")
    sub.add_argument("--compiler", action="append", default=[], metavar="NAME|DEVICE=NAME",
                     help="the Compiler attribute of the accelerator functions (the codegen "
                          "relay.ext.NAME); default from the device name (neuron@2020 -> "
                          "neuron_2020); DEVICE=NAME per device on a platform with several")
    _add_gate_options(sub)


def _add_gate_options(sub: argparse.ArgumentParser) -> None:
    """--fail-on-fallback and --max-host-ops: a CI gate with its own exit status."""
    sub.add_argument("--fail-on-fallback", action="store_true",
                     help=f"exit with status {EXIT_FALLBACK} if any op is on the host CPU")
    sub.add_argument("--max-host-ops", type=int, metavar="N",
                     help=f"exit with status {EXIT_FALLBACK} if more than N ops are on the host CPU")


def _add_compare(commands: Any) -> None:
    sub = _subparser(
        commands, "compare", "compare partition strategies on one model",
        ["partition-lab compare zoo:simple_pose_resnet152_v1b --target neuron@2020",
         "partition-lab compare model.onnx --strategies greedy,cost,optimal --json"],
        run_compare, extra=COMPARE_JSON_DOC + "\n")
    _add_model_options(sub, strategy=False)
    sub.add_argument("--strategies", metavar="A,B", help="comma-separated strategies "
                     "(default: all)")
    sub.add_argument("--json", action="store_true", help="print JSON instead of the table")


PROFILE_DOC = """\
Measures every op signature the model's plans can use on each device of the platform (every op
on every device that supports it; --strategies narrows it to those strategies' plans), plus the
copies between memory spaces and the per-region and per-op overheads as the executor pays them,
and merges them into the profile cache (schema "partition_lab.profile_cache/1"; default
$PARTITION_LAB_CACHE/profile_cache.json). Signatures the cache already has for that device are
not measured again (--force does). A bundle (.json.gz from bench/gpu/export_bundles.py) needs no
TVM: profile where the devices are. Runners: torch (the PyTorch executor's kernels; host-memory
devices on the CPU, the others on --device), tvm-llvm (TVM's llvm backend here), tvm-rpc (the
boards a TVM RPC tracker serves under --key: python -m tvm.exec.rpc_tracker, then
python -m tvm.exec.rpc_server --tracker HOST:PORT --key KEY on each board).
"""


def _add_profile(commands: Any) -> None:
    sub = _subparser(
        commands, "profile", "measure a model's op signatures, copies and overheads into the "
        "profile cache",
        ["partition-lab profile bundles/resnet50_v1.json.gz --device cuda:0 --cache h200.json",
         "partition-lab profile zoo:bert_encoder --platform tensorcore --runner tvm-llvm",
         "partition-lab profile model.onnx --platform neuron --runner tvm-rpc "
         "--tracker 10.0.0.2:9190 --key rasp4"],
        run_profile, extra=PROFILE_DOC + "\n")
    sub.add_argument("model", metavar="MODEL|BUNDLE",
                     help=f"{MODEL_HELP}, or a bundle file (.json.gz)")
    sub.add_argument("--platform", "-p", "--target", "-t", dest="platform", metavar="P",
                     help="the platform (a name or a file); for a bundle, default and must be "
                          "the bundle's own")
    sub.add_argument("--device", metavar="DEV", help="torch device of the platform's non-host "
                     "devices, cpu or cuda[:N] (default: cuda:0 if torch sees a GPU)")
    sub.add_argument("--cache", metavar="FILE", help="the profile cache to merge into "
                     "(default $PARTITION_LAB_CACHE/profile_cache.json)")
    sub.add_argument("--runner", choices=("torch", "tvm-llvm", "tvm-rpc"), default="torch",
                     help="what times the ops (default torch)")
    sub.add_argument("--tracker", metavar="HOST:PORT", help="the TVM RPC tracker (tvm-rpc)")
    sub.add_argument("--key", metavar="K", help="the device key the boards registered under "
                     "(tvm-rpc)")
    sub.add_argument("--rpc-target", metavar="T", default="llvm", help="the boards' TVM target "
                     "(tvm-rpc; default llvm, e.g. 'llvm -mtriple=aarch64-linux-gnu')")
    sub.add_argument("--sessions", type=int, default=1, metavar="N",
                     help="boards of --key to time on at once (tvm-rpc; default 1)")
    sub.add_argument("--strategies", metavar="A,B", help="only the placements of these "
                     "strategies' plans (default: every supported placement)")
    sub.add_argument("--force", action="store_true", help="measure again what the cache has")
    sub.add_argument("--budget", type=float, metavar="SECONDS", help="stop timing ops after "
                     "this long (what was measured is kept)")
    sub.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                     help="a platform option (e.g. precision=fp32 for tensorcore); repeatable")
    sub.add_argument("--input-shape", action="append", default=[], metavar="NAME=1,3,224,224",
                     help="the shape of a model input (model files only); repeatable")
    sub.add_argument("--name", metavar="NAME", help="the model name recorded with each "
                     "signature (default: the graph's name)")
    sub.add_argument("--bind-as", metavar="NAME", help="store the platform's device bindings "
                     "under this name (default the platform's; e.g. one per board type)")
    sub.add_argument("--json", action="store_true", help="print what was done as JSON")


def _add_targets(commands: Any) -> None:
    _subparser(commands, "targets", "list the built-in targets and their rules",
               ["partition-lab targets"], run_targets)


def _add_zoo(commands: Any) -> None:
    _subparser(commands, "zoo", "list the bundled models (use them as zoo:NAME, or tv:NAME)",
               ["partition-lab zoo", "partition-lab viz zoo:fcn_resnet101_ade --target neuron",
                "partition-lab viz tv:simple_pose_resnet152:small --target neuron@2020"],
               run_zoo)


# ---------------------------------------------------------------------------------- inputs
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


def resolve_job(args: argparse.Namespace, *, default_model: bool = False) -> Job:
    """Check target, strategy, options and shapes up front, so bad input fails in milliseconds."""
    model = args.model
    target_name, strategy = args.target, getattr(args, "strategy", None)
    if model is None and default_model:
        model = default_model_name()
        target_name = target_name or DEFAULT_MODEL_TARGET
        strategy = strategy or DEFAULT_MODEL_STRATEGY
    if strategy is None:
        strategy = strategies.default_strategy(profiled=bool(getattr(args, "profile_cache", None)))
    target_name = target_name or DEFAULT_TARGET
    options = parse_options(args.option)
    strategy_fields = {field[0] for field in strategies.option_fields(strategy)}
    strategy_options = {k: v for k, v in options.items() if k in strategy_fields}
    target_options = {k: v for k, v in options.items() if k not in strategy_fields}
    strategies.get_strategy(strategy, **strategy_options)  # raises UnknownStrategyError
    platform = get_platform(target_name, **target_options)  # raises UnknownTargetError
    if not args.profile:
        check_cost_profiles(platform)  # a target file without default_profile
    if args.profile:
        load_profile(args.profile)  # raises ProfileError listing the profiles
    cache = getattr(args, "profile_cache", None)
    if cache:
        from .cost_models.profiled import read_profile_cache

        read_profile_cache(cache)  # raises ProfileError naming what is wrong with the file
    shapes = parse_input_shapes(args.input_shape)
    if is_zoo_model(model):
        from . import zoo

        zoo.info(_zoo_name(model)[0])  # raises UnknownModelError listing the bundled models
    if shapes and is_zoo_model(model):
        raise InputShapeError("--input-shape applies to model files; zoo models have fixed "
                              "shapes (see 'partition-lab zoo')")
    return Job(model, target_name, platform, strategy, strategy_options, shapes,
               args.profile, Progress(True if args.progress else None), cache,
               args.onnx_check)


def load(job: Job, frontend: str | None) -> tuple[Any, Any]:
    """Load MODEL (a file, zoo:NAME[:small] or tv:NAME[:small]) as ``(IRModule, params)``;
    ``frontend`` None is the zoo model's own first frontend."""
    with job.progress.step(f"loading {job.model}"):
        if is_zoo_model(job.model):
            from . import zoo

            name, small = _zoo_name(job.model)
            return zoo.load(name, frontend=frontend, small=small)  # type: ignore[arg-type]
        from . import load_model

        return load_model(job.model, input_shapes=job.input_shapes or None,
                          check_onnx=job.onnx_check)


def model_label(model: str) -> str:
    """A short name for a model in titles and file names: the zoo name or the file's stem."""
    if is_zoo_model(model):
        name, small = _zoo_name(model)
        return f"{name} (small)" if small else name
    stem = Path(model).name
    for suffix in (".onnx", ".pt2", "-symbol.json", ".json"):
        stem = stem.removesuffix(suffix)
    return stem


def model_file(model: str) -> str | None:
    """The model argument if it names a file, None for a zoo model."""
    return None if is_zoo_model(model) else model


def is_zoo_model(model: str) -> bool:
    """Whether MODEL names a zoo model (``zoo:NAME``, ``tv:NAME``) rather than a file."""
    from .zoo import is_spec

    return is_spec(model)


def default_model_name() -> str:
    """:data:`DEFAULT_MODEL`, or its torchvision build where MXNet or gluoncv does not import
    (they install on Python 3.11 only)."""
    from ._optional import MissingDependencyError, require_mxnet

    try:
        require_mxnet("the default model", gluoncv=True)
    except MissingDependencyError:
        return DEFAULT_MODEL_WITHOUT_MXNET
    return DEFAULT_MODEL


def _zoo_name(model: str) -> tuple[str, bool]:
    """``(zoo name, small)``: ``zoo:NAME`` is ``NAME``, ``tv:NAME`` is ``tv:NAME``."""
    from .zoo import SPEC_FORM, parse_spec

    parsed = parse_spec(model)
    if parsed is None:
        raise UsageError(f"bad model {model!r}: {SPEC_FORM}")
    return parsed


def run_partition_job(job: Job, args: argparse.Namespace) -> Any:
    """Load and partition; returns the PartitionResult."""
    from . import partition
    from ._tvm_logs import quiet_tvm_logs

    mod, params = load(job, args.frontend)
    with job.progress.step(f"partitioning for {job.target} ({job.strategy})"), \
            quiet_tvm_logs(not getattr(args, "debug", False)):
        return partition(mod, job.platform, params=params, strategy=job.strategy,
                         name=model_label(job.model),
                         excl_node_names=tuple(args.exclude_node),
                         exclude_ops=tuple(args.exclude_op), cost_model=job.profile, profile_cache=job.profile_cache,
                         strategy_options=job.strategy_options or None,
                         compiler=parse_compiler(getattr(args, "compiler", [])))


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


def _check_output(path: Path, suffixes: Sequence[str]) -> None:
    if path.suffix.lower() not in suffixes:
        raise UsageError(f"cannot write {path}: unknown suffix {path.suffix!r} "
                         f"(use one of {', '.join(suffixes)})")
    if not path.parent.is_dir():
        raise PartitionLabError(f"cannot write {path}: directory {path.parent} does not exist")


# ---------------------------------------------------------------------------------- commands
def run_viz(args: argparse.Namespace) -> int:
    """``partition-lab viz``: partition a model and draw it."""
    from . import render

    job = resolve_job(args, default_model=True)
    limit = check_gate(args)
    output = Path(args.output or _default_drawing_name(job))
    _check_output(output, sorted(render.FORMATS))
    check_outputs([output], input_files(model_file(job.model), job.target, job.profile_cache))
    result = run_partition_job(job, args)
    with job.progress.step(f"rendering {output}"):
        render.write(result.plan, output, result.cost, collapse=args.collapse)
    print(f"wrote {output}")
    print(result.plan.summary().splitlines()[0])
    if result.cost is not None:
        print(f"predicted total: {render.format_time(result.cost.total)} ({result.cost.model})")
    return gate_status(result.plan, limit)


def _default_drawing_name(job: Job) -> str:
    stem = model_label(job.model).replace(" (small)", "-small").replace(":", "_")
    target = Path(job.target).stem if job.target.endswith((".toml", ".json")) else job.target
    return f"{stem}.{target}.{job.strategy}.svg"


def run_partition(args: argparse.Namespace) -> int:
    """``partition-lab partition``: print the summary; with -o, write plan JSON and Relay text."""
    from .relay.export import SUFFIX, partitioned_text

    job = resolve_job(args)
    limit = check_gate(args)
    parse_compiler(args.compiler)  # a malformed --compiler fails before loading
    output = Path(args.output) if args.output else None
    if output is not None:
        _check_output(output, [".json"])
    export = Path(args.export) if args.export else None
    if export is not None:
        _check_output(export, [SUFFIX])
    planned = [output, output.with_suffix(".relay")] if output is not None else []
    check_outputs(planned + ([export] if export is not None else []),
                  input_files(model_file(job.model), job.target, job.profile_cache))
    result = run_partition_job(job, args)
    print(result.summary())
    # Every text is built before any file is written, and the files are written as one unit.
    files: dict[Path, bytes] = {}
    if output is not None:
        files[output] = result.to_json().encode("utf-8") + b"\n"
        files[output.with_suffix(".relay")] = \
            result.mod.astext(show_meta_data=False).encode("utf-8")
    if export is not None:
        files[export] = partitioned_text(result.mod).encode("utf-8")
    if files:
        write_together(files)
    if output is not None:
        print(f"wrote {output} and {output.with_suffix('.relay')}")
    if export is not None:
        print(f"wrote {export} (the partitioned module with its weights)")
    return gate_status(result.plan, limit)


def run_compare(args: argparse.Namespace) -> int:
    """``partition-lab compare``: the strategies table (or JSON) for one model and target.

    The model is prepared and its support verdicts computed once (``api.analyze``); each
    strategy then runs on that graph (``compare.compare_plans``).
    """
    from .api import analyze
    from .comparison import compare_plans

    args.strategy = None
    job = resolve_job(args)
    names = parse_strategies(args.strategies)
    mod, params = load(job, args.frontend)
    from ._tvm_logs import quiet_tvm_logs

    with job.progress.step(f"preparing for {job.target}"), \
            quiet_tvm_logs(not getattr(args, "debug", False)):
        analysis = analyze(mod, job.platform, params=params, name=model_label(job.model),
                           excl_node_names=tuple(args.exclude_node),
                           exclude_ops=tuple(args.exclude_op), cost_model=job.profile,
                           profile_cache=job.profile_cache)
    with job.progress.step(f"comparing {len(names) if names else 'all'} strategies"):
        comparison = compare_plans(analysis.graph, analysis.support, strategies=names,
                                   cost_model=analysis.cost_model)
    print(comparison.to_json() if args.json else comparison.to_table())
    return 0


def run_profile(args: argparse.Namespace) -> int:
    """``partition-lab profile``: measure into the profile cache; print what was done."""
    import json

    from ._tvm_logs import quiet_tvm_logs  # the bar draws through sys.stderr: it stays live
    from .profiling import ProfileCache, default_cache_path, profile
    from .profiling.profile import is_bundle_path, parse_tracker, progress_bar

    model = args.model
    bundle = is_bundle_path(model)
    if bundle and not Path(model).is_file():
        raise PartitionLabError(f"bundle {model} does not exist")
    if not bundle and not is_zoo_model(model) and not Path(model).exists():
        raise PartitionLabError(f"model {model} does not exist ({MODEL_HELP})")
    if is_zoo_model(model):
        from . import zoo

        zoo.info(_zoo_name(model)[0])  # raises UnknownModelError listing the bundled models
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
        from .profiling.tvm_runners import TvmRpcRunner

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


def check_cost_profiles(platform: Platform) -> None:
    """:class:`TargetSpecError` if the cost model cannot price a device of ``platform`` without
    ``--profile``, said in the CLI's terms and before the model loads (a target file without
    ``default_profile`` otherwise fails after the whole load)."""
    try:
        get_cost_model(platform)
    except ProfileError:
        names = ", ".join(d.name for d in platform.accelerators if not d.profile)
        raise TargetSpecError(
            f"target {platform.name!r} names no hardware profile for {names}; pass --profile "
            f"with one of {', '.join(available_profiles())}, or set default_profile in the "
            "target file") from None


def run_targets(args: argparse.Namespace) -> int:
    """``partition-lab targets``: every built-in platform, its devices, and their rules."""
    for i, name in enumerate(available_targets()):
        platform = get_platform(name)
        print(("\n" if i else "") + platform.describe())
        for device in platform.accelerators:
            print(device.target.describe())
    return 0


def run_zoo(args: argparse.Namespace) -> int:
    """``partition-lab zoo``: the bundled models, their inputs and the story each tells."""
    from . import zoo

    for name in zoo.names() + zoo.torchvision_names():
        entry = zoo.info(name)
        shapes = ", ".join(f"{k}={','.join(map(str, v))}" for k, v in entry.input_shapes.items())
        print(f"{name}\n  {entry.description}\n  inputs: {shapes}\n  needs: "
              f"{', '.join(entry.needs)} (to build; {', '.join(entry.frontends)} frontend)")
        if getattr(entry, "story", None):
            print(f"  story: {entry.story}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
