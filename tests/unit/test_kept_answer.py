"""What a failed cell's record keeps of the answer its killed worker kept (harness/run/kept_answer.py),
as the runner records it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.bundle.cell_record import CellRecord, Metrics
from harness.bundle.migrations import SCHEMA_VERSION
from harness.bundle.timing_record import DeviceTime, TimeSummary
from harness.measure.protocol import WorkerAnswer, WorkerRequest
from harness.run.executors import CellTask, Finished
from harness.run.isolation import WorkerOutcome
from harness.run.sweep import finished_record
from tests.cell_configs import cell_config


def recorded(tmp_path: Path, partial: WorkerAnswer | None, answer: WorkerAnswer | None = None) -> dict[str, Any]:
    """The record of a cell whose worker exited in its correctness phase, having kept `partial`, or
    whose worker gave `answer`."""
    config = cell_config()
    artifacts = tmp_path / "cells" / "0123456789abcdef"
    artifacts.mkdir(parents=True, exist_ok=True)
    task = CellTask(cell_id="0123456789abcdef", label=config.shown_label,
                    request=WorkerRequest(cell=config, artifact_dir=str(artifacts)), artifacts=artifacts,
                    timeout_s=60, memory_limit_bytes=None, env_names=[], scratch_env={}, device="cpu")
    outcome = WorkerOutcome(answer, 3 if answer is None else 0, False, "correctness", 2.0, partial=partial)
    base = {"id": task.cell_id, "label": config.shown_label, "config": config.recorded()}
    return finished_record(base, Finished(task, outcome))


def test_the_figures_of_the_phases_that_ended_are_kept(tmp_path: Path) -> None:
    partial = WorkerAnswer(status="valid", reasons=["x"], warnings=["y"], metrics=Metrics(prepare_s=1.5),
                           phases_s={"prepare": 1.5}, environment={"pid": 7})
    record = recorded(tmp_path, partial)
    assert record["status"] == "failed" and record["warnings"] == []  # the partial's own say nothing
    assert record["reasons"] == ["worker exited with code 3 without an answer (in phase correctness)"]
    assert (record["metrics"], record["phases_s"], record["environment"]) == ({"prepare_s": 1.5}, {"prepare": 1.5},
                                                                             {"pid": 7})
    CellRecord.model_validate({**record, "schema_version": SCHEMA_VERSION})


def test_a_figure_of_the_answer_so_far_the_bundle_would_refuse_is_left_out_alone(tmp_path: Path) -> None:
    """A compile time that is not its phase's: written, the record ended the run when it was read
    back (exit 2, "not a cell record this harness reads"). It is left out, said in the log; the
    figures beside it, its phases and its environment are kept (one bad figure dropped them all)."""
    phases = {"prepare": 1.5, "first_call": 0.25}
    partial = WorkerAnswer(metrics=Metrics(prepare_s=999.0, first_call_s=0.25), phases_s=phases, environment={"pid": 7})
    record = recorded(tmp_path, partial)
    assert record["status"] == "failed"
    assert (record["metrics"], record["phases_s"], record["environment"]) == ({"first_call_s": 0.25}, phases, {"pid": 7})
    CellRecord.model_validate({**record, "schema_version": SCHEMA_VERSION})
    assert "of what the worker kept of its answer, metrics prepare_s is not recorded" in record["log_tail"]
    assert "metrics.prepare_s 999 is not the prepare phase's 1.5" in record["log_tail"]


def test_a_figure_derived_from_others_stays_when_another_is_left_out(tmp_path: Path) -> None:
    """The first call's ratio to the device-time median is refused alone (it needs both); a bad
    compile time beside them took it with it, though the record takes it with its sources."""
    timing = DeviceTime(samples_ns=[], summary=TimeSummary(n=10, median_ns=1e6, mean_ns=1e6))
    partial = WorkerAnswer(metrics=Metrics(prepare_s=999.0, first_call_s=0.25, device_time=timing,
                                           first_call_ratio=250.0), phases_s={"prepare": 1.5, "first_call": 0.25})
    record = recorded(tmp_path, partial)
    assert set(record["metrics"]) == {"first_call_s", "device_time", "first_call_ratio"}
    CellRecord.model_validate({**record, "schema_version": SCHEMA_VERSION})
    assert "of what the worker kept of its answer, metrics prepare_s is not recorded" in record["log_tail"]


def test_an_answer_so_far_refused_without_its_figures_is_not_recorded(tmp_path: Path) -> None:
    """Phases the record refuses (a negative time) take every field of the answer so far with them."""
    partial = WorkerAnswer(metrics=Metrics(first_call_s=0.25), phases_s={"prepare": 1.5})
    partial.phases_s = {"prepare": -1.0}  # as a worker of another build could have written it
    record = recorded(tmp_path, partial)
    assert record["status"] == "failed" and record["metrics"] == {} and "phases_s" not in record
    CellRecord.model_validate({**record, "schema_version": SCHEMA_VERSION})
    assert "of what the worker kept of its answer, all of it is not recorded" in record["log_tail"]


def test_a_whole_answer_the_bundle_would_refuse_fails_its_cell_and_not_the_run(tmp_path: Path) -> None:
    """Written as it came, such a record ended the run as the bundle was read back (exit 2, every other
    cell of the sweep unrun); now its cell fails, keeping no figure, and says why."""
    answer = WorkerAnswer(status="valid", metrics=Metrics(prepare_s=999.0), phases_s={"prepare": 1.5})
    record = recorded(tmp_path, None, answer)
    assert record["status"] == "failed" and record["metrics"] == {} and "phases_s" not in record
    [reason] = record["reasons"]
    assert reason.startswith("the worker's answer makes a record this harness refuses: ") and reason.endswith(
        "metrics.prepare_s 999 is not the prepare phase's 1.5"), reason
    CellRecord.model_validate({**record, "schema_version": SCHEMA_VERSION})
    assert "the worker's answer is not recorded" in record["log_tail"]
    fine = recorded(tmp_path / "fine", None, WorkerAnswer(status="valid", metrics=Metrics(prepare_s=1.5),
                                                          phases_s={"prepare": 1.5}))
    assert fine["status"] == "valid" and fine["metrics"] == {"prepare_s": 1.5}


def test_a_long_refusal_is_cut_saying_so_in_the_reason_and_in_the_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A refusal's text was cut at 500 characters in the reason (2,000 in the log's note) with no mark,
    and read as the whole: a cut one ends `...`."""
    from harness.run import kept_answer

    long = "metrics.prepare_s 999 is not the prepare phase's 1.5; " * 50  # 2,700 characters
    monkeypatch.setattr(kept_answer, "_refusals", lambda record, fields: [long.strip()])
    record = recorded(tmp_path, None, WorkerAnswer(status="valid", metrics=Metrics(prepare_s=1.5), phases_s={"prepare": 1.5}))
    [reason] = record["reasons"]
    refusal = reason.removeprefix("the worker's answer makes a record this harness refuses: ")
    assert len(refusal) == 500 and refusal.endswith("...") and long.startswith(refusal[:-3])
    note = [line for line in record["log_tail"].splitlines() if line.startswith("fusionbench: the worker's answer")]
    assert note and note[0].endswith("...") and len(note[0].split(": ", 2)[2]) == 2000


