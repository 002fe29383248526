"""Running one cell's worker process under limits, and reading what became of it.

The worker runs in a fresh temporary directory (so no stray `audit.config` or cache can change
the run), in its own process group (so a timeout kills everything it started), with its output
in a log file. A crash, a hang, an exception or too much memory becomes a reason the parent can
record. The memory limit is enforced by sampling the resident memory of the worker and every
process it started, ten times a second: a worker that allocates faster than that can overshoot
by what it allocates in 0.1 s before it is killed. The worker also asks the kernel to kill it
when the parent dies (harness/measure/worker.py), so a killed run leaves no worker behind.

The worker gets a whitelisted environment, as pyperf gives its workers: the system's paths and
locale, the GPUs it may see and the harness's own `FUSIONBENCH_*` variables, plus the variables
the scenario names (`env:`) and those its backend points at folders of the cell's own (compiler
caches); nothing else of the parent's environment reaches it. The cell records what it saw.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path

from harness import cgroup_limits, killed_wait
from harness.bundle.passes_record import WorkerStart
from harness.bundle.safe_json import MAX_JSON_BYTES
from harness.errors import HarnessError
from harness.files.regular_file import read_regular
from harness.measure.protocol import ProtocolError, WorkerAnswer, WorkerRequest, partial_answer_path
from harness.run.last_words import with_said_last
from harness.run.preloaded_parents import ForkedWorker, PreloadedParents, start_environment
from harness.run.scratch import scratch_dir
from harness.run.slots import Slot
from harness.run.system import SOURCE_ROOT
from harness.scenario.schema import WORKER_ENVIRONMENT

POLL_S = 0.1
LOG_TAIL_LINES = 40
MAX_PHASE_BYTES = 256  # a phase's name
MIB = 1 << 20
#: A cell's worker: a fresh Python, or forked by a preloaded parent (harness/run/preloaded_parents.py).
Started = subprocess.Popen[bytes] | ForkedWorker


#: How `WorkerOutcome.failure_reason` names the phase a worker was stopped in.
_STOPPED_IN = re.compile(r"in phase ([A-Za-z0-9_]+)[);]")


def stopped_in(reason: str) -> str | None:
    """The phase a cell's worker was stopped in, by its failure reason (`failure_reason`'s words), or None."""
    found = _STOPPED_IN.search(reason)
    return found.group(1) if found else None


@dataclass
class WorkerOutcome:
    answer: WorkerAnswer | None
    returncode: int | None
    timed_out: bool
    last_phase: str
    wall_s: float
    #: The worker's resident memory when it was killed for exceeding the limit, else None.
    memory_exceeded_bytes: int | None = None
    memory_limit_bytes: int | None = None
    #: Without an answer: what the worker had kept of it as its last phase ended (`worker.checkpoint`).
    partial: WorkerAnswer | None = None

    def failure_reason(self, timeout_s: float, log_text: str = "") -> str:
        """Why a worker produced no answer. Where it ended of itself (an exit code, a signal not
        the parent's), with the last line it wrote in `log_text` (its log's tail: `quoting_last_words`);
        the parent's own limits are their reason."""
        return self.quoting_last_words(self._why(timeout_s), log_text)

    def quoting_last_words(self, reason: str, log_text: str) -> str:
        """`reason` (`failure_reason`'s without a log) followed by the last line the worker wrote in
        `log_text` where it ended of itself (harness/run/last_words.py); as it is where the parent's
        limits ended it: its last line before the parent killed it is not why."""
        if self.timed_out or (self.memory_exceeded_bytes is not None and self.memory_limit_bytes is not None):
            return reason
        return with_said_last(reason, log_text)

    def _why(self, timeout_s: float) -> str:
        if self.memory_exceeded_bytes is not None and self.memory_limit_bytes is not None:
            return (f"memory limit of {self.memory_limit_bytes / MIB:.0f} MiB exceeded (the worker's processes "
                    f"held {self.memory_exceeded_bytes / MIB:.0f} MiB, in phase {self.last_phase})")
        if self.timed_out:
            return f"time limit of {timeout_s:g} s exceeded (in phase {self.last_phase})"
        if self.returncode is not None and self.returncode < 0:
            try:
                name = signal.Signals(-self.returncode).name
            except ValueError:
                name = f"signal {-self.returncode}"
            hint = ("; SIGKILL comes from the kernel's out-of-memory killer or from another process"
                    + _cgroup_memory_hint() if name == "SIGKILL" else "")
            return f"worker killed by {name} (in phase {self.last_phase}{hint})"
        return f"worker exited with code {self.returncode} without an answer (in phase {self.last_phase})"


