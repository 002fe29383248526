"""What `--resume` may start from.

A resumed run re-hashes the bundle when it closes it, so a bundle edited since it was written
would come out of the resume looking measured. `check` therefore asks `validate` first and lets
the resume go on only from a bundle it accepts, with two things forgiven that forge nothing.
"""

from __future__ import annotations

from harness.bundle import manifest
from harness.bundle.files import CELLS
from harness.bundle.validate import validate
from harness.bundle.writer import Bundle
from harness.errors import BundleError


def check(bundle: Bundle) -> None:
    """Resume only a bundle validate accepts as it stands: one edited since it was written would be
    re-hashed by the resumed run and pass for a measured one. Two things are forgiven: a run that
    was killed (`running`) left no manifest to check (every other check still applies), and a cell
    whose record was deleted, with its files, so that it runs again, forges nothing."""
    killed = bundle.header["state"] == "running"
    verdict = validate(bundle.root, integrity=not killed, resuming=True)
    rerun = {entry["id"] for entry in bundle.header["cells"] if not bundle.cell_path(entry["id"]).exists()}
    problems = [line for line in verdict.problems if not _of_a_cell_to_rerun(manifest.missing_file(line), rerun)]
    if not problems:
        return
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    raise BundleError(f"cannot resume {bundle.root}: it fails validation: {problems[0]}{more}; "
                      f"see `fusionbench validate {bundle.root}`")


def _of_a_cell_to_rerun(missing: str | None, rerun: set[str]) -> bool:
    """Whether `missing` (a file of the bundle) is the record or an artifact of a cell in `rerun`."""
    parts = (missing or "").split("/")
    return len(parts) > 1 and parts[0] == CELLS and parts[1].removesuffix(".json") in rerun
