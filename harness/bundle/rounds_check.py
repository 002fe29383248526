"""A cell's rounds (`metrics.rounds`, harness/run/rounds.py) checked against what they come from:
the cell's own config, its round 1 (its device timing), each further round's samples, the files
they name. A fusion pair's verdict rests on the rounds alone, so a round added, dropped, copied or
edited must be a problem, not a changed verdict.

- A valid cell has exactly `config.timing.rounds` rounds, numbered 1 to N (a further round that
  failed is kept as failed); one round may be left unrecorded (the cell's device timing is it).
- Round 1 is the cell's measurement: its median, CV, count, prepare cache, seconds and log are the
  cell's own.
- A further valid round of v8 on keeps its samples: its median, CV and count are derived from them
  again. One of v7 or before keeps none, and its figures are taken as recorded.
- No two rounds are the same in every figure: a copied round is not a measurement.
- Every log a round or the cell names is a file of the bundle.
- bundle.json's `rounds_paired` (the rounds of each setting took turns, which gives a backend's
  speedup over the baseline an interval from paired rounds) is held to how the run ran its cells:
  one at a time on the machine (`pairing`).
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from harness.bundle.belonging import instant
from harness.bundle.files import CELLS, HEADER
from harness.bundle.header_record import local_jobs
from harness.stats.summary import summarize_ns

#: The first schema version whose further rounds keep their samples (harness/bundle/migrations.py).
SAMPLES_KEPT_FROM = 8
_RELATIVE = 1e-9
#: When the harness began to take turns by setting and say so in `rounds_paired` (9ab5f26): a bundle
#: made before paired a fusion pair's rounds alone.
PAIRED_BY_SETTING_FROM = datetime(2026, 12, 1, 12, 45, 54, tzinfo=timezone.utc)


def _close(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is b
    return isinstance(a, (int, float)) and isinstance(b, (int, float)) and abs(a - b) <= _RELATIVE * max(abs(a), abs(b), 1)


def problems(cell: dict[str, Any], version: int, root: Path) -> list[str]:
    """What is wrong with the rounds (and the logs) of one cell record of a bundle of schema
    `version` at `root`, one line each."""
    rounds = cell["metrics"].get("rounds")
    if rounds is not None and not (isinstance(rounds, list) and all(isinstance(r, dict) for r in rounds)):
        # A schema before v6 knew no rounds and lets any value through, which the typed record refuses
        # in a line of its own; read as rounds here, it ended validate in an AttributeError.
        return []
    lines = _logs(cell, root)
    expected = ((cell.get("config") or {}).get("timing") or {}).get("rounds", 1)
    if cell["status"] == "valid" and isinstance(expected, int):
        if rounds is None and expected > 1:
            lines.append(f"rounds: the config asks for {expected} rounds and the cell records none")
        elif rounds is not None and len(rounds) != expected:
            lines.append(f"rounds: {len(rounds)} recorded, the config asks for {expected}")
    if not rounds:
        return lines
    lines += _first(cell, rounds[0])
    for r in rounds[1:]:
        lines += _further(r, version)
    seen: dict[str, int] = {}
    for r in rounds:
        if r.get("status") != "valid":
            continue
        figures = repr([r.get(key) for key in ("median_ns", "cv", "n", "wall_s", "samples_ns")])
        if figures in seen:
            lines.append(f"rounds: round {r.get('round')} is round {seen[figures]} again, figure for figure")
        seen.setdefault(figures, r.get("round"))
    return lines


def _first(cell: dict[str, Any], first: dict[str, Any]) -> list[str]:
    metrics = cell["metrics"]
    summary = (metrics.get("device_time") or {}).get("summary") or {}
    own = {"cv": summary.get("cv"), "n": summary.get("n"), "prepare_cache": metrics.get("prepare_cache"),
           "wall_s": cell.get("wall_s"), "log": cell.get("log")}
    wrong = [key for key, value in own.items()
             if (not _close(first.get(key), value) if key in ("cv", "wall_s") else first.get(key) != value)]
    return [f"rounds: round 1's {', '.join(wrong)} {'is' if len(wrong) == 1 else 'are'} not the cell's own"] if wrong else []


def _further(r: dict[str, Any], version: int) -> list[str]:
    number = r.get("round")
    if r.get("status") != "valid":
        return []
    samples = r.get("samples_ns")
    if samples is None:
        if version >= SAMPLES_KEPT_FROM:
            return [f"rounds: round {number} keeps no samples, so its median cannot be checked"]
        return []
    if not samples:
        return [f"rounds: round {number} is valid with no samples"]
    derived = summarize_ns(samples)
    wrong = [key for key in ("median_ns", "cv", "n") if not _close(r.get(key), derived[key])]
    if wrong:
        return [f"rounds: round {number}'s {', '.join(wrong)} {'is' if len(wrong) == 1 else 'are'} not its samples'"]
    return []


def _logs(cell: dict[str, Any], root: Path) -> list[str]:
    named = [("the cell's log", cell.get("log"))]
    named += [(f"round {r.get('round')}'s log", r.get("log")) for r in cell["metrics"].get("rounds") or []]
    return [f"{what} {path} is not a file of the bundle" for what, path in named
            if isinstance(path, str) and not (root / path).is_file()]


def pairing(header: dict[str, Any], cells: list[dict[str, Any]]) -> list[str]:
    """Where bundle.json says the rounds of each setting took turns (`rounds_paired`), yet the run
    did not run its cells one at a time on its machine (harness/run/runner.py sets it for a local
    run of one job alone): a run of `--jobs` above 1 (a cell in a slot) or under Ray ran other cells
    between one cell's rounds, and a bundle made before the harness took turns by setting paired a
    fusion pair's rounds alone. Either way the flag would give every backend's speedup over the
    baseline an interval from rounds that did not pair."""
    claimed = header.get("rounds_paired")
    if claimed is None:
        return []
    lines = []
    executor, created = header.get("executor"), instant(header.get("created"))
    if isinstance(executor, dict) and local_jobs(executor) != 1:
        lines.append(f"{HEADER}: rounds_paired {claimed!r}, yet its executor ran {executor.get('name')!r} with "
                     f"jobs {executor.get('jobs', 1)}: other cells ran between one cell's rounds")
    if created is not None and created < PAIRED_BY_SETTING_FROM:
        lines.append(f"{HEADER}: rounds_paired {claimed!r}, yet it was made ({header['created']}) before the "
                     f"harness took turns by setting ({PAIRED_BY_SETTING_FROM.isoformat()})")
    for cell in cells:
        node = cell.get("node")
        if not isinstance(node, dict):
            continue
        slot = node.get("slot")
        if node.get("executor") not in (None, "local") or slot is not None:
            ran = (f"in slot {slot.get('index') if isinstance(slot, dict) else slot} of a --jobs run" if slot is not None
                   else f"under {node.get('executor')!r}")
            lines.append(f"{CELLS}/{cell['id']}.json: ran {ran}, yet {HEADER} says rounds_paired {claimed!r}: "
                         "only a run of one cell at a time pairs them")
    return lines
