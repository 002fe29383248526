"""Validate's fourth layer: a cell's LoadGen figures, read again from LoadGen's own logs.

The record must say what the logs say. From the detail log: the validity, the headline metric,
every `result_*` entry and every setting (`effective_*`, `requested_*`) the record keeps, the
scenario, and the samples the system under test counted (the queries LoadGen issued times the
samples in each) with its batches, and its calls' mean and median time within the samples'
latencies; and the log must agree with itself: LoadGen's validity is every one of its conditions
met (minimum duration, minimum queries, early stopping, Server's latency bound), so a log that
says VALID beside an unmet condition was edited, as is one that calls a condition met against the
figures LoadGen judged it by (the query count, Server's bound, and the duration and early stopping
of harness/bundle/loadgen_conditions.py). From the summary log: the scenario, the mode,
`Result is`, whether each condition was satisfied, and every figure it prints (percentiles, mean,
min, max, rates, the early-stopping estimates that are SingleStream's and MultiStream's headline
latency), each against the record's entry of the same meaning. A forger who edits a record and
re-hashes the manifest must therefore edit both logs as well, consistently, line by line.

Why a run was not VALID is the log's too: the record's `invalid_reasons` are the ones its detail log
gives (each unmet condition, LoadGen's own reason, each error it logged), none dropped or added, and
an invalid cell's reasons say them as the worker does (`loadgen_record.invalid_run_reason`). Each of
the record's `attempts` (the runs before a retune, each with its logs in `attempt-N/` beside the
last) is held to its own detail log, as many as the logs kept, every one but the last INVALID, and
its hint to what it was made from: the device timing's calls before LoadGen, or the run before it.
"""

from __future__ import annotations

import math
import re
from typing import Any

from harness.bundle import loadgen_conditions
from harness.bundle.files import CELLS
from harness.bundle.loadgen_log import (
    CONDITIONS,
    DETAIL,
    EARLY_STOPPING_UNMET,
    SUMMARY,
    parse_detail,
    parse_summary,
    unmet_conditions,
)
from harness.bundle.loadgen_record import invalid_run_reason
from harness.bundle.snapshot import Snapshot
from harness.bundle.timing_record import BEFORE_LOADGEN
from harness.bundle.tolerance import SIX_DIGITS, number, printed_step
from harness.errors import BundleError
from harness.scenario.rules import rule
from harness.stats.summary import median

MAX_LOG_BYTES = 64 << 20
_SHOWN = 50  # characters of a value a problem line quotes
_ATTEMPT = re.compile(r"^(.*/)?attempt-([1-9][0-9]{0,2})$")  # harness/measure/loadgen.py's folder of each run


def problems(files: Snapshot, cell: dict[str, Any]) -> list[str]:
    """Where `cell`'s LoadGen figures disagree with the logs its bundle keeps."""
    loadgen = cell["metrics"].get("loadgen")
    if not loadgen:
        return []
    where = f"{CELLS}/{cell['id']}.json"
    rel = f"{CELLS}/{cell['id']}/{loadgen['log_dir']}"
    texts, lines = {}, []
    for name in (SUMMARY, DETAIL):
        try:
            texts[name] = files.inner_text(f"{rel}/{name}", max_bytes=MAX_LOG_BYTES)
        except BundleError as exc:
            lines.append(f"{exc} (the cell's LoadGen figures cannot be checked)")
    if lines:
        return lines
    try:
        parsed = parse_detail(texts[DETAIL], loadgen["scenario"])
    except ValueError as exc:  # a damaged log line
        return [f"{rel}/{DETAIL}: {str(exc)[:200]}"]
    lines += _against_detail(where, rel, loadgen, parsed, cell["config"]["scenario"])
    lines += _validity_against_conditions(rel, parsed)
    lines += _bound_against_its_condition(rel, parsed) + _queries_against_their_condition(rel, parsed)
    lines += loadgen_conditions.problems(rel, parsed)
    if cell["status"] == "valid" and parsed["validity"] == "VALID" and parsed["invalid_reasons"]:
        lines.append(f"{where}: status valid, yet its LoadGen run logged an error ({_shown('; '.join(parsed['invalid_reasons']))}): "
                     "a run MLPerf's checker refuses")
    # calls are held to the log once their count is: a forged count is said once, not again as its calls' time
    lines += _sut_against_detail(where, loadgen, parsed, cell["config"]["batch"]) or _calls_against_detail(where, loadgen, parsed)
    lines += _against_summary(where, rel, loadgen, parse_summary(texts[SUMMARY]))
    lines += _reasons_against_detail(where, "invalid_reasons", loadgen.get("invalid_reasons"), parsed)
    if cell["status"] == "invalid" and loadgen["validity"] != "VALID" and isinstance(loadgen.get("invalid_reasons"), list):
        said = invalid_run_reason(loadgen["validity"], loadgen["invalid_reasons"])
        if said not in cell["reasons"]:
            lines.append(f"{where}: status invalid, but its reasons do not say its LoadGen run's: {_shown(said)}")
    return lines + _attempts(files, where, cell, loadgen, parsed)


