"""The ``partition-lab`` argument parser: every command, its options, help and examples."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any, NoReturn

from .. import __version__, strategies
from ..targets import available_targets
from ..targets.bundled import example_specs
from ..zoo import example_spec, mxnet_installed
from .commands import (
    run_cache,
    run_compare,
    run_partition,
    run_profile,
    run_targets,
    run_viz,
    run_zoo,
)
from .jobs import (
    DEFAULT_MODEL,
    DEFAULT_MODEL_STRATEGY,
    DEFAULT_MODEL_TARGET,
    DEFAULT_MODEL_WITHOUT_MXNET,
    DEFAULT_STRATEGY,
    DEFAULT_TARGET,
    EXIT_FALLBACK,
    MODEL_HELP,
    PROG,
    UsageError,
)

COMPARE_JSON_DOC = """\
--json prints one object, schema "partition_lab.compare/3" (keys always present):
  {"schema": "partition_lab.compare/3", "graph": str, "target": str, "cost_model": str,
   "ops": int, "devices": [str],            # the platform's devices, most preferred first
   "default_strategy": str,                 # partition's strategy for these prices
   "best": str | null,                      # the row whose plan is best: cost's, if compared
   "best_reason": str | null,               # why, where that is not the lowest total
   "rows": [{"strategy": str, "applicable": bool,
             "accel_regions": int, "ops_on_accel": int,   # regions / ops off the host
             "ops_by_device": {device: int},
             "tensors_crossing": int, "bytes_crossing": float,
             "compute_cpu_s": float, "compute_accel_s": float, "transfer_s": float,
             "compute_by_device_s": {device: float},
             "total_sigma_s": float | null,           # uncertainty of total_s, 1 sigma
             "gain_s": float,                         # greedy's total_s minus this one
             "gain_sigma_s": float | null,            # uncertainty of gain_s, 1 sigma
             "robust": {...} | null,                  # cost/optimal: kept or left greedy's
             "ops_measured": int | null,              # ops timed, not estimated
             "overhead_s": float, "total_s": float,   # predicted seconds
             "partition_s": float,                    # wall time of the strategy itself
             "notes": [str]}]}
"robust" holds left_greedy, gain_s, gain_sigma_s, threshold_s, greedy_total_s,
candidate_total_s, confidence_z and min_gain: the best other plan the strategy found and
whether its gain cleared the threshold; where left_greedy is false, the row's plan is greedy's.
gain_sigma_s counts only what differs from greedy's plan: it is the sigma cost and optimal
test, and the one their notes quote. Numbers are null exactly when "applicable" is false
(all_accel on a model with an unsupported op). Keys are stable: new keys may be added, none
renamed or removed. JSON Schema: partition_lab/schemas/compare.schema.json.
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
Present only where there are any (pattern units, README "Patterns"): "units": [{"pattern",
"form", "nodes": [int]}] at the top, "patterns": [str] in a device record that judges them whole.
With --choose: "choice": {"candidates": [{"plan", "predicted_s", "sigma_s", "measured_s":
[float], "confirm_s": [float] (the confirming rounds; only where timed again)}], "chosen",
"runner", "reason", "elapsed_s"}.
Where a constant overflows the dtype a device computes in (a BatchNorm variance past float16
on tensorcore): "numeric_hazards": [{"op", "name", "value", "dtype", "device", "kept_fp32",
"node": int | null, "remedy" (a Relax module: what to do instead)}] (--option
keep_fp32_on_overflow=true keeps those ops in float32).
Where the cost model states its uncertainty: "total_sigma_s" in "cost" (1 sigma of total_s,
the same compare shows for this plan).
Nodes are in id order (a topological order). Older plan/1 files (one accelerator + the host,
one verdict per node) still load. JSON Schemas of this file and of compare --json ship in the
package: partition_lab/schemas/plan.schema.json (partition_lab.schemas.load_schema).
"""



class _Parser(argparse.ArgumentParser):
    """argparse with errors raised, so that main() reports them as one line and exit code 2."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help')")



