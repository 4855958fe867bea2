"""Run graphviz and write drawings: formats, a timeout on every ``dot`` call, atomic writes,
several drawings side by side."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

import graphviz

from .._io import write_atomic
from .._outputs import write_together
from ..core.plan import PartitionPlan
from ..cost_models.base import CostBreakdown
from ..errors import PartitionLabError
from .dot import COLLAPSE_ABOVE, draw

FORMATS = {".svg": "svg", ".png": "png", ".pdf": "pdf", ".dot": "dot", ".gv": "dot",
           ".html": "html"}
"""Output suffix -> format: a graphviz one, ``dot`` (the DOT source itself) or ``html`` (the
interactive view, :mod:`.html`, which graphviz does not draw and no budget limits)."""

MAX_CLUSTERS = 60
"""The most accelerator regions (graphviz clusters) a rendered drawing may have.

``dot``'s cluster layout grows far faster than linearly: on random DAGs whose support
alternates, 43 clusters take 0.2 s, 67 take 1.6 s, 90 take 9 s, 110 take 31 s and 1,400 (a
5,000-op graph) do not finish in hours (``python -m bench run viz``;
docs/evidence/performance.md). Past this budget a
drawing is refused before ``dot`` starts; its DOT text (``.dot``) can still be written."""

MAX_NODES = 2000
"""The most nodes (ops when expanded, regions when collapsed) a rendered drawing may have.

