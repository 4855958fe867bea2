"""User targets from a TOML or JSON file, with no change to the package.

Format (TOML shown; JSON takes the same keys)::

    name = "npu"                          # required: the target (and device) name
    description = "conv NPU, fp16/int8"   # optional texts shown by `partition-lab targets`
    version = "2024.1"
    provenance = "vendor datasheet rev. 3"
    sources = ["https://example.com/npu.pdf"]
    base = "cpu"                          # optional built-in (or registered) target to extend
    supported = ["nn.conv2d", "nn.relu"]  # ops added (or a table op -> reason)
    unsupported = { "image.resize2d" = "no resize unit" }  # ops removed (list or table)
    anchors = ["nn.conv2d"]               # ops a region must contain (replaces the base's)
    prepare_steps = ["convert_layout:NHWC", "mixed_precision:float16"]   # optional
    patterns = ["layer_norm", "gelu"]     # built-in patterns judged as one unit each
                                          # (partition_lab.core.pattern_library.PATTERN_NAMES)
    default_profile = "t4"                # cost-model profile; without it (and a base that
                                          # has one) the CLI needs --profile NAME

    [[rules]]                             # checked in order after the op table
    name = "channels-32"
    kind = "multiple_of"                  # multiple_of | dtype_in | attr_in | max_size | any_of
    ops = ["nn.conv2d"]                   # omit for every op
    dims = ["cin", "cout"]                # named dims or argI[J] / outI[J]
    multiples = [[32, 32]]                # alternatives; one dim: [16, 32] means 16 or 32
    reason = "the MAC array is 32 wide"   # appended to rejections

    [[custom_patterns]]                   # your own composite op, judged as one unit
    name = "mish"                         # the Composite name a codegen sees
    stands_for = ["tanh"]                 # optional: ops whose support decides the unit's
    steps = [                             # in order; the last step is the unit's output
      { op = "exp", args = ["x"] },       # args: earlier steps (0, 1, ...) or named outside
      { op = "add", args = [0] },         # values ("x": one tensor wherever it appears);
      { op = "log", args = [1] },         # constants (the 1 added here) are not args
      { op = "tanh", args = [2] },
      { op = "multiply", args = ["x", 3] },
    ]                                     # a step may constrain attributes:
                                          # { op = "mean", args = ["x"], attrs = { axis = [-1] } }

Rule kinds and their keys: ``multiple_of`` (dims, multiples, dtypes: only for these data
dtypes, reason); ``dtype_in`` (dtypes: allowed, exclude: denied, tensor: data | args | inputs |
outputs | activations, message, reason); ``attr_in`` (attr, values, message, reason);
``max_size`` (dims, max, reason); ``any_of`` (rules: a list of rule tables, the first that
accepts wins). A step's ``op`` may list alternatives (``op = ["divide", "multiply"]``). Dimension names: batch, cin, cout, height, width, kernel_h, kernel_w (conv2d and
conv2d_transpose, read through their layout attrs); batch/m, k/in_features, n/units (dense and
batch_matmul). ``message`` templates may use {op}, {value}, {expected} and {tensor} or {attr}.

Checked when the file is loaded, so that a mistake never passes silently: op names (in
``supported``, ``unsupported``, ``anchors``, each rule's ``ops`` and each custom pattern's
``op`` and ``stands_for``) must be Relay ops and an ``attr_in`` attribute (or a step's
``attrs`` key) a field of its ops' attributes (both with a did-you-mean); a custom pattern's
steps must each feed a later one; ``name`` may
not be the host's (``cpu``, ``host``, ``llvm``); a ``message`` may use only its rule's fields,
with at most an alignment and a width up to 80 (``{op:<20}``), see
:mod:`partition_lab.targets.templates`.

A file with a ``base`` accepts the base's options: ``get_target("npu.toml", precision="fp32")``
with ``base = "tensorcore"``. Every problem raises TargetSpecError naming the file and the key.
"""

from __future__ import annotations

import functools
import json
import os
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .._io import check_regular_file
from ..core.patterns import Pattern, Step
from ..errors import PartitionLabError, TargetSpecError
from .base import TargetSpec
from .bundled import missing_file_hint
from .op_names import check_attribute_name, check_device_name, check_op_names
from .rules import rule_from_dict
from .schema import Fields
from .templates import MessageTemplate