def _reason_key(reason: object) -> object:
    """A reason as compared with its log's: an unmet early stopping without the advice LoadGen
    gives with it, which the harness added to the reason on 2026-12-05."""
    return EARLY_STOPPING_UNMET if isinstance(reason, str) and reason.startswith(EARLY_STOPPING_UNMET) else reason


def _reasons_against_detail(where: str, what: str, recorded: Any, parsed: dict[str, Any]) -> list[str]:
    """Each reason the detail log gives for its run (`parse_detail`, which the worker recorded them
    with) among `recorded`, and no other."""
    if not isinstance(recorded, list):
        return []  # the schema's finding
    kept, logged = [_reason_key(r) for r in recorded], [_reason_key(r) for r in parsed["invalid_reasons"]]
    lines = [f"{where}: LoadGen {what} lack {_shown(reason)}, which its detail log gives"
             for reason in logged if reason not in kept]
    return lines + [f"{where}: LoadGen {what} give {_shown(reason)}, which its detail log does not"
                    for reason in kept if reason not in logged]


def _attempts(files: Snapshot, where: str, cell: dict[str, Any], loadgen: dict[str, Any],
              parsed: dict[str, Any]) -> list[str]:
    """Each attempt the record lists against its own detail log, the last being the run's
    (`log_dir`, in `attempt-N`: every harness has kept its runs so and listed them, none left out)."""
    attempts, found = loadgen.get("attempts"), _ATTEMPT.match(str(loadgen["log_dir"]))
    if not isinstance(attempts, list) or found is None:
        return []  # the schema's finding, or logs kept otherwise: nothing to count the attempts by
    folder = f"{CELLS}/{cell['id']}/{found.group(1) or ''}attempt-"
    if int(found.group(2)) != len(attempts):
        return [f"{where}: LoadGen attempts list {len(attempts)} run(s), but its log_dir is attempt {found.group(2)}"]
    lines, logs = [], {}
    for ordinal, attempt in enumerate(attempts, start=1):
        if not isinstance(attempt, dict):
            continue  # the schema's finding
        log = parsed
        if ordinal < len(attempts):
            try:
                log = parse_detail(files.inner_text(f"{folder}{ordinal}/{DETAIL}", max_bytes=MAX_LOG_BYTES),
                                   loadgen["scenario"])
            except (BundleError, ValueError) as exc:
                lines.append(f"{where}: LoadGen attempt {ordinal} cannot be checked: {str(exc)[:200]}")
                continue
            if attempt.get("validity") == "VALID":
                lines.append(f"{where}: LoadGen attempt {ordinal} VALID, yet another followed it: LoadGen is run "
                             "again only after an INVALID run")
        if attempt.get("validity") != log["validity"]:
            lines.append(f"{where}: LoadGen attempt {ordinal} {_shown(attempt.get('validity'))} but its detail log "
                         f"says {_shown(log['validity'])}")
        lines += _reasons_against_detail(where, f"attempt {ordinal}'s invalid_reasons", attempt.get("invalid_reasons"), log)
        logs[ordinal] = log
    lines += _hints(where, cell, attempts, logs)
    try:
        unlisted = any(path.startswith(f"{folder}{len(attempts) + 1}/") for path in files.walk()[0])
    except BundleError:
        unlisted = False  # a folder this user may not list: validate says so apart
    if unlisted:
        lines.append(f"{where}: its folder holds the logs of LoadGen attempt {len(attempts) + 1}, which its "
                     f"attempts do not list")
    return lines


