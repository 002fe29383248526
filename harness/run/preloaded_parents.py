"""The run's preloaded parents (harness/measure/preloaded.py): started on first use, one for each
start environment a cell's worker gets (a serial run has one; `--jobs N` one per slot), each
serving one cell at a time, and ended with the run.

A parent that cannot start, or refuses to fork, is not an error: the cell's worker is then started
as a fresh Python, as `--fresh-workers` starts them all, and its record says which it was
(`metrics.memory.worker_start`).
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path

from harness.measure.preloaded import ForkOrder, ParentReply
from harness.measure.protocol import ProtocolError
from harness.run.scratch import scratch_dir

#: How long a parent may take to import what it preloads (torch, torchvision, the harness) and say so.
START_TIMEOUT_S = 120.0


class _Lines:
    """Lines from a pipe, each read with a time limit (select on the raw descriptor: a buffered
    reader could hold a line select does not see)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = b""
        self.closed = False

    def next(self, timeout_s: float | None) -> ParentReply | None:
        """The next reply, or None when none came within `timeout_s` or the pipe closed."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while b"\n" not in self.buffer:
            if self.closed:
                return None
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self.fd], [], [], left)
            if not ready:
                return None
            chunk = os.read(self.fd, 65536)
            if not chunk:
                self.closed = True
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return ParentReply.from_line(line)


class ForkedWorker:
    """A cell's worker forked by a preloaded parent: what `subprocess.Popen` offers the runner
    (pid, wait with a time limit, returncode), read from the parent's messages."""

    def __init__(self, parent: PreloadedParent, pid: int) -> None:
        self.parent = parent
        self.pid = pid
        self.returncode: int | None = None

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            message = self.parent.lines.next(timeout)
            if message is None:
                if not self.parent.lines.closed:
                    raise subprocess.TimeoutExpired(["preloaded worker", str(self.pid)], timeout or 0.0)
                self.returncode = -signal.SIGKILL  # the parent died, and its child with it (PR_SET_PDEATHSIG)
                self.parent.broken = "the preloaded parent died"
            elif message.returncode is None:
                raise ProtocolError(f"the preloaded parent's reply for worker {self.pid} lacks its returncode")
            else:
                self.returncode = message.returncode
        return self.returncode


class PreloadedParent:
    def __init__(self, env: Mapping[str, str], backends: Sequence[str] = ()) -> None:
        self.broken: str | None = None
        self._resources = ExitStack()
        workdir = self._resources.enter_context(scratch_dir("fusionbench-preloaded-"))
        self.stderr_path = workdir / "stderr.log"
        with self.stderr_path.open("wb") as stderr:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "harness.measure.preloaded", str(os.getpid()), *backends],
                cwd=workdir, env=dict(env), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                start_new_session=True,
            )
        assert self.proc.stdout is not None and self.proc.stdin is not None
        self.lines = _Lines(self.proc.stdout.fileno())
        try:
            ready = self.lines.next(START_TIMEOUT_S)
        except BaseException:  # Ctrl-C while it imports: end it with the rest
            self.close()
            raise
        if ready is None or ready.ready is None:
            tail = self.stderr_path.read_text(errors="replace").strip().splitlines()[-3:]
            self.broken = (ready.refused if ready else None) or f"did not start: {' / '.join(tail) or 'no answer'}"
            self.close()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def fork(self, module: str, request: Path, cwd: Path, log: Path, env: Mapping[str, str]) -> ForkedWorker | None:
        """Fork a worker that runs `module` as `python -m module request` would, in `cwd`, writing
        to `log`, with `env`; None (and `broken` says why) when this parent cannot."""
        if self.broken is not None:
            return None
        assert self.proc.stdin is not None
        order = ForkOrder(module=module, request=str(request), cwd=str(cwd), log=str(log), env=dict(env))
        try:
            self.proc.stdin.write(order.to_line().encode())
            self.proc.stdin.flush()
        except OSError as exc:
            self.broken = f"cannot be written to: {exc}"
            return None
        answer = self.lines.next(START_TIMEOUT_S)
        if answer is None or answer.pid is None:
            self.broken = (answer.refused if answer else None) or "did not fork"
            return None
        return ForkedWorker(self, answer.pid)

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()  # end of input ends it
                self.proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None and not stream.closed:
                stream.close()
        self._resources.close()


class PreloadedParents:
    """The run's parents, by start environment; each lent to one cell at a time. Each preloads
    what `backends` (the run's) name for it (`Backend.preload`)."""

    def __init__(self, backends: Sequence[str] = ()) -> None:
        self._backends = tuple(backends)
        self._idle: dict[tuple[tuple[str, str], ...], list[PreloadedParent]] = {}
        self._all: list[PreloadedParent] = []
        self._lock = threading.Lock()

    @contextmanager
    def lent(self, env: Mapping[str, str]) -> Iterator[PreloadedParent]:
        key = tuple(sorted(env.items()))
        with self._lock:
            idle = self._idle.setdefault(key, [])
            parent = idle.pop() if idle else None
        if parent is None:
            parent = PreloadedParent(env, self._backends)
            with self._lock:
                self._all.append(parent)
        try:
            yield parent
        finally:
            with self._lock:
                self._idle[key].append(parent)

    def close(self) -> None:
        with self._lock:
            parents, self._all, self._idle = self._all, [], {}
        for parent in parents:
            parent.close()


def start_environment(env: Mapping[str, str], scratch: Mapping[str, str]) -> dict[str, str]:
    """A cell's environment without its own scratch folders: what its preloaded parent starts with."""
    return {name: value for name, value in env.items() if name not in scratch}

