"""Message templates from target files, rendered by a restricted formatter.

A rule's ``message`` comes from a file the user may have been sent, and ``str.format`` is too
powerful for it: ``"{op.__class__.__mro__}"`` walks attributes and ``"{op:>900000000}"`` pads a
string to 900 MB. A template here may only name the rule's fields (``{op}``, ``{value}``...),
with no attribute or index access and no conversion, and an alignment width of at most
:data:`MAX_WIDTH`. :func:`check_template` enforces that when the file is loaded;
:class:`MessageTemplate` is a ``str`` whose ``format`` renders through the same checks, so a
rule that formats its message can do nothing else.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable
from typing import Any

from ..errors import TargetSpecError

MAX_WIDTH = 80
"""The widest field a template may pad to (``{op:<20}``)."""

MAX_LENGTH = 500
"""The longest template, in characters."""

_SPEC = re.compile(r"(?:.?[<>^])?(?P<width>\d{1,3})?")  # [[fill]align][width], nothing else


def check_template(template: str, fields: Iterable[str], where: str) -> None:
    """:class:`TargetSpecError` unless ``template`` uses only ``{field}`` or ``{field:<width>}``
    with a field of ``fields`` and a width of at most :data:`MAX_WIDTH`."""
    allowed = sorted(set(fields))
    if len(template) > MAX_LENGTH:
        raise TargetSpecError(f"{where}: the message is {len(template)} characters long; "
                              f"keep it under {MAX_LENGTH}")
    try:
        parts = list(string.Formatter().parse(template))
    except ValueError as error:
        raise TargetSpecError(f"{where}: bad message template {_short(template)} ({error}); "
                              "write a literal brace as {{ or }}") from None
    for _, field, spec, conversion in parts:
        if field is None:
            continue
        if field not in allowed:
            raise TargetSpecError(
                f"{where}: bad placeholder {{{_short(field, 30)}}} in the message; a message "
                f"may use only {', '.join('{' + name + '}' for name in allowed)}")
        match = _SPEC.fullmatch(spec or "")
        if conversion or match is None or int(match["width"] or 0) > MAX_WIDTH:
            raise TargetSpecError(
                f"{where}: bad placeholder {{{field}}} in the message, with the format "
                f"{_short((('!' + conversion) if conversion else '') + ':' + (spec or ''), 30)}"
                f"; only an alignment and a width up to {MAX_WIDTH} are allowed, e.g. {{{field}:<20}}")


class MessageTemplate(str):
    """A checked template; its :meth:`format` takes only the names it was checked against."""

    fields: tuple[str, ...] = ()

    def __new__(cls, template: str, fields: Iterable[str], where: str) -> MessageTemplate:
        check_template(template, fields, where)
        self = super().__new__(cls, template)
        self.fields = tuple(fields)
        return self

    def format(self, *args: Any, **kwargs: Any) -> str:
        """Render with the checked fields only; values are turned into text first, so a field
        never reaches an object's ``__format__``."""
        if args:
            raise TypeError("a message template takes keyword fields only")
        values = {name: str(kwargs.get(name, "")) for name in self.fields}
        return str.format(str(self), **values)


def _short(text: str, limit: int = 60) -> str:
    shown = repr(text)
    return shown if len(shown) <= limit else shown[:limit - 3] + "..."
