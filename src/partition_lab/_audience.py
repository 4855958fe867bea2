"""Who reads an error message: a Python caller or a command-line user.

The frontends tell a user how to fix a missing input shape or params file. A Python caller
fixes it with ``input_shapes={'data': (1, 3, 224, 224)}``; a command-line user with
``--input-shape data=1,3,224,224``, and has no ``params=`` at all. The CLI runs its commands
inside :func:`command_line`; the hints below then speak in its flags.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

_cli: ContextVar[bool] = ContextVar("partition_lab_cli_audience", default=False)


@contextmanager
def command_line() -> Iterator[None]:
    """Word the hints of errors raised in the body for a command-line user."""
    token = _cli.set(True)
    try:
        yield
    finally:
        _cli.reset(token)


def is_command_line() -> bool:
    """Whether the current hints are for a command-line user."""
    return _cli.get()


def option(python_name: str, flag: str) -> str:
    """The name of an option in the reader's terms: ``flag`` (``--exclude-op``) on the command
    line, ``python_name`` (``exclude_ops``) in Python."""
    return flag if _cli.get() else python_name


def shapes_hint(shapes: Mapping[str, Sequence[int]]) -> str:
    """How to give these input shapes: ``--input-shape a=1,2 --input-shape b=3`` on the
    command line, ``input_shapes={'a': (1, 2), 'b': (3,)}`` in Python."""
    if _cli.get():
        return " ".join(f"--input-shape {name}={','.join(map(str, shape))}"
                        for name, shape in shapes.items())
    inner = ", ".join(f"{name!r}: {tuple(shape)}" for name, shape in shapes.items())
    return f"input_shapes={{{inner}}}"


def shape_name(name: str) -> str:
    """How the user wrote the shape of one input: ``--input-shape data`` or
    ``input_shapes['data']``."""
    return f"--input-shape {name}" if _cli.get() else f"input_shapes[{name!r}]"


def shapes_option() -> str:
    """The option that gives input shapes: ``--input-shape`` or ``input_shapes``."""
    return "--input-shape" if _cli.get() else "input_shapes"


def params_hint(prefix: str) -> str:
    """How to point at an MXNet params file that is not where it was looked for."""
    if _cli.get():
        return f"put it beside the symbol file as {prefix}-0000.params or {prefix}.params"
    return "pass params='path/to/file.params'"
