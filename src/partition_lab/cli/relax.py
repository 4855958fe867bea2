"""The command line where the installed TVM is apache-tvm >= 0.20 (Relax only, no Relay).

``viz``, ``partition`` and ``compare`` read an ``.onnx`` file with the Relax loader
(:func:`partition_lab.relax.load_model`), or a ``tv:``/``hf:`` zoo model through its ONNX export
(built by torch, cached as on the Relay stack), and hand the module to the same ``partition`` /
``analyze`` calls, which send a Relax module to :mod:`partition_lab.relax`: the plan JSON, the
summaries and the drawings are the ones the Relay stack writes. ``--export FILE.relax`` writes the
partitioned module as TVMScript with its weights (``tvm.script.from_source`` reads it back).
``profile`` of a model times its ops with the torch runner. What rests on Relay is refused here,
before the model loads, with one line naming why and the Relay stack: the gluoncv-built ``zoo:``
models (MXNet), MXNet, ``.pt2`` and Relay-text files, and the TVM runners of ``profile`` (each op
built by ``relay.build``). ``--choose`` times the candidate plans built by TVM
(:mod:`partition_lab.relax.timing`). The converted-model and prepared-module caches are Relay's:
the Relax path converts each time, so ``--no-model-cache`` changes nothing here.

Which IR the command line uses is :func:`partition_lab._optional.relax_only`'s decision.
"""

from __future__ import annotations

import argparse
import contextlib
import io
from importlib import metadata
from pathlib import Path
from typing import Any

from .._optional import RELAY_FIX, pip_install
from .usage import UsageError, is_zoo_model

#: Where the refused paths work, as the messages name it.
RELAY_STACK = f"the Relay stack (TVM 0.19: {RELAY_FIX})"

#: The suffix of the partitioned module's text beside PLAN.json (TVMScript, weights elided) and
#: of ``--export`` (TVMScript with its weights).
TEXT_SUFFIX = ".relax"


class RelayOnlyError(UsageError):
    """A command or option that needs Relay, asked for where only Relax is installed."""


def check_job(args: argparse.Namespace, model: str | None) -> None:
    """Refuse, in one line, what the Relax path cannot do for ``viz``/``partition``/``compare``
    (``model`` None: viz's default model, a tv: build here)."""
    what = _relay_only_part(model)
    if what is not None:
        raise RelayOnlyError(f"{what} needs {RELAY_STACK}; with {_installed_tvm()} (Relax) the "
                             f"command line reads {_READS}")
    if str(getattr(args, "target", None) or "").startswith("tvm:"):
        import partition_lab.relax.byoc  # noqa: F401 - registers the tvm:<backend> targets


#: What the Relax path reads, as the refusals name it.
_READS = ".onnx files and the tv:/hf: zoo models"


def _relay_only_part(model: str | None) -> str | None:
    """What in this command needs Relay, as the start of the message; None if nothing does."""
    if model is None:
        return None
    if is_zoo_model(model):
        from .. import zoo
        from .usage import zoo_name

        name, small = zoo_name(model)
        if zoo.info(name).built_with == "mxnet":  # raises UnknownModelError for a bad name
            twin = zoo.torchvision_twin(name, small=small)
            use = f"; here, use its torchvision build {twin}" if twin else ""
            raise RelayOnlyError(f"the zoo model {model} is built with MXNet, whose frontend is "
                                 f"Relay's: it needs {RELAY_STACK}{use}")
        return None
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


def check_profile(args: argparse.Namespace, bundle: bool) -> None:
    """``profile`` here: a model (an .onnx file or a tv:/hf: zoo model) or a bundle, timed by the
    torch runner; the TVM runners build each op as a Relay module (``relay.build``)."""
    if args.runner != "torch":
        raise RelayOnlyError(
            f"--runner {args.runner} builds each op as a Relay module (relay.build), which "
            f"{_installed_tvm()} (Relax) does not have: it needs {RELAY_STACK}; here profile "
            f"times ops with --runner torch ({pip_install('relax,torch')} adds PyTorch)")
    if not bundle:
        what = _relay_only_part(args.model)
        if what is not None:
            raise RelayOnlyError(f"{what} needs {RELAY_STACK}; with {_installed_tvm()} (Relax), "
                                 f"profile reads {_READS}, and bundles")


