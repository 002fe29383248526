"""Rounds (harness/run/rounds.py): the order a sweep runs them in, fusion pairs alternating; the
further rounds skipped where round 1 was not valid; a cell's record held until its last round and
then carrying every round; the record's checks; the speedup and verdict the report shows."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from harness.bundle.cell_record import CellRecord, problems
from harness.bundle.migrations import SCHEMA_VERSION
from harness.measure.protocol import WorkerAnswer, WorkerRequest
from harness.reporting.cell_rows import Row, fmt_time_over_rounds
from harness.reporting.fusion_pairs import FusionPair, fmt_speedup
from harness.run import rounds
from harness.run.executors import CellTask, Finished
from harness.run.isolation import WorkerOutcome
from harness.scenario.cells import Cell, expand
from harness.scenario.schema import ScenarioFile
from harness.stats.summary import summarize_ns

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def _cells(rounds_wanted: int) -> list[Cell]:
    data = {"models": [{"name": "resnet18", "input_size": 32}],
            "backends": ["eager", {"name": "inductor", "fusion": ["on", "off"]}], "scenarios": ["Offline"],
            "batch_sizes": {"cpu": [4]}, "timing": {"rounds": rounds_wanted}}
    resolved = ScenarioFile.model_validate(data).model_dump(mode="json")
    resolved["name"] = "t"
    return expand(resolved, "cpu")


def _tasks(cells: list[Cell], root: Path) -> list[CellTask]:
    tasks = []
    for cell in cells:
        folder = root / "cells" / cell.id
        folder.mkdir(parents=True)
        tasks.append(CellTask(cell_id=cell.id, label=cell.label, request=WorkerRequest(cell=cell.config, artifact_dir=str(folder)),
                              artifacts=folder, timeout_s=60, memory_limit_bytes=None, env_names=[], scratch_env={},
                              device="cpu"))
    return tasks


def _plan(rounds_wanted: int, root: Path) -> tuple[list[Cell], list[CellTask], rounds.Rounds]:
    cells = _cells(rounds_wanted)
    firsts = _tasks(cells, root)
    state = rounds.Rounds({c.id: c.config.timing.rounds for c in cells}, root)
    return cells, rounds.order(firsts, {c.id: c for c in cells}, state), state


def test_one_round_keeps_the_sweeps_order(tmp_path: Path) -> None:
    cells = _cells(1)
    firsts = _tasks(cells, tmp_path)
    state = rounds.Rounds({c.id: 1 for c in cells}, tmp_path)
    assert rounds.order(firsts, {c.id: c for c in cells}, state) == firsts


def test_the_rounds_of_a_settings_cells_take_turns_the_order_flipping_each_round(tmp_path: Path) -> None:
    """eager and the Inductor pair of one setting: round i of each met the same stretch of the machine,
    so a backend's rounds pair with the baseline's as a fusion pair's do (eager ran its three rounds
    alone, before Inductor's)."""
    cells, ordered, _ = _plan(3, tmp_path)
    name = {c.id: f"{c.config.backend}-{c.config.variant.fusion}" for c in cells}
    assert [(name[t.cell_id], t.request.timing_round) for t in ordered] == [
        ("eager-on", 1), ("inductor-on", 1), ("inductor-off", 1),
        ("inductor-off", 2), ("inductor-on", 2), ("eager-on", 2),
        ("eager-on", 3), ("inductor-on", 3), ("inductor-off", 3)]  # which runs last flips: an order effect favours none
    further = [t for t in ordered if t.request.timing_round > 1]
    assert all(t.artifacts == tmp_path / "cells" / t.cell_id / f"round-{t.request.timing_round}" for t in further)
    assert all(t.artifacts.is_dir() and t.request.artifact_dir == str(t.artifacts) for t in further)
    assert all(t.label.endswith(f"round {t.request.timing_round}") for t in further)