def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of every command (exposed for documentation and tests)."""

    parser = _Parser(prog=PROG, formatter_class=argparse.RawDescriptionHelpFormatter,
                     description="Split a network into accelerator subgraphs and CPU islands, "
                                 "explain every decision, and draw it.",
                     epilog=_examples("partition-lab viz",
                                      f"partition-lab viz {example_spec('resnet50_v1')} "
                                      "--target tensorcore -o resnet.svg",
                                      f"partition-lab compare {example_spec('fcn_resnet101_ade:small')}"))
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    _add_common(parser, None)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add in (_add_viz, _add_partition, _add_compare, _add_profile, _add_targets, _add_zoo,
                _add_cache):
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
    lines = [f"targets: {', '.join(available_targets())}, a TOML/JSON target or platform file, "
             f"or a bundled example ({', '.join(example_specs())})",
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
                     help=f"a target name (see 'partition-lab targets'), a target or platform "
                          f"file, or a bundled example file (example:NAME, e.g. "
                          f"example:npu_dsp_cpu); default {DEFAULT_TARGET}")
    if strategy:
        sub.add_argument("--strategy", "-s", metavar="S",
                         help=f"partition strategy; default cost where the prices are "
                              f"measured (--profile-cache, or a platform's shipped profile), "
                              f"else {DEFAULT_STRATEGY}")
    sub.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                     help="a strategy option (e.g. min_ops=3 for min_size), or else a target option "
                          "(e.g. precision=fp32 for tensorcore); repeatable")
    sub.add_argument("--input-shape", action="append", default=[], metavar="NAME=1,3,224,224",
                     help="the shape of a model input (model files, and tv:/hf: models, which are "
                          "exported again at it); repeatable")
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
    sub.add_argument("--no-shipped-profile", dest="shipped_profile", action="store_false",
                     help="price with the roofline's assumed figures where the platform ships "
                          "a profile (tensorcore: the project's H200 measurements), and default "
                          "to the greedy strategy there")
    sub.add_argument("--frontend", choices=("mxnet", "onnx"), default=None,
                     help="for zoo: models, which frontend converts them (default "
                          f"{'mxnet' if mxnet_installed() else 'onnx: MXNet is not installed'}; "
                          "tv: and hf: models are always onnx, having no MXNet form)")
    sub.add_argument("--no-onnx-check", dest="onnx_check", action="store_false",
                     help="convert an ONNX file that onnx.checker rejects (or whose opset is "
                          "missing or unknown) anyway, with a warning")
    sub.add_argument("--no-model-cache", dest="model_cache", action="store_false",
                     help="convert the model again instead of taking it from the converted-model "
                          "cache ($PARTITION_LAB_CACHE/converted; ONNX, .pt2 and Relay text)")


def _add_viz(commands: Any) -> None:
    sub = _subparser(
        commands, "viz", "draw the partition of a model (SVG, PNG, PDF, DOT, or an interactive "
        "HTML view)",
        ["partition-lab viz",
         "partition-lab viz model.onnx --target neuron -o model.png",
         "partition-lab viz model.onnx --target neuron -o model.html",
         f"partition-lab viz {example_spec('resnet50_v1_b32')} --target tensorcore "
         "--option precision=fp32",
         "partition-lab viz model.onnx --input-shape data=32,3,224,224 -t tensorcore",
         "partition-lab viz resnet50.pt2 --target neuron@2020 -o resnet50.svg",
         f"partition-lab viz {example_spec('simple_pose_resnet152_v1b')} --target neuron@2020 "
         "--strategy greedy --expand -o pose.svg"],
        run_viz,
        extra="Accelerator regions are coloured clusters, CPU ops grey and dashed with the reason "
              "they are not\non the accelerator; red edges are copies between devices, labelled "
              "with shape, bytes and\npredicted time. Graphs over 150 ops are collapsed to one "
              "node per region unless --expand.\n-o NAME.html writes the interactive view "
              "instead: one self-contained file with pan, zoom,\nsearch, regions that expand on "
              "click and each op's device, reason, shapes and time, for plans\nof any size.\n\n"
              "Prints the file written, the summary's first line (the model, target, strategy, "
              "regions and\nops per device) and the predicted total with its cost model.\n\n"
              + _choices_text())
    _add_model_options(sub, optional_model=True)
    shape = sub.add_mutually_exclusive_group()
    shape.add_argument("--collapse", dest="collapse", action="store_true", default=None,
                       help="one summary node per region (default above 150 ops)")
    shape.add_argument("--expand", dest="collapse", action="store_false",
                       help="one node per op")
    sub.add_argument("-o", "--output", metavar="PATH",
                     help="output file; the suffix picks the format (.svg .png .pdf .dot, or "
                          ".html: the interactive view, for plans of any size); default "
                          "<model>.<target>.<strategy>.svg")
    _add_gate_options(sub)


def _add_partition(commands: Any) -> None:
    sub = _subparser(
        commands, "partition", "partition a model; print the summary, write the plan",
        ["partition-lab partition model.onnx --target neuron -o plan.json",
         # The report's node names are the gluoncv build's; the torchvision build names its
         # ops by module path.
         f"partition-lab partition {example_spec('simple_pose_resnet152_v1b')} --target "
         "neuron@2020 --exclude-node "
         f"{'batchnormcudnnoff0_fwd' if mxnet_installed() else 'backbone.bn1'} -o pose.json"],
        run_partition,
        extra="With -o PLAN.json, writes the plan (every op's device, region and reason, and the "
              "predicted\ncost) and the partitioned Relay text beside it as PLAN.relay (for "
              "reading: weights\nare elided as meta[relay.Constant] references). --export "
              "FILE.relay writes the partitioned\nmodule with its weights for a BYOC codegen: "
              "partition_lab.load_model and tvm.relay.fromtext\nread it back, and relay.build "
              "hands each region to relay.ext.<Compiler> (see --compiler). With apache-tvm\n"
              "(Relax), PLAN.relax and --export FILE.relax are the module's TVMScript, the "
              "latter with its weights\n(tvm.script.from_source reads it back).\n\n"
              f"Exit status {EXIT_FALLBACK}: --fail-on-fallback or --max-host-ops found more ops "
              "on the host than allowed\n(outputs are written first); 2: an error.\n\n"
              + PLAN_JSON_DOC + "\n" + _choices_text())
    _add_model_options(sub)
    sub.add_argument("-o", "--output", metavar="PLAN.json", help="write the plan as JSON here "
                     "and the partitioned Relay text with suffix .relay (with apache-tvm, "
                     "Relax: the module's TVMScript, suffix .relax)")
    sub.add_argument("--export", metavar="FILE.relay", help="write the partitioned module with "
                     "its weights (Relay text with metadata) for a BYOC codegen; with "
                     "apache-tvm (Relax), FILE.relax: TVMScript with its metadata")
    sub.add_argument("--compiler", action="append", default=[], metavar="NAME|DEVICE=NAME",
                     help="the Compiler attribute of the accelerator functions (the codegen "
                          "relay.ext.NAME); default from the device name (neuron@2020 -> "
                          "neuron_2020); DEVICE=NAME per device on a platform with several")
    sub.add_argument("--choose", type=int, metavar="K",
                     help="decide by timing: greedy's plan and the K best other distinct plans "
                          "(by predicted time and by optimism) run in turns with the PyTorch "
                          "executor (built by TVM with apache-tvm); the two fastest by median "
                          "are timed again with new executors and the faster is taken where "
                          "it beat greedy in three of four of those rounds (recorded as the "
                          "plan JSON's \"choice\"); not with --strategy")
    sub.add_argument("--choose-device", default="cpu", metavar="DEV",
                     help="where --choose runs the accelerators' ops: cpu (a stand-in) or "
                          "cuda[:N]; default cpu")
    sub.add_argument("--choose-seconds", type=float, default=20.0, metavar="S",
                     help="about how long --choose times the plans, both stages together "
                          "(6 rounds each at least, but never past twice the time; setup and "
                          "builds on top; too few rounds keep greedy's plan); default 20")
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
        [f"partition-lab compare {example_spec('simple_pose_resnet152_v1b')} --target neuron@2020",
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
not measured again (--force does). A bundle (.json.gz; docs/guide/profiling.md) needs no
TVM: profile where the devices are. Runners: torch (the PyTorch executor's kernels; host-memory
devices on the CPU, the others on --device), tvm-llvm (TVM's llvm backend here), tvm-rpc (the
boards a TVM RPC tracker serves under --key: python -m tvm.exec.rpc_tracker, then
python -m tvm.exec.rpc_server --tracker HOST:PORT --key KEY on each board). With apache-tvm
(Relax) a model's ops are timed by the torch runner, each alone (the TVM runners build them as
Relay modules).
"""


