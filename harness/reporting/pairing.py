"""Which cells of two bundles `compare` pairs, and what keeps a cell out of a pair it can judge.

A cell pairs with its counterpart by its config's hash less the rounds it was timed over
(`pairing_key`). Two cells of one config are not comparable where their math modes differ or went
unrecorded, or where they ran on different hardware or another share of it (`unlike_runs`). A cell
with no counterpart says which settings the other bundle ran a cell of its name with
(`settings_apart`), or what the other never ran (`not_in`).
"""

from __future__ import annotations

import json

from harness.bundle.cell_record import CellRecord
from harness.bundle.header_record import Node
from harness.bundle.record_base import read_as
from harness.reporting.run_facts import hardware, machine_share, other_cpus, quota_recorded
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


def unlike_runs(cell_a: CellRecord, cell_b: CellRecord) -> str:
    """Why two cells of one config cannot be set side by side however they ended ("" when they
    can): their math modes differ or are unrecorded, or they ran on different hardware."""
    mode_a, mode_b = math_mode(cell_a), math_mode(cell_b)
    if mode_a != mode_b or "unrecorded" in (mode_a, mode_b):
        return (f"math modes differ: A {mode_a}, B {mode_b}" if mode_a != mode_b
                else "neither cell recorded its math mode (TF32 may have been on)")
    where_a, where_b = hardware(read_as(Node, cell_a.node)), hardware(read_as(Node, cell_b.node))
    if where_a and where_b and where_a != where_b:
        return f"ran on different hardware: A {where_a}, B {where_b}"
    cpus = other_cpus(read_as(Node, cell_a.node), read_as(Node, cell_b.node))
    if cpus is not None:
        return f"ran on different hardware: A {cpus[0]}, B {cpus[1]}"
    with_quota = quota_recorded(cell_a) and quota_recorded(cell_b)
    share_a, share_b = machine_share(cell_a, with_quota), machine_share(cell_b, with_quota)
    if share_a != share_b:
        return f"ran on different shares of the machine: A {share_a}, B {share_b}"
    return ""


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
