"""The package's floors: every module imports only its own floor and the floors under it, and the
import graph (every import) has no circle.

The floors, lowest first, are :data:`LAYERS`. Every import counts: function-local ones,
``importlib.import_module("...")`` and ``__import__("...")`` with a literal name (absolute, or
relative with ``package=``), and those under ``if TYPE_CHECKING:``. If moving every import to the
top of its module made a circle, one of them would be there to dodge it, and the thing it imports
would live on the wrong floor; a type two modules name in both directions lives on the wrong one
of them too, even if only the type checker reads it.
"""

from __future__ import annotations

import ast
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

import networkx as nx
import pytest

from repo_paths import REPO_ROOT

PACKAGE = REPO_ROOT / "src" / "partition_lab"

#: Floors, lowest first: a module may import its own floor and any floor below it.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "_io", "_signals", "_audience", "_tvm_logs", "_optional", "_units", "_stages",
     "_version", "progress", "_text", "_run_to_run", "_cache_store",
     "schemas", "_outputs"),
    ("core",),
    # _torch_onnx: the torch -> ONNX export both IRs' loaders and the zoo share
    ("targets", "cost_models", "_torch_onnx"),
    ("strategies", "synthetic"),
    ("comparison",),
    ("relay", "executors", "render"),
    # choice: proposes with strategies, times with the executor; relax: the Relax adapter, whose
    # measured choice times TVM-built plans in choice's turns (relay, its peer, needs no choice)
    ("zoo", "choice", "relax"),
    ("pipeline",),  # the one pipeline over the IR adapters (relay, relax), which never import it
    ("api",),
    ("profiling",),
    ("cli", "__init__"),
)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def floor_of(module: str) -> int:
    parts = module.split(".")
    room = parts[1] if len(parts) > 1 else "__init__"
    for level, rooms in enumerate(LAYERS):
        if room in rooms:
            return level
    raise AssertionError(f"{module} is on no floor: add its package to LAYERS")


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """ids of the nodes (imports among them) under ``if TYPE_CHECKING:``."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            found.update(id(n) for child in node.body for n in ast.walk(child))
    return found


def _ours(name: str) -> bool:
    return name == "partition_lab" or name.startswith("partition_lab.")


def imports_of(module: str) -> list[tuple[str, int, bool]]:
    """``(imported module, line, type-checking only)`` for each of our modules it imports."""
    path = MODULES[module]
    return imports_in(module, path.name == "__init__.py", path.read_text(encoding="utf-8"))


def _literal(node: ast.expr | None) -> object:
    return node.value if isinstance(node, ast.Constant) else None


def _absolute(name: str, level: int, package: str) -> str:
    """The absolute module name of ``name`` imported ``level`` packages up from ``package``."""
    if not level:
        return name
    parts = package.split(".")
    base = parts[: len(parts) - level + 1]
    return ".".join(base + ([name] if name else []))


def _called_import(node: ast.Call, module: str, package: str) -> str | None:
    """The module an ``importlib.import_module(...)`` or ``__import__(...)`` call imports, where
    its name is a string literal; ``None`` for any other call."""
    func = node.func
    called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if called not in ("import_module", "__import__"):
        return None
    keywords = {k.arg: k.value for k in node.keywords}
    name = _literal(node.args[0] if node.args else keywords.get("name"))
    if not isinstance(name, str):
        return None
    if called == "import_module":
        level = len(name) - len(name.lstrip("."))
        anchor = node.args[1] if len(node.args) > 1 else keywords.get("package")
        given = _literal(anchor)
        if isinstance(given, str):
            base = given
        elif isinstance(anchor, ast.Name) and anchor.id in ("__package__", "__name__"):
            base = package if anchor.id == "__package__" else module
        else:
            base = package
        return _absolute(name[level:], level, base)
    level = _literal(node.args[4] if len(node.args) > 4 else keywords.get("level"))
    return _absolute(name, level if isinstance(level, int) else 0, package)


def imports_in(module: str, is_package: bool, text: str, modules: Collection[str] = MODULES
               ) -> list[tuple[str, int, bool]]:
    """:func:`imports_of` for the source ``text`` of ``module``, among ``modules`` (made-up
    modules of a test beside the package's)."""
    tree = ast.parse(text)
    package = module if is_package else module.rsplit(".", 1)[0]
    typing_only = _type_checking_nodes(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            called = _called_import(node, module, package)
            if called is None or not _ours(called):
                continue
            targets = [called]
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(node.module or "", node.level, package)
            if not _ours(source):
                continue
            # `from P import X` imports the module P.X when X is one; P itself otherwise.
            targets = [f"{source}.{a.name}" for a in node.names if f"{source}.{a.name}" in modules]
            if len(targets) < len(node.names):
                targets.append(source)
        elif isinstance(node, ast.Import):
            targets = [a.name for a in node.names if _ours(a.name)]
        else:
            continue
        for target in targets:
            while target not in modules:
                target = target.rsplit(".", 1)[0]
            if target != module:
                found.append((target, node.lineno, id(node) in typing_only))
    return found


Imports = Mapping[str, Sequence[tuple[str, int, bool]]]


def package_imports() -> dict[str, list[tuple[str, int, bool]]]:
    return {module: imports_of(module) for module in MODULES}


def import_graph(imports: Imports | None = None) -> nx.DiGraph:
    """Every import of ``imports`` (module -> what it imports; default the package's) as an
    edge ``module -> imported`` with its line."""
    graph = nx.DiGraph()
    for module, found in (package_imports() if imports is None else imports).items():
        graph.add_node(module)
        for target, line, _ in found:
            if graph.has_edge(module, target):  # imported twice: the first line
                line = min(line, graph.edges[module, target]["line"])
            graph.add_edge(module, target, line=line)
    return graph


def circles(graph: nx.DiGraph) -> list[str]:
    """Every import circle of ``graph``, each as ``a:LINE -> b:LINE -> a`` (the line of each
    import; ``a`` the first module by name), sorted."""
    shown = []
    for cycle in nx.simple_cycles(graph):
        start = cycle.index(min(cycle))
        cycle = cycle[start:] + cycle[:start]
        steps = [f"{a}:{graph.edges[a, b]['line']}"
                 for a, b in zip(cycle, cycle[1:] + cycle[:1], strict=True)]
        shown.append(" -> ".join(steps + cycle[:1]))
    return sorted(shown)


def check_no_circle(graph: nx.DiGraph) -> None:
    found = circles(graph)
    assert not found, f"{len(found)} import circles:\n" + "\n".join(found)


def upward_imports(module: str, imports: Sequence[tuple[str, int, bool]]) -> list[str]:
    return [f"{module}:{line} imports {target} (floor {floor_of(target)} > {floor_of(module)})"
            for target, line, _ in imports if floor_of(target) > floor_of(module)]


def check_floors(imports: Imports) -> None:
    upward = [line for module, found in imports.items() for line in upward_imports(module, found)]
    assert not upward, "\n".join(upward)


def test_every_module_is_on_a_floor() -> None:
    off = []
    for module in MODULES:
        try:
            floor_of(module)
        except AssertionError as error:
            off.append(str(error))
    assert not off, "\n".join(off)
    # ... and every name on a floor is a module or package that exists (no stale entry).
    rooms = {module.split(".")[1] if "." in module else "__init__" for module in MODULES}
    assert sorted(room for rooms_of in LAYERS for room in rooms_of if room not in rooms) == []
    with pytest.raises(AssertionError, match="partition_lab.nowhere is on no floor"):
        floor_of("partition_lab.nowhere")


def test_no_module_imports_a_higher_floor() -> None:
    check_floors(package_imports())


def test_the_import_graph_has_no_circle() -> None:
    check_no_circle(import_graph())


def test_the_core_imports_nothing_of_ours_above_it() -> None:
    # errors, and _units: the one way numbers are written (a leaf that imports nothing).
    allowed = {"partition_lab.errors", "partition_lab._units"}
    for module in MODULES:
        if module.startswith("partition_lab.core"):
            outside = {t for t, _, _ in imports_of(module)
                       if not t.startswith("partition_lab.core") and t not in allowed}
            assert not outside, f"{module} imports {sorted(outside)}"


#: The most lines a file of the package may have: a longer one holds more than one thing.
MAX_LINES = 600


def test_no_file_of_the_package_is_over_600_lines() -> None:
    lines = {}
    for path in sorted(PACKAGE.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            try:
                text = path.read_text(encoding="utf-8")
            except UnicodeDecodeError:  # data (the shipped profile, gzip): not lines of code
                continue
            lines[path.relative_to(PACKAGE).as_posix()] = text.count("\n")
    assert any(name.endswith(".js") for name in lines)  # every kind of text file is read
    long = {name: n for name, n in lines.items() if n > MAX_LINES}
    assert not long, f"over {MAX_LINES} lines: {long}"


# ---------------------------------------------------------------------------- the checker itself
@pytest.mark.parametrize("source, upward", [
    ("from ..cli import main\n", ["partition_lab.cli"]),
    ("def f():\n    from ..strategies import greedy\n", ["partition_lab.strategies.greedy"]),
    ("if TYPE_CHECKING:\n    from ..api import Analysis\n", ["partition_lab.api"]),
    ("from . import graph\nfrom .support import Verdict\nfrom ..errors import PlanError\n", []),
    ("import importlib\ndef f():\n    return importlib.import_module('partition_lab.relax')\n",
     ["partition_lab.relax"]),
    ("import importlib\nimportlib.import_module('..strategies.greedy', package=__package__)\n",
     ["partition_lab.strategies.greedy"]),
    ("from importlib import import_module\nimport_module('.greedy', 'partition_lab.strategies')\n",
     ["partition_lab.strategies.greedy"]),
    ("import importlib\nimportlib.import_module('.cli', __package__.rsplit('.', 1)[0])\n", []),
    ("__import__('partition_lab.zoo.models')\n", ["partition_lab.zoo.models"]),
    ("__import__('cli', globals(), locals(), ['main'], 2)\n", ["partition_lab.cli"]),
    ("if TYPE_CHECKING:\n    importlib.import_module('partition_lab.api')\n",
     ["partition_lab.api"]),
    ("import importlib\nimportlib.import_module('.graph', __package__)\n"
     "importlib.import_module('numpy')\nimportlib.import_module(name)\n", []),
])
def test_the_checker_sees_upward_imports(source: str, upward: list[str]) -> None:
    """The checker itself: a made-up module of the core importing what ``source`` imports (a
    relative name whose package is not a literal or ``__package__`` cannot be followed)."""
    found = upward_imports("partition_lab.core.probe",
                           imports_in("partition_lab.core.probe", False, source))
    assert [line.split(" imports ")[1].split(" ")[0] for line in found] == upward


def test_the_floor_check_fails_on_an_importlib_import_that_runs_up() -> None:
    source = ("import importlib\n\n\ndef f():\n"
              "    return importlib.import_module('partition_lab.strategies.greedy')\n")
    imports = {**package_imports(), "partition_lab.core.probe": imports_in(
        "partition_lab.core.probe", False, source, {*MODULES, "partition_lab.core.probe"})}
    with pytest.raises(AssertionError, match=r"core\.probe:5 imports partition_lab\.strategies"
                                             r"\.greedy \(floor 3 > 1\)"):
        check_floors(imports)


@pytest.mark.parametrize("back", [
    "import importlib\n\n\ndef f():\n    return importlib.import_module('.probe_a', __package__)\n",
    "def f():\n    return __import__('partition_lab.core.probe_a')\n",
    "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .probe_a import Thing\n",
])
def test_the_circle_check_fails_on_a_made_up_pair(back: str) -> None:
    """probe_a imports probe_b at its top; probe_b imports probe_a back (``back``): a circle,
    whichever way the import back is written."""
    made_up = {"partition_lab.core.probe_a": ("from .probe_b import g\n", False),
               "partition_lab.core.probe_b": (back, False)}
    modules = {*MODULES, *made_up}
    imports = {module: imports_in(module, is_package, text, modules)
               for module, (text, is_package) in made_up.items()}
    check_no_circle(import_graph({**imports, "partition_lab.core.probe_b": []}))  # one way only
    graph = import_graph(imports)
    assert circles(graph) == [
        "partition_lab.core.probe_a:1 -> partition_lab.core.probe_b:"
        f"{graph.edges['partition_lab.core.probe_b', 'partition_lab.core.probe_a']['line']}"
        " -> partition_lab.core.probe_a"]
    with pytest.raises(AssertionError, match="1 import circles"):
        check_no_circle(graph)


def test_the_checker_sees_a_circle_through_a_local_import() -> None:
    graph = import_graph()
    graph.add_edge("partition_lab.core.support", "partition_lab.core.plan", line=0)  # made up
    with pytest.raises(AssertionError, match=r"partition_lab\.core\.support:0 -> "
                                             r"partition_lab\.core\.plan"):
        check_no_circle(graph)
