"""What a cell's record keeps of its worker's answer, so that a run never writes a record it cannot
read back (a figure that disagrees with the phase it comes from ended the run with exit 2 as the
bundle was read): of the answer a killed worker kept as its phases ended (`worker.checkpoint`, read
by harness/run/isolation.py), the figures unless the record they make is refused, then none; of a
whole answer the bundle would refuse, nothing, the cell failed with the first refusal as its
reason. Either way the refusals are said in the cell's log."""

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
    if _refusals(record, fields, log_path, "what the worker kept of its answer"):
        return {"metrics": {}}
    return fields


def answered(answer: WorkerAnswer, record: dict[str, Any], log_path: Path) -> dict[str, Any]:
    """The fields `record` takes of a worker's whole answer; where the record they make is refused,
    a failed cell's instead, keeping no figure, its reason the first refusal."""
    fields = answer.record()
    refused = _refusals(record, fields, log_path, "the worker's answer")
    if not refused:
        return fields
    return {"status": "failed", "reasons": [f"the worker's answer makes a record this harness refuses: {refused[0][:500]}"],
            "warnings": [], "metrics": {}}


def _refusals(record: dict[str, Any], fields: dict[str, Any], log_path: Path, what: str) -> list[str]:
    """Why the bundle would refuse `record` with `fields`, each said in the cell's log; none: it takes them."""
    refused = problems({**record, **fields, "schema_version": SCHEMA_VERSION}, "the record")
    if refused:
        with log_path.open("a") as log_file:
            log_file.write(f"\nfusionbench: {what} is not recorded: {'; '.join(refused)[:2000]}\n")
    return refused