def _add_profile(commands: Any) -> None:
    sub = _subparser(
        commands, "profile", "measure a model's op signatures, copies and overheads into the "
        "profile cache",
        ["partition-lab profile bundles/resnet50_v1.json.gz --device cuda:0 --cache h200.json",
         f"partition-lab profile {example_spec('resnet50_v1:small')} --platform tensorcore "
         "--runner tvm-llvm",
         "partition-lab profile model.onnx --platform neuron --runner tvm-rpc "
         "--tracker 10.0.0.2:9190 --key rasp4"],
        run_profile, extra=PROFILE_DOC + "\n")
    sub.add_argument("model", metavar="MODEL|BUNDLE",
                     help=f"{MODEL_HELP}, or a bundle file (.json.gz)")
    sub.add_argument("--platform", "-p", "--target", "-t", dest="platform", metavar="P",
                     help="the platform (a name, a file or example:NAME); for a bundle, default "
                          "and must be the bundle's own")
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
                     help="the shape of a model input (model files, and tv:/hf: models, which are "
                          "exported again at it); repeatable")
    sub.add_argument("--name", metavar="NAME", help="the model name recorded with each "
                     "signature (default: the graph's name)")
    sub.add_argument("--bind-as", metavar="NAME", help="store the platform's device bindings "
                     "under this name (default the platform's; e.g. one per board type)")
    sub.add_argument("--json", action="store_true", help="print what was done as JSON")


