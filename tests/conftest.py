"""Shared test fixtures.

The zoo builds its model files on first use; tests keep them in ``<repo>/.cache/zoo`` (git
ignores ``.cache/``) so that a second run of the suite starts warm. A ``PARTITION_LAB_CACHE``
set by the caller wins. ``PARTITION_LAB_VERIFY_CACHE=1`` has every model-cache entry written
read back and checked (a mismatch fails the test). These variables are set at import time,
before any test module imports TVM or the zoo.

MXNet and gluoncv are the optional ``[mxnet]`` extra (Python 3.11 only). Where MXNet does not
import, a test marked ``requires_mxnet`` is skipped, and so is any test (or test module) that
reaches an import of ``mxnet`` or ``gluoncv`` (the MXNet frontend, the gluoncv-built zoo): the
import itself skips it (:class:`SkipOnMXNetImport`), so no list of such tests has to be kept up
to date. That the package's own modules and the ONNX path work without MXNet is checked apart,
in subprocesses (tests/project/test_packaging.py), where no test can be skipped this way. With
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
TESTS_DIR = Path(__file__).resolve().parent

os.environ.setdefault("PARTITION_LAB_CACHE", str(ZOO_CACHE))
# No size bound on the suite's own cache: evicting its zoo builds would make the next run cold
# (tests/test_cache_store.py sets bounds of its own).
os.environ.setdefault("PARTITION_LAB_CACHE_MAX_BYTES", "none")
os.environ.setdefault("TOPHUB_LOCATION", "NONE")  # TVM builds would otherwise try a download
# One TVM runtime thread: on a shared 2-core machine TVM's spinning worker threads make small
# models run 10x slower than one thread does.
os.environ.setdefault("TVM_NUM_THREADS", "1")
# Every model-cache entry a test writes is read back and compared with what was computed, and
# an entry that reads back otherwise fails the test (CacheMismatchError) rather than being
# dropped and rebuilt with a warning, as it is for users (a warm run's plan must be a cold
# run's).
os.environ.setdefault("PARTITION_LAB_VERIFY_CACHE", "1")

REQUIRE_MXNET = os.environ.get("PARTITION_LAB_REQUIRE_MXNET") == "1"
MXNET_PACKAGES = ("mxnet", "gluoncv")


def mxnet_problem() -> str | None:
    """Why MXNet does not import here (the user's message), or None when it does."""
    try:
        require_mxnet("the MXNet tests")
    except MissingDependencyError as exc:
        return str(exc)
    return None


MXNET_PROBLEM = mxnet_problem()


class SkipOnMXNetImport(importlib.abc.MetaPathFinder):
    """Where MXNet is missing, an import of mxnet or gluoncv skips what needs it.

    While a test runs (its fixtures included), any such import skips the test: the MXNet paths
    import it lazily, and the CLI, run in-process, would turn the error into exit status 2. While
    a test module is collected, an import written in the test module skips the module; one in the
    package fails as it would for a user (the package must load without MXNet).
    """

    in_test = False

    def find_spec(self, fullname: str, path: object, target: object = None) -> None:
        if fullname.partition(".")[0] not in MXNET_PACKAGES:
            return None
        reason = f"requires_mxnet: imports {fullname}; {MXNET_FIX}"
        if self.in_test:
            pytest.skip(reason)
        if _importer_file().startswith(str(TESTS_DIR)):
            pytest.skip(reason, allow_module_level=True)
        return None  # the other finders fail to find it, as for a user


def _importer_file() -> str:
    """The file of the code that runs the import statement (outside importlib)."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_globals.get("__name__", "").startswith(
            ("importlib", "_frozen_importlib")):
        frame = frame.f_back
    return frame.f_code.co_filename if frame is not None else ""


_MXNET_FINDER = SkipOnMXNetImport()


# The slowest files, longest first, handed to the workers first (the Makefile's ``--dist
# loadfile --no-loadscope-reorder`` keeps this order): longest first is the usual greedy
# schedule for two machines, and a long file left to the end runs alone while the other worker
# idles. The order is read off ``make test``'s ``--durations`` report (seconds per file, summed).
RUN_FIRST = (
    "relay/test_runtime.py",
    "executors/test_torch_exec.py",
    "zoo/test_zoo.py",
    "zoo/test_torch_models.py",
    "project/test_readme.py",
    "zoo/test_transformer_suite.py",
    "relay/frontends/test_cache_identity.py",
    "relay/test_relay_routes.py",
    "relay/passes/test_outline.py",
    "relay/frontends/test_cache.py",
    "zoo/test_strategies_on_zoo.py",
    "relay/frontends/test_torch.py",
    "project/test_packaging.py",
    "test_api.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Move the files of :data:`RUN_FIRST` to the front, in that order; the rest, and the
    order of tests within every file, stay as collected."""
    def rank(item: pytest.Item) -> int:
        try:
            name = item.path.relative_to(TESTS_DIR).as_posix()
        except ValueError:
            return len(RUN_FIRST)
        return RUN_FIRST.index(name) if name in RUN_FIRST else len(RUN_FIRST)

    items.sort(key=rank)  # stable
    if ONE_MODEL_PER_TEST:
        _keep_one_model_per_test(items, config)


# The newest-Python job (make test-py) sets this: every test function runs there, but one
# parametrized over zoo models runs on its first model only. The other models repeat the same
# Python code on other weights through compiled code (TVM, onnxruntime, torch) built from the
# same sources at the same pins; what can differ between Python versions (the interpreter, the
# standard library, numpy 2 where 3.11 has numpy 1, wheels built for that Python) is reached
# by the first model as by the rest. make test runs every model on Python 3.11.
ONE_MODEL_PER_TEST = os.environ.get("PARTITION_LAB_ONE_MODEL_PER_TEST") == "1"


def _zoo_model_of(item: pytest.Item) -> str | None:
    from partition_lab.zoo._catalog import ENTRIES

    params = getattr(getattr(item, "callspec", None), "params", {})
    models = [v for v in params.values() if isinstance(v, str) and v in ENTRIES]
    return models[0] if models else None


def _keep_one_model_per_test(items: list[pytest.Item], config: pytest.Config) -> None:
    """Deselect every zoo-model parametrization of a test but those of its first model."""
    first: dict[tuple[str, str], str] = {}
    kept, dropped = [], []
    for item in items:
        model = _zoo_model_of(item)
        key = (str(item.path), getattr(item, "originalname", item.name))
        if model is not None and first.setdefault(key, model) != model:
            dropped.append(item)
        else:
            kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def pytest_configure(config: pytest.Config) -> None:
    if MXNET_PROBLEM is None:
        return
    if REQUIRE_MXNET:
        raise pytest.UsageError(f"PARTITION_LAB_REQUIRE_MXNET=1 but {MXNET_PROBLEM}")
    sys.meta_path.insert(0, _MXNET_FINDER)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> object:
    _MXNET_FINDER.in_test = True
    try:
        return (yield)
    finally:
        _MXNET_FINDER.in_test = False


def pytest_runtest_setup(item: pytest.Item) -> None:
    if MXNET_PROBLEM is not None and item.get_closest_marker("requires_mxnet"):
        pytest.skip(f"requires_mxnet: {MXNET_FIX}")


@pytest.fixture(scope="session")
def zoo_cache() -> Path:
    """The directory the zoo caches its files in for this test session."""
    return Path(os.environ["PARTITION_LAB_CACHE"])
