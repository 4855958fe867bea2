"""Typed reading of target data (TOML/JSON tables) with errors that name the file and the key.

Every problem in a target file raises :class:`~partition_lab.errors.TargetSpecError` with the
place (``npu.toml: rules[1].multiples``), what was found and what is expected, so a user can fix
the file without reading our code.

Why these checks are written out rather than validated with ``jsonschema`` at load: target
files are TOML written by hand, and what their writer needs is the place, what
was found, what is expected and a did-you-mean for op and attribute names, in one line that
``tests/cli/test_bad_data_files.py`` asserts; a schema error names the failed keyword instead
(``'multiples' is not of type 'array'``). And most checks are beyond a schema: Relay op and
attribute names against TVM's registry, reserved device names, message templates that may use
only their rule's fields, steps of a custom pattern that refer only backwards.
"""

from __future__ import annotations

import functools
import tomllib
from collections.abc import Iterable, Mapping
from importlib import resources
from typing import Any

from ..errors import TargetSpecError

_MISSING: Any = object()


class Fields:
    """One table of a target file: checks its keys, then hands out typed values.

    ``where`` is the place used in error messages (``"npu.toml"`` or ``"npu.toml: rules[0]"``).
    Unknown keys are an error at construction, so a typo never passes silently.
    """

    def __init__(self, data: Any, where: str, allowed: Iterable[str]) -> None:
        if not isinstance(data, Mapping):
            raise TargetSpecError(f"{where}: expected a table, got {_kind(data)}")
        self.data = data
        self.where = where
        allowed = tuple(allowed)
        for key in data:
            if key not in allowed:
                raise TargetSpecError(
                    f"{where}: unknown key {key!r}; expected one of {', '.join(allowed)}")

    def place(self, key: str) -> str:
        """The error-message place of ``key``."""
        return f"{self.where}.{key}" if ":" in self.where else f"{self.where}: {key}"

    def has(self, key: str) -> bool:
        return key in self.data

    def _get(self, key: str, default: Any) -> Any:
        if key in self.data:
            return self.data[key]
        if default is _MISSING:
            raise TargetSpecError(f"{self.place(key)} is missing (required)")
        return default

    def string(self, key: str, default: Any = _MISSING) -> Any:
        value = self._get(key, default)
        if value is not default and not isinstance(value, str):
            raise TargetSpecError(f"{self.place(key)}: expected a string, got {_kind(value)}")
        return value

    def strings(self, key: str, default: Any = _MISSING) -> Any:
        """A list of strings (a single string is accepted as a one-element list)."""
        value = self._get(key, default)
        if value is default:
            return value
        if isinstance(value, str):
            return (value,)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise TargetSpecError(f"{self.place(key)}: expected a list of strings, got {_kind(value)}")
        return tuple(value)

    def op_reasons(self, key: str) -> dict[str, str]:
        """Ops as a list of names, or as a table op -> reason (the reason may be empty)."""
        value = self._get(key, [])
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return dict.fromkeys(value, "")
        if isinstance(value, Mapping) and all(isinstance(v, str) for v in value.values()):
            return {str(k): v for k, v in value.items()}
        raise TargetSpecError(
            f"{self.place(key)}: expected a list of op names or a table op -> reason, "
            f"got {_kind(value)}")

    def positive_int(self, key: str, default: Any = _MISSING) -> Any:
        value = self._get(key, default)
        if value is default:
            return value
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise TargetSpecError(f"{self.place(key)}: expected a positive integer, got {_kind(value)}")
        return value

    def table_list(self, key: str) -> list[Any]:
        value = self._get(key, [])
        if not isinstance(value, list):
            raise TargetSpecError(f"{self.place(key)}: expected a list of tables, got {_kind(value)}")
        return value

    def scalars(self, key: str) -> tuple[Any, ...]:
        """A non-empty list of strings, numbers or booleans (or lists of numbers, for tuples)."""
        value = self._get(key, _MISSING)
        if not isinstance(value, list) or not value or not all(_is_attr_value(v) for v in value):
            raise TargetSpecError(
                f"{self.place(key)}: expected a non-empty list of strings, numbers, booleans or "
                f"lists of numbers, got {_kind(value)}")
        return tuple(tuple(v) if isinstance(v, list) else v for v in value)


def _is_attr_value(value: Any) -> bool:
    if isinstance(value, list):
        return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
    return isinstance(value, (str, int, float, bool))


def _kind(value: Any) -> str:
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}"


@functools.cache
def packaged_data(filename: str) -> Mapping[str, Any]:
    """A TOML file from ``partition_lab/targets/data`` (parsed once; do not mutate it)."""
    text = resources.files("partition_lab.targets").joinpath("data", filename).read_text("utf-8")
    return tomllib.loads(text)