def test_two_settings_take_their_turns_apart(tmp_path: Path) -> None:
    """Two batch sizes: each batch's cells are a unit of their own, its rounds done before the next's."""
    data = {"models": [{"name": "resnet18", "input_size": 32}], "backends": ["eager", "inductor"],
            "scenarios": ["Offline"], "batch_sizes": {"cpu": [1, 4]}, "timing": {"rounds": 2}}
    resolved = ScenarioFile.model_validate(data).model_dump(mode="json")
    resolved["name"] = "t"
    cells = expand(resolved, "cpu")
    state = rounds.Rounds({c.id: 2 for c in cells}, tmp_path)
    ordered = rounds.order(_tasks(cells, tmp_path), {c.id: c for c in cells}, state)
    batch = {c.id: c.config.batch for c in cells}
    first, second = ordered[:4], ordered[4:]
    assert len({batch[t.cell_id] for t in first}) == 1 and len({batch[t.cell_id] for t in second}) == 1
    assert batch[first[0].cell_id] != batch[second[0].cell_id]
    assert [t.request.timing_round for t in ordered] == [1, 1, 2, 2, 1, 1, 2, 2]
    assert [t.cell_id for t in first[2:]] == [t.cell_id for t in first[1::-1]]  # round 2 in the other order


def test_a_cells_rounds_share_one_scratch_home_removed_once_its_record_is_complete(tmp_path: Path) -> None:
    """The backend's scratch folders (a compiler's caches) live in one folder per cell, empty for
    round 1 and kept for the further rounds: their compiles are warm."""
    cells, ordered, state = _plan(2, tmp_path)
    homes = {t.cell_id: t.scratch_home for t in ordered}
    assert all(t.scratch_home == homes[t.cell_id] for t in ordered) and len(set(homes.values())) == len(cells)
    assert all(home is not None and home.is_dir() and not any(home.iterdir()) for home in homes.values())
    eager = next(c for c in cells if c.config.backend == "eager")
    first, second = [t for t in ordered if t.cell_id == eager.id]
    state.finished(_done(first, 1e6), _first_record(eager))
    assert homes[eager.id].is_dir()  # round 2 still to come
    assert state.finished(_done(second, 1.1e6), None) is not None and not homes[eager.id].exists()
    state.close()  # the run ended: the rest go too
    assert not any(home.exists() for home in homes.values())  # type: ignore[union-attr]
    one = _tasks(_cells(1), tmp_path / "one")
    assert all(t.scratch_home is None for t in rounds.order(one, {c.id: c for c in _cells(1)}, rounds.Rounds({}, tmp_path)))


def _first_record(cell: Cell, status: str = "valid", median_ns: float = 1e6) -> dict[str, Any]:
    import json

    record = next(r for r in (json.loads(p.read_text()) for p in sorted((GOLDEN / f"v{SCHEMA_VERSION}" / "cells").glob("*.json")))
                  if r["status"] == "valid" and r["config"]["backend"] == "eager")
    record.update(id=cell.id, label=cell.label, status=status, schema_version=SCHEMA_VERSION, config=cell.config.recorded(),
                  log=f"cells/{cell.id}/worker.log")
    record["metrics"].pop("rounds", None)
    record["metrics"]["device_time"]["summary"]["median_ns"] = median_ns
    record["metrics"]["device_time"]["summary"]["n"] = 40
    record["metrics"]["first_call_ratio"] = record["metrics"]["first_call_s"] * 1e9 / median_ns  # derived from the median
    return record


def _done(task: CellTask, median_ns: float | None, failure: str | None = None) -> Finished:
    if median_ns is None:
        return Finished(task, None, {}, failure=failure)
    (task.artifacts / "worker.log").write_text("round\n")
    answer = WorkerAnswer(status="valid")
    samples = [round(median_ns * 0.99), round(median_ns), round(median_ns * 1.01)]
    answer.metrics = answer.metrics.model_validate({
        "prepare_cache": "warm", "device_time": {"samples_ns": samples, "summary": summarize_ns(samples)}})
    return Finished(task, WorkerOutcome(answer=answer, returncode=0, timed_out=False, last_phase="timing", wall_s=2.5), {})


