"""Edits the tests make to a copy of a golden bundle, each leaving a bundle that validates."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from harness.bundle import manifest


def without_backend(root: Path, backend: str, only: list[str]) -> None:
    """`root` as a run with `--only backend=...` (`only`) leaves it: the cells of `backend` neither
    listed nor recorded, the manifest written again."""
    header = json.loads((root / "bundle.json").read_text())
    gone = [e["id"] for e in header["cells"]
            if json.loads((root / "cells" / f"{e['id']}.json").read_text())["config"]["backend"] == backend]
    header["cells"] = [e for e in header["cells"] if e["id"] not in gone]
    header["only"] = {"backend": only}
    (root / "bundle.json").write_text(json.dumps(header))
    for cell in gone:
        (root / "cells" / f"{cell}.json").unlink()
        if (root / "cells" / cell).is_dir():  # a skipped cell has no folder
            shutil.rmtree(root / "cells" / cell)
    manifest.write(root)