def _cgroup_memory_hint() -> str:
    """Where this process's cgroups limit its memory, what that limit does to a worker (a container's
    `--memory`, a batch job's allocation): the kernel kills the worker at it, with no figure kept."""
    limit = cgroup_limits.memory_limit_bytes()
    if limit is None:
        return ""
    return (f"; this process's cgroup may hold {limit / MIB:.0f} MiB and the kernel kills a worker over it: "
            f"`limits: {{memory_limit_mib: N}}` below that stops the worker first and says its peak")


def log_tail(log_path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = log_path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


#: What a worker inherits from the parent's environment; anything else only when the scenario names it.
INHERITED = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TEMP", "TMP",
             "PYTHONPATH", "VIRTUAL_ENV", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUDA_HOME",
             "CUDA_PATH", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "XDG_CACHE_HOME", "SSL_CERT_FILE")
INHERITED_PREFIXES = ("LC_", "FUSIONBENCH_")


def inherited(name: str) -> bool:
    """Whether a worker gets the parent's variable `name` whatever the scenario names."""
    return name in INHERITED or name.startswith(INHERITED_PREFIXES)


def passed_on(name: str, named: Sequence[str]) -> bool:
    """Whether a worker gets the parent's variable `name`, or one the scenario sets under that name
    (`named`: its `env:`)."""
    return inherited(name) or any(item.partition("=")[0] == name for item in named)