def test_a_cell_is_written_once_its_last_round_is_in_with_every_round(tmp_path: Path) -> None:
    cells, ordered, state = _plan(3, tmp_path)
    on = next(c for c in cells if c.config.backend == "inductor" and c.config.variant.fusion == "on")
    mine = [t for t in ordered if t.cell_id == on.id]
    assert state.finished(_done(mine[0], 1e6), _first_record(on)) is None
    assert state.waiting() == [on.id]
    assert state.finished(_done(mine[2], 1.2e6), None) is None  # rounds may finish out of order
    complete = state.finished(_done(mine[1], 1.1e6), None)
    assert complete is not None and state.waiting() == []
    got = complete["metrics"]["rounds"]
    assert [(r["round"], r["status"], r["median_ns"]) for r in got] == [(1, "valid", 1e6), (2, "valid", 1.1e6), (3, "valid", 1.2e6)]
    assert got[1]["prepare_cache"] == "warm" and got[1]["log"] == f"cells/{on.id}/round-2/worker.log"
    assert problems(complete, "cell") == []


def test_a_round_out_of_line_with_the_others_is_warned_of(tmp_path: Path) -> None:
    """Rounds of 36, 30 and 382 ms: the third, run while something else took the machine, was
    recorded valid and said nothing, though the pair's estimate leaned on it."""
    from harness.bundle import figures_check

    cells, ordered, state = _plan(3, tmp_path)
    on = next(c for c in cells if c.config.backend == "inductor" and c.config.variant.fusion == "on")
    mine = [t for t in ordered if t.cell_id == on.id]
    state.finished(_done(mine[0], 36.2e6), _first_record(on, median_ns=36.2e6))
    state.finished(_done(mine[1], 30.4e6), None)
    complete = state.finished(_done(mine[2], 382e6), None)
    assert complete is not None
    apart = [w for w in complete["warnings"] if w.startswith(rounds.ROUNDS_OUT_OF_LINE)]
    assert apart == ["rounds out of line: round 3's 382 ms (10.6x) against the median of the cell's 3 rounds, 36.2 ms: "
                     "that round's process or the machine was not as in the others; a speedup's interval over the "
                     "rounds (fusion on over off, or over the baseline) takes it in, and its verdict with it"]
    assert problems(complete, "cell") == [] and figures_check._warnings(complete) == []


def test_two_rounds_far_apart_are_both_named_and_rounds_alike_say_nothing(tmp_path: Path) -> None:
    cells, ordered, state = _plan(2, tmp_path)
    eager = next(c for c in cells if c.config.backend == "eager")
    mine = [t for t in ordered if t.cell_id == eager.id]
    state.finished(_done(mine[0], 10e6), _first_record(eager, median_ns=10e6))
    complete = state.finished(_done(mine[1], 21e6), None)
    assert complete is not None
    assert [w for w in complete["warnings"] if w.startswith("rounds out of line:")] == [
        "rounds out of line: round 1's median, 10.0 ms, and round 2's, 21.0 ms, differ by 2.1x: that round's process "
        "or the machine was not as in the others; a speedup's interval over the rounds (fusion on over off, or over "
        "the baseline) takes it in, and its verdict with it"]
    assert rounds.rounds_warning([]) is None
    cells, ordered, state = _plan(3, tmp_path / "alike")
    mine = [t for t in ordered if t.cell_id == eager.id]
    state.finished(_done(mine[0], 10e6), _first_record(eager, median_ns=10e6))
    state.finished(_done(mine[1], 12e6), None)
    complete = state.finished(_done(mine[2], 14e6), None)  # 1.4x the lowest, within 1.5x of the median
    assert complete is not None and not any(w.startswith("rounds out of line:") for w in complete["warnings"])


