"""Validate's fourth layer: a cell's LoadGen figures, read again from LoadGen's own logs.

The record must say what the logs say. From the detail log: the validity, the headline metric,
every `result_*` entry and every setting (`effective_*`, `requested_*`) the record keeps, the
scenario, and the samples the system under test counted (the queries LoadGen issued times the
samples in each) with its batches; and the log must agree with itself: LoadGen's validity is every one of its conditions
met (minimum duration, minimum queries, early stopping, Server's latency bound), so a log that
says VALID beside an unmet condition was edited. From the summary log: the scenario, the mode,
`Result is`, whether each condition was satisfied, and every figure it prints (percentiles, mean,
min, max, rates, the early-stopping estimates that are SingleStream's and MultiStream's headline
latency), each against the record's entry of the same meaning. A forger who edits a record and
re-hashes the manifest must therefore edit both logs as well, consistently, line by line.
"""

from __future__ import annotations

import math
from typing import Any

from harness.bundle.files import CELLS
from harness.bundle.loadgen_log import CONDITIONS, DETAIL, SUMMARY, parse_detail, parse_summary, unmet_conditions
from harness.bundle.snapshot import Snapshot
from harness.bundle.tolerance import number, printed_step
from harness.errors import BundleError

MAX_LOG_BYTES = 64 << 20
_SIX_DIGITS = 1e-5  # a float LoadGen logs with six significant digits is this close to the true one
_SHOWN = 50  # characters of a value a problem line quotes


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
    lines += _bound_against_its_condition(rel, parsed)
    if cell["status"] == "valid" and parsed["validity"] == "VALID" and parsed["invalid_reasons"]:
        lines.append(f"{where}: status valid, yet its LoadGen run logged an error ({_shown('; '.join(parsed['invalid_reasons']))}): "
                     "a run MLPerf's checker refuses")
    lines += _sut_against_detail(where, loadgen, parsed, cell["config"]["batch"])
    lines += _against_summary(where, rel, loadgen, parse_summary(texts[SUMMARY]))
    return lines


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
    return recorded is not None and math.isclose(recorded, logged, rel_tol=_SIX_DIGITS, abs_tol=printed_step(text))


def _shown(value: Any) -> str:
    text = str(value)
    return repr(text[:_SHOWN] + ("..." if len(text) > _SHOWN else ""))
