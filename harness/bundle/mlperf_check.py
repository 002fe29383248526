"""Validate's fifth layer: a cell's accuracy run, compliance tests and user.conf, read again from
the files its bundle keeps (everything `pack` copies into a submission is checked here first).

- Accuracy: `total` is the number of distinct samples the accuracy log answers; where the bundle
  keeps the labels the run was scored against (`labels.txt` beside the log, written since this
  layer exists), `good` and `top1_percent` are scored again from the log (an older bundle's
  `good` is only held to `top1_percent`, and a note says so); accuracy.txt must say the same, and
  the run's summary and detail logs must be there.
- Against the user's own labels (`validate --labels VAL_MAP`, `Reference`): the labels a bundle
  keeps are its own word, so a score forged together with them is consistent; given the labels
  file of the data set, each accuracy run's kept labels must be its first lines and its log must
  score `good` against them too.
- Compliance: only the tests the cell's config asked for, each with the checks its test makes.
  Each test's validity and metric are read again from its own detail log; its performance check
  is made again against the cell's performance run (itself checked against its logs by
  `loadgen_check`); TEST01's accuracy check is made again from its log against the accuracy
  run's; each verdict must be what its verify_*.txt says, and `passed` all of them.
- The official flag: under the `mlperf` profile, the performance run's user.conf must set the
  overrides the config names, as the harness writes them, and nothing but the expected rate or
  latency besides, and its detail log must show those overrides in effect: a run with overrides
  is never packed as official.

Every file is read under harness.bundle.confine's rules (inside the bundle, regular, bounded).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from harness.bundle.files import CELLS
from harness.bundle.loadgen_check import MAX_LOG_BYTES, metric_named_as_logged
from harness.bundle.loadgen_log import DETAIL, SUMMARY, parse_detail
from harness.bundle.safe_json import parse_json
from harness.bundle.snapshot import Snapshot
from harness.bundle.tolerance import number
from harness.errors import BundleError, HarnessError
from harness.mlperf import accuracy, compliance, user_conf

ACCURACY_LOG = "mlperf_log_accuracy.json"
ACCURACY_TXT = "accuracy.txt"
USER_CONF = "user.conf"
VERIFY = {"performance": "verify_performance.txt", "accuracy": "verify_accuracy.txt"}
MAX_ACCURACY_LOG_BYTES = 64 << 20
MAX_LABELS_BYTES = 64 << 20
MAX_SMALL_BYTES = 1 << 20
_CONF_LINE = re.compile(r"^([^.\s]+)\.([^.\s]+)\.([A-Za-z_]+)\s*=\s*(\S+)$")
# user.conf keys the harness overrides -> the setting LoadGen logs having read (ms, or a count)
_REQUESTED = {"min_duration": "requested_min_duration_ms", "max_duration": "requested_max_duration_ms",
               "min_query_count": "requested_min_query_count", "max_query_count": "requested_max_query_count"}


#: The first schema version whose accuracy runs all keep their labels (labels.txt beside the log):
#: from it on, an accuracy record without them is a problem, not an older harness's gap.
LABELS_KEPT_FROM = 4


@dataclass(frozen=True)
class Reference:
    """A labels file from outside the bundle (`validate --labels`): `where` names it, `labels` its
    (image, class) pairs in its order, line k LoadGen's sample k as in the run that read it."""

    where: str
    labels: list[tuple[str, int]]