def test_a_further_rounds_own_warnings_and_recompiles_are_kept_as_that_rounds(tmp_path: Path) -> None:
    """Round 1's warnings were the record's; a further round's (a busy machine, noise) were lost. Its
    recompiles in the timed calls (tests/unit/test_worker.py records them) went unrecorded; validate
    holds its warning and its count together."""
    from harness.bundle import recompiles_check
    from harness.bundle.cell_record import Dynamo

    cells, ordered, state = _plan(2, tmp_path)
    eager = next(c for c in cells if c.config.backend == "eager")
    mine = [t for t in ordered if t.cell_id == eager.id]
    state.finished(_done(mine[0], 10e6), _first_record(eager, median_ns=10e6))
    second = _done(mine[1], 10.5e6)
    assert second.outcome is not None and second.outcome.answer is not None
    recompiled = "recompiled: Dynamo compiled 2 frames again during the timed calls, after the warm-up"
    second.outcome.answer.warnings = ["a busy machine: other processes used 0.80 cores during the timed calls", recompiled]
    second.outcome.answer.metrics.dynamo = Dynamo(graphs=1, graph_breaks=0, distinct_break_reasons=0, recompiles_timed=2)
    complete = state.finished(second, None)
    assert complete is not None
    assert "round 2: a busy machine: other processes used 0.80 cores during the timed calls" in complete["warnings"]
    assert f"round 2: {recompiled}" in complete["warnings"]
    assert complete["metrics"]["rounds"][1]["recompiles_timed"] == 2 and "recompiles_timed" not in complete["metrics"]["rounds"][0]
    assert problems(complete, "cell") == [] and recompiles_check.problems(complete) == []
    unsaid = copy.deepcopy(complete)
    unsaid["warnings"].remove(f"round 2: {recompiled}")
    assert recompiles_check.problems(unsaid) == ["warnings: none begins 'round 2: recompiled:', yet round 2's "
                                                 "recompiles_timed is 2: Dynamo compiled frames during that round's timed calls"]
    unsaid["metrics"]["rounds"][1]["recompiles_timed"] = 0
    unsaid["warnings"].append(f"round 2: {recompiled}".replace("2 frames", "1 frame"))
    assert recompiles_check.problems(unsaid) == ["warnings: 'round 2: recompiled:' says Dynamo compiled 1 frame(s) in the "
                                                 "timed calls, yet round 2's recompiles_timed is 0"]
    complete["metrics"]["rounds"][0]["recompiles_timed"] = 2  # round 1's are metrics.dynamo's
    assert any("recompiles_timed is a further valid round's" in line for line in problems(complete, "cell"))


def test_a_failed_further_round_keeps_its_reason_and_the_cell_stays_valid(tmp_path: Path) -> None:
    cells, ordered, state = _plan(2, tmp_path)
    eager = next(c for c in cells if c.config.backend == "eager")
    mine = [t for t in ordered if t.cell_id == eager.id]
    state.finished(_done(mine[0], 1e6), _first_record(eager))
    complete = state.finished(_done(mine[1], None, failure="the executor lost it twice"), None)
    assert complete is not None and complete["status"] == "valid"
    assert complete["metrics"]["rounds"][1] == {"round": 2, "status": "failed", "reason": "the executor lost it twice",
                                                "wall_s": 0.0}
    assert not (tmp_path / "cells" / eager.id / "round-2").exists()  # it never ran: no empty folder is left
    assert [w for w in complete["warnings"] if rounds.ROUND_NO_TIME in w] == [
        "round 2 of 2 gave no time (the executor lost it twice): the cell's figures over rounds, and the intervals of "
        "its speedups, take its other rounds"]
    assert problems(complete, "cell") == []


def test_further_rounds_are_skipped_once_round_1_was_not_valid(tmp_path: Path) -> None:
    cells, ordered, state = _plan(2, tmp_path)
    eager = next(c for c in cells if c.config.backend == "eager")
    first, second = [t for t in ordered if t.cell_id == eager.id]
    assert second.skip_reason() is None  # asked before round 1 finished: not known yet
    assert state.finished(_done(first, 1e6), _first_record(eager, status="invalid")) is None
    assert second.skip_reason() == "round 1 of the cell was invalid"
    complete = state.finished(_done(second, None, failure=second.skip_reason()), None)
    assert complete is not None and complete["status"] == "invalid" and "rounds" not in complete["metrics"]


