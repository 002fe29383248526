"""Fake worker processes for the isolation tests: `python -m tests.fakes.workers BEHAVIOUR REQUEST`.

Each misbehaves the way a real backend can: a crash, a hang, an exit without an answer, a
child process that hoards memory.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

from harness.bundle.cell_record import Metrics
from harness.measure import protocol
from harness.measure.phase_clock import PhaseClock
from harness.measure.protocol import WorkerAnswer, WorkerRequest
from harness.measure.worker import checkpoint, die_with_parent


def main() -> None:
    request = WorkerRequest.from_json(Path(sys.argv[1]).read_text())
    die_with_parent(request.parent_pid)  # as the real worker does
    behaviour = Path(request.artifact_dir).name  # the tests name the folder after the behaviour
    Path(request.phase_file).write_text("prepare")
    print("fake worker starting", behaviour, flush=True)
    if behaviour == "segfault":
        os.kill(os.getpid(), signal.SIGSEGV)
    elif behaviour == "hang":
        child = os.fork()  # a grandchild must die with it too
        if child == 0:
            time.sleep(600)
        Path(request.artifact_dir).mkdir(parents=True, exist_ok=True)
        (Path(request.artifact_dir) / "pids").write_text(f"{os.getpid()} {child}")
        time.sleep(600)
    elif behaviour == "measured_then_hang":  # its timing ended and was kept; then LoadGen never returns
        answer = WorkerAnswer(metrics=Metrics(prepare_s=1.5))
        clock = PhaseClock(Path(request.phase_file), lambda: checkpoint(answer, clock, request.answer_file))
        with clock.phase(protocol.TIMING):
            pass
        Path(request.phase_file).write_text(protocol.LOADGEN.name)
        time.sleep(600)
    elif behaviour.startswith("partial_"):  # a hostile or torn answer so far in its place, then a crash
        hostile_partial(behaviour.removeprefix("partial_"), protocol.partial_answer_path(request.answer_file),
                        Path(request.artifact_dir).parent)
        os._exit(3)
    elif behaviour == "phase_fifo":  # a FIFO where the parent reads the phase, then a hang
        Path(request.phase_file).unlink()
        os.mkfifo(request.phase_file)
        time.sleep(600)
    elif behaviour == "exit":
        print("giving up", file=sys.stderr, flush=True)
        sys.exit(3)
    elif behaviour == "hog":  # memory held by a child, which the limit must count too
        if os.fork() == 0:
            hoard = [b"\x01" * (16 << 20) for _ in range(64)]  # 1 GiB, written so it is resident
            time.sleep(600 + len(hoard))
        time.sleep(600)
    elif behaviour == "answer":
        Path(request.answer_file).write_text(WorkerAnswer(status="valid", metrics=Metrics(prepare_s=1.5)).to_json())
    elif behaviour == "garbled":  # an answer of another protocol version
        Path(request.answer_file).write_text('{"version": 99, "status": "valid"}')
    elif behaviour == "environment":
        Path(request.answer_file).write_text(WorkerAnswer(status="valid", environment=dict(os.environ)).to_json())
    elif behaviour == "process":  # what kind of process it is: its parent, group, folder, arguments, request
        process = {"pid": os.getpid(), "ppid": os.getppid(), "pgid": os.getpgid(0), "sid": os.getsid(0),
                   "cwd": os.getcwd(), "argv": sys.argv, "parent_pid": request.parent_pid,
                   "worker_start": request.worker_start, "torch_imported": "torch" in sys.modules,
                   "modules": sorted(sys.modules), "stdin": os.read(0, 10).decode()}
        Path(request.answer_file).write_text(WorkerAnswer(status="valid", environment=process).to_json())
        print(json.dumps(process))


def hostile_partial(kind: str, path: Path, elsewhere: Path) -> None:
    """What a killed worker leaves in place of its answer so far: a FIFO (no writer: a reader that
    waits on it waits for ever), a link to another cell's answer, NaN, a field of the wrong type,
    or more than a cell record may hold."""
    kept = WorkerAnswer(metrics=Metrics(prepare_s=1.5), phases_s={"prepare": 1.5})
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "link":
        other = elsewhere / "other-cell.partial.json"
        other.write_text(WorkerAnswer(metrics=Metrics(prepare_s=7.0), phases_s={"prepare": 7.0}).to_json())
        path.symlink_to(other)
    elif kind == "nan":
        path.write_text(kept.to_json().replace('"prepare": 1.5', '"prepare": NaN'))
    elif kind == "typed":
        path.write_text(kept.to_json().replace('"phases_s": {"prepare": 1.5}', '"phases_s": "several"'))
    elif kind == "large":
        path.write_text(WorkerAnswer(environment={"junk": "x" * 4096}).to_json())


if __name__ == "__main__":
    main()