def _add_targets(commands: Any) -> None:
    sub = _subparser(commands, "targets", "list the built-in targets, or show one with its rules",
                     ["partition-lab targets", "partition-lab targets tensorcore",
                      "partition-lab targets example:npu_dsp_cpu"], run_targets)
    sub.add_argument("name", nargs="?", metavar="NAME",
                     help="a target or platform name, a target/platform file, or a bundled "
                          "example (example:NAME): its devices and every rule (default: one "
                          "line per built-in target and bundled example)")


def _add_zoo(commands: Any) -> None:
    _subparser(commands, "zoo", "list the bundled models (use them as tv:NAME, hf:NAME or, with "
               "MXNet, zoo:NAME)",
               ["partition-lab zoo",
                f"partition-lab viz {example_spec('fcn_resnet101_ade')} --target neuron",
                "partition-lab viz tv:simple_pose_resnet152:small --target neuron@2020"],
               run_zoo)


def _add_cache(commands: Any) -> None:
    from .._cache_store import KINDS, MAX_BYTES_ENV

    sub = _subparser(
        commands, "cache", "show the user cache (where, its bound, its size per kind) or clear it",
        ["partition-lab cache", "partition-lab cache clear",
         "partition-lab cache clear --kind converted"], run_cache,
        extra="Kinds: converted (converted models), prepared (prepared modules), zoo (built zoo "
              "models),\nprofile (the profile cache: measurements; never evicted, and 'clear' "
              "removes it only with\n--kind profile). $PARTITION_LAB_CACHE sets the folder, "
              f"${MAX_BYTES_ENV} its bound\n(2GB, 500MB; 0 or none: no bound).\n\n")
    sub.add_argument("action", nargs="?", choices=("info", "clear"), default="info",
                     help="info (default): where the cache is and what it holds; clear: remove "
                          "its entries")
    sub.add_argument("--kind", choices=list(KINDS), metavar="KIND",
                     help=f"only this kind ({', '.join(KINDS)}); default every kind")


# ---------------------------------------------------------------------------------- inputs