@pytest.mark.parametrize(("change", "said"), [
    (lambda r: r.__setitem__("round", 3), "numbered 1, 2"),
    (lambda r: r.__setitem__("median_ns", None), "a valid round has a median"),
])
def test_a_record_whose_rounds_do_not_add_up_is_refused(tmp_path: Path, change: Any, said: str) -> None:
    cells, ordered, state = _plan(2, tmp_path)
    eager = next(c for c in cells if c.config.backend == "eager")
    first, second = [t for t in ordered if t.cell_id == eager.id]
    state.finished(_done(first, 1e6), _first_record(eager))
    complete = state.finished(_done(second, 2e6), None)
    assert complete is not None
    broken = copy.deepcopy(complete)
    change(broken["metrics"]["rounds"][1])
    assert any(said in line for line in problems(broken, "cell"))
    moved = copy.deepcopy(complete)
    moved["metrics"]["rounds"][0]["median_ns"] = 5e5
    assert any("round 1 is the cell's own device timing" in line for line in problems(moved, "cell"))


@pytest.mark.parametrize(("change", "said"), [
    (lambda r: r.__setitem__("median_ns", r["median_ns"] * 2), "round 2's median_ns is not its samples'"),
    (lambda r: r["samples_ns"].append(r["samples_ns"][0]), "n are not its samples'"),
    (lambda r: r.pop("samples_ns"), "round 2 keeps no samples"),
])
def test_a_further_round_is_checked_against_its_own_samples(tmp_path: Path, change: Any, said: str) -> None:
    """From schema 8 a further round keeps its samples: a median edited to move a verdict no longer
    agrees with them, and a round that drops them cannot be checked, so both are problems."""
    from harness.bundle import rounds_check

    cells, ordered, state = _plan(2, tmp_path)
    eager = next(c for c in cells if c.config.backend == "eager")
    first, second = [t for t in ordered if t.cell_id == eager.id]
    state.finished(_done(first, 1e6), _first_record(eager))
    complete = state.finished(_done(second, 2e6), None)
    assert complete is not None and complete["metrics"]["rounds"][1]["samples_ns"]
    assert not [line for line in rounds_check.problems(complete, SCHEMA_VERSION, tmp_path) if "samples" in line]
    change(complete["metrics"]["rounds"][1])
    assert any(said in line for line in rounds_check.problems(complete, SCHEMA_VERSION, tmp_path))
    if "samples_ns" not in complete["metrics"]["rounds"][1]:  # a v7 round kept none: its figures stand as recorded
        assert not rounds_check.problems(complete, 7, tmp_path)


def _row(cell: Cell, medians: list[float]) -> Row:
    record = _first_record(cell, median_ns=medians[0])
    record["metrics"]["rounds"] = [{"round": i + 1, "status": "valid", "median_ns": m, "n": 3, "cv": 0.01}
                                   | ({"samples_ns": [round(m)] * 3} if i else {}) for i, m in enumerate(medians)]
    return Row(CellRecord.model_validate(record))


def test_the_pairs_speedup_comes_from_its_paired_rounds_with_an_interval_and_verdict() -> None:
    cells = _cells(3)
    on = next(c for c in cells if c.config.backend == "inductor" and c.config.variant.fusion == "on")
    off = next(c for c in cells if c.config.backend == "inductor" and c.config.variant.fusion == "off")
    pair = FusionPair(_row(on, [1.0e6, 1.02e6, 0.99e6]), _row(off, [1.5e6, 1.49e6, 1.52e6]))
    assert pair.result.verdict == "faster" and pair.speedup == pytest.approx(pair.result.value)
    assert fmt_speedup(pair).startswith(f"{pair.speedup:.2f}x [") and fmt_speedup(pair).endswith("faster")
    one = FusionPair(_row(on, [1.0e6]), _row(off, [1.5e6]))
    assert fmt_speedup(one) == "1.50x (one round)"


