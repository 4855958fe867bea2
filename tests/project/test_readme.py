"""Every command block of the README runs as written, so the user guide cannot drift.

The convention (the README says it in its tour): every fenced ```bash, ```python and ```console
block runs, in the order of the page, in one empty folder, with this interpreter and the
``partition-lab`` console script beside it. A block is left out when the line before its fence
is an HTML comment ``<!-- not-run: WHY -->`` (installs, the Makefile's own targets), and a block
after ``<!-- mxnet -->`` runs only where MXNet imports (Python 3.11 with the extra). ``bash``
blocks run under ``bash -e -o pipefail``; ``console`` blocks run their ``$ `` lines.
Nothing of the repository is copied into the folder: a reader runs the page from wherever they
are, so the example target and platform files it uses are the package's (``example:NAME``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from partition_lab import zoo
from partition_lab._optional import MXNET_FIX
from repo_paths import REPO_ROOT

REPO_ROOT = REPO_ROOT
README = REPO_ROOT / "README.md"
RUNNABLE = ("bash", "python", "console")
#: Folders of the repository that a block may not read from: it runs outside the checkout.
REPO_FOLDERS = ("examples/", "src/", "bench/", "tests/", "docs/")
# A fence with its language, and the line before it (where a marker comment stands).
FENCE = re.compile(r"(?:^(?P<marker><!--[^\n]*-->)\n)?^```(?P<lang>\w*)\n(?P<body>.*?)^```$",
                   re.M | re.S)
# Seconds one block may take: the slowest, a tensorcore drawing at batch 32, takes about 20 s
# on a quiet machine; the margin is for two busy shared cores.
BLOCK_TIMEOUT_S = 300


@dataclass(frozen=True)
class Block:
    """One fenced block of the README: its language, code, marker and line number."""

    lang: str
    code: str
    marker: str
    line: int

    @property
    def runs(self) -> bool:
        return self.lang in RUNNABLE and not self.marker.startswith("<!-- not-run")

    @property
    def needs_mxnet(self) -> bool:
        return self.marker.startswith("<!-- mxnet")


def readme_blocks(text: str) -> list[Block]:
    """The fenced blocks of ``text`` in page order."""
    return [Block(m["lang"], m["body"], m["marker"] or "", text.count("\n", 0, m.start()) + 1)
            for m in FENCE.finditer(text)]


def command(block: Block, folder: Path) -> list[str]:
    """How to run ``block`` in ``folder``: python blocks as a script file of this interpreter."""
    if block.lang == "python":
        script = folder / f"readme_block_{block.line}.py"
        script.write_text(block.code, encoding="utf-8")
        return [sys.executable, script.name]
    code = block.code
    if block.lang == "console":
        code = "\n".join(line[2:] for line in code.splitlines() if line.startswith("$ "))
    return ["bash", "-e", "-o", "pipefail", "-c", code]


def mxnet_problem() -> str | None:
    """Why the MXNet blocks cannot run here, or None. Read from the installed distributions:
    importing MXNet inside a test would skip the whole test where it is missing (conftest)."""
    if zoo.mxnet_installed():
        return None
    return f"MXNet is not installed: {MXNET_FIX}"


def environment() -> dict[str, str]:
    """This interpreter's bin folder first on PATH, so ``python`` and ``partition-lab`` are the
    ones under test, whatever the caller's PATH holds; this process's import path, so that the
    package under test is the one imported (as in the other subprocess tests)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def test_the_convention_finds_the_tour() -> None:
    blocks = readme_blocks(README.read_text(encoding="utf-8"))
    running = [b for b in blocks if b.runs]
    assert len(running) >= 8, "the README has fewer runnable blocks than its tour"
    assert any(b.needs_mxnet for b in running) and any(not b.runs for b in blocks)
    assert "model.onnx" in running[0].code  # the tour makes its model before using it
    markers = {b.marker.split(":")[0] for b in blocks if b.marker}
    assert markers <= {"<!-- not-run", "<!-- mxnet -->"}, markers


def test_no_runnable_block_reads_a_file_of_the_repository() -> None:
    """The blocks run in an empty folder (below), so a path into the checkout would fail there;
    this says which block and which path, without running anything."""
    for block in readme_blocks(README.read_text(encoding="utf-8")):
        if block.runs:
            found = [folder for folder in REPO_FOLDERS if re.search(rf"(?<![\w.]){folder}", block.code)]
            assert not found, f"README line {block.line} names {found} of the repository"


def test_every_command_block_of_the_readme_runs(tmp_path: Path) -> None:
    env = environment()
    problem = mxnet_problem()
    for block in readme_blocks(README.read_text(encoding="utf-8")):
        if not block.runs or (block.needs_mxnet and problem):
            continue  # the MXNet blocks: every other block still runs (not a skip of it all)
        done = subprocess.run(command(block, tmp_path), cwd=tmp_path, env=env, text=True,
                              capture_output=True, timeout=BLOCK_TIMEOUT_S, check=False)
        assert done.returncode == 0, (f"README line {block.line} ({block.lang}) exited "
                                      f"{done.returncode}:\n{block.code}\n--- stdout\n"
                                      f"{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}")
