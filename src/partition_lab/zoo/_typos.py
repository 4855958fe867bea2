"""Model names the zoo does not have: the close one where there is one, else the names that
``partition-lab zoo`` lists of the same kind, in the reader's spelling. Each function takes the
zoo's entries by name (``_catalog.ENTRIES``, which imports this module)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._audience import is_command_line, option
from .._text import closest, did_you_mean


def spelled(name: str) -> str:
    """How the reader writes the model ``name``: ``zoo:NAME`` on the command line for a gluoncv
    build (``tv:``/``hf:`` names carry their prefix), the bare name in Python."""
    return f"zoo:{name}" if is_command_line() and ":" not in name else name


def unknown_model_message(name: str, entries: Mapping[str, Any]) -> str:
    """One line for a model name the zoo does not have: the closest name where one is close,
    else the names ``partition-lab zoo`` lists of the same kind (``tv:``, ``hf:``, gluoncv);
    and where the whole list is. Evaluation models load by name but are not listed (they are
    suggested only when close)."""
    typed = spelled(name)
    listing = option("partition_lab.zoo.names(), torchvision_names() and transformers_names() "
                     "list", "'partition-lab zoo' lists")
    close = did_you_mean(typed, [spelled(known) for known in entries])
    if close:
        return f"no zoo model named {typed!r}{close}; {listing} the bundled models"
    prefix = name.partition(":")[0] + ":" if ":" in name else ""
    kind = [spelled(known) for known, e in entries.items() if not e.evaluation
            and (known.startswith(prefix) if prefix else ":" not in known)]
    if not kind:  # a prefix the zoo does not have
        return f"no zoo model named {typed!r}; {listing} the bundled models"
    what = f"the {prefix} models" if prefix else "the gluoncv builds"
    return (f"no zoo model named {typed!r}; {what} are {', '.join(kind)}; {listing} every "
            "bundled model")


def close_model_hint(text: str, entries: Mapping[str, Any]) -> str:
    """For a model argument that is neither a file nor a zoo name (``resnet50``, ``mx:resnet50``)
    on the command line: ``; did you mean the bundled model 'tv:resnet50'?`` where one is close,
    else nothing. Paths (a folder, a file suffix) get nothing: those are files gone astray."""
    if not is_command_line() or "/" in text or ("." in text and ":" not in text):
        return ""
    close = closest(text, [spelled(known) for known in entries])
    return f"; did you mean the bundled model {close!r}? ('partition-lab zoo' lists them)" \
        if close else ""
