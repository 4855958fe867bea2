"""Shared test fixtures.

The zoo builds its model files on first use; tests keep them in ``<repo>/.cache/zoo`` (git
ignores ``.cache/``) so that a second run of the suite starts warm. A ``PARTITION_LAB_CACHE``
set by the caller wins. These variables are set at import time, before any test module imports
TVM or the zoo.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
ZOO_CACHE = REPO_ROOT / ".cache" / "zoo"

os.environ.setdefault("PARTITION_LAB_CACHE", str(ZOO_CACHE))
os.environ.setdefault("TOPHUB_LOCATION", "NONE")  # TVM builds would otherwise try a download
# One TVM runtime thread: on a shared 2-core machine TVM's spinning worker threads make small
# models run 10x slower than one thread does.
os.environ.setdefault("TVM_NUM_THREADS", "1")


@pytest.fixture(scope="session")
def zoo_cache() -> Path:
    """The directory the zoo caches its files in for this test session."""
    return Path(os.environ["PARTITION_LAB_CACHE"])
