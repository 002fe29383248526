"""`fusionbench validate RUN_DIR`: can this bundle be trusted as it is?

Six layers, each reported one problem per line as `<file>: <what is wrong>`:
1. integrity: MANIFEST.sha256 lists every file with its SHA-256; an edited, missing or added
   file, a link or a special file is a problem (`harness.bundle.manifest`);
2. schema: bundle.json and every cell against the JSON Schema of the version they were written
   with (`harness.bundle.schema`, checked by `harness.bundle.schema_check`), which also bounds every
   figure to a sane range;
3. consistency: every cell bundle.json lists has a record (unless the run says it did not
   finish), no record is unlisted, each id is the hash of its config, the scenario hash matches,
   a `valid` cell really is valid, summaries agree with their raw samples, the fusion report's
   counts are its kernels' counted again (its record's check, `passes_record.FusionReportRecord`);
4. LoadGen: each cell's validity, scenario, metric, results and settings are read again from its
   own detail and summary logs and must match (`harness.bundle.loadgen_check`);
5. MLPerf: each cell's accuracy, compliance verdicts and user.conf are derived again from the
   files the bundle keeps (`harness.bundle.mlperf_check`), and its accuracy against the data set's
   own labels file where one is given (`--labels`);
6. figures: every figure a cell computed from others is computed again, and each cell must be one
   its bundle's scenario expands to (`harness.bundle.figures_check`).

Reading is read-only and bounded (`harness.bundle.reader`), every path a bundle names is confined
to it (`harness.bundle.confine`), and each file is read once (`harness.bundle.snapshot`): the bytes
the manifest's hash is taken of are the bytes the later layers read. A file that cannot be used at
all (a FIFO, one over its size limit) is one problem line, and the checks that need it are skipped.
A file or folder this user may not read, or the system fails to read, says nothing of the bundle:
it is no problem line but a refusal of the whole (BundleUnreadable), naming it, for no verdict
can be given on files not read. The verdict hands on the bundle as read (`Verdict.loaded`), so a
command that validates before it reads reads nothing again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.bundle import (
    cell_record,
    figures_check,
    header_record,
    loadgen_check,
    manifest,
    mlperf_check,
    record_base,
    schema_check,
    traffic_check,
)
from harness.bundle.files import CELLS, HEADER
from harness.bundle.reader import LoadedBundle, check_root, load, lookup
from harness.bundle.snapshot import Snapshot
from harness.bundle.statuses import FINISHED
from harness.bundle.tolerance import close, number
from harness.errors import BundleError, BundleUnreadable, SchemaVersionError
from harness.plain_text import one_line
from harness.precision import PRECISIONS, max_abs_limit
from harness.scenario import checked_rows
from harness.stats.summary import summarize_ns


@dataclass
class Verdict:
    """What validate found: `problems` make the bundle invalid; `notes` do not."""

    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    cells: int = 0
    files: int = 0
    accuracy_runs: int = 0  # cells with an accuracy record
    loaded: LoadedBundle | None = None  # the bundle as read, where it could be read at all

    @property
    def ok(self) -> bool:
        return not self.problems


def validate(source: Path | Snapshot, *, integrity: bool = True, resuming: bool = False,
             reference: mlperf_check.Reference | None = None) -> Verdict:
    """Every problem of the bundle at `source` (a path, or the snapshot a resume opened it with).
    Raises BundleError only when it is no bundle at all (no directory, no bundle.json),
    BundleUnreadable when this user cannot read a folder or file of it (the line names the bundle
    and the first, with a count of the others), SchemaVersionError when it is newer than this
    harness. `integrity=False` skips the first layer: for a run that was killed, whose manifest is
    gone. `resuming`: the bundle is about to be completed, so cells without a record are notes.
    `reference`: a labels file from outside the bundle that every accuracy run is scored against too
    (`validate --labels`)."""
    files = source if isinstance(source, Snapshot) else Snapshot(source)
    check_root(files.root)
    try:
        verdict = _verdict(files, integrity, resuming, reference)
    except BundleUnreadable as exc:  # a folder not listed: nothing under it was seen
        raise _unread(files.root, files.unreadable or [str(exc)]) from None
    if files.unreadable:  # a layer took a file it could not read for a problem of its own
        raise _unread(files.root, files.unreadable)
    return verdict


def _unread(root: Path, unreadable: list[str]) -> BundleUnreadable:
    """The refusal of the bundle at `root`, of which `unreadable` could not be read."""
    more = f" (and {len(unreadable) - 1} more unreadable)" if len(unreadable) > 1 else ""
    return BundleUnreadable(f"{root}: {unreadable[0]}{more}")


def _verdict(files: Snapshot, integrity: bool, resuming: bool, reference: mlperf_check.Reference | None) -> Verdict:
    verdict = Verdict()
    if integrity:
        verdict.problems += manifest.problems(files)
    else:  # no manifest to check (a killed run), but a link still leads out of the bundle
        verdict.problems += manifest.links_and_special_files(files)
    verdict.files = len(files.walk()[0])
    try:
        loaded = load(files)
    except SchemaVersionError:
        raise
    except BundleError as exc:  # a truncated or hostile file: the checks that need it cannot run
        verdict.problems.append(str(exc))
        return verdict
    verdict.cells = len(loaded.cells)
    verdict.loaded = loaded
    if integrity and verdict.problems and loaded.header.get("state") == "running":  # so far the manifest's alone
        verdict.notes.append(f"{HEADER}: the run is running: a run killed, or stopped as it wrote its checksums, "
                             "leaves them missing or out of date; where no process runs it, finish it with --resume")
    malformed = schema_check.problems(loaded.raw_header, "bundle", loaded.version, HEADER)
    for cell_id, raw in loaded.raw_cells.items():
        where = f"{CELLS}/{cell_id}.json"
        too_long = _oversized(raw)  # refused before the schema, which would spend seconds on each item
        malformed += [f"{where}: {line}" for line in too_long] or schema_check.problems(raw, "cell", raw["schema_version"],
                                                                                         where)
    verdict.problems += malformed
    if malformed:
        return verdict  # the consistency checks read fields the schema guarantees
    _consistency(loaded, verdict, resuming)
    for cell in loaded.cells:
        verdict.problems += loadgen_check.problems(files, cell)
        verdict.problems += traffic_check.log_problems(files, cell)
        raw = loaded.raw_cells.get(cell["id"])
        written = raw.get("schema_version") if isinstance(raw, dict) else None
        found, notes = mlperf_check.problems(files, cell, written if isinstance(written, int) else loaded.version,
                                             reference)
        verdict.problems += found
        verdict.notes += notes
        verdict.accuracy_runs += cell["metrics"].get("accuracy") is not None
    verdict.problems += figures_check.problems(loaded)
    verdict.problems += header_record.problems(loaded.header, HEADER)  # upgraded: the typed header and cells
    for cell in loaded.cells:
        verdict.problems += cell_record.problems(cell, f"{CELLS}/{cell['id']}.json", loaded.model_plugins)
    return verdict


def _consistency(loaded: LoadedBundle, verdict: Verdict, resuming: bool) -> None:
    from harness.scenario.cells import cell_id
    from harness.scenario.loading import sha256 as scenario_sha256

    header = loaded.header
    listed = [entry["id"] for entry in header["cells"]]
    if len(set(listed)) != len(listed):
        verdict.problems.append(f"{HEADER}: cells lists an id more than once")
    if scenario_sha256(header["scenario"]) != header["scenario_sha256"]:
        verdict.problems.append(f"{HEADER}: scenario_sha256 does not match the stored scenario")
    rerun_of = header.get("rerun_of")
    if isinstance(rerun_of, dict) and rerun_of.get("scenario_sha256") != header["scenario_sha256"]:
        # a rerun stores the scenario of the bundle it reran unchanged: `compare` would call another run a rerun
        verdict.problems.append(f"{HEADER}: rerun_of.scenario_sha256 is not the run's own: a rerun runs the scenario "
                                "of the bundle it reran, unchanged")
    why = lookup(header, "interruption", "why")
    stopped = f"{HEADER}: the run is {header['state']}{f' ({one_line(why)})' if why else ''}"
    if loaded.missing:
        shown = ", ".join(loaded.missing[:3]) + (", ..." if len(loaded.missing) > 3 else "")
        message = f"{len(loaded.missing)} of {len(listed)} listed cell(s) have no record ({shown})"
        if header["state"] in ("running", "interrupted") or resuming:
            verdict.notes.append(f"{stopped}: {message}; finish it with --resume")
        else:
            verdict.problems.append(f"{HEADER}: {message}")
    elif why and header["state"] == "interrupted":  # every cell has a record: some interrupted, or cut short of their rounds
        verdict.notes.append(f"{stopped}; finish it with --resume")
    interruption = header.get("interruption")
    if isinstance(interruption, dict):  # absent before 2026-12-06; the schema types it
        if header["state"] != "interrupted":
            verdict.problems.append(f"{HEADER}: records why the run was interrupted, yet its state is {header['state']}")
        resume_runs = interruption.get("resume_runs") or []
        unlisted = [cell for cell in resume_runs if cell not in listed]
        if unlisted:
            verdict.problems.append(f"{HEADER}: interruption.resume_runs names cells it does not list ({', '.join(unlisted[:3])})")
        # the raw cells, whose status the schema holds: a typed record a cell fails is its own problem, found below
        finished = {cell["id"] for cell in loaded.cells if cell["status"] in FINISHED}
        left_out = [cell for cell in listed if cell not in finished and cell not in resume_runs]
        if left_out:
            verdict.problems.append(f"{HEADER}: interruption.resume_runs leaves out cells with no result, which --resume "
                                    f"runs ({', '.join(left_out[:3])})")
    on_disk = {p.stem for p in (loaded.root / CELLS).glob("*.json")} if (loaded.root / CELLS).is_dir() else set()
    for extra in sorted(on_disk - set(listed)):
        verdict.problems.append(f"{CELLS}/{extra}.json: a cell record bundle.json does not list")
    verdict.problems += _unlisted(loaded)
    labels = {entry["id"]: entry["label"] for entry in header["cells"]}
    for cell in loaded.cells:
        where = f"{CELLS}/{cell['id']}.json"
        raw = loaded.raw_cells.get(cell["id"])
        written = raw.get("schema_version") if isinstance(raw, dict) else None
        if written != loaded.version:
            verdict.problems.append(f"{where}: written with schema version {written}, the bundle with {loaded.version}: "
                                    "a bundle holds one version")
        expected = cell_id(cell["config"], loaded.version)
        if cell["id"] != expected:
            verdict.problems.append(f"{where}: id {cell['id']} is not the hash of its config ({expected})")
        if cell["id"] not in labels:
            verdict.problems.append(f"{where}: its id does not match its file name")
        elif cell["label"] != labels[cell["id"]]:
            verdict.problems.append(f"{where}: label differs from bundle.json's")
        if cell["config"]["device"] != header["device"]:
            verdict.problems.append(f"{where}: device {cell['config']['device']} but the run's is {header['device']}")
        if cell["status"] == "interrupted" and header["state"] == "complete":
            verdict.problems.append(f"{where}: interrupted, yet bundle.json says the run is complete")
        verdict.problems += [f"{where}: {line}" for line in _cell_problems(cell, loaded.version)]


def _oversized(cell: Any) -> list[str]:
    """The timing lists of a raw cell longer than any this harness records (record_base.MAX_SAMPLES)."""
    metrics = cell.get("metrics") if isinstance(cell, dict) else None
    timing = metrics.get("device_time") if isinstance(metrics, dict) else None
    lists = {f"device_time/{key}": timing.get(key) for key in ("samples_ns", "warmup_samples_ns", "host_samples_ns")
             } if isinstance(timing, dict) else {}
    rounds = metrics.get("rounds") if isinstance(metrics, dict) else None
    for index, entry in enumerate(rounds if isinstance(rounds, list) else []):
        if isinstance(entry, dict):
            lists[f"rounds/{index}/samples_ns"] = entry.get("samples_ns")
    return [f"metrics/{path}: {len(found):,} items, more than the {record_base.MAX_SAMPLES:,} a timing list holds"
            for path, found in lists.items() if isinstance(found, list) and len(found) > record_base.MAX_SAMPLES]


#: The first schema version whose cells record `variant.graphs` (harness/bundle/migrations.py).
GRAPHS_RECORDED_FROM = 3
#: The first schema version whose valid cells, of a backend that computes the model, all record the
#: check after timing (harness/bundle/migrations.py): a v11 cell may lack it, a v12 one may not.
AFTER_TIMING_RECORDED_FROM = 12


def _unlisted(loaded: LoadedBundle) -> list[str]:
    """The cells the stored scenario expands to on the run's device (within its `--only`) that
    bundle.json does not list: a cell deleted with its record and entry would hide a failure.
    (A listed cell that is none of the scenario's is the figures check's finding.)"""
    from harness.scenario.cells import cell_id, expand, matches
    from harness.scenario.schema import MAX_CELLS, planned_cells

    header = loaded.header
    scenario, device, only = header["scenario"], header["device"], header.get("only") or {}
    try:
        if planned_cells(scenario, device) > MAX_CELLS:
            return [f"{HEADER}: its scenario expands to more than {MAX_CELLS} cells: not a run this harness checks"]
        chosen = {key: set(values) for key, values in only.items()}
        cells = [c for c in expand(scenario, device, loaded.model_plugins) if matches(c, chosen)]
    except (LookupError, TypeError, AttributeError, ValueError):
        return []  # a scenario that does not expand is the figures check's finding
    listed = {entry["id"] for entry in header["cells"]}
    lines = []
    for cell in cells:
        config = cell.config.recorded()
        if loaded.version < GRAPHS_RECORDED_FROM:
            config["variant"].pop("graphs", None)
        if cell_id(config, loaded.version) not in listed:
            lines.append(f"{HEADER}: its scenario's cell {cell.label} is not listed in cells: a cell of the run is "
                         "missing")
    return lines


def _cell_problems(cell: dict[str, Any], version: int) -> list[str]:
    status, metrics = cell["status"], cell["metrics"]
    lines = []
    if status != "valid" and not cell["reasons"]:
        lines.append(f"status {status} without a reason")
    if status == "valid":
        if cell["reasons"]:
            lines.append("status valid, yet it gives reasons")
        loadgen = metrics.get("loadgen")
        if not loadgen or loadgen["validity"] != "VALID":
            lines.append("status valid without a VALID LoadGen run")
        correctness = metrics.get("correctness") or {}
        if not correctness.get("ok"):
            lines.append("status valid without a passed correctness check")
        if isinstance(correctness.get("after_timing"), dict) and not correctness["after_timing"].get("ok"):
            lines.append("status valid with a failed correctness check after timing")
        compared = correctness.get("max_abs_error") is not None  # a backend that computes no model is not compared
        if compared and version >= AFTER_TIMING_RECORDED_FROM and correctness.get("after_timing") is None:
            lines.append("status valid without the correctness check after timing, which every valid cell of this "
                         "schema version records")
    timing = metrics.get("device_time")
    if timing and timing["samples_ns"]:
        lines += _summary_problems(timing["summary"], summarize_ns(timing["samples_ns"]))
    dtype = cell["config"].get("dtype")
    lines += _correctness_problems(metrics.get("correctness"), dtype)
    lines += _correctness_problems((metrics.get("correctness") or {}).get("after_timing"), dtype,
                                   "correctness after timing")
    lines += _checked_rows_problems(cell["config"], metrics.get("correctness"))
    return lines  # the fusion report's counts against its kernels: its record's (passes_record.FusionReportRecord)


#: Statistics re-derived from the raw samples; a summary that differs by more than the tolerance
#: of `_close` (relative 1e-6, or 1 ns) was not computed from them.
_DERIVED = ("median_ns", "p90_ns", "p99_ns", "mean_ns", "stdev_ns", "cv", "min_ns", "max_ns")


def _summary_problems(summary: dict[str, Any], recomputed: dict[str, Any]) -> list[str]:
    if summary["n"] != recomputed["n"]:
        return [f"device_time: summary n {summary['n']} but {recomputed['n']} samples"]
    lines = []
    for key in _DERIVED:
        if key not in summary:
            continue  # older bundles record fewer statistics
        recorded, derived = number(summary[key]), float(recomputed[key])
        scale = 1e9 if key == "cv" else 1.0  # compare a CV at the precision of nanoseconds
        if recorded is None or not close(recorded * scale, derived * scale):
            lines.append(f"device_time: summary {key.removesuffix('_ns')} {summary[key]} but the samples' is {derived:.6g}")
    return lines


def _checked_rows_problems(config: dict[str, Any], correctness: Any) -> list[str]:
    """The samples each correctness check records are the ones its config gives (the worker builds
    `inputs.samples` of them, or from a folder as many images as it holds up to that, and checks
    the example batch, then another after the timing: harness/scenario/checked_rows.py): an
    after-timing check said to run on the timing's second batch where it ran on the example's, or
    on samples the cell never read, was not the harness's."""
    count, batch = lookup(config, "inputs", "samples"), config.get("batch")
    if not isinstance(correctness, dict) or not isinstance(count, int) or not isinstance(batch, int) or count < 1:
        return []  # a record before the inputs were configured: the schema's finding
    after = correctness.get("after_timing")
    recorded = [check.get("samples") if isinstance(check, dict) else None for check in (correctness, after)]
    # one count of samples read gives both checks' rows: a folder of 6 images read for `samples: 64`
    # in batches of 4 checks [0, 1, 2, 3], then [4, 5, 0, 1]
    from_folder = lookup(config, "inputs", "source") == "folder"
    for read in checked_rows.counts_read(count, batch, from_folder):
        rows = (checked_rows.example_rows(read, batch), checked_rows.later_rows(read, batch))
        if all(samples is None or samples == wanted for samples, wanted in zip(recorded, rows)):
            return []
    held = f"{count} samples" + (" (or the fewer images of its folder)" if from_folder else "")
    return [f"{name}: samples {str(samples)[:80]}, but {held} run {batch} at a time are checked on {wanted}"
            for name, samples, wanted in zip(("correctness", "correctness after timing"), recorded,
                                             (checked_rows.example_rows(count, batch), checked_rows.later_rows(count, batch)))
            if samples is not None and samples != wanted]