def test_a_cells_time_is_the_median_over_its_rounds_with_that_medians_interval() -> None:
    cells = _cells(3)
    on = next(c for c in cells if c.config.backend == "inductor" and c.config.variant.fusion == "on")
    three = _row(on, [1.0e6, 1.2e6, 0.9e6])
    middle, interval = three.over_rounds  # type: ignore[misc]
    assert middle == 1.0e6 and (interval.low, interval.high, interval.coverage) == (0.9e6, 1.2e6, 0.75)
    assert fmt_time_over_rounds(three) == "1.00 ms [900 us-1.20 ms, 75%] over 3 rounds"
    assert three.median_ns == 1.0e6  # the cell's own timing stays round 1's
    failed_round = _row(on, [1.0e6, 1.2e6])
    failed_round.record.metrics.rounds[1].status = "failed"  # type: ignore[index]
    assert failed_round.over_rounds is None and fmt_time_over_rounds(failed_round) == "1.00 ms"
    assert fmt_time_over_rounds(_row(on, [2.0e6])) == "2.00 ms"


def test_the_command_lines_rounds_override_the_files_and_are_stored_with_the_scenario(tmp_path: Path) -> None:
    from contextlib import ExitStack

    from harness.run.opening import open_or_plan
    from harness.run.run_request import RunRequest

    scenario = tmp_path / "s.yaml"
    scenario.write_text("models: [resnet18]\nbackends: [eager]\nscenarios: [Offline]\ntiming: {rounds: 2}\n")
    with ExitStack() as closing:
        _, as_filed, typed_as_filed = open_or_plan(RunRequest(scenario_path=scenario), closing)
        _, overridden, typed = open_or_plan(RunRequest(scenario_path=scenario, rounds=5), closing)
    assert as_filed["timing"]["rounds"] == 2 and overridden["timing"]["rounds"] == 5
    assert typed_as_filed.timing.rounds == 2 and typed.timing.rounds == 5 and typed.name == "s"
    assert {k: v for k, v in overridden["timing"].items() if k != "rounds"} == \
        {k: v for k, v in as_filed["timing"].items() if k != "rounds"}


