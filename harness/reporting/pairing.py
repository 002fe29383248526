"""Which cells of two bundles `compare` pairs, and what keeps a cell out of a pair it can judge.

A cell pairs with its counterpart by its config's hash less the rounds it was timed over
(`pairing_key`). Two cells of one config are not comparable where their math modes differ or went
unrecorded, where they ran on different hardware or another share of it, or with other thread
counts or other values of a variable a scenario's `env:` passed to its cells (`unlike_runs`; each
of these apart, `runs_apart`, where a caller asks whether the machine alone differs). A cell
with no counterpart says which settings the other bundle ran a cell of its name with
(`settings_apart`), or what the other never ran (`not_in`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from harness.bundle.cell_record import CellRecord
from harness.bundle.header_record import Node
from harness.bundle.record_base import read_as
from harness.plain_text import one_line
from harness.reporting.run_facts import machine_share, machines_apart, quota_recorded
from harness.scenario.cells import LEFT_OUT_OF_ID, cell_id
from harness.scenario.differences import differences


def pairing_key(record: CellRecord) -> str:
    """What pairs a cell with its counterpart in another bundle: its config's hash without the
    rounds it was timed over (harness/scenario/cells.py `cell_id`, as schema 8 on computes ids), so
    cells of a run of three rounds and of one, or of a bundle of any version that recorded no
    rounds, pair; the rounds are noted in each pair's figures, not what the cell is."""
    return cell_id(record.config.recorded())


def math_mode(cell: CellRecord) -> str:
    """The math a cell ran with, as recorded (harness/precision.py), or "unrecorded"."""
    recorded = cell.metrics.math_mode
    return recorded.effective if recorded else "unrecorded"


def unlike_runs(cell_a: CellRecord, cell_b: CellRecord, passed: frozenset[str] = frozenset()) -> str:
    """Why two cells of one config cannot be set side by side however they ended ("" when they
    can): their math modes differ or are unrecorded, they ran on different hardware or another
    share of it, or with other threads or other values of the variables in `passed` (`other_threads`)."""
    return runs_apart(cell_a, cell_b, passed).words()


@dataclass(frozen=True)
class RunsApart:
    """Each setting two cells of one config ran with apart, in words ("", or None for the hardware,
    where alike): what `unlike_runs` names the first of, kept apart so that a caller can tell runs
    apart only in their machine (`only_hardware`) from runs apart in what they computed or ran with."""

    math: str
    hardware: tuple[str, str] | None  # (A's, B's), as `hardware_apart` says them
    share: tuple[str, str] | None  # (A's, B's), as `run_facts.machine_share` says them
    threads: str

    def said(self) -> list[str]:
        """Each of math, hardware, share and threads that differ, in words, in that order."""
        hardware = f"ran on different hardware: A {self.hardware[0]}, B {self.hardware[1]}" if self.hardware else ""
        share = f"ran on different shares of the machine: A {self.share[0]}, B {self.share[1]}" if self.share else ""
        threads = f"ran with other threads or variables: {self.threads}" if self.threads else ""
        return [words for words in (self.math, hardware, share, threads) if words]

    def words(self) -> str:
        """The first of math, hardware, share and threads that differ, as `unlike_runs` says it."""
        return next(iter(self.said()), "")

    @property
    def only_hardware(self) -> bool:
        """The machines differ and nothing else does: one math mode, one share of each machine, the
        same threads and `env:` values, so each side's figures answer the same question on its own machine."""
        return self.hardware is not None and self.share is None and not (self.math or self.threads)


def runs_apart(cell_a: CellRecord, cell_b: CellRecord, passed: frozenset[str] = frozenset()) -> RunsApart:
    """Every setting two cells of one config ran with apart (`RunsApart`), `passed` as `unlike_runs` takes it."""
    with_quota = quota_recorded(cell_a) and quota_recorded(cell_b)
    share_a, share_b = machine_share(cell_a, with_quota), machine_share(cell_b, with_quota)
    return RunsApart(math_apart(cell_a, cell_b), hardware_apart(cell_a, cell_b),
                     (share_a, share_b) if share_a != share_b else None,
                     other_threads(cell_a, cell_b, passed))


def math_apart(cell_a: CellRecord, cell_b: CellRecord) -> str:
    """Why two cells' math cannot be set side by side, in words ("" where it can): their math modes
    differ, or one did not record it (TF32 may have been on)."""
    mode_a, mode_b = math_mode(cell_a), math_mode(cell_b)
    if mode_a != mode_b or "unrecorded" in (mode_a, mode_b):
        return (f"math modes differ: A {mode_a}, B {mode_b}" if mode_a != mode_b
                else "neither cell recorded its math mode (TF32 may have been on)")
    return ""


def hardware_apart(cell_a: CellRecord, cell_b: CellRecord) -> tuple[str, str] | None:
    """The hardware of each of two cells in words (A's, B's) where they ran on different hardware:
    another CPU or GPU model, or one CPU name over two generations or vector extensions; else None."""
    return machines_apart(read_as(Node, cell_a.node), read_as(Node, cell_b.node))