_CORRECTNESS_FIGURES = ("max_abs_error", "max_abs_error_limit", "rtol", "reference_max_abs", "cosine_similarity",
                        "min_cosine")


def _correctness_problems(correctness: Any, dtype: Any, name: str = "correctness") -> list[str]:
    """A verdict that contradicts the error and tolerance recorded beside it, or a tolerance that is
    not the cell's dtype's (harness/precision.py: one policy, unchanged since the first bundle that
    records it)."""
    if not isinstance(correctness, dict) or "max_abs_error" not in correctness:
        return []
    # The worker writes these six together (harness/measure/correctness.py), in every schema version:
    # one left out would leave its check undone (a limit raised tenfold passed without its rtol).
    figures = {key: number(correctness.get(key)) for key in _CORRECTNESS_FIGURES}
    absent = [key for key, value in figures.items() if value is None]
    if absent:
        return [f"{name}: {', '.join(absent)} not a number, where max_abs_error is recorded"]
    error, limit, rtol, reference, cosine, minimum = (float(value or 0) for value in figures.values())
    policy = PRECISIONS.get(dtype) if isinstance(dtype, str) else None
    if policy is not None and (rtol != policy.rtol or minimum != policy.min_cosine):
        return [f"{name}: tolerance rtol {correctness.get('rtol')}, min_cosine {correctness.get('min_cosine')} is not "
                f"a {dtype} cell's ({policy.rtol}, {policy.min_cosine})"]
    expected = max_abs_limit(rtol, reference)
    if not close(limit, expected, absolute=0.0):
        return [f"{name}: max_abs_error_limit {limit!r} is not rtol {rtol} times the reference's largest "
                f"magnitude {reference!r} ({expected!r})"]
    passes = error <= limit and cosine >= minimum
    if bool(correctness.get("ok")) != passes:
        return [f"{name}: ok is {correctness.get('ok')} but max abs error {error:.3g} against limit {limit:.3g}, "
                f"cosine {cosine:.6f} against {minimum} says {'pass' if passes else 'fail'}"]
    return []
