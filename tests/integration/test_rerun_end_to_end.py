"""`fusionbench rerun` through the real CLI: one cell of the golden bundle run again, and `compare`
setting the rerun beside the bundle it reran (tests/unit/test_rerun.py holds what it reads and
what it is refused for)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.bundle import manifest
from harness.bundle.migrations import SCHEMA_VERSION
from tests.integration.test_cli_end_to_end import REPO, cells_of, fusionbench, only_bundle

pytestmark = pytest.mark.slow

GOLDEN = REPO / "tests" / "golden" / f"v{SCHEMA_VERSION}"


def test_a_rerun_runs_the_bundles_cell_again_as_the_same_cell_and_compare_says_it_is_a_rerun(tmp_path: Path) -> None:
    """Before, a bundle was run again by writing its stored scenario out as a file: nothing in the
    new bundle named the one it reran, and `compare` set them side by side as any two runs."""
    out = tmp_path / "out"
    done = fusionbench("rerun", str(GOLDEN), "--only", "backend=null,scenario=SingleStream", "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    new = only_bundle(out)
    header, original = (json.loads((root / "bundle.json").read_text()) for root in (new, GOLDEN))
    assert header["rerun_of"] == {"run_id": original["run_id"], "created": original["created"],
                                  "scenario_sha256": original["scenario_sha256"],
                                  "manifest_sha256": manifest.sha256_file(GOLDEN / "MANIFEST.sha256")}
    assert header["scenario"] == original["scenario"] and header["scenario_sha256"] == original["scenario_sha256"]
    (cell,) = cells_of(new).values()
    assert cell["status"] == "valid" and cell["id"] in {planned["id"] for planned in original["cells"]}
    assert fusionbench("validate", str(new)).returncode == 0
    compared = fusionbench("compare", str(GOLDEN), str(new))
    assert "B is a rerun of A: A's cells, run again from the scenario it stores" in compared.stdout, compared.stdout
    # the golden's other valid cells, which the rerun's --only left out: said so, not unpaired
    assert "## Not rerun: 11 valid cell(s) the rerun's --only left out" in compared.stdout, compared.stdout
