"""docs/results/README.md lists every result page, and every link it holds is there: a page added
without its line, or renamed, fails here. A findings page (`fusionbench findings` rendered over kept
bundles) is reached from the page that ran it, so it is held to be linked from some page instead."""

from __future__ import annotations

import re
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"
_LINK = re.compile(r"\]\(([^)#\s]+)\)")


def _links(page: Path) -> set[str]:
    return set(_LINK.findall(page.read_text()))


def _pages() -> set[str]:
    return {page.name for page in RESULTS.glob("*.md") if page.name != "README.md"}


def test_the_index_lists_every_result_page_and_each_link_resolves() -> None:
    index = _links(RESULTS / "README.md")
    missing = {name for name in _pages() if not name.endswith("-findings.md")} - index
    assert not missing, f"pages docs/results/README.md does not list: {sorted(missing)}"
    broken = {link for link in index if not (RESULTS / link).exists()}
    assert not broken, f"links in docs/results/README.md to nothing: {sorted(broken)}"


def test_every_findings_page_is_linked_from_a_result_page() -> None:
    linked = set().union(*(_links(RESULTS / name) for name in _pages()))
    orphans = {name for name in _pages() if name.endswith("-findings.md")} - linked
    assert not orphans, f"findings pages no result page links: {sorted(orphans)}"
