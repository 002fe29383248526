"""How a run ends: its bundle closed (`close`: the state it ended in, the machines its cells ran
on, the checksums and the report), the lines the run ends with on the console (`last_lines`: the
summary tables of harness/run/summary.py, warnings, the cells not run yet, skipped, failed or
invalid) and its exit code by its cells' statuses (`exit_code`)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

from rich.console import Console
from rich.text import Text

from harness.bundle import manifest
from harness.bundle.cell_record import CellRecord
from harness.bundle.files import HEADER
from harness.bundle.reader import load
from harness.bundle.statuses import BAD, FINISHED, nothing_measured
from harness.bundle.writer import Bundle, utc_now
from harness.errors import EXIT_NOTHING_MEASURED, BundleError, OutputError
from harness.plain_text import one_line, shell_word, visible
from harness.reporting.report import REPORT_HTML, REPORT_MD, render
from harness.run import resumable
from harness.run.last_words import whole_log
from harness.run.run_request import RunRequest
from harness.run.summary import fusion_summary, skipped_lines, summary_table, time_line

#: Failed or invalid cells whose first reason the run's last lines give.
SHOWN_REASONS = 10


def close(bundle: Bundle, state: str, console: Console, why: str | None = None) -> None:
    """Record how the run ended (an `interrupted` one with `why`, and the cells a `--resume` runs,
    which the report says), checksum the bundle, then add its report (and checksum again:
    the bundle is complete and valid even if rendering the report fails). A report of an earlier
    close goes first, and one cut short (Ctrl-C, SIGTERM, a full disk) is removed, so that the
    checksums cover every file either way; the run then says how to write it. A disk that fills up
    before the bundle is sealed leaves it `running`, which `--resume` completes (OutputError)."""
    reports = [bundle.root / REPORT_MD, bundle.root / REPORT_HTML]
    bundle.header.pop("interruption", None)  # an earlier close's: this one says how the run ended now
    interruption = ({"interruption": {"why": why or "not said", "resume_runs": resumable.left_to_run(bundle)}}
                    if state == "interrupted" else {})
    try:
        for path in reports:
            path.unlink(missing_ok=True)
        bundle.seal(state=state, ended=utc_now(), nodes=nodes(bundle.cells()), **interruption)
    except OSError as exc:
        raise OutputError(f"could not close {bundle.root}: {exc.strerror or exc}; its finished cells are intact: once "
                          f"it can be written (room made, rights given), run --resume {shell_word(bundle.root)}") from None
    try:
        render(load(bundle.root), bundle.root)
    except BaseException as exc:
        _without_its_report(bundle, state, exc, console)
    try:
        bundle.write_manifest()
    except BaseException as exc:
        if not _manifest_lists(bundle.root, REPORT_MD, REPORT_HTML):  # its write never landed
            _without_its_report(bundle, state, exc, console)
        if isinstance(exc, OSError):  # landed, then the folder's fsync failed: the bundle is whole
            raise OutputError(f"could not close {bundle.root}: {exc.strerror or exc}; the bundle is {state} and "
                              "valid") from None
        raise


def _without_its_report(bundle: Bundle, state: str, exc: BaseException, console: Console) -> NoReturn:
    """Leave the bundle, sealed as `state`, valid without its report, which `exc` cut short (the
    manifest of the seal lists none), and raise: Ctrl-C and SIGTERM as they are, saying how to
    write the report; OSError (a full disk) as OutputError, which says it; anything else, a bug,
    as it is."""
    for path in (bundle.root / REPORT_MD, bundle.root / REPORT_HTML):
        path.unlink(missing_ok=True)
    if not isinstance(exc, (KeyboardInterrupt, OSError)):
        raise exc  # a bug: its traceback, the bundle valid without its report
    how = ("interrupted while writing the report" if isinstance(exc, KeyboardInterrupt)
           else f"could not write the report ({exc.strerror or exc})")
    line = (f"{how}: the bundle is {state} and valid without {REPORT_MD} and {REPORT_HTML}; write them "
            f"with `fusionbench report {shell_word(bundle.root)}` (or `fusionbench run --resume "
            f"{shell_word(bundle.root)}`)")
    if isinstance(exc, OSError):
        raise OutputError(line) from None
    console.print(Text(line, style="yellow"))
    raise exc


def _manifest_lists(root: Path, *names: str) -> bool:
    """Whether the manifest in `root` lists each of `names` (false where it cannot be read)."""
    try:
        listed = manifest.parse((root / manifest.MANIFEST).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, BundleError):
        return False
    return all(name in listed for name in names)


@contextmanager
def said_if_stopped(bundle: Bundle, console: Console) -> Iterator[None]:
    """Where a stop (Ctrl-C, SIGTERM) outside the sweep's own handling lands, as a run's bundle
    closes or once it is closed (a second Ctrl-C in the close of an interrupted sweep, or one
    while the last lines are printed): say what it left, then let it end the run as a stop."""
    try:
        yield
    except KeyboardInterrupt:
        line = what_a_stop_left(bundle.root)
        if line:
            console.print(Text(line, style="yellow"))
        raise


def what_a_stop_left(root: Path) -> str:
    """The line a run stopped outside its sweep ends with, from the bundle as it lies on disk:
    left `running` (its seal had not landed), or closed with its report. Empty where the report
    was cut short: `_without_its_report` has said so."""
    try:
        state = json.loads((root / HEADER).read_bytes()).get("state")
    except (OSError, ValueError, AttributeError):
        state = None
    resume = f"--resume {shell_word(root)}"
    if state == "running":
        return (f"stopped before {visible(root)} was closed: its finished cells are kept, but it is left `running`, "
                f"without its checksums, which `validate` refuses; complete it with {resume} (it runs only the cells "
                "that have no record)")
    if not all((root / name).is_file() for name in (REPORT_MD, REPORT_HTML, manifest.MANIFEST)):
        return ""
    return (f"stopped once {visible(root)} was closed: it is {state} and valid, with its report"
            + (f"; complete it with {resume}" if state == "interrupted" else ""))


def nodes(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Every machine the bundle's cells ran on, by hostname, with its CPU and GPUs as the cell saw them."""
    seen: dict[str, Any] = {}
    for record in records:
        node = record.get("node") or {}
        if node.get("hostname"):
            seen.setdefault(node["hostname"], {k: node[k] for k in ("cpu", "gpus") if k in node})
    return seen


