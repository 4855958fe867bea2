"""Import gluoncv 0.10 beside PyTorch 2.

gluoncv's ``__init__`` checks for an optional PyTorch and raises ``RuntimeError`` (not
``ImportError``) when it finds torch >= 2.0, so with the ``torch`` extra installed (the plan
executor's) ``import gluoncv`` would fail. The zoo only uses gluoncv's MXNet models, so torch is
hidden from that one check: with ``sys.modules["torch"] = None`` gluoncv's ``import torch``
raises ``ImportError``, which it reads as "no PyTorch". The zoo imports this module before it
builds a Gluon model (nothing else imports gluoncv), so that the zoo itself imports without
MXNet; torch is restored (or stays importable) afterwards.
"""

from __future__ import annotations

import sys

if "gluoncv" not in sys.modules:
    _saved_torch = sys.modules.get("torch")
    sys.modules["torch"] = None  # type: ignore[assignment]
    try:
        import gluoncv  # noqa: F401
    finally:
        if _saved_torch is None:
            del sys.modules["torch"]
        else:
            sys.modules["torch"] = _saved_torch
