"""What a scenario file asks for that it will not get: settings no scenario of the file reads,
LoadGen minimums below what its early stopping needs, batches larger than the sample library, an
official MLPerf run from a profile whose settings the file overrides.
None of it is wrong enough to refuse (a quick look at an INVALID run is a fair thing to want), and
each of it was accepted in silence: a run prints these as warnings before it starts."""

from __future__ import annotations

from pydantic import BaseModel

from harness.scenario.rules import RULES
from harness.scenario.schema import ScenarioFile

#: The batch sizes field is read by these scenarios only.
_BATCHED = tuple(name for name, rule in RULES.items() if rule.batch == "batch_sizes")


def warnings(scenario: ScenarioFile, device: str) -> list[str]:
    """One sentence per thing the file sets that will not do what it reads as, for a run on `device`
    ("auto" where the device is not known yet: both devices' batch sizes are looked at)."""
    found = _unread_loadgen_keys(scenario)
    found += _unread_batch_sizes(scenario)
    found += _below_early_stopping(scenario)
    found += _batches_beyond_the_samples(scenario, device)
    found += _unofficial_mlperf(scenario)
    return found


def _unofficial_mlperf(scenario: ScenarioFile) -> list[str]:
    """Under the mlperf profile a LoadGen setting the file gives overrides mlperf.conf: the run is
    then no official one, which only `pack` said, after the run."""
    given = sorted(scenario.loadgen.user_conf())
    if scenario.loadgen.profile != "mlperf" or not given:
        return []
    return [f"loadgen.{', loadgen.'.join(given)} under profile mlperf {'override' if len(given) > 1 else 'overrides'} "
            "mlperf.conf's: the run is not an official one (pack says so, and refuses it for the closed division)"]


def _given(settings: BaseModel, key: str) -> bool:
    """Whether a file gave `key` a value of its own: a setting at its default reads the same left out,
    and a bundle's stored scenario (`loading.resolved`), run again as a file, gives every default."""
    default = type(settings).model_fields[key].get_default(call_default_factory=True)
    return key in settings.model_fields_set and getattr(settings, key) != default


def _unread_loadgen_keys(scenario: ScenarioFile) -> list[str]:
    read = {key for name in scenario.scenarios for key in RULES[name].loadgen_keys}
    found = []
    for name, rule in RULES.items():
        for key in rule.loadgen_keys:
            if _given(scenario.loadgen, key) and key not in read:
                found.append(f"loadgen.{key} is a {name} setting and this file runs {', '.join(scenario.scenarios)}: "
                             "it is ignored")
    return list(dict.fromkeys(found))


def _unread_batch_sizes(scenario: ScenarioFile) -> list[str]:
    if not _given(scenario, "batch_sizes") or any(name in _BATCHED for name in scenario.scenarios):
        return []
    return [f"batch_sizes is read by {' and '.join(_BATCHED)} only and this file runs "
            f"{', '.join(scenario.scenarios)}: it is ignored (SingleStream runs batch 1; MultiStream a query of "
            "loadgen.samples_per_query samples)"]


#: The fewest queries with which LoadGen's early stopping passes at all, by scenario: measured with
#: LoadGen 6.0.17 on a model of steady speed (no query over the estimate, or over Server's bound):
#: SingleStream's p90 was INVALID at 63 queries and VALID at 64, MultiStream's p99 INVALID at 661
#: and VALID at 662, Server's p99 INVALID at 458 and VALID at 459.
EARLY_STOPPING_FLOOR = {"SingleStream": 64, "MultiStream": 662, "Server": 459}


def _below_early_stopping(scenario: ScenarioFile) -> list[str]:
    given = scenario.loadgen.min_query_count
    if given is None:
        return []
    return [f"loadgen.min_query_count {given} is below the {EARLY_STOPPING_FLOOR[name]} queries LoadGen's early "
            f"stopping needs for {name}: expect its cells INVALID (early stopping not met)"
            for name in scenario.scenarios if name in EARLY_STOPPING_FLOOR and given < EARLY_STOPPING_FLOOR[name]]


def _batches_beyond_the_samples(scenario: ScenarioFile, device: str) -> list[str]:
    samples = scenario.inputs.samples
    sizes: set[int] = set()
    for name in scenario.scenarios:
        rule = RULES[name]
        if rule.batch == "samples_per_query":
            sizes.add(scenario.loadgen.samples_per_query)
        elif rule.batch == "batch_sizes":
            for each in ("cpu", "cuda") if device == "auto" else (device,):
                sizes.update(getattr(scenario.batch_sizes, each))
    over = sorted(size for size in sizes if size > samples)
    if not over:
        return []
    return [f"batches of {', '.join(map(str, over))} from inputs.samples {samples}: each batch holds the same inputs "
            "more than once, warm in the caches, which flatters the figures; give inputs.samples at least the "
            "largest batch"]
