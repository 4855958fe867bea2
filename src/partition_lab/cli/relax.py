"""The command line where the installed TVM is apache-tvm >= 0.20 (Relax only, no Relay).

``viz``, ``partition`` and ``compare`` read an ``.onnx`` file with the Relax loader
(:func:`partition_lab.relax.load_model`) and hand the module to the same ``partition`` /
``analyze`` calls, which send a Relax module to :mod:`partition_lab.relax`: the plan JSON, the
summaries and the drawings are the ones the Relay stack writes. What rests on Relay is refused
here, before the model loads, with one line naming the Relay stack: the zoo's models (built
through the Relay frontends), MXNet, ``.pt2`` and Relay-text files, ``--export`` (Relay text for
``relay.build``) and ``profile`` of a model (converted and built through Relay). ``--choose``
times the candidate plans built by TVM (:mod:`partition_lab.relax.timing`). The converted-model and prepared-module caches are
Relay's: the Relax path converts each time, so ``--no-model-cache`` changes nothing here.

Which IR the command line uses is :func:`partition_lab._optional.relax_only`'s decision.
"""

from __future__ import annotations

import argparse
import contextlib
import io
from importlib import metadata
from pathlib import Path
from typing import Any

from .usage import UsageError, is_zoo_model

#: Where the refused paths work, as the messages name it.
RELAY_STACK = "the Relay stack (TVM 0.19: pip install partition-lab, the default venv)"

#: The suffix of the partitioned module's text beside PLAN.json (TVMScript, weights elided).
TEXT_SUFFIX = ".relax"


class RelayOnlyError(UsageError):
    """A command or option that needs Relay, asked for where only Relax is installed."""


def check_job(args: argparse.Namespace, model: str | None) -> None:
    """Refuse, in one line, what the Relax path cannot do for ``viz``/``partition``/``compare``
    (``model`` None: viz's default model)."""
    what = _relay_only_part(args, model)
    if what is not None:
        raise RelayOnlyError(f"{what} needs {RELAY_STACK}; with {_installed_tvm()} (Relax) the "
                             "command line reads .onnx files (viz, partition, compare)")


def _relay_only_part(args: argparse.Namespace, model: str | None) -> str | None:
    """What in this command needs Relay, as the start of the message; None if nothing does."""
    if model is None:
        return "viz without MODEL (it draws a zoo model, built through the Relay frontends)"
    if is_zoo_model(model):
        return f"the zoo model {model} (built through the Relay frontends)"
    if getattr(args, "export", None):
        return "--export (Relay text with weights, for relay.build's BYOC)"
    if Path(model).suffix.lower() != ".onnx":
        return f"reading {Path(model).name} ({_format_name(model)})"
    return None


def _format_name(model: str) -> str:
    """What kind of model file ``model`` looks like, for the refusal."""
    name = model.lower()
    if name.endswith(".pt2"):
        return "a torch.export file"
    if name.endswith(".json"):
        return "an MXNet model"
    if name.endswith((".relay", ".txt")):
        return "Relay text"
    return "not an .onnx file"


def check_profile(bundle: bool, runner: str) -> None:
    """``profile`` of a model converts and builds it through Relay, and so do the TVM runners;
    a bundle timed by the torch runner needs no TVM."""
    what = ("profile of a model" if not bundle else
            f"--runner {runner} (it builds each op with relay.build)" if runner != "torch" else
            None)
    if what is not None:
        raise RelayOnlyError(f"{what} needs {RELAY_STACK}; with {_installed_tvm()} (Relax), "
                             "profile takes a bundle (.json.gz) with the torch runner")


def load(model: str, input_shapes: dict[str, tuple[int, ...]],
         debug: bool = False) -> tuple[Any, dict]:
    """``(Relax IRModule, {})`` of an ``.onnx`` file (weights bound as constants)."""
    from .._tvm_logs import quiet_tvm_logs
    from ..relax.frontends import load_model

    # TVM's ONNX importer prints a failing node's inputs to stdout, where they would mix with
    # the command's output (compare --json); the error raised says what failed. --debug shows it.
    printed = contextlib.nullcontext() if debug else contextlib.redirect_stdout(io.StringIO())
    with quiet_tvm_logs(not debug), printed:
        try:
            return load_model(model, input_shapes or None)
        except Exception as exc:
            if debug:
                raise
            # The failed import's frames hold its BlockBuilder, whose destructor logs a
            # warning: let them go here, where TVM's log lines are dropped, not after the error.
            raise exc.with_traceback(None) from None


def module_text(mod: Any) -> str:
    """The partitioned Relax module as TVMScript, for reading: weights are elided as
    ``metadata[...]`` references, as the Relay stack's ``.relay`` text elides them."""
    return str(mod.script(show_meta=False))


def _installed_tvm() -> str:
    """``apache-tvm 0.27.0.post1``, read from the package metadata (no TVM import)."""
    try:
        return f"apache-tvm {metadata.version('apache-tvm')}"
    except metadata.PackageNotFoundError:
        return "the installed TVM"