def problems(files: Snapshot, cell: dict[str, Any], version: int = LABELS_KEPT_FROM,
             reference: Reference | None = None) -> tuple[list[str], list[str]]:
    """(problems, notes) of `cell`'s accuracy, compliance and user.conf against its files; `version`:
    the schema version the cell was written with; `reference`: labels to score its accuracy run
    against as well."""
    lines: list[str] = []
    notes: list[str] = []
    metrics, loadgen_config = cell["metrics"], cell["config"].get("loadgen") or {}
    where = f"{CELLS}/{cell['id']}.json"
    base = f"{CELLS}/{cell['id']}"
    record = metrics.get("accuracy")
    asked = bool(loadgen_config.get("accuracy"))
    if record is not None and not asked:
        lines.append(f"{where}: an accuracy record, yet its config asks for no accuracy run")
    responses = None
    if record is not None:
        responses, kept, accuracy_lines, accuracy_notes = _accuracy(files, base, where, record, version)
        lines += accuracy_lines
        notes += accuracy_notes
        if reference is not None and responses is not None:
            lines += _against(f"{base}/{record['log_dir']}", where, record, responses, kept, reference)
    outcomes = metrics.get("compliance") or {}
    if outcomes and not metrics.get("loadgen"):
        return [*lines, f"{where}: compliance tests recorded without the performance run they are checked against"], notes
    wanted = set(loadgen_config.get("compliance") or ())
    for test in sorted(set(outcomes) - wanted):
        lines.append(f"{where}: compliance {test} recorded, yet its config does not ask for it")
    for test in sorted(set(outcomes) & wanted):
        lines += _compliance(files, base, where, test, outcomes[test], cell, responses, record is not None)
    if cell["status"] == "valid":
        if asked and record is None:
            lines.append(f"{where}: status valid, yet the accuracy run its config asks for has no record")
        for test in sorted(wanted - set(outcomes)):
            lines.append(f"{where}: status valid, yet compliance {test} (asked for by its config) has no record")
    if loadgen_config.get("profile") == "mlperf" and metrics.get("loadgen"):
        lines += _official(files, base, where, cell)
    return lines, notes


def _read_text(files: Snapshot, rel: str, max_bytes: int = MAX_SMALL_BYTES) -> str:
    return files.inner_text(rel, max_bytes=max_bytes)


def _responses(files: Snapshot, rel: str) -> list[dict[str, Any]]:
    try:
        return accuracy.responses(parse_json(_read_text(files, rel, MAX_ACCURACY_LOG_BYTES), rel), rel)
    except HarnessError as exc:
        raise BundleError(str(exc)) from None


def _accuracy(files: Snapshot, base: str, where: str, record: dict[str, Any], version: int
              ) -> tuple[list[dict[str, Any]] | None, list[int] | None, list[str], list[str]]:
    """(the accuracy log's responses, the labels kept beside it, problems, notes); the responses
    are None where the files cannot be read."""
    folder = f"{base}/{record['log_dir']}"
    lines: list[str] = []
    notes: list[str] = []
    try:
        responses = _responses(files, f"{folder}/{ACCURACY_LOG}")
        for log in (SUMMARY, DETAIL):
            _read_text(files, f"{folder}/{log}", MAX_LOG_BYTES)
        text = _read_text(files, f"{folder}/{ACCURACY_TXT}")
        labels_file = record.get("labels")
        labels = (accuracy.parse_labels(_read_text(files, f"{folder}/{labels_file}", MAX_LABELS_BYTES),
                                        f"{folder}/{labels_file}") if labels_file else None)
        scored = accuracy.score_entries(responses, labels, f"{folder}/{ACCURACY_LOG}") if labels is not None else None
        distinct = _distinct_samples(responses, f"{folder}/{ACCURACY_LOG}")
    except HarnessError as exc:  # BundleError, and a damaged log or labels file
        return None, None, [f"{exc} (the cell's accuracy cannot be checked)"], []
    if record["total"] != distinct:
        lines.append(f"{where}: accuracy total {record['total']} but its log answers {distinct} distinct samples")
    if record["good"] > record["total"]:
        lines.append(f"{where}: accuracy good {record['good']} is more than its total {record['total']}")
    elif not math.isclose(record["top1_percent"], 100.0 * record["good"] / record["total"], rel_tol=1e-9, abs_tol=1e-9):
        lines.append(f"{where}: accuracy top1_percent {record['top1_percent']} is not good over total "
                     f"({record['good']}/{record['total']})")
    if scored is None and version >= LABELS_KEPT_FROM:
        lines.append(f"{where}: accuracy good {record['good']} cannot be scored again: its labels are gone (every "
                     f"accuracy run keeps them from schema version {LABELS_KEPT_FROM} on)")
    elif scored is None:
        notes.append(f"{where}: accuracy good not scored again: the bundle keeps no labels for it (an older harness)")
    elif scored["good"] != record["good"]:
        lines.append(f"{where}: accuracy good {record['good']} but its log scores {scored['good']} against its labels")
    first = text.splitlines()[0] if text.strip() else ""
    if first != accuracy.summary_line(record):
        lines.append(f"{where}: accuracy {accuracy.summary_line(record)!r} but {folder}/{ACCURACY_TXT} says {first[:80]!r}")
    return responses, labels, lines, notes