def _hints(where: str, cell: dict[str, Any], attempts: list[Any], logs: dict[int, dict[str, Any]]) -> list[str]:
    """Each attempt's `hint_latency_ns` against what it was made from (harness/measure/phases.py and
    loadgen.py): the first, the median of the device timing's calls before the LoadGen pass, where
    the record says which those were; a retune's, at most LoadGen's own time per batch in the run
    before it, since it hints with the faster of that and the system under test's time."""
    lines = []
    for ordinal, attempt in enumerate(attempts, start=1):
        hint = number(attempt.get("hint_latency_ns")) if isinstance(attempt, dict) else None
        if hint is None:
            continue  # the schema's finding
        if ordinal == 1:
            timed = _timed_before_loadgen(cell["metrics"].get("device_time"))
            if timed and not math.isclose(hint, median(timed), rel_tol=1e-9):
                lines.append(f"{where}: LoadGen attempt 1's hint_latency_ns {hint}, but the median of the "
                             f"{len(timed)} device-timing calls before LoadGen is {median(timed)}")
        elif ordinal - 1 in logs:
            before = rule(logs[ordinal - 1]["scenario"]).retune_ns(cell["config"]["batch"], logs[ordinal - 1]["results"])
            if before is not None and hint > float(before) * (1 + SIX_DIGITS):
                lines.append(f"{where}: LoadGen attempt {ordinal}'s hint_latency_ns {hint} is slower than the "
                             f"{float(before):.0f} ns a batch LoadGen's attempt {ordinal - 1} ran at, which a retune "
                             "hints with at the slowest")
    return lines


def _timed_before_loadgen(device_time: Any) -> list[float]:
    """The device-timing samples of the repetitions before the LoadGen pass, which come first (none
    where a record does not say when each repetition ran)."""
    if not isinstance(device_time, dict) or not isinstance(device_time.get("repetitions"), list):
        return []
    repetitions, samples = device_time["repetitions"], device_time.get("samples_ns")
    if not isinstance(samples, list) or not all(isinstance(r, dict) and "when" in r for r in repetitions):
        return []
    first = [r.get("n") for r in repetitions if r["when"] == BEFORE_LOADGEN]
    if not all(isinstance(n, int) for n in first) or not 0 < sum(first) <= len(samples):
        return []
    return [float(value) for value in samples[:sum(first)]]


def _against_detail(where: str, rel: str, loadgen: dict[str, Any], parsed: dict[str, Any], scenario: str) -> list[str]:
    lines = []
    if loadgen["scenario"] != scenario:
        lines.append(f"{where}: LoadGen scenario {_shown(loadgen['scenario'])} but the cell's is {_shown(scenario)}")
    logged_scenario = parsed["settings"].get("effective_scenario")
    if logged_scenario is not None and logged_scenario != loadgen["scenario"]:
        lines.append(f"{where}: LoadGen scenario {_shown(loadgen['scenario'])} but its detail log says {_shown(logged_scenario)}")
    if parsed["validity"] != loadgen["validity"]:
        lines.append(f"{where}: LoadGen validity {_shown(loadgen['validity'])} but its detail log says {_shown(parsed['validity'])}")
    logged, recorded = number(parsed["metric"]["value"]), number(loadgen["metric"]["value"])
    if logged is None and parsed["metric"]["value"] is not None:
        return [*lines, f"{rel}/{DETAIL}: {loadgen['metric']['name']} is {_shown(parsed['metric']['value'])}, not a number"]
    if logged != recorded:  # the record keeps the logged figure as parsed
        lines.append(f"{where}: LoadGen {loadgen['metric']['name']} {recorded} but its detail log says {logged}")
    lines += metric_named_as_logged(where, "LoadGen", loadgen["metric"], parsed["metric"])
    for part in ("results", "settings"):
        kept, read = loadgen.get(part) or {}, parsed[part]
        for key in sorted(set(kept) | set(read)):
            if key not in read:
                lines.append(f"{where}: LoadGen {part} {_shown(key)} is not in its detail log")
            elif key not in kept:
                continue  # a record may keep fewer entries than the log has (older harnesses did)
            elif not _same(kept[key], read[key]):
                lines.append(f"{where}: LoadGen {_shown(key)} {_shown(kept[key])} but its detail log says {_shown(read[key])}")
    return lines


