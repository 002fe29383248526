"""Rounds: a cell's device timing repeated in fresh worker processes (`timing: {rounds: N}`).

The machine moves between processes more than within one (core placement, heap and address-space
layout, the phase of the host's noise), so a cell's repetitions alone make too narrow a range.
Round 1 is the cell's whole measurement; each further round is a fresh worker that prepares the
model again (its compiled artefacts from the artifact cache round 1 filled) and times the steady
state as round 1 did (`WorkerRequest.timing_round`). The rounds of the cells of one setting (one
model, input size, scenario, batch, dtype and device: every backend and variant of it) take turns,
round 1 of each, then round 2 of each in the other order, and so on, so that round i of every cell
of the setting met the same stretch of the machine, and running later (a warmer machine, a filled
page cache) favours no cell in every round: a fusion pair's speedup, and a backend's over the
baseline's cell of its setting, take their intervals from those paired rounds
(harness/stats/intervals.py); an order effect that favoured one side each round would pass into
them unseen. Bundles of schema 10 before 2026-12-01 paired the rounds of a fusion pair alone
(bundle.json's `rounds_paired` is absent from them; "setting" since).

A cell's rounds share the folders its backend keeps scratch in (`Backend.scratch_env`: a compiler's
on-disk caches), made empty for round 1 and kept until its last round ends: round 1 compiles cold,
each further round finds what the rounds before it left (`CellTask.scratch_home`; under Ray, whose
tasks may run on other machines, each round keeps fresh folders of its own and compiles cold).

Order: with every cell at one round the sweep's order is kept as it was. Otherwise the cells are
grouped into units, the cells of one setting, in the order of their first cell; a unit runs its
cells' round 1 in the sweep's order (a fusion pair's two cells side by side), then their round 2 in
the other order, and so on. A cell's record is
written once its last round has finished, with `metrics.rounds` (harness/bundle/cell_record.py;
a further round's frames Dynamo compiled in its timed calls among its figures), each further round's
own warnings (`round 2: a busy machine: ...`, `round 2: recompiled: ...`), a warning for each further
round that gave no time (kept as failed, with its reason: its worker failed, or the run's time
budget ended before it or while it ran, or left less than the cell's rounds say it takes as it would
start (`Rounds.guess`: its longest further round so far, else what of round 1 a further round runs
again), `round 2 of 3 gave no time (not started: round 1 took 36 s, 27 s of it in what a further round
runs again, 7 s of the run's time budget left)`, in
which case it is not started and the cell keeps the rounds that finished, until a --resume times them
all afresh; harness/run/time_budget.py)
and a warning where a round's
median is out of line with the others (more than 1.5x the median of the rounds, or below it by as
much: `harness.stats.summary.out_of_line`);
a further round is not run where the cell's round 1 was not valid (Serial and LocalPool ask just
before it starts; Ray runs it anyway). LocalPool starts a further round once the round before it
has finished (never two rounds of a cell at once: they share its scratch folders), and until then
it holds none of the pool's places, so other cells run meanwhile.
"""

from __future__ import annotations

import json
import threading
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pydantic
from pydantic import ConfigDict

from harness.bundle.cell_record import Metrics
from harness.bundle.timing_record import TimingRound
from harness.measure.protocol import FURTHER_ROUND_PHASES
from harness.metric_table import format_value
from harness.plain_text import shortened
from harness.run import time_budget
from harness.run.executors import CellTask, Finished
from harness.run.isolation import log_tail
from harness.run.scratch import scratch_dir
from harness.scenario.cells import Cell
from harness.stats.summary import median, out_of_line
from harness.stats.thresholds import ROUND_OUT_OF_LINE

ROUND_FOLDER = "round-{}"  # under the cell's artifact folder: the further round's worker.log
#: How the warning of rounds whose medians are out of line with the others begins.
ROUNDS_OUT_OF_LINE = "rounds out of line:"
#: What the warning of a further round of a valid cell that has no time says of it.
ROUND_NO_TIME = "gave no time"
#: The most of a failed further round's reason its record keeps (a cut one ends `...`): its reasons
#: joined, or its worker's last words, can run long; the whole is in its log.
ROUND_REASON_CHARS = 500