def _against(folder: str, where: str, record: dict[str, Any], responses: list[dict[str, Any]], kept: list[int] | None,
             reference: Reference) -> list[str]:
    """An accuracy run held to `reference`: the labels it keeps (`kept`, None in a bundle of an
    older harness) must be the reference's first lines, and its log must score its `good` against
    the reference as well."""
    classes = [label for _, label in reference.labels]
    lines = []
    labels_file = f"{folder}/{record.get('labels')}"
    if kept is not None and len(kept) > len(classes):
        lines.append(f"{labels_file}: {len(kept)} samples, {reference.where} lists {len(classes)}")
    elif kept is not None and kept != classes[:len(kept)]:
        k = next(i for i, (a, b) in enumerate(zip(kept, classes, strict=False)) if a != b)
        lines.append(f"{labels_file}: sample {k} is class {kept[k]}, {reference.where} says "
                     f"{classes[k]} ({reference.labels[k][0]})")
    try:
        scored = accuracy.score_entries(responses, classes, f"{folder}/{ACCURACY_LOG}")
    except HarnessError as exc:
        return [*lines, f"{exc} (against {reference.where})"]
    if scored["good"] != record["good"]:
        lines.append(f"{where}: accuracy good {record['good']} but its log scores {scored['good']} against "
                     f"{reference.where} ({scored['top1_percent']:.3f}%)")
    return lines


def _distinct_samples(responses: list[dict[str, Any]], where: str) -> int:
    seen = set()
    for entry in responses:
        index = entry.get("qsl_idx")
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise BundleError(f"{where}: a response names sample {str(index)[:20]!r}")
        accuracy.predicted(entry, where)
        seen.add(index)
    return len(seen)


