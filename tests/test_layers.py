"""The package's floors: every module imports only its own floor and the floors under it, and the
import graph (function-local imports included) has no circle.

The floors, lowest first, are :data:`LAYERS`. Function-local imports count: if moving every one
of them to the top of its module made a circle, one of them would be there to dodge it, and the
thing it imports would live on the wrong floor. Imports under ``if TYPE_CHECKING:`` count for the
direction of the floors but not for circles (they never run).
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "partition_lab"

#: Floors, lowest first: a module may import its own floor and any floor below it.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "_io", "_signals", "_audience", "_tvm_logs", "_optional", "_units", "_stages",
     "_version", "progress",
     "schemas", "_outputs"),
    ("core",),
    ("targets", "cost_models"),
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
    """ids of the import nodes under ``if TYPE_CHECKING:``."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            found.update(id(n) for n in ast.walk(node) if isinstance(n, ast.ImportFrom))
    return found


def imports_of(module: str) -> list[tuple[str, int, bool]]:
    """``(imported module, line, type-checking only)`` for each of our modules it imports."""
    path = MODULES[module]
    return imports_in(module, path.name == "__init__.py", path.read_text(encoding="utf-8"))


def imports_in(module: str, is_package: bool, text: str) -> list[tuple[str, int, bool]]:
    """:func:`imports_of` for the source ``text`` of ``module``."""
    tree = ast.parse(text)
    package = module if is_package else module.rsplit(".", 1)[0]
    typing_only = _type_checking_nodes(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if not source.startswith("partition_lab"):
                continue
            # `from P import X` imports the module P.X when X is one; P itself otherwise.
            targets = [f"{source}.{a.name}" for a in node.names if f"{source}.{a.name}" in MODULES]
            if len(targets) < len(node.names):
                targets.append(source)
        elif isinstance(node, ast.Import):
            targets = [a.name for a in node.names if a.name.startswith("partition_lab")]
        else:
            continue
        for target in targets:
            while target not in MODULES:
                target = target.rsplit(".", 1)[0]
            if target != module:
                found.append((target, node.lineno, id(node) in typing_only))
    return found


def import_graph(*, with_type_checking: bool) -> nx.DiGraph:
    graph = nx.DiGraph()
    graph.add_nodes_from(MODULES)
    for module in MODULES:
        for target, line, typing_only in imports_of(module):
            if with_type_checking or not typing_only:
                graph.add_edge(module, target, line=line)
    return graph


def test_every_module_is_on_a_floor() -> None:
    for module in MODULES:
        floor_of(module)


def upward_imports(module: str, imports: list[tuple[str, int, bool]]) -> list[str]:
    return [f"{module}:{line} imports {target} (floor {floor_of(target)} > {floor_of(module)})"
            for target, line, _ in imports if floor_of(target) > floor_of(module)]


def test_no_module_imports_a_higher_floor() -> None:
    upward = [line for module in MODULES for line in upward_imports(module, imports_of(module))]
    assert not upward, "\n".join(upward)


def test_the_import_graph_has_no_circle() -> None:
    graph = import_graph(with_type_checking=False)
    cycles = list(nx.simple_cycles(graph))
    shown = [" -> ".join(cycle + cycle[:1]) for cycle in cycles[:5]]
    assert not cycles, f"{len(cycles)} import circles, e.g.:\n" + "\n".join(shown)


def test_the_core_imports_nothing_of_ours_above_it() -> None:
    # errors, and _units: the one way numbers are written (a leaf that imports nothing).
    allowed = {"partition_lab.errors", "partition_lab._units"}
    for module in MODULES:
        if module.startswith("partition_lab.core"):
            outside = {t for t, _, _ in imports_of(module)
                       if not t.startswith("partition_lab.core") and t not in allowed}
            assert not outside, f"{module} imports {sorted(outside)}"


@pytest.mark.parametrize("source, upward", [
    ("from ..cli import main\n", ["partition_lab.cli"]),
    ("def f():\n    from ..strategies import greedy\n", ["partition_lab.strategies.greedy"]),
    ("if TYPE_CHECKING:\n    from ..api import Analysis\n", ["partition_lab.api"]),
    ("from . import graph\nfrom .support import Verdict\nfrom ..errors import PlanError\n", []),
])
def test_the_checker_sees_upward_imports(source: str, upward: list[str]) -> None:
    """The checker itself: a made-up module of the core importing what ``source`` imports."""
    found = upward_imports("partition_lab.core.probe",
                           imports_in("partition_lab.core.probe", False, source))
    assert [line.split(" imports ")[1].split(" ")[0] for line in found] == upward


def test_the_checker_sees_a_circle_through_a_local_import() -> None:
    graph = import_graph(with_type_checking=False)
    graph.add_edge("partition_lab.core.support", "partition_lab.core.plan")  # a local import
    assert list(nx.simple_cycles(graph))