class FirstRound(pydantic.BaseModel):
    """What the rounds read of round 1's cell record (harness/run/sweep.py makes it, and the bundle
    keeps it as it is, with `metrics.rounds` added once the cell's rounds are in): its status, its
    metrics as recorded, its worker's wall time and log."""

    model_config = ConfigDict(frozen=True, extra="ignore")
    status: str
    metrics: dict[str, Any] = {}
    wall_s: float | None = None
    log: str | None = None
    phases_s: dict[str, float] = {}


#: bundle.json's `rounds_paired`: the cells whose rounds take turns (absent: a fusion pair's alone).
ROUNDS_PAIRED = "setting"


def setting_key(cell: Cell) -> str:
    """The same for the cells of one setting: their whole config but the backend and its variant."""
    recorded = cell.config.recorded()
    return json.dumps({k: v for k, v in recorded.items() if k not in ("backend", "variant")}, sort_keys=True)


def further_round(task: CellTask, number: int, state: Rounds) -> CellTask:
    """Round `number` (2 or more) of the cell `task` is round 1 of; it starts once the round before it
    has finished (never two rounds of a cell at once: they share its scratch folders)."""
    folder = task.artifacts / ROUND_FOLDER.format(number)
    request = replace(task.request, timing_round=number, artifact_dir=str(folder))
    return replace(
        task,
        label=f"{task.label} round {number}",
        request=request,
        artifacts=folder,
        skip=lambda: state.why_not_further(task.cell_id),
        after=state.round_ended(task.cell_id, number - 1),
        round_guess=lambda: state.guess(task.cell_id),
    )


def order(firsts: list[CellTask], cells: dict[str, Cell], state: Rounds) -> list[CellTask]:
    """Every task of the sweep in the order described above; the further rounds' folders made."""
    if all(cells[t.cell_id].config.timing.rounds == 1 for t in firsts):
        return list(firsts)
    units: dict[str, list[CellTask]] = {}
    for task in firsts:
        units.setdefault(setting_key(cells[task.cell_id]), []).append(task)
    ordered: list[CellTask] = []
    for unit in units.values():
        unit = [replace(t, scratch_home=state.home(t.cell_id)) if cells[t.cell_id].config.timing.rounds > 1 else t for t in unit]
        most = max(cells[t.cell_id].config.timing.rounds for t in unit)
        for number in range(1, most + 1):
            for task in unit if number % 2 else unit[::-1]:  # which runs second flips each round
                if number == 1:
                    ordered.append(task)
                elif number <= cells[task.cell_id].config.timing.rounds:
                    round_task = further_round(task, number, state)
                    round_task.artifacts.mkdir(parents=True, exist_ok=True)
                    ordered.append(round_task)
    return ordered


