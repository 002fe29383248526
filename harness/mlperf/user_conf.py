"""The user.conf of a cell's LoadGen run under the `mlperf` profile.

LoadGen reads its built-in mlperf.conf (the official seeds, minimum duration, performance sample
count, early stopping and Server latency bound) and then the user.conf given to
`TestSettings.FromConfig`, whose lines are `<model>.<scenario>.<key> = <value>`. A submission's
user.conf may only set what a submitter tunes: the expected rate or latency. This one carries the
hint measured by the device-timing pass, and the overrides the scenario file asked for; a result
with overrides is not an official run, and says so (`pack` refuses it for the closed division).
"""

from __future__ import annotations

from typing import Any

#: What a submitter tunes (the expected rate or latency): the only keys of an official user.conf.
HINTS = ("target_qps", "target_latency")
# The scenario file's LoadGen fields that may override mlperf.conf, and their user.conf keys.
OVERRIDABLE = {"min_duration_s": "min_duration", "max_duration_s": "max_duration",
               "min_query_count": "min_query_count", "max_query_count": "max_query_count"}


def text(conf_model: str, scenario: str, hints: dict[str, float], overrides: dict[str, Any]) -> str:
    """user.conf lines: `hints` (`target_qps` in queries per second, or `target_latency` in ms)
    for the benchmark's model, then the overrides (durations in seconds, written in ms)."""
    lines = ["# Written by FusionBench: the hint from the device-timing pass."]
    lines += [f"{conf_model}.{scenario}.{key} = {value:.6g}" for key, value in sorted(hints.items())]
    if overrides:
        lines.append("# Overrides of mlperf.conf asked for by the scenario file: not an official run.")
    lines += override_lines(scenario, overrides)
    return "\n".join(lines) + "\n"


def override_lines(scenario: str, overrides: dict[str, Any]) -> list[str]:
    """The user.conf lines of `overrides` (durations in seconds, written in ms), sorted."""
    lines = []
    for field, value in sorted(overrides.items()):
        number = int(value * 1000) if field.endswith("_s") else int(value)
        lines.append(f"*.{scenario}.{OVERRIDABLE[field]} = {number}")
    return lines
