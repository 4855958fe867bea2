"""The example target and platform files that ship with the package, named ``example:NAME``.

They are package data (``partition_lab/targets/examples/``), so ``--target example:npu_dsp_cpu``
and ``partition(mod, "example:npu_dsp_cpu")`` work from any folder, and a platform file's
targets (paths relative to it) are found beside it. A name is its file's stem
(:func:`example_names`); ``partition-lab targets`` lists them after the built-ins, and
``partition-lab targets example:NAME`` shows one. To start a file of your own, copy one
(:func:`example_path` says where it is).

>>> example_names()
['dsp', 'mac_npu', 'neuron_resize', 'npu', 'npu_dsp_cpu']
>>> example_path("example:npu_dsp_cpu").name
'npu_dsp_cpu.toml'
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TypeVar

from .._text import did_you_mean
from ..errors import UnknownTargetError

#: What names a bundled example: ``example:npu_dsp_cpu``.
PREFIX = "example:"
#: The folder of the bundled files (package data, listed in setup.cfg).
FOLDER = Path(__file__).with_name("examples")
SUFFIXES = (".toml", ".json")
T = TypeVar("T")


def example_names() -> list[str]:
    """The bundled examples' names, without the ``example:`` prefix."""
    return sorted(p.stem for p in FOLDER.iterdir() if p.suffix in SUFFIXES and p.is_file())


def example_specs() -> list[str]:
    """The names as a target argument takes them: ``example:npu_dsp_cpu``..."""
    return [PREFIX + name for name in example_names()]


def is_example(target: object) -> bool:
    """Whether ``target`` is an ``example:NAME`` string."""
    return isinstance(target, str) and target.startswith(PREFIX)


def example_path(name: str) -> Path:
    """The file ``example:NAME`` (or ``NAME``) stands for.

    Raises
    ------
    UnknownTargetError
        No bundled example of that name; the message lists them, with a did-you-mean.
    """
    stem = name.removeprefix(PREFIX)
    if stem and os.sep not in stem and "/" not in stem:
        for suffix in SUFFIXES:
            path = FOLDER / f"{stem}{suffix}"
            if path.is_file():
                return path
    close = did_you_mean(PREFIX + stem, example_specs())
    raise UnknownTargetError(f"no bundled example {PREFIX}{stem}{close}; the examples are "
                             f"{_listing()}")


def resolve(target: T) -> T | Path:
    """``target`` with an ``example:NAME`` string replaced by its file's path; anything else
    (a built-in name, a path, a TargetSpec) as it is."""
    return example_path(target) if is_example(target) else target  # type: ignore[arg-type]


def missing_file_hint(path: str | os.PathLike[str]) -> str:
    """What to add to "no such target file": the bundled example of that file name, where there
    is one (``examples/platforms/npu_dsp_cpu.toml`` is ``example:npu_dsp_cpu``), else the names
    of them all; both work from any folder."""
    stem = Path(path).stem
    if stem in example_names():
        return (f"; the package bundles a file of that name as {PREFIX}{stem}, which works from "
                "any folder")
    return f"; the package bundles example files, which work from any folder: {_listing()}"


def _listing() -> str:
    return f"{', '.join(example_specs())} (in {FOLDER})"