def metric_named_as_logged(where: str, what: str, recorded: dict[str, Any], logged: dict[str, Any]) -> list[str]:
    """A run's metric is named and in the unit its scenario's rule gives the detail log's entries
    (harness/scenario/rules.py `metric`, which the worker recorded it with): `compare` judges a
    figure in ns as a latency, lower better, and one in samples/s as a throughput, higher better."""
    return [f"{where}: {what} metric {field} {_shown(recorded.get(field))} but its detail log's figure is "
            f"{_shown(logged.get(field))}" for field in ("name", "unit") if recorded.get(field) != logged.get(field)]


def _sut_against_detail(where: str, loadgen: dict[str, Any], parsed: dict[str, Any], batch: int) -> list[str]:
    """The samples the system under test counted (harness/measure/sut.py) are the queries LoadGen's
    detail log says it issued, times the samples each carries: LoadGen ends its run only once every
    query is answered. They ran `batch` at a time at the most (a batch is never split across calls,
    nor a sample repeated in two), and no more batches were gathered than ran."""
    sut = loadgen.get("sut") or {}
    samples, batches, gathered = sut.get("samples"), sut.get("batches"), sut.get("gathered_batches")
    queries = number(parsed["results"].get("result_query_count"))
    per_query = number(parsed["settings"].get("effective_samples_per_query"))
    lines = []
    if samples is not None and queries is not None and per_query is not None and samples != queries * per_query:
        lines.append(f"{where}: LoadGen sut samples {samples}, but its detail log's {queries:.0f} queries of "
                     f"{per_query:.0f} samples are {queries * per_query:.0f}")
    if samples is not None and batches is not None and not math.ceil(samples / batch) <= batches <= samples:
        lines.append(f"{where}: LoadGen sut batches {batches}, but {samples} samples run {batch} at a time are "
                     f"{math.ceil(samples / batch)} batches at the fewest and {samples} at the most")
    if gathered is not None and batches is not None and gathered > batches:
        lines.append(f"{where}: LoadGen sut gathered_batches {gathered}, more than its {batches} batches")
    return lines


def _calls_against_detail(where: str, loadgen: dict[str, Any], parsed: dict[str, Any]) -> list[str]:
    """The system under test's own times of its calls (`call_mean_ns`, `call_median_ns`: the worker
    keeps no call's time, only these) within what LoadGen's detail log says of the same run. Each
    call runs after its samples' query is issued and ends before they are answered, so it lies
    inside each of their latencies: none is longer than the run's largest latency, and the calls,
    one at a time (`batches_in_flight` at a time where they are pipelined), fit in the time the
    samples' latencies cover: the one query's largest where the run issued one (Offline), else at
    most all its samples' latencies together. Half the calls at least take the median or more.
    Neither figure has a floor the logs give: LoadGen's time around the calls is not logged."""
    sut, results = loadgen.get("sut") or {}, parsed["results"]
    batches, samples = number(sut.get("batches")), number(sut.get("samples"))
    in_flight = number(sut.get("batches_in_flight")) or 1.0
    queries, largest = number(results.get("result_query_count")), number(results.get("result_max_latency_ns"))
    mean_latency = number(results.get("result_mean_latency_ns"))
    if not batches or not samples or queries is None or largest is None or mean_latency is None:
        return []  # no call ran, or a log of no latencies: nothing to hold the calls to
    covered = largest if queries == 1 else mean_latency * samples
    room = in_flight * covered * (1 + SIX_DIGITS) + samples  # LoadGen logs its mean to the nanosecond
    lines = []
    for key, calls in (("call_mean_ns", batches), ("call_median_ns", math.ceil(batches / 2))):
        figure = number(sut.get(key))
        if figure is None:
            continue  # a record before the figure, or the schema's finding
        if figure > largest * (1 + SIX_DIGITS):
            lines.append(f"{where}: LoadGen sut {key} {figure:.0f} is longer than the run's largest latency, "
                         f"{largest:.0f} ns in its detail log: a call lies inside its samples' latency")
        elif figure * calls > room:
            lines.append(f"{where}: LoadGen sut {key} {figure:.0f} over {calls:.0f} of its {batches:.0f} calls is "
                         f"{figure * calls:.0f} ns, more than the {covered:.0f} ns its samples' latencies in its "
                         f"detail log cover{f' with {in_flight:.0f} batches in flight' if in_flight > 1 else ''}")
    return lines


