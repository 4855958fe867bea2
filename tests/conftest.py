"""Shared test fixtures.

The zoo builds its model files on first use; tests keep them in ``<repo>/.cache/zoo`` (git
ignores ``.cache/``) so that a second run of the suite starts warm. A ``PARTITION_LAB_CACHE``
set by the caller wins. These variables are set at import time, before any test module imports
TVM or the zoo.

MXNet and gluoncv are the optional ``[mxnet]`` extra (Python 3.11 only). Where MXNet does not
import, a test marked ``requires_mxnet`` is skipped, and so is any test that reaches an import of
``mxnet`` or ``gluoncv`` while it runs (the MXNet frontend, the gluoncv-built zoo): the import
itself skips the test, so no list of such tests has to be kept. An import of MXNet at module
level still fails collection, because the core must load without it. With
``PARTITION_LAB_REQUIRE_MXNET=1`` (set by ``make test``) a missing MXNet fails the run instead.
"""

from __future__ import annotations

import importlib.abc
import os
import sys
from pathlib import Path

import pytest

# The package imports TVM only when a name that needs it is used, so this import leaves the
# environment below in time.
from partition_lab._optional import MXNET_FIX, MissingDependencyError, require_mxnet

REPO_ROOT = Path(__file__).resolve().parents[1]
ZOO_CACHE = REPO_ROOT / ".cache" / "zoo"

os.environ.setdefault("PARTITION_LAB_CACHE", str(ZOO_CACHE))
os.environ.setdefault("TOPHUB_LOCATION", "NONE")  # TVM builds would otherwise try a download
# One TVM runtime thread: on a shared 2-core machine TVM's spinning worker threads make small
# models run 10x slower than one thread does.
os.environ.setdefault("TVM_NUM_THREADS", "1")

REQUIRE_MXNET = os.environ.get("PARTITION_LAB_REQUIRE_MXNET") == "1"
MXNET_PACKAGES = ("mxnet", "gluoncv")


def mxnet_problem() -> str | None:
    """Why MXNet does not import here (the user's message), or None when it does."""
    try:
        require_mxnet("this test")
    except MissingDependencyError as exc:
        return str(exc)
    return None


MXNET_PROBLEM = mxnet_problem()


class SkipOnMXNetImport(importlib.abc.MetaPathFinder):
    """Turns an import of mxnet or gluoncv during a test into a skip of that test."""

    def find_spec(self, fullname: str, path: object, target: object = None) -> None:
        if fullname.partition(".")[0] in MXNET_PACKAGES:
            pytest.skip(f"requires_mxnet: imports {fullname}; {MXNET_FIX}")
        return None


def pytest_configure(config: pytest.Config) -> None:
    if MXNET_PROBLEM is not None and REQUIRE_MXNET:
        raise pytest.UsageError(f"PARTITION_LAB_REQUIRE_MXNET=1 but {MXNET_PROBLEM}")


def pytest_runtest_setup(item: pytest.Item) -> None:
    if MXNET_PROBLEM is not None and item.get_closest_marker("requires_mxnet"):
        pytest.skip(f"requires_mxnet: {MXNET_FIX}")


@pytest.fixture(autouse=True)
def _skip_where_mxnet_is_imported():
    """Where MXNet is missing, a test that imports it is skipped rather than failed."""
    if MXNET_PROBLEM is None:
        yield
        return
    finder = SkipOnMXNetImport()
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)


@pytest.fixture(scope="session")
def zoo_cache() -> Path:
    """The directory the zoo caches its files in for this test session."""
    return Path(os.environ["PARTITION_LAB_CACHE"])