@dataclass
class Rounds:
    """The rounds of the cells being swept: round 1's record held until every further round is in."""

    expected: dict[str, int]  # cell id -> rounds
    bundle_root: Path
    held: dict[str, dict[str, Any]] = field(default_factory=dict)  # round 1's record
    further: dict[str, list[TimingRound]] = field(default_factory=dict)
    further_warnings: dict[str, list[str]] = field(default_factory=dict)  # cell id -> its further rounds' warnings
    first_status: dict[str, str] = field(default_factory=dict)
    first_guess: dict[str, time_budget.RoundGuess] = field(default_factory=dict)  # of round 1: what round 2 is held to
    longest_further: dict[str, TimingRound] = field(default_factory=dict)  # its longest valid further round so far
    homes: dict[str, ExitStack] = field(default_factory=dict)  # cell id -> its rounds' scratch folder, held
    ended: dict[tuple[str, int], threading.Event] = field(default_factory=dict)  # (cell id, round) -> set once in

    def round_ended(self, cell_id: str, number: int) -> threading.Event:
        """Set once the cell's round `number` has finished and is taken (`finished`)."""
        return self.ended.setdefault((cell_id, number), threading.Event())

    def home(self, cell_id: str) -> Path:
        """A new, empty folder for the scratch folders of the cell's rounds; removed when its record is
        complete, or by `close`."""
        stack = self.homes[cell_id] = ExitStack()
        return stack.enter_context(scratch_dir("fusionbench-rounds-"))

    def close(self) -> None:
        """Remove the rounds' folders still held (the run ended or was interrupted)."""
        for stack in self.homes.values():
            stack.close()
        self.homes.clear()

    def guess(self, cell_id: str) -> time_budget.RoundGuess | None:
        """What the cell's next further round is held to under a budget (time_budget.RoundGuess):
        its longest valid further round so far, the same work, else the part of round 1 a further
        round runs again; None before round 1 has finished."""
        longest = self.longest_further.get(cell_id)
        if longest is not None and longest.wall_s is not None:
            return time_budget.RoundGuess(longest.wall_s, longest.round)
        return self.first_guess.get(cell_id)

    def why_not_further(self, cell_id: str) -> str | None:
        status = self.first_status.get(cell_id)
        if status is None or status == "valid":
            return None
        return f"round 1 of the cell was {status}"

    def finished(self, done: Finished, record: dict[str, Any] | None) -> dict[str, Any] | None:
        """Take a finished task (`record`: round 1's cell record, None for a further round); return
        the cell's record once it is complete, else None."""
        cell_id = done.task.cell_id
        if done.task.request.timing_round == 1:
            assert record is not None
            taken = FirstRound.model_validate(record)
            self.first_status[cell_id] = taken.status
            if taken.wall_s is not None:
                self.first_guess[cell_id] = _repeated_of(taken.wall_s, taken.phases_s)
            self.round_ended(cell_id, 1).set()
            if self.expected.get(cell_id, 1) == 1:
                return record
            self.held[cell_id] = record
        else:
            taken_round = self._round(done)
            self.further.setdefault(cell_id, []).append(taken_round)
            longest = self.longest_further.get(cell_id)
            if taken_round.status == "valid" and (longest is None or (taken_round.wall_s or 0) > (longest.wall_s or 0)):
                self.longest_further[cell_id] = taken_round
            self.further_warnings.setdefault(cell_id, []).extend(_warnings_of(done))
            self.round_ended(cell_id, done.task.request.timing_round).set()
        if cell_id not in self.held or len(self.further.get(cell_id, [])) < self.expected[cell_id] - 1:
            return None
        complete = self.held.pop(cell_id)
        round_one = FirstRound.model_validate(complete)
        if cell_id in self.homes:
            self.homes.pop(cell_id).close()
        further = sorted(self.further.pop(cell_id, []), key=lambda r: r.round)
        measured = Metrics.model_validate(round_one.metrics)
        timing = measured.device_time
        if round_one.status == "valid" and timing is not None:
            first = TimingRound(
                round=1,
                status="valid",
                median_ns=timing.summary.median_ns,
                cv=timing.summary.cv,
                n=timing.summary.n,
                prepare_cache=measured.prepare_cache,
                wall_s=round_one.wall_s,
                log=round_one.log,
            )
            complete["metrics"] = {**round_one.metrics, "rounds": [r.recorded() for r in (first, *further)]}
            apart = rounds_warning([first, *further])
            complete["warnings"] = [*complete.get("warnings", []), *self.further_warnings.pop(cell_id, []),
                                    *_no_time_warnings(further, self.expected[cell_id]), *([apart] if apart else [])]
        return complete

    def waiting(self) -> list[str]:
        """The cells whose round 1 is held for rounds still to come."""
        return list(self.held)

    def _round(self, done: Finished) -> TimingRound:
        number = done.task.request.timing_round
        folder = done.task.artifacts
        where: dict[str, Any] = {}  # its log, where the worker wrote one
        if (folder / "worker.log").is_file():
            where["log"] = (folder / "worker.log").relative_to(self.bundle_root).as_posix()
        elif folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()  # not run (its cell's round 1 was not valid): no empty folder left in the bundle
        outcome = done.outcome
        answer = outcome.answer if outcome is not None else None
        timing = answer.metrics.device_time if answer is not None else None
        if outcome is None or answer is None or answer.status != "valid" or timing is None:
            if done.failure is not None:
                why = done.failure
            elif outcome is None:
                why = "the executor lost it"
            elif answer is None:
                # the round's `log` beside its reason says where the whole log is
                why = outcome.failure_reason(done.task.timeout_s, log_tail(folder / "worker.log"))
            else:
                why = "; ".join(answer.reasons) or f"the worker answered {answer.status}"
            return TimingRound(
                round=number, status="failed", reason=shortened(why, ROUND_REASON_CHARS),
                wall_s=outcome.wall_s if outcome is not None else 0.0, **where
            )
        return TimingRound(
            round=number,
            status="valid",
            median_ns=timing.summary.median_ns,
            cv=timing.summary.cv,
            n=timing.summary.n,
            samples_ns=list(timing.samples_ns),
            prepare_cache=answer.metrics.prepare_cache,
            wall_s=outcome.wall_s,
            recompiles_timed=answer.metrics.dynamo.recompiles_timed if answer.metrics.dynamo is not None else None,
            **where,
        )