def _validity_against_conditions(rel: str, parsed: dict[str, Any]) -> list[str]:
    """LoadGen writes VALID exactly where every condition it judged was met."""
    validity, results = parsed["validity"], parsed["results"]
    if validity not in ("VALID", "INVALID") or not any(key in results for key, _, _ in CONDITIONS):
        return []  # no verdict, or a log of no conditions: nothing to hold it to
    unmet = unmet_conditions(results)
    if validity == "VALID" and unmet:
        return [f"{rel}/{DETAIL}: result_validity VALID, yet {'; '.join(unmet)}: "
                "LoadGen calls a run VALID only with every condition met"]
    if validity == "INVALID" and not unmet and not parsed["invalid_reasons"]:  # no other reason logged either
        return [f"{rel}/{DETAIL}: result_validity INVALID, yet every condition it logs was met"]
    return []


def _bound_against_its_condition(rel: str, parsed: dict[str, Any]) -> list[str]:
    """Server's latency condition is its target percentile's latency within the bound (LoadGen's
    own rule), all three in the same log: the one must say what the other two do."""
    results, settings = parsed["results"], parsed["settings"]
    met, bound = results.get("result_perf_constraints_met"), number(settings.get("effective_target_latency_ns"))
    percentile = number(settings.get("effective_target_latency_percentile"))
    if not isinstance(met, bool) or bound is None or percentile is None:
        return []
    key = f"result_{percentile * 100:.2f}_percentile_latency_ns"
    latency = number(results.get(key))
    if latency is None or (latency <= bound) == met:
        return []
    return [f"{rel}/{DETAIL}: result_perf_constraints_met {met}, yet {key} {latency:.0f} is "
            f"{'within' if latency <= bound else 'over'} effective_target_latency_ns {bound:.0f}"]


def _queries_against_their_condition(rel: str, parsed: dict[str, Any]) -> list[str]:
    """LoadGen's minimum-queries condition is met only by as many queries as its minimum, both
    counts in the same log: a run stopped at its maximum duration after 2 of 1,000,000 queries,
    called met (and VALID), was edited."""
    results, settings = parsed["results"], parsed["settings"]
    queries, least = number(results.get("result_query_count")), number(settings.get("effective_min_query_count"))
    if results.get("result_min_queries_met") is not True or queries is None or least is None or queries >= least:
        return []
    return [f"{rel}/{DETAIL}: result_min_queries_met True, yet result_query_count {queries:.0f} is under "
            f"effective_min_query_count {least:.0f}"]


def _against_summary(where: str, rel: str, loadgen: dict[str, Any], summary: dict[str, Any]) -> list[str]:
    lines = []
    for what, logged, recorded in (("scenario", summary["scenario"], loadgen["scenario"]),
                                   ("result", summary["validity"], loadgen["validity"]),
                                   ("mode", summary["mode"], "PerformanceOnly")):
        if logged != recorded:
            lines.append(f"{where}: LoadGen {what} {_shown(recorded)} but its summary log says {_shown(logged)}")
    results = loadgen.get("results") or {}
    for key, met in sorted(summary["conditions"].items()):
        if key in results and results[key] is not met:
            lines.append(f"{where}: LoadGen {_shown(key)} {_shown(results[key])} but its summary log says {_shown(met)}")
    for key, text in sorted(summary["figures"].items()):
        logged = number(text)
        if logged is None:
            lines.append(f"{rel}/{SUMMARY}: {_shown(key)} is {_shown(text)}, not a number")
        elif key in results and not _close_printed(number(results[key]), logged, text):
            lines.append(f"{where}: LoadGen {_shown(key)} {_shown(results[key])} but its summary log says {_shown(text)}")
    return lines


def _same(kept: Any, read: Any) -> bool:
    """A record keeps the detail log's entries as parsed from its JSON: the same value, exactly."""
    return kept == read and isinstance(kept, bool) == isinstance(read, bool)


def _close_printed(recorded: float | None, logged: float, text: str) -> bool:
    """Each log rounds a figure its own way: the summary to its last printed digit, the detail log
    (whose figure the record keeps) to six significant digits."""
    return recorded is not None and math.isclose(recorded, logged, rel_tol=SIX_DIGITS, abs_tol=printed_step(text))


def _shown(value: Any) -> str:
    text = str(value)
    return repr(text[:_SHOWN] + ("..." if len(text) > _SHOWN else ""))