def worker_environment(
    parent: Mapping[str, str], named: list[str] | tuple[str, ...], scratch: Mapping[str, str], workdir: Path,
) -> dict[str, str]:
    """The environment of a worker: the whitelisted part of `parent`, then each of `named` ("NAME"
    passes the parent's value on, "NAME=value" sets it), then each of `scratch` (variable -> a
    folder name, made under `workdir`: the backend's caches, fresh for every cell); the harness's
    source root last on PYTHONPATH, whose folders are absolute (a relative one from this process's
    working folder)."""
    env = {k: v for k, v in parent.items() if inherited(k)}
    for item in named:
        name, sep, value = item.partition("=")
        if sep:
            env[name] = value
        elif name in parent:
            env[name] = parent[name]
    for name, folder in scratch.items():
        env[name] = str(workdir / folder)
    # The worker imports the harness the parent runs, also where it is not installed (a checkout
    # run as `python -m harness.cli` from its root): the worker starts in its scratch folder. So a
    # folder named relative (`PYTHONPATH=.` where a plugin is) is the parent's, made absolute: the
    # worker read it in its scratch folder and failed `unknown model` for a plugin the parent had found.
    paths = [os.path.abspath(p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(paths if str(SOURCE_ROOT) in paths else [*paths, str(SOURCE_ROOT)])
    env.update(WORKER_ENVIRONMENT)
    return env


def run_worker(
    request: WorkerRequest,
    *,
    timeout_s: float,
    log_path: Path,
    on_phase: Callable[[str], None] = lambda phase: None,
    module: str = "harness.measure.worker",
    memory_limit_bytes: int | None = None,
    env_names: list[str] | tuple[str, ...] = (),
    scratch_env: Mapping[str, str] | None = None,
    scratch_home: Path | None = None,
    slot: Slot | None = None,
    stop: threading.Event | None = None,
    parents: PreloadedParents | None = None,
) -> WorkerOutcome:
    """Run `python -m module REQUEST` for one cell and wait for it, at most `timeout_s`, killing it
    (with its children) if their resident memory passes `memory_limit_bytes`. The worker's
    environment is `worker_environment(os.environ, env_names, scratch_env)` (the scratch folders under
    `scratch_home` where given, else in the worker's own scratch folder), with the slot's
    GPU, cores and thread count where a parallel run gave it a slot (harness/run/slots.py).
    Setting `stop` kills the worker and raises KeyboardInterrupt (a parallel run's Ctrl-C, which
    only the main thread receives). With `parents`, the worker is forked by the run's preloaded
    parent for its environment (harness/run/preloaded_parents.py), else started fresh."""
    with scratch_dir("fusionbench-cell-") as workdir, ExitStack() as lending:
        phase_file = workdir / "phase"
        answer_file = workdir / "answer.json"
        env = worker_environment(os.environ, env_names, scratch_env or {}, scratch_home or workdir)
        if slot is not None:
            env.update(slot.environment(env))
        parent = None
        if parents is not None:
            parent = lending.enter_context(parents.lent(start_environment(env, scratch_env or {})))
        request_path = workdir / "request.json"

        def write_request(parent_pid: int, worker_start: WorkerStart) -> None:
            request_path.write_text(replace(request, phase_file=str(phase_file), answer_file=str(answer_file),
                                            time_limit_s=timeout_s,
                                            parent_pid=parent_pid, worker_start=worker_start).to_json())

        last_phase = "start"
        timed_out = False
        memory_exceeded: int | None = None
        start = time.monotonic()
        with log_path.open("wb") as log:
            proc: Started | None = None
            if parent is not None and parent.broken is None:
                write_request(parent.pid, "preloaded")
                proc = parent.fork(module, request_path, workdir, log_path, env)
            if proc is None:  # no preloaded parent, or it could not fork: a fresh Python
                if parent is not None:  # why goes first in the cell's log
                    log.write(f"fusionbench: this worker started as a fresh Python: its preloaded parent {parent.broken}\n"
                              .encode(errors="replace"))
                    log.flush()
                write_request(os.getpid(), "fresh")
                proc = subprocess.Popen(
                    [sys.executable, "-m", module, str(request_path)],
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
                    if stop is not None and stop.is_set():
                        raise KeyboardInterrupt
                    phase = _read_phase(phase_file, last_phase)
                    if phase != last_phase:
                        last_phase = phase
                        on_phase(phase)
                    if time.monotonic() - start > timeout_s:
                        timed_out = True
                        _kill_group(proc)
                        break
                    if memory_limit_bytes is not None:
                        held = tree_rss_bytes(proc.pid)
                        if held > memory_limit_bytes:
                            memory_exceeded = held
                            _kill_group(proc)
                            break
            except BaseException:  # Ctrl-C or an error in the parent: never leave a worker behind
                _kill_group(proc)
                raise
        last_phase = _read_phase(phase_file, last_phase)
        answer = None
        if not timed_out and memory_exceeded is None:
            answer = _answer(answer_file, log_path, "the worker's answer")
        partial = _answer(partial_answer_path(answer_file), log_path,
                          "what the worker kept of its answer") if answer is None else None
        return WorkerOutcome(answer, proc.returncode, timed_out, last_phase, time.monotonic() - start,
                             memory_exceeded_bytes=memory_exceeded, memory_limit_bytes=memory_limit_bytes,
                             partial=partial)


def _answer(path: Path, log_path: Path, what: str) -> WorkerAnswer | None:
    """The answer the worker left at `path`, if any: a regular file no larger than a cell record
    the bundle reads, that parses as one. A link, a FIFO or a device in its place is refused
    unread (a link could name another cell's answer, a FIFO would hold the run), said in the log."""
    if not os.path.lexists(path):
        return None
    try:
        data = read_regular(path, what, max_bytes=MAX_JSON_BYTES)
        return WorkerAnswer.from_json(data.decode())
    except (HarnessError, ProtocolError, UnicodeDecodeError) as exc:
        with log_path.open("a") as log_file:
            log_file.write(f"\nfusionbench: {what} is unreadable: {exc}\n")
        return None


def tree_rss_bytes(pid: int) -> int:
    """Resident memory of process `pid` and all its descendants (0 once it is gone)."""
    import psutil

    try:
        root = psutil.Process(pid)
        processes = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0
    total = 0
    for process in processes:
        try:
            total += process.memory_info().rss
        except psutil.Error:
            continue  # exited between listing and reading
    return total


def _read_phase(phase_file: Path, last: str) -> str:
    """The phase the worker says it is in ("start" where it says none), or `last`, the one it said
    before, where the file is missing or not a regular file: a FIFO in its place held the parent,
    and with it the cell's time limit, for ever."""
    try:
        text = read_regular(phase_file, "the phase file", max_bytes=MAX_PHASE_BYTES).decode(errors="replace")
    except HarnessError:
        return last
    return text.strip() or "start"


def _kill_group(proc: Started) -> None:
    """SIGKILL the worker's process group and wait for the worker, then (bounded: killed_wait) for the
    rest of its group (a compile worker, a profiled program), which holds its memory and device files
    until it has ended: the next cell starts after."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
        group = True
    except (ProcessLookupError, PermissionError):
        group = False
        try:  # a forked worker a moment old may not lead its own group yet
            os.kill(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    proc.wait()
    if group:
        killed_wait.wait_until_ended(lambda: killed_wait.group_running(proc.pid))