#: The thread counts a worker reads back from torch (harness/measure/worker.py): an
#: `OMP_NUM_THREADS` or `torch.set_num_threads` moves them, and with them every CPU figure.
_TORCH_THREADS = (("torch_threads", "torch threads"), ("torch_interop_threads", "torch interop threads"))


def passed_variables(scenario_env: object) -> frozenset[str]:
    """The names a stored scenario's `env:` passes to its cells (`NAME` or `NAME=value` each), none
    where it has no such list (bundles before `env:`)."""
    if not isinstance(scenario_env, list):
        return frozenset()
    return frozenset(item.partition("=")[0] for item in scenario_env if isinstance(item, str))


def other_threads(cell_a: CellRecord, cell_b: CellRecord, passed: frozenset[str]) -> str:
    """What two cells on one share of one machine ran with apart, in words ("" where nothing): torch's
    thread counts, where both recorded them, and each variable of `passed` (the names either run's
    `env:` passed on: `OMP_NUM_THREADS`, `KMP_AFFINITY`, `TVM_NUM_THREADS`, ...) whose value the two
    workers saw differ, `unset` where one saw none. Neither is in a cell's config, so the two cells
    share an id: one run on 2 threads against another on 1 read as a speedup or a regression. So
    too the threads of the backend's own pool, where both cells' profiles recorded them
    (`backend_figures.thread_pool_threads`: ONNX Runtime's intra-op pool, TVM's), which its
    runtime may size by itself, apart from torch's."""
    environment_a, environment_b = (c.environment if isinstance(c.environment, dict) else {} for c in (cell_a, cell_b))
    found = []
    for key, words in _TORCH_THREADS:
        count_a, count_b = environment_a.get(key), environment_b.get(key)
        if _is_count(count_a) and _is_count(count_b) and count_a != count_b:
            found.append(f"{words} A {count_a}, B {count_b}")
    pool_a, pool_b = _pool_threads(cell_a), _pool_threads(cell_b)
    if _is_count(pool_a) and _is_count(pool_b) and pool_a != pool_b:
        found.append(f"{one_line(cell_a.config.backend)} pool threads A {pool_a}, B {pool_b}")
    variables_a, variables_b = (_variables(e) for e in (environment_a, environment_b))
    for name in sorted(passed):
        value_a, value_b = variables_a.get(name), variables_b.get(name)
        if value_a != value_b:
            found.append(f"{one_line(name)} A {variable_value(value_a)}, B {variable_value(value_b)}")
    return "; ".join(found)


def _pool_threads(cell: CellRecord) -> object:
    """The threads of the backend's own pool as the cell's profile pass read them, None where not."""
    kernels = cell.metrics.kernels
    return getattr(kernels.backend_figures, "thread_pool_threads", None) if kernels is not None else None


def _variables(environment: dict[str, Any]) -> dict[str, Any]:
    """The variables a worker saw, as its cell recorded them (none where the record has no mapping)."""
    variables = environment.get("variables")
    return variables if isinstance(variables, dict) else {}


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def variable_value(value: object) -> str:
    """A variable's value as a worker saw it, in words: `unset` where it saw none."""
    return "unset" if value is None else one_line(value)


def settings_apart(cell: CellRecord, other: CellRecord, side: str, other_side: str) -> str:
    """What two cells of one name were measured with apart (`inputs.samples 8 in A, 16 in B`): every
    setting of their recorded configs that differs (the first three and "and 5 more" hid the
    LoadGen profile behind the inputs)."""
    found = [f"{path} {json.dumps(mine)} in {side}, {json.dumps(theirs)} in {other_side}"
             for path, mine, theirs in differences(cell.config.recorded(), other.config.recorded())]
    unpaired_by = tuple(f"{part}.{key} " for part, key in LEFT_OUT_OF_ID)  # cells apart in these still pair (pairing_key)
    return "; ".join(f for f in found if not f.startswith(unpaired_by))


#: What a cell's counterpart is looked for by, in the order `not_in` names the first the other run lacks.
_SETTINGS = (("device", "on"), ("model", "of"), ("input_size", "at input size"), ("backend", "on"), ("scenario", "in"),
             ("dtype", "in"), ("batch", "at batch"))


def _setting(cell: CellRecord, name: str) -> str:
    config = cell.config
    return str(config.model.name if name == "model" else getattr(config, name))  # input_size: the size it ran at


def settings_ran(cells: list[CellRecord]) -> dict[str, set[str]]:
    """Each of `_SETTINGS` with every value a bundle's cells ran it at: read once per bundle."""
    return {name: {_setting(cell, name) for cell in cells} for name, _ in _SETTINGS}


def not_in(cell: CellRecord, ran: dict[str, set[str]], other_side: str) -> str:
    """Why `cell` has no counterpart in the bundle that ran `ran` (`settings_ran`): the first of its
    settings no cell there has (`B ran no cell on cpu`), else only that B did not run this combination."""
    for name, word in _SETTINGS:
        value = _setting(cell, name)
        if value not in ran[name]:
            return f"{other_side} ran no cell {word} {value}"
    return f"{other_side} ran no cell of these settings together"
