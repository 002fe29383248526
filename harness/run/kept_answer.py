"""What a cell's record keeps of its worker's answer, so that a run never writes a record it cannot
read back (a figure that disagrees with the phase it comes from ended the run with exit 2 as the
bundle was read): of the answer a killed worker kept as its phases ended (`worker.checkpoint`, read
by harness/run/isolation.py), every figure the record takes, one refused figure leaving out itself
alone (`kept`); of a whole answer the bundle would refuse, nothing, the cell failed with the first
refusal as its reason. Either way the refusals are said in the cell's log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.bundle.cell_record import problems
from harness.bundle.migrations import SCHEMA_VERSION
from harness.measure.protocol import WorkerAnswer
from harness.plain_text import shortened

#: A refusal's characters in a failed cell's reason, and the refusals' in the note the log gets: the record
#: holds a refusal's text (a figure and the phase it disagrees with), not a dump; a cut one ends `...`.
REASON_CHARS = 500
LOG_NOTE_CHARS = 2000


def kept(partial: WorkerAnswer | None, record: dict[str, Any], log_path: Path) -> dict[str, Any]:
    """The fields of `partial` that `record` (the failed cell's, its status and reasons set) takes:
    all of them, or where the record they make is refused, those it takes without the figures
    (top-level metrics) it refuses, each figure tried beside those taken until no more is taken
    (a derived figure once its sources are); `{"metrics": {}}` where there is no partial answer or
    even its fields without figures are refused."""
    if partial is None:
        return {"metrics": {}}
    fields = {k: v for k, v in partial.record().items() if k not in ("status", "reasons", "warnings")}
    refused = _refusals(record, fields)
    if not refused:
        return fields
    bare = {**fields, "metrics": {}}
    figures = fields["metrics"]
    taken: dict[str, Any] = {}
    grew = True
    while grew:  # a figure derived from others (first_call_ratio) is taken once they are
        grew = False
        for name, value in figures.items():
            if name not in taken and not _refusals(record, {**bare, "metrics": {**taken, name: value}}):
                taken[name] = value
                grew = True
    salvaged = {**bare, "metrics": taken}
    if _refusals(record, salvaged):  # even without any figure
        salvaged = {"metrics": {}}
    left_out = sorted(set(figures) - set(salvaged["metrics"]))
    _say(log_path, f"of what the worker kept of its answer, {_which(left_out, salvaged)} not recorded", refused)
    return salvaged


def answered(answer: WorkerAnswer, record: dict[str, Any], log_path: Path) -> dict[str, Any]:
    """The fields `record` takes of a worker's whole answer; where the record they make is refused,
    a failed cell's instead, keeping no figure, its reason the first refusal."""
    fields = answer.record()
    refused = _refusals(record, fields)
    if not refused:
        return fields
    _say(log_path, "the worker's answer is not recorded", refused)
    reason = f"the worker's answer makes a record this harness refuses: {shortened(refused[0], REASON_CHARS)}"
    return {"status": "failed", "reasons": [reason], "warnings": [], "metrics": {}}


def _which(left_out: list[str], salvaged: dict[str, Any]) -> str:
    """Which part of the worker's answer so far a record leaves out, in words."""
    if set(salvaged) == {"metrics"} and not salvaged["metrics"]:
        return "all of it is"
    if not left_out:
        return "its figures are"
    return f"metrics {', '.join(left_out)} {'is' if len(left_out) == 1 else 'are'}"


def _refusals(record: dict[str, Any], fields: dict[str, Any]) -> list[str]:
    """Why the bundle would refuse `record` with `fields`; none: it takes them."""
    return problems({**record, **fields, "schema_version": SCHEMA_VERSION}, "the record")


def _say(log_path: Path, what: str, refused: list[str]) -> None:
    """Say in the cell's log what is not recorded, and why."""
    with log_path.open("a") as log_file:
        log_file.write(f"\nfusionbench: {what}: {shortened('; '.join(refused), LOG_NOTE_CHARS)}\n")