Counting regions alone let ``viz --expand`` of a 20,000-op chain through (a few regions, but
every op a node): ``dot`` ran out of memory after 48 s. Even a plain chain of ops in one
cluster grows about as the cube of its length: 1,000 ops take 0.7 s, 2,000 take 4 s, 4,000
take 39 s."""

TIMEOUT_S = 120.0
"""Seconds any graphviz program may run before it is stopped (a backstop to the budget)."""


class RenderBudgetError(PartitionLabError):
    """A drawing is too large for graphviz to lay out in reasonable time, or ran too long."""


def write(
    plan: PartitionPlan,
    path: str | os.PathLike[str],
    cost: CostBreakdown | None = None,
    *,
    collapse: bool | None = None,
    title: str | None = None,
) -> Path:
    """Draw ``plan`` and write it to ``path``; the format comes from the suffix.

    ``.svg``, ``.png`` and ``.pdf`` are rendered by graphviz's ``dot``; ``.dot`` (or ``.gv``)
    writes the DOT source; ``.html`` writes the interactive view (:func:`.html.write_html`),
    for plans of any size. The file is written to a temporary name in the same directory and
    renamed into place, so a failure leaves no partial file.

    Raises
    ------
    PartitionLabError
        Unknown suffix, missing directory, ``dot`` not installed or failing.
    """
    path = _checked_output(path)
    fmt = FORMATS[path.suffix.lower()]
    if fmt == "html":  # laid out in Python and the browser, not by graphviz: no budget
        from .html import write_html

        return write_html(plan, path, cost, collapse=collapse, title=title)
    if fmt != "dot":
        check_render_budget(plan, path, collapse=collapse)
    source = draw(plan, cost, collapse=collapse, title=title).source
    data = source.encode("utf-8") if fmt == "dot" else render_source(source, fmt)
    write_together({path: data})
    return path


def check_render_budget(plan: PartitionPlan, path: str | os.PathLike[str],
                        collapse: bool | None = None) -> None:
    """:class:`RenderBudgetError` if the drawing of ``plan`` would have more than
    :data:`MAX_CLUSTERS` accelerator regions or :data:`MAX_NODES` nodes, before any graphviz
    program runs; the message says what to do instead. ``collapse`` as for :func:`draw`."""
    clusters = sum(1 for region in plan.regions if region.is_accelerator)
    dot_path = Path(path).with_suffix(".dot")
    html_path = Path(path).with_suffix(".html")
    if collapse is None:
        collapse = len(plan.graph) > COLLAPSE_ABOVE
    nodes = len(plan.regions) if collapse else len(plan.graph)
    if clusters > MAX_CLUSTERS:
        raise RenderBudgetError(
            f"cannot draw {path}: the plan has {clusters} accelerator regions and graphviz "
            f"needs minutes to hours to lay out more than {MAX_CLUSTERS}; explore it in the "
            f"interactive view instead (-o {html_path}: pan, zoom, search, regions that expand "
            f"on click) or write the DOT text (-o {dot_path})")
    if nodes > MAX_NODES:
        what = "regions" if collapse else "ops (one node each when expanded)"
        instead = "" if collapse else "draw it collapsed (without --expand), "
        raise RenderBudgetError(
            f"cannot draw {path}: the drawing has {nodes} {what} and graphviz needs minutes "
            f"to hours or runs out of memory laying out more than {MAX_NODES}; {instead}"
            f"explore it in the interactive view instead (-o {html_path}) or write the DOT "
            f"text (-o {dot_path})")


def write_side_by_side(
    drawings: Sequence[graphviz.Digraph], path: str | os.PathLike[str]
) -> Path:
    """Lay out several drawings (from :func:`draw`) in one row and write them to ``path``.

    For before/after pictures: each drawing keeps its own header, clusters and labels. Each is
    laid out by ``dot``, packed with graphviz's ``gvpack`` and drawn with ``neato -n2``; a
    ``.dot`` path receives the packed, laid-out graph.
    """
    path = _checked_output(path)
    fmt = FORMATS[path.suffix.lower()]
    if fmt == "html":
        raise PartitionLabError(f"cannot write {path}: drawings side by side are graphviz "
                                "drawings (.svg .png .pdf .dot); write each plan's view alone")
    laid_out = b"".join(_run_graphviz(["dot", "-Tdot"], _with_sort_key(d, i), "dot")
                        for i, d in enumerate(drawings))
    # u: keep the given order (each graph's sortv); t: align tops.
    packed = _run_graphviz(["gvpack", f"-array_ut{len(drawings)}"], laid_out, "gvpack")
    data = packed if fmt == "dot" else _run_graphviz(["neato", "-s", "-n2", f"-T{fmt}"],
                                                     packed, "neato")
    return write_atomic(path, data)


def _with_sort_key(drawing: graphviz.Digraph, index: int) -> bytes:
    ordered = drawing.copy()  # the caller's drawing stays as it was
    ordered.attr("graph", sortv=str(index))
    return ordered.source.encode("utf-8")


def render_source(source: str, fmt: str) -> bytes:
    """Run graphviz ``dot -T<fmt>`` on DOT text; errors become one-line PartitionLabErrors."""
    return _run_graphviz(["dot", f"-T{fmt}"], source.encode("utf-8"), "dot")


def _run_graphviz(command: list[str], data: bytes, what: str) -> bytes:
    """Run one graphviz program on ``data``; its output, or a one-line error.

    The program stays in our process group (a terminal's Ctrl-C, or ``kill -- -PGID``, reaches
    it too), and ``subprocess.run`` kills it on any exception while waiting: a Ctrl-C, and
    SIGTERM, which the command line turns into :class:`partition_lab._signals.Terminated`.
    """
    try:
        proc = subprocess.run(command, input=data, capture_output=True, check=False,
                              timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise RenderBudgetError(
            f"graphviz {what} did not finish within {TIMEOUT_S:.0f} s and was stopped; the "
            "drawing is too large: write the DOT text instead (a .dot output)") from None
    except FileNotFoundError as exc:
        raise PartitionLabError(
            f"graphviz's '{command[0]}' program was not found; install graphviz "
            "(apt-get install graphviz) or write a .dot file instead") from exc
    if proc.returncode != 0:
        detail = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        first = detail[0] if detail else f"exit status {proc.returncode}"
        fmt = command[-1].removeprefix("-T")
        raise PartitionLabError(f"graphviz {what} failed to render {fmt}: {first}")
    return proc.stdout


def _checked_output(path: str | os.PathLike[str]) -> Path:
    """``path`` as a Path, if its suffix names a format and its directory exists."""
    path = Path(path)
    if path.suffix.lower() not in FORMATS:
        known = ", ".join(sorted(FORMATS))
        raise PartitionLabError(f"cannot write {path}: unknown suffix {path.suffix!r} "
                                f"(use one of {known})")
    if not path.parent.is_dir():
        raise PartitionLabError(f"cannot write {path}: directory {path.parent} does not exist")
    return path


