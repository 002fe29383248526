"""What the record of a cell whose worker never answered keeps of the answer it kept as its phases
ended (`worker.checkpoint`, read by harness/run/isolation.py): the figures, unless the record they
make is one the bundle would refuse (a figure that disagrees with the phase it comes from); then
none, said in the cell's log, so a run never writes a record it cannot read back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.bundle.cell_record import problems
from harness.bundle.migrations import SCHEMA_VERSION
from harness.measure.protocol import WorkerAnswer


def kept(partial: WorkerAnswer | None, record: dict[str, Any], log_path: Path) -> dict[str, Any]:
    """The fields of `partial` that `record` (the failed cell's, its status and reasons set) takes;
    `{"metrics": {}}` where there is none or the record it makes is refused."""
    if partial is None:
        return {"metrics": {}}
    fields = {k: v for k, v in partial.record().items() if k not in ("status", "reasons", "warnings")}
    refused = problems({**record, **fields, "schema_version": SCHEMA_VERSION}, "the record")
    if refused:
        with log_path.open("a") as log_file:
            log_file.write(f"\nfusionbench: what the worker kept of its answer is not recorded: {'; '.join(refused)[:2000]}\n")
        return {"metrics": {}}
    return fields
