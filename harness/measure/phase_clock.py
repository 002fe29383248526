"""A worker's clock of its phases (`PhaseClock`): each phase of `protocol.PHASES` timed, its name
written to a small file the parent shows in its progress bar, and the worker's answer so far kept
as each phase begins and ends, outside its timed region (harness/measure/worker.py's `checkpoint`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from harness.errors import HarnessError
from harness.measure.protocol import Phase


class PhaseClock:
    """Times each phase and tells the parent which one is running; `keep` is called as each phase
    begins and as it ends, outside its timed region (the worker keeps its answer so far:
    `checkpoint`). As it begins, for the figures worked out between phases from those that ended
    (the compile time less the toolchain's, the first call's time, the device timing once both its
    halves ended, the roofline, the math mode): a worker killed in the next phase keeps them too."""

    def __init__(self, phase_file: Path, keep: Callable[[], None] = lambda: None) -> None:
        self.phase_file = phase_file
        self.started = time.monotonic()  # the worker's start, on the clock of the parent's time limit
        self.durations_s: dict[str, float] = {}
        self.current = "start"
        self.keep = keep

    @contextmanager
    def phase(self, phase: Phase) -> Iterator[None]:
        """Time `phase`, one of `protocol.PHASES` (the parent groups them by kind)."""
        self.keep()
        self.current = phase.name
        try:
            self.phase_file.write_text(phase.name)
        except OSError:
            pass  # the progress display is a convenience; measurement goes on
        start = time.perf_counter()
        ended = False
        try:
            yield
            ended = True
        finally:
            self.durations_s[phase.name] = time.perf_counter() - start
            if ended:  # a failure between phases (math_mode() after the profile) is not one in it
                self.current = f"after {phase.name}"
            self.keep()

    def move(self, seconds: float, source: Phase, target: Phase) -> None:
        """Record `seconds` of the ended phase `source` as `target`'s instead (none: nothing recorded)."""
        if not 0 <= seconds <= self.durations_s[source.name]:
            raise HarnessError(f"{seconds:.3f} s of {source.name} reported as {target.name}: outside its "
                               f"{self.durations_s[source.name]:.3f} s")
        if seconds:
            self.durations_s[source.name] -= seconds
            self.durations_s[target.name] = seconds

