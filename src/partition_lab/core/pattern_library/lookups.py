"""Lookups: an embedding table read at token ids."""

from __future__ import annotations

from ..patterns import Pattern, Step


def embedding() -> Pattern:
    """``nn.Embedding`` as ``torch.export`` -> ONNX -> Relay writes it: the ids' negative-index
    normalisation ``where(ids < 0, ids + vocab, ids)`` (``less``, ``add``, ``where``), then the
    gather from the table (``take``). The ids are int64 as tokenizers give them, which some
    compilers do not take: the reason names the lookup, not its ``less``."""
    steps = (Step.of("less", "ids"), Step.of("add", "ids"), Step.of("where", "ids", 0, 1),
             Step.of("take", 2))
    return Pattern("embedding", steps, ("take",), "where(ids < 0, ids + n, ids), take",
                   "embedding lookup: negative-index normalisation and a gather from the table",
                   construct="embedding lookup with {dtype} ids")