def _compliance(files: Snapshot, base: str, where: str, test: str, outcome: dict[str, Any], cell: dict[str, Any],
                accuracy_run: list[dict[str, Any]] | None, accuracy_recorded: bool) -> list[str]:
    folder = f"{base}/{outcome['log_dir']}"
    run = f"{folder}/performance/run_1"
    checks = outcome["checks"]
    expected_checks = {"performance", "accuracy"} if test == "TEST01" else {"performance"}
    lines = []
    if set(checks) != expected_checks:
        lines.append(f"{where}: compliance {test} checks {', '.join(sorted(checks))}; {test} checks "
                     f"{', '.join(sorted(expected_checks))}")
    if outcome["passed"] != all(checks.values()):
        lines.append(f"{where}: compliance {test} passed is {outcome['passed']} but its checks say "
                     f"{'pass' if all(checks.values()) else 'fail'}")
    derived: dict[str, bool] = {}
    try:
        _read_text(files, f"{run}/{SUMMARY}", MAX_LOG_BYTES)
        parsed = parse_detail(_read_text(files, f"{run}/{DETAIL}", MAX_LOG_BYTES), cell["config"]["scenario"])
        reports = {check: _verdict(files, f"{folder}/{VERIFY[check]}") for check in sorted(checks) if check in VERIFY}
        derived["performance"], _ = compliance.verify_performance(test, cell["metrics"]["loadgen"], parsed)
        if test == "TEST01":
            if accuracy_run is None:
                return [*lines, f"{where}: compliance TEST01's accuracy check cannot be made again: "
                        + ("the accuracy run's log could not be read" if accuracy_recorded else "no accuracy run")]
            derived["accuracy"], _ = compliance.verify_responses(accuracy_run, _responses(files, f"{run}/{ACCURACY_LOG}"),
                                                                 "the accuracy run's log", f"{run}/{ACCURACY_LOG}")
    except (HarnessError, ValueError) as exc:
        return [*lines, f"{str(exc)[:300]} (compliance {test} cannot be checked)"]
    if parsed["validity"] != outcome["validity"]:
        lines.append(f"{where}: compliance {test} validity {outcome['validity']} but its detail log says {parsed['validity']}")
    if number(parsed["metric"]["value"]) != number(outcome["metric"]["value"]):
        lines.append(f"{where}: compliance {test} {outcome['metric']['name']} {outcome['metric']['value']} but its "
                     f"detail log says {parsed['metric']['value']}")
    lines += metric_named_as_logged(where, f"compliance {test}", outcome["metric"], parsed["metric"])
    for check, verdict in sorted(checks.items()):
        shown = "TEST PASS" if verdict else "TEST FAIL"
        if check in reports and reports[check] != verdict:
            lines.append(f"{where}: compliance {test} {check} {shown} but {folder}/{VERIFY[check]} says the opposite")
        if check in derived and derived[check] != verdict:
            lines.append(f"{where}: compliance {test} {check} {shown} but its logs, checked again, say "
                         f"{'TEST PASS' if derived[check] else 'TEST FAIL'}")
    return lines


def _verdict(files: Snapshot, rel: str) -> bool:
    """What a verify_*.txt concludes: its last line, TEST PASS or TEST FAIL."""
    last = next((line.strip() for line in reversed(_read_text(files, rel).splitlines()) if line.strip()), "")
    if last not in ("TEST PASS", "TEST FAIL"):
        raise BundleError(f"{rel}: does not end with TEST PASS or TEST FAIL")
    return last == "TEST PASS"


def _official(files: Snapshot, base: str, where: str, cell: dict[str, Any]) -> list[str]:
    config, loadgen = cell["config"], cell["metrics"]["loadgen"]
    scenario = config["scenario"]
    folder = f"{base}/{loadgen['log_dir']}"
    overrides = config["loadgen"].get("overrides") or {}
    try:
        text = _read_text(files, f"{folder}/{USER_CONF}")
        settings = parse_detail(_read_text(files, f"{folder}/{DETAIL}", MAX_LOG_BYTES), scenario)["settings"]
    except (HarnessError, ValueError) as exc:
        return [f"{str(exc)[:300]} (whether the run is official cannot be checked)"]
    expected = user_conf.override_lines(scenario, overrides)
    found, lines = [], []
    for number_, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = _CONF_LINE.match(line)
        if match is None:
            lines.append(f"{folder}/{USER_CONF}:{number_}: not a '<model>.<scenario>.<key> = <value>' line")
        elif match.group(3) not in user_conf.HINTS:
            found.append(line)
    if sorted(found) != expected:
        lines.append(f"{where}: {folder}/{USER_CONF} sets {'; '.join(found) or 'nothing but the hint'} but the cell's "
                     f"overrides of mlperf.conf are {'; '.join(expected) or 'none'}: it would pass as "
                     f"{'official' if not found else 'another run'}")
    for line in expected:
        key, value = line.split(".", 2)[2].split(" = ")
        requested = settings.get(_REQUESTED[key])
        if number(requested) != float(value):
            lines.append(f"{where}: the override {key} = {value} is not what LoadGen read: its detail log says "
                         f"{_REQUESTED[key]} {str(requested)[:40]}")
    return lines
