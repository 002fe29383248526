"""Nsight Compute's hardware-counter log, read: DRAM bytes per kernel launch, and per inference.

The memory-traffic pass (harness/measure/memory_traffic.py) reads its figures from this log and
keeps the log in the cell's folder; validate reads the figures from it again
(harness/bundle/traffic_check.py), as it does LoadGen's from LoadGen's logs.

`ncu` is run with `--csv --page raw --print-units base` and the
two DRAM metrics, and its log is this module's input. The raw page's CSV is one header row (the
launch's identity columns, then one column per metric), one row of units (empty under the identity
columns), then one row per profiled kernel launch, every field quoted. `ncu` writes its own lines
among them, each starting with `==PROF==`, `==WARNING==` or `==ERROR==` (an error line is the reason
no counters were read: a driver that refuses counter access, a sandbox whose profiler library does
not load), and the profiled program's output may come between them too.

Nothing here imports anything heavy: the parsing is tested on CPU against logs in that layout.
"""

from __future__ import annotations

import csv
import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

DRAM_READ = "dram__bytes_read.sum"
DRAM_WRITE = "dram__bytes_write.sum"
METRICS = (DRAM_READ, DRAM_WRITE)
KERNEL_NAME = "Kernel Name"
# The unit words ncu prints for bytes; `--print-units base` asks for "byte", the others are read
# too so a log written without it is not misread (ncu's prefixes are decimal).
BYTE_UNITS = {"byte": 1, "Kbyte": 10**3, "Mbyte": 10**6, "Gbyte": 10**9, "Tbyte": 10**12}
_TOOL_LINE = re.compile(r"^==(PROF|WARNING|ERROR)==\s?(.*)$")
_NUMBER = re.compile(r"^\d{1,3}(,\d{3})+(\.\d+)?$|^\d+(\.\d+)?$")
_VERSION = re.compile(r"Version\s+(\d+(?:\.\d+)+)")
#: The kernels a record lists by the bytes they move (`MemoryTraffic.top_kernels`).
TOP_KERNELS = 25
#: Where a cell keeps the log, in its folder of the bundle.
KEPT_AS = "memory-traffic/ncu.csv"


class CounterLogError(ValueError):
    """A log that holds no counters, with the reason: what ncu said, or what is wrong with the log."""


@dataclass(frozen=True)
class Launch:
    """One profiled kernel launch and the DRAM bytes it read and wrote."""

    kernel: str
    read_bytes: int
    write_bytes: int


def launches(log: str) -> list[Launch]:
    """Every kernel launch the log profiled, in order. Raises `CounterLogError` where there are
    none: ncu's first error line is the reason, else what the log lacks."""
    lines = log.splitlines()
    tool_lines = [(match.group(1), match.group(2).strip()) for match in map(_TOOL_LINE.match, lines) if match]
    errors = [text for kind, text in tool_lines if kind == "ERROR"]
    if errors:
        raise CounterLogError(f"ncu: {errors[0]}")
    # The table starts at the header naming the kernel; the profiled program's own output may
    # come between its rows (ncu and the program share the terminal), and every row is quoted.
    start = next((at for at, line in enumerate(lines) if line.startswith('"') and f'"{KERNEL_NAME}"' in line), None)
    if start is None:
        said = next((text for kind, text in tool_lines if kind == "WARNING"), None)
        raise CounterLogError(f"ncu profiled no kernel{f' ({said})' if said else ''}")
    try:
        rows = list(csv.reader([lines[start], *(line for line in lines[start + 1:] if line.startswith('"'))]))
    except csv.Error as exc:  # a field past csv's limit: not a log ncu wrote
        raise CounterLogError(f"the counter log is not CSV as ncu writes it: {exc}") from None
    header = rows[0]
    missing = [column for column in (KERNEL_NAME, *METRICS) if column not in header]
    if missing:
        raise CounterLogError(f"the counter log's header lacks {', '.join(missing)}: {','.join(header)[:200]}")
    if len(rows) < 2 or len(rows[1]) != len(header) or rows[1][header.index(KERNEL_NAME)]:
        raise CounterLogError("the counter log has no row of units after its header")
    units = rows[1]
    name_at, read_at, write_at = header.index(KERNEL_NAME), header.index(DRAM_READ), header.index(DRAM_WRITE)
    scale = {metric: _byte_scale(units, header.index(metric), metric) for metric in METRICS}
    found = []
    for number, row in enumerate(rows[2:], start=3):
        if len(row) != len(header):
            raise CounterLogError(f"row {number} of the counter log has {len(row)} fields, its header {len(header)}")
        found.append(Launch(kernel=row[name_at], read_bytes=_bytes(row[read_at], scale[DRAM_READ], number),
                            write_bytes=_bytes(row[write_at], scale[DRAM_WRITE], number)))
    if not found:
        raise CounterLogError("ncu profiled no kernel: the counter log has a header and no launch")
    return found


def _byte_scale(units: list[str], column: int, metric: str) -> int:
    unit = units[column] if column < len(units) else ""
    if unit not in BYTE_UNITS:
        raise CounterLogError(f"{metric} is in {unit!r}, not a unit of bytes ({', '.join(BYTE_UNITS)})")
    return BYTE_UNITS[unit]


def _bytes(text: str, scale: int, row: int) -> int:
    """A counter value as ncu prints it (digits, maybe grouped by commas, maybe a fraction of a
    prefixed unit) in bytes."""
    value = text.strip()
    if not _NUMBER.match(value):
        raise CounterLogError(f"row {row} of the counter log has {text!r} where a byte count belongs")
    return round(float(value.replace(",", "")) * scale)


def tool_version(version_output: str) -> str:
    """The version `ncu --version` prints (its last line: `Version 2025.3.1.0 (build ...)`)."""
    match = _VERSION.search(version_output)
    if not match:
        raise CounterLogError(f"ncu --version printed no version: {version_output.strip()[:200]!r}")
    return match.group(1)


def per_inference(found: list[Launch], iters: int) -> dict[str, Any]:
    """The figures of `iters` profiled inferences' launches, per inference, and the kernels that
    move most (`TOP_KERNELS` of them)."""
    read = sum(launch.read_bytes for launch in found)
    write = sum(launch.write_bytes for launch in found)
    calls: dict[str, int] = defaultdict(int)
    moved: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for launch in found:
        calls[launch.kernel] += 1
        moved[launch.kernel][0] += launch.read_bytes
        moved[launch.kernel][1] += launch.write_bytes
    by_bytes = sorted(calls, key=lambda kernel: (-sum(moved[kernel]), kernel))[:TOP_KERNELS]
    return {
        "dram_read_bytes_per_inference": read / iters,
        "dram_write_bytes_per_inference": write / iters,
        "dram_bytes_per_inference": (read + write) / iters,
        "kernels_per_inference": len(found) / iters,
        "profiled_iters": iters,
        "top_kernels": [{"name": kernel, "calls_per_inference": calls[kernel] / iters,
                         "dram_read_bytes_per_inference": moved[kernel][0] / iters,
                         "dram_write_bytes_per_inference": moved[kernel][1] / iters} for kernel in by_bytes],
    }