def check_export(path: Path) -> None:
    """``--export`` writes TVMScript here: the file's suffix must say so, and the installed
    apache-tvm-ffi must be able to write the weights (checked before the model loads)."""
    if path.suffix.lower() != TEXT_SUFFIX:
        raise UsageError(f"cannot export to {path}: with {_installed_tvm()} (Relax) --export "
                         f"writes the partitioned module as TVMScript; use the suffix "
                         f"{TEXT_SUFFIX}")
    try:
        ffi = metadata.version("apache-tvm-ffi")
    except metadata.PackageNotFoundError:
        ffi = ""
    if ffi.startswith(_FFI_WITHOUT_METADATA):
        raise RelayOnlyError(
            f"--export: apache-tvm-ffi {ffi} crashes writing a module's weights (TVMScript's "
            f"metadata) beside {_installed_tvm()}; {pip_install('relax')} pins one that writes "
            "them (apache-tvm-ffi 0.1.14.post1); -o PLAN.json writes the text without weights")


def load(model: str, input_shapes: dict[str, tuple[int, ...]],
         debug: bool = False) -> tuple[Any, dict]:
    """``(Relax IRModule, {})`` of an ``.onnx`` file, or of a tv:/hf: zoo model's ONNX export
    (built and cached on first use, at ``input_shapes`` where given), weights bound as
    constants."""
    from .._tvm_logs import quiet_tvm_logs
    from ..relax.frontends import load_model

    path, shapes, label = model, input_shapes or None, None
    if is_zoo_model(model):
        from .. import zoo
        from .usage import zoo_name

        name, small = zoo_name(model)
        path = str(zoo.onnx_path(name, small=small, input_shapes=input_shapes or None))
        # the file is exported at those shapes; its inputs are named as the zoo names them
        shapes, label = None, f"{name}:small" if small else name
    # TVM's ONNX importer prints a failing node's inputs to stdout, where they would mix with
    # the command's output (compare --json); the error raised says what failed. --debug shows it.
    printed = contextlib.nullcontext() if debug else contextlib.redirect_stdout(io.StringIO())
    with quiet_tvm_logs(not debug), printed:
        try:
            mod, params = load_model(path, shapes)
        except Exception as exc:
            if debug:
                raise
            # The failed import's frames hold its BlockBuilder, whose destructor logs a
            # warning: let them go here, where TVM's log lines are dropped, not after the error.
            raise exc.with_traceback(None) from None
    return (mod.with_attr("partition_lab.name", label) if label else mod), params


def module_text(mod: Any) -> str:
    """The partitioned Relax module as TVMScript, for reading: weights are elided as
    ``metadata[...]`` references, as the Relay stack's ``.relay`` text elides them."""
    return str(mod.script(show_meta=False))


#: apache-tvm-ffi releases whose JSON writer crashes the process (a segmentation fault in
#: ``ToJSONGraph``) beside apache-tvm 0.27, on any module: TVMScript's metadata section is
#: written by it. The [relax] extra pins 0.1.14.post1, which writes it.
_FFI_WITHOUT_METADATA = ("0.1.15",)


def exported_text(mod: Any, label: str) -> str:
    """The partitioned Relax module as TVMScript with its weights (the metadata section), which
    ``tvm.script.from_source`` reads back into the same module (:func:`check_export` first)."""
    header = (f"# The partitioned module of {label} as TVMScript, weights included (written by "
              "partition-lab --export).\n# Read it back with "
              "tvm.script.from_source(open(path).read()).\n")
    return header + str(mod.script(show_meta=True))


def _installed_tvm() -> str:
    """``apache-tvm 0.27.0.post1``, read from the package metadata (no TVM import)."""
    try:
        return f"apache-tvm {metadata.version('apache-tvm')}"
    except metadata.PackageNotFoundError:
        return "the installed TVM"
