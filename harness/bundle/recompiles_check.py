"""A cell's warnings of TorchDynamo's recompiles in the timed calls held to the counts it records
(harness/measure/dynamo_counts.py): round 1's `metrics.dynamo.recompiles_timed`, said `recompiled:
Dynamo compiled N frames again ...`, and a further round's `metrics.rounds[].recompiles_timed`
(from 2026-12-06), said `round 2: recompiled: ...`.

Each warning must say the count its round records: a warning beside a record of none (0, or no
Dynamo record), or of another count, was a record and its warning edited apart. A further round's
count without its warning is found here; round 1's, as every warning round 1's figures imply, by
harness/bundle/figures_check.py.
"""

from __future__ import annotations

import re
from typing import Any

from harness.bundle.reader import lookup
from harness.bundle.statuses import MEASURED
from harness.bundle.tolerance import number

#: How the worker's warning begins (harness/measure/trust.py writes it; harness/run/rounds.py says a
#: further round's after `round N: `); the count it says is read as `_COUNT` reads it, which
#: tests/unit/test_figures_check.py holds to the worker's sentence.
RECOMPILED = "recompiled:"
_WARNING = re.compile(rf"^(?:round (\d+): )?{RECOMPILED}")
_COUNT = re.compile(r"Dynamo compiled (\d+) frames? again")


def said_count(line: str) -> int | None:
    """The frames a recompile warning says Dynamo compiled, or None where it says no count."""
    found = _COUNT.search(line)
    return int(found.group(1)) if found else None


def problems(cell: dict[str, Any]) -> list[str]:
    """Where a cell's recompile warnings and its counts disagree, one line each."""
    recorded = cell.get("warnings")
    if not isinstance(recorded, list) or cell["status"] not in MEASURED:
        return []  # a record from before warnings, or a cell whose worker did not finish
    metrics = cell["metrics"]
    counts: dict[int, tuple[str, float | None]] = {
        1: ("metrics.dynamo.recompiles_timed", number(lookup(metrics, "dynamo", "recompiles_timed")))}
    rounds = metrics.get("rounds")
    for entry in rounds[1:] if isinstance(rounds, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("round"), int):
            counts[entry["round"]] = (f"round {entry['round']}'s recompiles_timed", number(entry.get("recompiles_timed")))
    said: dict[int, list[str]] = {}
    for line in recorded:
        matched = _WARNING.match(line) if isinstance(line, str) else None
        if matched:
            said.setdefault(int(matched.group(1) or 1), []).append(line)
    lines = []
    for round_number, warnings in sorted(said.items()):
        field, count = counts.get(round_number, (f"round {round_number}", None))
        stem = f"round {round_number}: {RECOMPILED}" if round_number > 1 else RECOMPILED
        if len(warnings) > 1:
            lines.append(f"warnings: {len(warnings)} begin {stem!r}, where a round says its recompiles once")
        told = said_count(warnings[0])
        if not count:
            lines.append(f"warnings: {stem!r} says Dynamo compiled {told if told is not None else 'some'} frame(s) in the "
                         f"timed calls, yet {field} is {'absent' if count is None else f'{count:g}'}")
        elif told != count:
            lines.append(f"warnings: {stem!r} says Dynamo compiled {told if told is not None else 'no count of'} frame(s) in "
                         f"the timed calls, yet {field} is {count:g}")
    for round_number, (field, count) in sorted(counts.items()):
        if round_number > 1 and count and round_number not in said:
            lines.append(f"warnings: none begins 'round {round_number}: {RECOMPILED}', yet {field} is {count:g}: Dynamo "
                         "compiled frames during that round's timed calls")
    return lines