def last_lines(bundle: Bundle, request: RunRequest, missing: list[str], noise_warning: str | None,
               budget_cause: str | None, console: Console) -> int:
    """Print what a run ends with, once its bundle is closed (`missing`: the bundle's cells not
    finished; `noise_warning`: the machine's, as the run said it when it began; `budget_cause`: why
    `run --budget-s` left cells for --resume, harness/run/time_budget.py `why_left`); return the
    run's exit code."""
    records = bundle.records()
    console.print(summary_table(records))
    ablation = fusion_summary(records, bundle.header.get("resumed"))
    if ablation is not None:
        console.print(ablation)
    console.print(Text(time_line(records)))
    if noise_warning:
        console.print(Text(f"warning: {noise_warning}", style="yellow"))
    warned = [r for r in records if r.warnings]
    if warned:
        console.print(Text(f"{len(warned)} cell(s) have warnings (noise, drift, LoadGen against device timing, a busy "
                           "machine): see report.md, section Warnings", style="yellow"))
    bad = [r for r in records if r.status in BAD]
    console.print(Text(f"bundle: {visible(bundle.root)} (report: {visible(bundle.root / REPORT_HTML)})"))
    cut = [cell for cell in missing if bundle.finished(cell)]  # kept with fewer rounds than asked
    not_run = len(missing) - len(cut)
    if missing:
        causes = causes_left(request, budget_cause)
        why = f" ({', or '.join(causes)})" if causes else ""
        said = [f"{not_run} cell(s) of the bundle not run yet{why}"] if not_run else []
        said += [f"{len(cut)} cell(s) kept with fewer rounds than asked (the time budget), which a resume times afresh, "
                 "every round"] if cut else []
        console.print(Text(f"{'; '.join(said)}: complete them with --resume {shell_word(bundle.root)}", style="yellow"))
    for line in skipped_lines(records, SHOWN_REASONS):
        console.print(Text(line, style="dim"), soft_wrap=True)  # one line each, whole, to grep and to copy
    if bad:
        console.print(Text(f"{len(bad)} cell(s) failed or invalid:", style="red"))
        for record in bad[:SHOWN_REASONS]:  # each cell's first reason; its record has them all
            console.print(bad_line(record, bundle.root), soft_wrap=True)  # one line each, whole, to grep and to copy
        more = f"{len(bad) - SHOWN_REASONS} more, and " if len(bad) > SHOWN_REASONS else ""
        console.print(Text(f"  ({more}every reason in each cell's JSON and report.md)", style="red"))
    statuses = [r.status for r in records if r.status in FINISHED]  # `interrupted`: a stop's, to run again
    if not bad and nothing_measured(statuses):
        console.print(Text(f"nothing measured: every cell run ({len(statuses)}) was skipped, each for its reason above",
                           style="red"))
    if not statuses:  # `--budget-s` spent before any cell had a result: not a pass either
        console.print(Text("nothing measured: no cell of the bundle has a result yet", style="red"))
        return EXIT_NOTHING_MEASURED
    return exit_code(statuses)