TARGET_FILE_SUFFIXES = (".toml", ".json")
TOP_LEVEL_KEYS = ("name", "description", "version", "provenance", "sources", "base", "supported",
                  "unsupported", "anchors", "prepare_steps", "default_profile", "rules",
                  "patterns", "custom_patterns")
PATTERN_KEYS = ("name", "description", "stands_for", "steps")
STEP_KEYS = ("op", "args", "attrs")


def looks_like_target_file(target: str | os.PathLike[str]) -> bool:
    """Whether ``target`` names a file rather than a registered target."""
    text = os.fspath(target)
    return text.endswith(TARGET_FILE_SUFFIXES) or os.sep in text or isinstance(target, os.PathLike)


def read_target_file(path: str | os.PathLike[str], resolve_base: Callable[..., TargetSpec],
                     **options: Any) -> TargetSpec:
    """Read a user target file (format in the module docstring).

    Parameters
    ----------
    path
        A ``.toml`` or ``.json`` file.
    resolve_base
        ``resolve_base(name, **options)``: the built-in or registered target a ``base`` key
        names (:func:`partition_lab.targets.get_target`).
    options
        Options for the ``base`` target (a file without a base takes none).

    Returns
    -------
    TargetSpec
        The target; ``with_options`` re-reads the file with other base options.

    Raises
    ------
    TargetSpecError
        The file is missing, unreadable, not TOML/JSON, or has an unknown key, a wrong type, an
        unknown rule kind or dimension, or an unknown base target.
    """
    path = Path(path)
    where = str(path)
    f = Fields(_parse(path), where, TOP_LEVEL_KEYS)
    _check_names(f)
    base = _base(f, options, resolve_base)
    rules = [rule_from_dict(item, f"{where}: rules[{i}]")
             for i, item in enumerate(f.table_list("rules"))]
    supported, unsupported = f.op_reasons("supported"), f.op_reasons("unsupported")
    if base is None and not supported:
        raise TargetSpecError(f"{where}: supported is empty and there is no base, so the "
                              "target would run no op; list ops in supported or set base")
    fields = {
        "description": f.string("description", None), "version": f.string("version", None),
        "provenance": f.string("provenance", None), "supported": supported,
        "unsupported": unsupported, "anchors": f.strings("anchors", None), "rules": rules,
        "prepare_steps": f.strings("prepare_steps", None),
        "patterns": f.strings("patterns", None),
        "custom_patterns": _custom_patterns(f),
        "default_profile": f.string("default_profile", None),
        "sources": f.strings("sources", ()),
    }
    try:
        spec = (base or _EMPTY).extend(f.string("name"), **fields)
    except TargetSpecError as error:
        raise TargetSpecError(f"{where}: {error}") from None
    spec.factory = functools.partial(read_target_file, path, resolve_base)
    return spec


_EMPTY = TargetSpec("empty")


def _custom_patterns(f: Fields) -> list[Pattern]:
    """The file's ``[[custom_patterns]]``, each checked (format in the module docstring)."""
    patterns: list[Pattern] = []
    for i, table in enumerate(f.table_list("custom_patterns")):
        p = Fields(table, f"{f.where}: custom_patterns[{i}]", PATTERN_KEYS)
        name = p.string("name")
        if not name.isidentifier():
            raise TargetSpecError(f"{p.place('name')}: {name!r} is not a name a codegen can "
                                  "use (letters, digits and _, not starting with a digit)")
        if any(known.name == name for known in patterns):
            raise TargetSpecError(f"{p.place('name')}: a second custom pattern named {name!r}")
        stands_for = p.strings("stands_for", ())
        check_op_names(stands_for, p.place("stands_for"))
        steps = [_step(item, f"{p.place('steps')}[{j}]")
                 for j, item in enumerate(p.table_list("steps"))]
        try:
            patterns.append(Pattern(name, tuple(steps), tuple(stands_for), "custom",
                                    p.string("description", "")))
        except ValueError as error:  # a step refers forward, or feeds nothing
            raise TargetSpecError(f"{p.place('steps')}: {str(error).split(': ', 1)[-1]}") from None
    return patterns


