"""Every document the README, the docs and the package point to is in the repository: a fresh
clone resolves each relative link, each "targets-reference §N" and each "seeds/NNN"."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from repo_paths import REPO_ROOT

ROOT = REPO_ROOT
DOCS = ROOT / "docs"
REFERENCE = DOCS / "guide" / "targets-reference.md"
FIELD_REPORTS = DOCS / "evidence" / "field-reports.md"
MARKDOWN = [ROOT / "README.md", *sorted(DOCS.rglob("*.md")),
            *sorted((ROOT / "examples").rglob("*.md")), *sorted((ROOT / "bench").rglob("*.md")),
            *sorted((ROOT / "experiments").rglob("*.md"))]
# Where the package and its tests cite the reference or the field reports.
CITING = [p for folder in ("src", "tests", "examples", "bench", "experiments")
          for p in sorted((ROOT / folder).rglob("*"))
          if p.suffix in (".py", ".toml", ".md", ".json") and p.is_file()]

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CITATION = re.compile(r"targets-reference(?:\.md)?,? (?:§|section |sections )?(\d+)(?:\.(\d+))?")
SEED = re.compile(r"seeds/(\d{3})")


def _sections() -> set[tuple[str, str | None]]:
    """("1", "4") for a heading "### 1.4", ("2", None) for "## 2.", ("4", "11") for item 11 of
    section 4 (its open uncertainties are a numbered list)."""
    found: set[tuple[str, str | None]] = set()
    section = None
    for line in REFERENCE.read_text(encoding="utf-8").splitlines():
        if match := re.match(r"## (\d+)\. ", line):
            section = match.group(1)
            found.add((section, None))
        elif match := re.match(r"### (\d+)\.(\d+) ", line):
            found.add((match.group(1), match.group(2)))
        elif section == "4" and (match := re.match(r"(\d+)\. ", line)):
            found.add(("4", match.group(1)))
    return found


@pytest.mark.parametrize("doc", MARKDOWN, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue  # a web address or an anchor
        assert (doc.parent / target.split("#")[0]).exists(), f"{doc.name} links to {target}"


def test_docs_are_a_guide_and_evidence_indexed_by_the_readme() -> None:
    """docs/ holds its index, guide/, evidence/ and the pictures, and nothing else; the index
    links every page of the guide and the evidence (their results/ folder as a whole)."""
    assert {p.name for p in DOCS.iterdir()} == {"README.md", "guide", "evidence", "img"}
    index = (DOCS / "README.md").read_text(encoding="utf-8")
    linked = {(DOCS / target.split("#")[0]).resolve() for target in LINK.findall(index)}
    pages = {p.resolve() for folder in ("guide", "evidence") for p in (DOCS / folder).glob("*.md")}
    assert pages and not pages - linked, f"docs/README.md does not link {sorted(pages - linked)}"
    assert (DOCS / "evidence" / "results").resolve() in linked


def test_no_reference_points_outside_the_repository() -> None:
    for path in [*MARKDOWN, *CITING]:
        if "cost_models" in path.parts or path == Path(__file__).resolve():
            continue  # profiles name the reference by its file name (checked below)
        text = path.read_text(encoding="utf-8", errors="replace")
        assert "../shared/" not in text, f"{path.relative_to(ROOT)} points to ../shared/"


def test_every_cited_section_of_the_targets_reference_exists() -> None:
    sections = _sections()
    assert ("1", "4") in sections and ("4", "11") in sections  # the parser reads the page
    cited = {}
    for path in CITING + [ROOT / "README.md"]:
        for major, minor in CITATION.findall(path.read_text(encoding="utf-8", errors="replace")):
            cited[(major, minor or None)] = path.relative_to(ROOT)
    assert len(cited) > 10  # the data files and profiles cite it throughout
    missing = {f"{a}.{b}" if b else a: str(p) for (a, b), p in cited.items()
               if (a, b) not in sections}
    assert not missing, f"cited sections not in docs/guide/targets-reference.md: {missing}"


def test_every_cited_field_report_is_described() -> None:
    described = set(SEED.findall(FIELD_REPORTS.read_text(encoding="utf-8")))
    cited = {n for p in CITING for n in SEED.findall(p.read_text(encoding="utf-8",
                                                                errors="replace"))}
    assert cited and cited <= described, cited - described
    assert "https://medium.com/nttlabs/" in FIELD_REPORTS.read_text(encoding="utf-8")
