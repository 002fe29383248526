"""A preloaded parent for cells' workers: `python -m harness.measure.preloaded RUNNER_PID [BACKEND...]`.

Every cell runs in a process of its own (harness/measure/worker.py), and a fresh Python spends
about 5 CPU-seconds before it measures anything: importing torch and torchvision (which imports
torch._dynamo) and the harness's measuring modules. This process pays that once: the run starts
it with the environment its cells' workers get (the same whitelist, slot, thread counts and
allocator, harness/run/isolation.py), it binds itself to the slot's cores and imports what every
worker imports and what the run's backends name as theirs to preload (`Backend.preload`: TVM's
runtime, Inductor's compiler, about 3 and 1.5 CPU-seconds a cell otherwise; a module that fails
to import is left to the worker, which reports it), and then forks one child per cell. The child
is the worker: its own session and process group, the cell's scratch directory as its working
directory, its log as stdout and stderr, the cell's environment (the start environment plus the
cell's own compiler-cache folders), and a request that names this process as the parent it dies
with. What a cell measures is unchanged;
what it no longer measures is the imports (its `import` phase is near zero), and the cells of one
run share the address-space layout of the libraries imported here. `fusionbench run
--fresh-workers` starts every worker as a new Python instead.

It forks only while it is a single thread (an OpenMP pool or any thread started by an import would
not survive a fork) with no CUDA context (which a forked child cannot use): before each fork it
checks, refuses the cell otherwise, and the runner then starts that worker fresh. Libraries that
end their thread pools at a fork and start them again when next used (OpenBLAS, which numpy starts
on import) are let do so by one empty fork right after the imports.

Protocol, one JSON object per line: on start, this process writes {"ready": PID} (or {"refused":
WHY}); then for each line {"module": NAME, "request": PATH, "cwd": DIR, "log": FILE, "env": {...}}
it reads (a `ForkOrder`; the child runs NAME as `python -m NAME PATH` would), it writes {"pid":
CHILD} as soon as the child exists and {"pid": CHILD, "returncode": CODE} when it has ended (CODE
negative for a signal, as subprocess gives it); a line that is no `ForkOrder` is answered
{"refused": WHY}. End of input ends this process;
it dies with the runner (PR_SET_PDEATHSIG), and its child dies with it.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import threading
import traceback
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Self, TextIO

import pydantic
from pydantic import ConfigDict

from harness.measure import start_imports
from harness.quick_exit import quick_exit


class _Line(pydantic.BaseModel):
    """A message of the protocol, one JSON object a line: strict, unknown keys refused, and only
    the fields a message gives written."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    def to_line(self) -> str:
        """The message as one line of the protocol, its newline included."""
        return json.dumps(self.model_dump(exclude_none=True)) + "\n"

    @classmethod
    def from_line(cls, line: bytes | str) -> Self:
        """The message one line holds; pydantic.ValidationError where it holds none."""
        return cls.model_validate_json(line)


class ForkOrder(_Line):
    """What the run asks of its preloaded parent, one line each (harness/run/preloaded_parents.py
    writes it, `serve` reads it): fork a child that runs `module` as `python -m MODULE REQUEST`
    would, in `cwd`, with `log` as its stdout and stderr and `env` as its whole environment. An
    order with a key missing or unknown, or a value of another type, is refused."""

    model_config = ConfigDict(hide_input_in_errors=True)  # an environment is no error message's business
    module: str
    request: str  # the worker's request file (harness/measure/protocol.py's WorkerRequest)
    cwd: str
    log: str
    env: dict[str, str]


class ParentReply(_Line):
    """What the preloaded parent says back, one line each: `ready` (its PID) once its imports are
    done, `refused` (why) in place of a start or a fork, `pid` (the child's) when it has forked, and
    `pid` with `returncode` when that child has ended. Only the fields a reply gives go on the line."""

    ready: int | None = None
    refused: str | None = None
    pid: int | None = None
    returncode: int | None = None


