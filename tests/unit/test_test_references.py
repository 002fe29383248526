"""Every test the docs and the code name (`tests/unit/test_rerun.py::test_...`) is there: the README,
docs/*.md (docs/reliability.md gives a test for each defect it lists) and the harness's comments.
Two rows of docs/reliability.md named tests that had been renamed or moved to another module. The
result pages under docs/results are each a session's record, of the tests as they were then."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

#: `tests/<path>.py::<name>`, a test function or class; a parametrised test is named without its ids.
_REFERENCE = re.compile(r"(tests/[A-Za-z0-9_/]+\.py)::([A-Za-z_][A-Za-z0-9_]*)")


def _named() -> dict[str, set[str]]:
    """Each file that names a test, and the references it holds."""
    sources = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *sorted((REPO / "harness").rglob("*.py"))]
    return {str(source.relative_to(REPO)): {f"{m[1]}::{m[2]}" for m in _REFERENCE.finditer(source.read_text())}
            for source in sources}


def _defined(module: Path, name: str) -> bool:
    return re.search(rf"^\s*(async def|def|class) {name}\b", module.read_text(), re.MULTILINE) is not None


def test_every_test_the_docs_and_the_code_name_is_defined_where_they_say() -> None:
    named = _named()
    assert sum(len(refs) for refs in named.values()) > 100  # the pattern still finds what the docs write
    missing = sorted(f"{source}: {ref}" for source, refs in named.items() for ref in refs
                     if not (REPO / ref.split("::")[0]).is_file()
                     or not _defined(REPO / ref.split("::")[0], ref.split("::")[1]))
    assert missing == []


def test_a_renamed_test_is_found_missing() -> None:
    """The check above fails where a test was renamed: its pattern reads a reference as written."""
    module = REPO / "tests" / "unit" / "test_test_references.py"
    assert _defined(module, "test_a_renamed_test_is_found_missing")
    assert not _defined(module, "test_a_renamed_test_is_found")
    (found,) = _REFERENCE.finditer("see `tests/unit/test_rerun.py::test_a_bundle_of_a_newer_schema_is_refused`.")
    assert (found[1], found[2]) == ("tests/unit/test_rerun.py", "test_a_bundle_of_a_newer_schema_is_refused")
