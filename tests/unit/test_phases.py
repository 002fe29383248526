"""The worker's phases come from one list (harness/measure/protocol.py): the worker times only those,
and the run's time line counts every one of them by its kind, so a new phase is never taken for
process start and exit."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import get_args

import pytest

from harness.bundle.reader import load
from harness.measure import protocol
from harness.measure.protocol import COMPLIANCE, PHASE_KINDS, PHASES, Phase
from harness.run.isolation import WorkerOutcome
from harness.run.summary import OTHER_PHASES, time_by_kind, time_line
from harness.scenario.settings import LoadGenSettings
from tests.cell_configs import cell_record

REPO = Path(__file__).resolve().parents[2]
#: The worker's modules that time its phases: its entry point (the `import` phase) and the phases after it.
WORKER = [REPO / "harness" / "measure" / "worker.py", REPO / "harness" / "measure" / "phases.py"]


def timed_by_the_worker() -> list[Phase]:
    """The phases worker.py and phases.py pass to `clock.phase(...)`, and those `clock.move(seconds,
    source, target)` records part of another as, resolved against the protocol module."""
    found: list[Phase] = []
    for module in WORKER:
        for node in ast.walk(ast.parse(module.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("phase", "move")
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "clock"):
                continue
            argument = node.args[-1]
            if isinstance(argument, ast.Subscript):  # protocol.COMPLIANCE[test]: any compliance test
                assert ast.unparse(argument.value) == "protocol.COMPLIANCE", ast.unparse(argument)
                found += COMPLIANCE.values()
                continue
            assert isinstance(argument, ast.Attribute) and ast.unparse(argument.value) == "protocol", (
                f"{module.name} line {node.lineno}: clock.phase({ast.unparse(argument)}) names no phase of the protocol")
            phase = getattr(protocol, argument.attr)
            assert isinstance(phase, Phase), ast.unparse(argument)
            found.append(phase)
    return found


def test_the_worker_times_every_listed_phase_and_no_other() -> None:
    timed = timed_by_the_worker()
    assert timed and set(timed) <= set(PHASES)
    assert set(timed) == set(PHASES), "a listed phase the worker never times"


def test_every_phase_of_the_protocol_is_in_the_list_once() -> None:
    defined = {value for value in vars(protocol).values() if isinstance(value, Phase)} | set(COMPLIANCE.values())
    assert defined == set(PHASES)
    names = [phase.name for phase in PHASES]
    assert len(names) == len(set(names))


def test_the_compliance_phases_are_the_tests_the_scenario_file_allows() -> None:
    (tests,) = get_args(LoadGenSettings.model_fields["compliance"].annotation)
    assert set(get_args(tests)) == set(COMPLIANCE)


@pytest.mark.parametrize("phase", PHASES, ids=[p.name for p in PHASES])
def test_the_time_line_counts_every_phase_by_its_kind(phase: Phase) -> None:
    record = cell_record(wall_s=10.0, phases_s={phase.name: 4.0})
    kinds = time_by_kind(record)
    assert kinds[phase.kind] == 4.0 and sum(kinds.values()) == 4.0
    line = time_line([record])
    assert f"{phase.kind} 40%" in line and "process start and exit 60%" in line
    assert all(kind in line for kind in PHASE_KINDS)


def test_an_unknown_phase_is_not_taken_for_process_start_and_exit() -> None:
    record = cell_record(wall_s=10.0, phases_s={"prepare": 2.0, "a phase of a newer worker": 5.0})
    assert time_by_kind(record)[OTHER_PHASES] == 5.0
    line = time_line([record])
    assert f"{OTHER_PHASES} 50%" in line and "process start and exit 30%" in line
    assert OTHER_PHASES not in time_line([cell_record(wall_s=10.0, phases_s={"prepare": 2.0})])


@pytest.mark.parametrize("bundle", ["v1", "v2", "v3", "mlperf"])
def test_the_golden_bundles_name_only_listed_phases(bundle: str) -> None:
    names = {phase.name for phase in PHASES}
    for cell in load(REPO / "tests" / "golden" / bundle).cells:
        assert set(cell.get("phases_s") or {}) <= names, cell["label"]


def test_further_rounds_count_in_the_cell_time_and_the_time_line() -> None:
    from rich.console import Console

    from harness.run.summary import FURTHER_ROUNDS, summary_table

    rounds = [{"round": 1, "status": "valid", "median_ns": 1e6, "n": 3, "cv": 0.01, "wall_s": 10.0},
              {"round": 2, "status": "valid", "median_ns": 1e6, "n": 3, "cv": 0.0, "samples_ns": [1_000_000] * 3,
               "wall_s": 4.0},
              {"round": 3, "status": "failed", "reason": "killed", "wall_s": 6.0}]
    timing = {"samples_ns": [1_000_000] * 3, "summary": {"n": 3, "median_ns": 1e6, "cv": 0.01}}
    record = cell_record(wall_s=10.0, phases_s={"prepare": 5.0}, metrics={"device_time": timing, "rounds": rounds})
    line = time_line([record])
    assert line.startswith("cells took 0.3 min: ") and f"{FURTHER_ROUNDS} 50%" in line, line
    assert "compile 25%" in line and "process start and exit 25%" in line, line
    console = Console(width=400, record=True)
    console.print(summary_table([record]))
    assert "10 s: 5 compile, 0 passes, 0 LoadGen; 2 further rounds 10 s" in console.export_text()
    one = cell_record(wall_s=10.0, phases_s={"prepare": 5.0})
    assert FURTHER_ROUNDS not in time_line([one]) and "compile 50%" in time_line([one])


def test_a_cell_that_gave_no_answer_is_not_taken_for_process_start_and_exit() -> None:
    """A worker killed in its compile (out of memory) leaves a record with its wall time and no
    phases: its minutes are a kind of their own in the time line."""
    from harness.run.summary import NO_ANSWER

    answered = cell_record(wall_s=10.0, phases_s={"prepare": 6.0})
    killed = cell_record(wall_s=30.0, phases_s={}, status="failed", reasons=["worker killed by SIGKILL (in phase prepare)"])
    line = time_line([answered, killed])
    assert f"{NO_ANSWER} 75%" in line and "compile 15%" in line and "process start and exit 10%" in line, line
    assert NO_ANSWER not in time_line([answered])
    skipped = cell_record(wall_s=2.0, phases_s={}, status="skipped", reasons=["not available here"])
    assert NO_ANSWER not in time_line([answered, skipped])


@pytest.mark.parametrize("outcome", [
    WorkerOutcome(None, -9, True, "loadgen", 40.0),  # its time limit
    WorkerOutcome(None, -9, False, "loadgen", 40.0, memory_exceeded_bytes=2 << 30, memory_limit_bytes=1 << 30),
    WorkerOutcome(None, -9, False, "loadgen", 40.0),  # a kill
    WorkerOutcome(None, 3, False, "loadgen", 40.0),  # a crash
], ids=["time limit", "memory limit", "killed", "crashed"])
def test_a_cell_stopped_in_a_phase_counts_the_rest_of_its_time_in_that_phase(outcome: WorkerOutcome) -> None:
    """A cell its time limit stopped in LoadGen said "40 s: 0 compile, 3 passes, 0 LoadGen", and the
    time line put its LoadGen minutes under process start and exit."""
    from rich.console import Console

    from harness.run.summary import summary_table

    record = cell_record(status="failed", reasons=[outcome.failure_reason(40.0)], wall_s=40.0,
                         phases_s={"import": 3.0, "prepare": 1.0, "timing": 3.0})
    assert time_by_kind(record)["LoadGen"] == 33.0
    console = Console(width=400, record=True)
    console.print(summary_table([record]))
    assert "40 s: 1 compile, 3 passes, 33 LoadGen" in console.export_text()
    assert "process start and exit 0%" in time_line([record])
    # a cell that ended with its answer: the rest is process start and exit, as before
    answered = cell_record(status="failed", reasons=["output differs from eager"], wall_s=40.0, phases_s={"timing": 3.0})
    assert time_by_kind(answered)["LoadGen"] == 0.0