def _repeated_of(wall_s: float, phases_s: dict[str, float]) -> time_budget.RoundGuess:
    """What of round 1 (its `wall_s`, its `phases_s`) a further round runs again: all but the phases
    it does not run (LoadGen and the other passes); its process start and exit too."""
    not_repeated = sum(seconds for name, seconds in phases_s.items() if name not in _REPEATED)
    return time_budget.RoundGuess(max(wall_s - not_repeated, 0.0), 1, wall_s)


_REPEATED = frozenset(phase.name for phase in FURTHER_ROUND_PHASES)


def _warnings_of(done: Finished) -> list[str]:
    """A further round's own warnings (a busy machine, noise, drift), each said to be that round's:
    round 1's are the record's, and the others were lost."""
    answer = done.outcome.answer if done.outcome is not None else None
    if answer is None or answer.status != "valid":
        return []
    return [f"round {done.task.request.timing_round}: {line}" for line in answer.warnings]


def _no_time_warnings(further: list[TimingRound], expected: int) -> list[str]:
    """A warning for each further round of a valid cell that gave no time (its worker failed, or the
    run's time budget kept it), saying why: the cell's figures over rounds take the others."""
    return [f"round {r.round} of {expected} {ROUND_NO_TIME} ({r.reason or 'no reason recorded'}): the cell's "
            "figures over rounds, and the intervals of its speedups, take its other rounds"
            for r in further if r.status != "valid"]


def rounds_warning(rounds: list[TimingRound]) -> str | None:
    """The warning for the valid rounds whose medians are out of line with the others
    (`out_of_line`), or None."""
    valid = [r for r in rounds if r.status == "valid" and r.median_ns is not None]
    medians = [r.median_ns for r in valid if r.median_ns is not None]
    odd = [valid[i] for i in out_of_line(medians, ROUND_OUT_OF_LINE)]
    if not odd:
        return None
    why = ("that round's process or the machine was not as in the others; a speedup's interval over the "
           "rounds (fusion on over off, or over the baseline) takes it in, and its verdict with it")
    if len(valid) == 2:
        a, b = valid
        ratio = max(medians) / min(medians)
        return (f"{ROUNDS_OUT_OF_LINE} round {a.round}'s median, {format_value(a.median_ns, 'ns')}, and round "
                f"{b.round}'s, {format_value(b.median_ns, 'ns')}, differ by {ratio:.1f}x: {why}")
    middle = median(medians)
    each = ", ".join(f"round {r.round}'s {format_value(r.median_ns, 'ns')} ({(r.median_ns or 0) / middle:.1f}x)" for r in odd)
    return (f"{ROUNDS_OUT_OF_LINE} {each} against the median of the cell's {len(valid)} rounds, "
            f"{format_value(middle, 'ns')}: {why}")