def bad_line(record: CellRecord, root: Path) -> Text:
    """A failed or invalid cell's line as the run ends: its label, its status and its first reason,
    and, for a failed cell, where its log is (a failure's traceback is there, not in the reason),
    named once: a reason that quotes the worker's last words names the log too (`whole log:`, in the
    bundle), which this line's path, the whole of it, replaces."""
    reason = record.reasons[0] if record.reasons else "no reason recorded"
    log = record.log if record.status == "failed" and record.log and (root / record.log).is_file() else None
    if log is None:
        return Text(f"  {visible(record.config.shown_label)}: {record.status}: {one_line(reason)}")
    return Text(f"  {visible(record.config.shown_label)}: {record.status}: "
                f"{one_line(reason.removesuffix(whole_log(log)))} (its log: {visible(root / log)})")


def causes_left(request: RunRequest, budget_cause: str | None) -> list[str]:
    """Why a run that ran its sweep to its end left cells of its bundle for `--resume`: outside a
    resume's `--only` (a new run's bundle holds only the cells its --only chose), the time budget
    (`budget_cause`, harness/run/time_budget.py `why_left`)."""
    return (["outside --only"] if request.only and request.resume is not None else []) + (
        [budget_cause] if budget_cause else [])


def why_left(request: RunRequest, budget_cause: str | None, cut: bool) -> str:
    """What the bundle of a run that left cells for `--resume` records of why (bundle.json
    `interruption.why`): its causes, or the time budget where it cut a cell's rounds (`cut`) alone."""
    causes = causes_left(request, budget_cause) or (["the time budget cut cells short of their rounds"] if cut else [])
    budget = f" (--budget-s {request.budget_s:g})" if request.budget_s is not None and (budget_cause or cut) else ""
    return (", or ".join(causes) or "cells left without a result") + budget


def exit_code(statuses: Sequence[str]) -> int:
    """A run's exit code by its cells' statuses (a run and a resume of its complete bundle alike): 1
    where one failed or is invalid, 4 where every one was skipped, else 0."""
    if any(status in BAD for status in statuses):
        return 1
    return EXIT_NOTHING_MEASURED if nothing_measured(statuses) else 0
