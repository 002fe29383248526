"""A copy of a golden bundle made resumable on this machine: a resume is refused where the
versions of its backends' libraries differ from the first start's (harness/run/resume_refusals.py),
and the golden bundles ran on torch 2.14, where a machine of torch 2.11 also runs the suite."""

from __future__ import annotations

import json
from pathlib import Path

from harness import registry
from harness.bundle import manifest


def as_run_here(root: Path) -> None:
    """The bundle's first-start probe of its backends as this machine's reads them (each available
    backend's versions; none where it cannot run here), its manifest written again."""
    header = json.loads((root / "bundle.json").read_text())
    for name, entry in header["backends"].items():
        if entry.get("available"):
            backend = registry.load(name)()
            ok = backend.availability(header["device"]).ok
            entry["versions"] = {str(k): str(v) for k, v in backend.versions().items()} if ok else {}
    (root / "bundle.json").write_text(json.dumps(header))
    manifest.write(root)