def thread_count() -> int:
    """This process's threads, as the kernel counts them (1 where /proc cannot tell)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


def other_threads() -> list[str]:
    """The threads of this process other than the calling one, each by what names it: a Python
    thread's name (its target's among them), else the kernel's name for it (an OpenMP or a driver's
    thread names itself there); so a refusal says which library started what."""
    python = {t.native_id: t.name for t in threading.enumerate() if t.native_id is not None}
    me = threading.get_native_id()
    try:
        tids = sorted(int(tid) for tid in os.listdir("/proc/self/task"))
    except OSError:
        return []
    names = []
    for tid in tids:
        if tid == me:
            continue
        if tid in python:
            names.append(f"Python thread {python[tid]!r}")
            continue
        try:
            names.append(repr(Path(f"/proc/self/task/{tid}/comm").read_text().strip()))
        except OSError:  # it ended meanwhile
            continue
    return names


def why_not_fork() -> str | None:
    """Why a child forked now would not work, or None: more threads than this one (a fork carries
    only the caller; the others are named), or a CUDA context (a forked child cannot use its parent's)."""
    threads = thread_count()
    if threads != 1:
        return f"{threads} threads run here ({', '.join(other_threads())} beside this one) and a fork would carry one"
    import torch

    if torch.cuda.is_initialized():
        return "CUDA is initialised here and a forked child could not use it"
    return None


def _empty_fork() -> None:
    """Fork a child that exits at once: libraries' fork handlers (OpenBLAS's) end their pools."""
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)


def _send(channel: TextIO, reply: ParentReply) -> None:
    channel.write(reply.to_line())
    channel.flush()


def _child(order: ForkOrder, channels: tuple[int, int]) -> None:
    """In the forked child: become the cell's worker, then exit with its code (never returns)."""
    code = 1
    try:
        for fd in channels:
            os.close(fd)
        os.setsid()
        os.chdir(order.cwd)
        log = os.open(order.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        os.close(null)
        os.environ.clear()
        os.environ.update(order.env)
        sys.argv = [order.module, order.request]
        # The module was imported here already (start_imports): runpy would warn so in every worker's log,
        # where a fresh worker's log has no such line.
        warnings.filterwarnings("ignore", message=r"'.*' found in sys\.modules after import of package", category=RuntimeWarning)
        runpy.run_module(order.module, run_name="__main__", alter_sys=True)  # as `python -m MODULE REQUEST`
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - whatever happens, the child must not return into the server loop
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _preload(backends: Sequence[str]) -> None:
    """Import what the named backends ask a preloaded parent to (`Backend.preload`). A backend that
    cannot be loaded, or a module that fails to import, is left to the cells' workers, which
    import it again and report what fails."""
    from harness import registry

    for name in backends:
        try:
            preload = registry.load(name).preload
        except Exception as exc:  # noqa: BLE001 - a broken plugin is its cells' failure, not this parent's
            print(f"preloaded: backend {name!r} not fully preloaded: {type(exc).__name__}: {exc}", file=sys.stderr)
            continue
        start_imports.import_preload(name, preload)


def serve(runner_pid: int, commands: TextIO, replies: TextIO, backends: Sequence[str]) -> int:
    from harness.measure import worker
    from harness.measure.worker import bind_to_slot, die_with_parent

    die_with_parent(runner_pid)
    bind_to_slot(os.environ.get("FUSIONBENCH_CPUS"))
    worker.handed_cpus = worker.given_cpus()  # before the imports: torch's OpenMP may bind this thread
    start_imports.import_modules()
    _preload(backends)
    _empty_fork()
    refusal = why_not_fork()
    if refusal:
        _send(replies, ParentReply(refused=f"after the imports, {refusal}"))
        return 1
    _send(replies, ParentReply(ready=os.getpid()))
    for line in commands:
        try:
            order = ForkOrder.from_line(line)
        except pydantic.ValidationError as exc:
            _send(replies, ParentReply(refused=f"not an order this parent reads: {_why(exc)}"))
            continue
        refusal = why_not_fork()
        if refusal:
            _send(replies, ParentReply(refused=refusal))
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(order, (commands.fileno(), replies.fileno()))
        _send(replies, ParentReply(pid=pid))
        _, status = os.waitpid(pid, 0)
        _send(replies, ParentReply(pid=pid, returncode=os.waitstatus_to_exitcode(status)))
    return 0


def _why(exc: pydantic.ValidationError) -> str:
    """What is wrong with an order, on one line: pydantic's message without its links (nor the
    order's values: an environment is no message's business)."""
    lines = [line.strip() for line in str(exc).splitlines() if not line.strip().startswith("For further information")]
    return " / ".join(lines)[:300]


def main() -> int:
    # The protocol gets file descriptors of its own; stdin reads nothing and stdout goes to stderr,
    # so no library's print can corrupt it and no child inherits it.
    commands = os.fdopen(os.dup(0), "r")
    replies = os.fdopen(os.dup(1), "w")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    return serve(int(sys.argv[1]), commands, replies, sys.argv[2:])


if __name__ == "__main__":
    quick_exit(main())  # without the interpreter's teardown: harness/quick_exit.py