def test_with_two_jobs_a_further_round_starts_once_its_round_1_is_in(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Two slots: round 2 of the eager cell must not start while its round 1 runs, and once round 1
    turned out failed it is skipped, never run."""
    import threading
    import time

    from harness.run import executors
    from harness.run.slots import Slot

    cells, ordered, state = _plan(2, tmp_path)
    eager = next(c for c in cells if c.config.backend == "eager")
    first, second = [t for t in ordered if t.cell_id == eager.id]
    ran: list[tuple[str, float, float]] = []
    lock = threading.Lock()

    def run_here(task: CellTask, slot: Any, on_phase: Any, stop: Any = None, parents: Any = None) -> WorkerOutcome:
        start = time.monotonic()
        time.sleep(0.4 if task is first else 0.05)
        with lock:
            ran.append((task.label, start, time.monotonic()))
        return WorkerOutcome(answer=None, returncode=1, timed_out=True, last_phase="loadgen", wall_s=0.4)

    monkeypatch.setattr(executors, "run_here", run_here)
    pool = executors.LocalPool([Slot(index=0, cpus=[0]), Slot(index=1, cpus=[1])])
    seen = []
    for done in pool.run([first, second], lambda task, phase: None):
        seen.append(done)
        if done.task is first:  # the runner takes round 1's record: a failed cell
            state.finished(done, _first_record(eager, status="failed"))
    assert [label for label, _, _ in ran] == [first.label], "round 2 ran although round 1 failed"
    (skipped,) = [d for d in seen if d.task is second]
    assert skipped.outcome is None and skipped.failure == "round 1 of the cell was failed"


def test_with_two_jobs_a_cells_rounds_run_one_after_another_and_hold_no_slot_while_they_wait(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every further round waited on round 1 alone: rounds 2 and 3 of a cell then ran at once, in the
    one scratch folder its rounds share, and while they waited they held the pool's threads, so the
    next cell could not start beside round 1."""
    import threading
    import time

    from harness.run import executors
    from harness.run.slots import Slot

    cells, ordered, state = _plan(3, tmp_path)
    eager = next(c for c in cells if c.config.backend == "eager")
    mine = [t for t in ordered if t.cell_id == eager.id]
    other = next(t for t in ordered if t.cell_id != eager.id and t.request.timing_round == 1)
    spans: dict[str, tuple[float, float]] = {}
    lock = threading.Lock()
    other_started = threading.Event()
    beside_round_1: list[bool] = []

    def run_here(task: CellTask, slot: Any, on_phase: Any, stop: Any = None, parents: Any = None) -> WorkerOutcome:
        start = time.monotonic()
        if task is mine[0]:  # round 1 runs until the next cell has started beside it, or gives up
            beside_round_1.append(other_started.wait(timeout=10))
        elif task.cell_id == eager.id:
            time.sleep(0.3)  # long enough for a round run at the same time as this one to show
        else:
            other_started.set()
        with lock:
            spans[task.label] = (start, time.monotonic())
        return WorkerOutcome(answer=None, returncode=1, timed_out=True, last_phase="loadgen", wall_s=0.3)

    monkeypatch.setattr(executors, "run_here", run_here)
    pool = executors.LocalPool([Slot(index=0, cpus=[0]), Slot(index=1, cpus=[1])])
    by_id = {c.id: c for c in cells}
    for done in pool.run([*mine, other], lambda task, phase: None):  # the runner takes each round 1's record
        state.finished(done, _first_record(by_id[done.task.cell_id]) if done.task.request.timing_round == 1 else None)
    first, second, third = (spans[t.label] for t in mine)
    assert second[0] >= first[1] and third[0] >= second[1], "two rounds of one cell ran at once"
    assert beside_round_1 == [True], "the next cell waited behind the rounds"


def test_a_further_round_is_held_to_what_of_round_1_it_runs_again_then_to_the_longest_further_round(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under --budget-s round 2 was held to round 1's whole wall time, LoadGen's and the other passes'
    minutes included, which a further round does not run (an mlperf-profile cell's LoadGen alone is
    600 s): round 2 of Inductor's resnet18 at 32x32 took 17 s where round 1 took 36 s, 4 s of it in
    passes and LoadGen. A further round is held to the phases it runs again, then to its own kind."""
    from harness.run import time_budget

    monkeypatch.setattr(time_budget, "clock", lambda: 1000.0)
    cells, ordered, state = _plan(3, tmp_path)
    on = next(c for c in cells if c.config.backend == "inductor" and c.config.variant.fusion == "on")
    mine = [t for t in ordered if t.cell_id == on.id]
    first = _first_record(on)
    first["wall_s"] = 700.0
    first["phases_s"] = {"import": 2.0, "prepare": 60.0, "timing": 5.0, "loadgen": 600.0, "memory": 3.0, "profile": 2.0}
    state.finished(_done(mine[0], 1e6), first)
    guess = state.guess(on.id)
    assert guess == time_budget.RoundGuess(95.0, 1, 700.0)  # 700 s less 605 s of LoadGen and passes
    assert time_budget.shorter_than_a_round(1080.0, guess) == (
        "not started: round 1 took 700 s, 95 s of it in what a further round runs again, 80 s of the run's "
        "time budget left")
    assert time_budget.shorter_than_a_round(1100.0, guess) is None, "a round that fits was held back"
    state.finished(_done(mine[1], 1.1e6), None)  # round 2 took 2.5 s: round 3 is held to it
    assert state.guess(on.id) == time_budget.RoundGuess(2.5, 2)
    assert time_budget.shorter_than_a_round(1001.0, state.guess(on.id)) == (
        "not started: round 2 took 2 s, 1 s of the run's time budget left")


def test_a_further_rounds_long_reason_is_cut_saying_so(tmp_path: Path) -> None:
    """A round's reason over ROUND_REASON_CHARS was cut there without a mark, so a reader took the
    cut text for the whole; it ends `...` now, as the project's other cut texts do."""
    cells, ordered, state = _plan(2, tmp_path)
    eager = next(c for c in cells if c.config.backend == "eager")
    mine = [t for t in ordered if t.cell_id == eager.id]
    state.finished(_done(mine[0], 1e6), _first_record(eager))
    complete = state.finished(_done(mine[1], None, failure="the worker said: " + "x" * 600), None)
    assert complete is not None
    reason = complete["metrics"]["rounds"][1]["reason"]
    assert len(reason) == rounds.ROUND_REASON_CHARS and reason == "the worker said: " + "x" * 480 + "..."
