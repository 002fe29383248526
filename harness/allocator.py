"""The C library allocator's settings in every cell's worker: a setting that moves figures.

With glibc's defaults a large block is mapped fresh from the kernel and unmapped when freed
(above 128 KiB, a threshold that rises with what is freed, to at most 32 MiB), and free memory
at the top of the heap is handed back. Eager PyTorch on a CPU allocates and frees every
activation on every call, so each call faults its pages in again: on the 2-core VM of
docs/results/cpu-2core-2026-11-24.md (benchmarks/allocator.py), 74,000 page faults a call made
efficientnet_b0 (batch 8) take 132 ms instead of 52 ms, and resnet18 101 ms instead of 84 ms;
Inductor with fusion off, whose unfused kernels each allocate their output, lost as much. How much a call
faults also depends on the heap's history, so the figure moved between the timing before and
after LoadGen's run.

`steady` (the default) keeps what was freed: malloc never maps (every block comes from the
heap) and the heap is never trimmed, so after the first calls no call faults. Every backend runs
under it, so fusion on and off, and one backend against another, differ by what they compute,
not by how often the kernel hands them pages. `system` leaves the C library's defaults, as in
bundles written before the setting existed (their cells' ids have no `allocator` key and mean
`system`). The setting is a glibc tunable read when the worker starts; on another C library it
has no effect, and the cell records which library ran (`environment.allocator`) and warns.
"""

from __future__ import annotations

import platform
from typing import Any, Literal

Allocator = Literal["steady", "system"]
DEFAULT: Allocator = "steady"
#: What a resolved scenario without the key ran with: bundles from before the setting existed.
UNRECORDED: Allocator = "system"
VARIABLE = "GLIBC_TUNABLES"
STEADY_TUNABLES = "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184"


def of(resolved: dict[str, Any]) -> Allocator:
    """The allocator a resolved scenario (or a cell's config) asks for."""
    value = resolved.get("allocator", UNRECORDED)
    return "steady" if value == "steady" else "system"


def environment(allocator: Allocator) -> list[str]:
    """The worker's variables for `allocator`, as a scenario's `env` items (NAME=value)."""
    return [f"{VARIABLE}={STEADY_TUNABLES}"] if allocator == "steady" else []


def record(allocator: Allocator, variables: dict[str, str]) -> dict[str, Any]:
    """What the worker says of its allocator: the setting, the C library and the tunables it saw."""
    libc, version = platform.libc_ver()
    return {
        "setting": allocator,
        "libc": f"{libc} {version}".strip() or "unknown",
        "tunables": variables.get(VARIABLE),
        "in_effect": allocator == "system" or (libc == "glibc" and variables.get(VARIABLE) == STEADY_TUNABLES),
    }


def warnings(recorded: dict[str, Any] | None) -> list[str]:
    """A cell's warning when the allocator it asked for was not the one it ran with."""
    if not isinstance(recorded, dict) or recorded.get("in_effect", True):
        return []
    return [f"allocator {recorded.get('setting')} asked for but not in effect (C library: {recorded.get('libc')}): "
            "freed memory may be handed back and faulted in again on every call"]