def _step(table: Any, where: str) -> Step:
    s = Fields(table, where, STEP_KEYS)
    ops = s.strings("op")
    if not ops:
        raise TargetSpecError(f"{s.place('op')}: expected an op name or a list of them")
    check_op_names(ops, s.place("op"))
    args = s.table_list("args")
    for arg in args:
        if isinstance(arg, bool) or not isinstance(arg, int | str) or arg == "":
            raise TargetSpecError(f"{s.place('args')}: expected earlier step numbers or names of "
                                  f"outside values, got {arg!r}")
    attrs = s.data.get("attrs", {})
    if not isinstance(attrs, dict):
        raise TargetSpecError(f"{s.place('attrs')}: expected a table attribute -> value")
    for attr in attrs:
        check_attribute_name(attr, ops, f"{s.place('attrs')}.{attr}")
    return Step.of(ops, *args, **attrs)

#: The fields each rule kind's ``message`` may use.
MESSAGE_FIELDS = {"dtype_in": ("op", "tensor", "value", "expected"),
                  "attr_in": ("op", "attr", "value", "expected")}


def _check_names(f: Fields) -> None:
    """Reject a reserved target name, op and attribute names that are not Relay's, and unsafe
    message templates, before anything is built (so that nothing fails later, silently)."""
    name = f.string("name")
    check_device_name(name, f.place("name"))
    for key in ("supported", "unsupported"):
        check_op_names(f.op_reasons(key), f.place(key))
    check_op_names(f.strings("anchors", ()), f.place("anchors"))
    _check_rules(f.table_list("rules"), f"{f.where}: rules", ())


def _check_rules(tables: list[Any], where: str, inherited_ops: tuple[str, ...]) -> None:
    """Check each rule table's names and make its message a :class:`MessageTemplate`.

    Tables that are not tables, or miss a key, are left to ``rule_from_dict`` to report.
    """
    for i, table in enumerate(tables):
        place = f"{where}[{i}]"
        if not isinstance(table, dict):
            continue
        ops = table.get("ops", inherited_ops)
        ops = (ops,) if isinstance(ops, str) else tuple(ops) if isinstance(ops, list) else ()
        check_op_names(ops, f"{place}.ops")
        kind = table.get("kind")
        if kind == "attr_in" and isinstance(table.get("attr"), str):
            check_attribute_name(table["attr"], ops, f"{place}.attr")
        if kind in MESSAGE_FIELDS and isinstance(table.get("message"), str):
            table["message"] = MessageTemplate(table["message"], MESSAGE_FIELDS[kind],
                                               f"{place}.message")
        if kind == "any_of" and isinstance(table.get("rules"), list):
            _check_rules(table["rules"], f"{place}.rules", ops)


def _parse(path: Path) -> Any:
    if path.suffix not in TARGET_FILE_SUFFIXES:
        raise TargetSpecError(f"{path}: a target file must end in .toml or .json")
    check_regular_file(path, "target file", TargetSpecError)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TargetSpecError(f"{path}: no such target file{missing_file_hint(path)}") from None
    except (OSError, UnicodeDecodeError) as error:
        raise TargetSpecError(f"{path}: cannot read the target file ({error})") from None
    try:
        return tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise TargetSpecError(f"{path}: not valid TOML: {error}") from None
    except json.JSONDecodeError as error:
        raise TargetSpecError(f"{path}: not valid JSON: {error}") from None
    except RecursionError:
        raise TargetSpecError(f"{path}: nested too deeply to be a target file") from None


def _base(f: Fields, options: dict[str, Any],
          resolve_base: Callable[..., TargetSpec]) -> TargetSpec | None:
    name = f.string("base", None)
    if name is None:
        if options:
            raise TargetSpecError(f"{f.where}: takes no options (it has no base target); got "
                                  f"{', '.join(sorted(options))}")
        return None
    if looks_like_target_file(name):
        raise TargetSpecError(f"{f.place('base')}: must name a built-in or registered target, "
                              f"not a file ({name!r})")
    try:
        return resolve_base(name, **options)
    except PartitionLabError as error:
        raise TargetSpecError(f"{f.place('base')}: {error}") from None

