"""Running one cell's worker process with a time limit, and reading what became of it.

The worker runs in a fresh temporary directory (so no stray `audit.config` or cache can change
the run), in its own process group (so a timeout kills everything it started), with its output
in a log file. A crash, a hang or an exception becomes a reason the parent can record.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

POLL_S = 0.25
LOG_TAIL_LINES = 40


@dataclass
class WorkerOutcome:
    answer: dict[str, Any] | None
    returncode: int | None
    timed_out: bool
    last_phase: str
    wall_s: float

    def failure_reason(self, timeout_s: float) -> str:
        """Why a worker produced no answer."""
        if self.timed_out:
            return f"time limit of {timeout_s:g} s exceeded (in phase {self.last_phase})"
        if self.returncode is not None and self.returncode < 0:
            try:
                name = signal.Signals(-self.returncode).name
            except ValueError:
                name = f"signal {-self.returncode}"
            return f"worker killed by {name} (in phase {self.last_phase})"
        return f"worker exited with code {self.returncode} without an answer (in phase {self.last_phase})"


def log_tail(log_path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = log_path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def run_worker(
    request: dict[str, Any],
    *,
    timeout_s: float,
    log_path: Path,
    on_phase: Callable[[str], None] = lambda phase: None,
    module: str = "harness.worker",
) -> WorkerOutcome:
    """Run `python -m module REQUEST` for one cell and wait for it, at most `timeout_s`."""
    workdir = Path(tempfile.mkdtemp(prefix="fusionbench-cell-"))
    phase_file = workdir / "phase"
    answer_file = workdir / "answer.json"
    request = {**request, "phase_file": str(phase_file), "answer_file": str(answer_file)}
    (workdir / "request.json").write_text(json.dumps(request))
    env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "TORCHINDUCTOR_CACHE_DIR": str(workdir / "inductor-cache"),
        "TRITON_CACHE_DIR": str(workdir / "triton-cache"),
    }
    last_phase = "start"
    timed_out = False
    start = time.monotonic()
    try:
        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", module, str(workdir / "request.json")],
                cwd=workdir, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=env, start_new_session=True,
            )
            try:
                while True:
                    try:
                        proc.wait(timeout=POLL_S)
                        break
                    except subprocess.TimeoutExpired:
                        pass
                    phase = _read_phase(phase_file)
                    if phase != last_phase:
                        last_phase = phase
                        on_phase(phase)
                    if time.monotonic() - start > timeout_s:
                        timed_out = True
                        _kill_group(proc)
                        break
            except BaseException:  # Ctrl-C or an error in the parent: never leave a worker behind
                _kill_group(proc)
                raise
        last_phase = _read_phase(phase_file) if phase_file.exists() else last_phase
        answer = None
        if not timed_out and answer_file.exists():
            try:
                answer = json.loads(answer_file.read_text())
            except ValueError:
                answer = None
        return WorkerOutcome(answer, proc.returncode, timed_out, last_phase, time.monotonic() - start)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _read_phase(phase_file: Path) -> str:
    try:
        return phase_file.read_text().strip() or "start"
    except OSError:
        return "start"


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()