def test_a_killed_workers_reason_quotes_its_last_words_not_the_notes_kept_writes_after_them(tmp_path: Path) -> None:
    """The log is read after `kept` has written what it refused: the reason still quotes the worker's
    last line (the parent's `fusionbench:` notes are not its words), and the tail holds both. (That it
    is read once, not twice, is not held here: both reads gave the same reason and tail, so only a
    count of the reads could tell them apart.)"""
    log = tmp_path / "cells" / "0123456789abcdef" / "worker.log"
    log.parent.mkdir(parents=True)
    log.write_text("fusionbench worker: the compiler ran out of registers\n")
    partial = WorkerAnswer(metrics=Metrics(prepare_s=999.0), phases_s={"prepare": 1.5})
    record = recorded(tmp_path, partial)
    assert record["reasons"] == ["worker exited with code 3 without an answer (in phase correctness); it last wrote: "
                                 "fusionbench worker: the compiler ran out of registers "
                                 "(whole log: cells/0123456789abcdef/worker.log)"]
    assert record["log_tail"].startswith("fusionbench worker: the compiler ran out of registers\n")
    assert "fusionbench: of what the worker kept of its answer, metrics prepare_s is not recorded" in record["log_tail"]
    CellRecord.model_validate({**record, "schema_version": SCHEMA_VERSION})
