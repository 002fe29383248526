"""MLPerf's compliance tests TEST01 and TEST04 for image classification: their audit settings, and
verification of a test's logs against the cell's own performance and accuracy runs.

LoadGen reads a test's `audit.config` from the file name it is given (`<model>.<scenario>.<key> =
value` lines, `*` for any) over the cell's settings:

- TEST01 runs in performance mode and logs a sample of the responses (a seeded draw) to its
  accuracy log. It passes when every logged response equals the accuracy run's response for the
  same sample (the system answers the same whatever the mode), and its performance is within 10%
  of the performance run's (20% for a SingleStream latency of 200 us or less or a MultiStream one
  of 1.6 ms or less, where a few microseconds move the figure that much).
- TEST04 issues one sample over and over. It passes when that is not more than 10% (20%, as above)
  faster than the performance run: a system that caches results would be.

The verification here is FusionBench's own, from these rules; its reports are written as
`verify_accuracy.txt` and `verify_performance.txt` with a `TEST PASS` or `TEST FAIL` line, as
MLPerf's submission checker reads them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from harness.mlperf.accuracy import predicted, read_log

TESTS = ("TEST01", "TEST04")
TEST01_SEED = 720381539243781796
TEST01_SAMPLING_TARGET = 4096  # responses TEST01 logs for image classification
TEST04_SAME_INDEX = 3
TOLERANCE = 0.10
FAST_TOLERANCE = 0.20
FAST_LATENCY_NS = {"SingleStream": 200_000, "MultiStream": 1_600_000}


def audit_config(test: str) -> str:
    """The audit.config of `test` for every model and scenario."""
    if test == "TEST01":
        lines = ["*.*.mode = 2", f"*.*.accuracy_log_rng_seed = {TEST01_SEED}",
                 f"*.*.accuracy_log_sampling_target = {TEST01_SAMPLING_TARGET}"]
    elif test == "TEST04":
        lines = ["*.*.mode = 2", "*.*.performance_issue_unique = 0", "*.*.performance_issue_same = 1",
                 f"*.*.performance_issue_same_index = {TEST04_SAME_INDEX}"]
    else:
        raise HarnessError(f"unknown compliance test {test!r}; known: {', '.join(TESTS)}")
    return f"# {test}, written by FusionBench\n" + "\n".join(lines) + "\n"


def _score(result: dict[str, Any]) -> tuple[float, bool]:
    """A run's headline figure and whether higher is better (a rate) or lower (a latency)."""
    metric = result["metric"]
    value = metric.get("value")
    if not isinstance(value, (int, float)) or value <= 0:
        raise HarnessError(f"the {result['scenario']} run has no figure to compare ({metric.get('name')})")
    return float(value), metric.get("unit") == "samples/s"


def verify_performance(test: str, reference: dict[str, Any], run: dict[str, Any]) -> tuple[bool, list[str]]:
    """Whether a compliance run's performance is what the rule above asks, with the report's lines."""
    ref, higher_better = _score(reference)
    got, _ = _score(run)
    fast = not higher_better and ref <= FAST_LATENCY_NS.get(reference["scenario"], 0)
    tolerance = FAST_TOLERANCE if fast else TOLERANCE
    lines = [f"reference score = {ref:g}", f"test score = {got:g}", f"tolerance = {tolerance:.0%}"]
    if reference["validity"] != "VALID" or run["validity"] != "VALID":
        lines.append(f"validity: reference {reference['validity']}, test {run['validity']}")
        return False, lines
    # A test that is faster than the reference by more than the tolerance fails both tests;
    # TEST01 (responses logged) must not be slower by more than it either.
    ratio = got / ref if higher_better else ref / got  # > 1: the test run was faster
    ok = ratio <= 1 + tolerance and (test != "TEST01" or ratio >= 1 - tolerance)
    lines.append(f"test / reference speed = {ratio:.4f}")
    return ok, lines


def verify_accuracy(accuracy_log: Path, test_log: Path) -> tuple[bool, list[str]]:
    """TEST01: every response the test run logged equals the accuracy run's for that sample."""
    return verify_responses(read_log(accuracy_log), read_log(test_log), str(accuracy_log), str(test_log))


def verify_responses(accuracy_run: list[dict[str, Any]], test_run: list[dict[str, Any]],
                     accuracy_where: str, test_where: str) -> tuple[bool, list[str]]:
    """`verify_accuracy` of two accuracy logs' responses, already read."""
    expected: dict[Any, int] = {}
    for entry in accuracy_run:
        index = entry.get("qsl_idx")
        if isinstance(index, int) and not isinstance(index, bool):
            expected[index] = predicted(entry, accuracy_where)
    matched = mismatched = unknown = 0
    for entry in test_run:
        index = entry.get("qsl_idx")
        want = expected.get(index) if isinstance(index, int) and not isinstance(index, bool) else None
        if want is None:
            unknown += 1
        elif predicted(entry, test_where) == want:
            matched += 1
        else:
            mismatched += 1
    lines = [f"responses logged = {matched + mismatched + unknown}", f"matching the accuracy run = {matched}",
             f"differing from it = {mismatched}", f"samples the accuracy run did not answer = {unknown}"]
    return matched > 0 and mismatched == 0 and unknown == 0, lines


def report(passed: bool, lines: list[str]) -> str:
    return "\n".join([*lines, "TEST PASS" if passed else "TEST FAIL"]) + "\n"
