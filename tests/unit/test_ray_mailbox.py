"""The Ray driver's reading of its cells' mailbox (harness/run/ray_executor.py `RayExecutor.run`), on a
fake Ray that stands in for the cluster: what a task told the mailbox reaches the run, even when the
run is stopped before its next read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.measure.protocol import WorkerRequest
from harness.run import ray_executor
from harness.run.executors import CellTask
from tests.cell_configs import cell_config


class _Ref:
    def __init__(self, answer: Any = None) -> None:
        self.answer = answer


class _Mailbox:
    """The `Phases` actor's handle: `since.remote(n)` gives a ref to what was said after the first n."""

    def __init__(self, said: list[tuple[int, str]]) -> None:
        self.said = said
        self.since = self

    def remote(self, count: int, instance: str) -> _Ref:
        start = count if instance == "one" else 0
        return _Ref(("one", start, self.said[start:]))


class _Cluster:
    """What `RayExecutor.run` calls of the `ray` module. The task says it started just after the
    driver's first read of the mailbox; a stop (Ctrl-C) cuts the driver's second wait, or with
    `cut_read` its second read of the mailbox, once the mailbox has answered."""

    def __init__(self, cut_read: bool) -> None:
        self.said: list[tuple[int, str]] = []
        self.waits = 0
        self.reads = 0
        self.cut_read = cut_read
        self.cancelled: list[_Ref] = []

    def is_initialized(self) -> bool:
        return True

    def remote(self, function: Any = None, **_: Any) -> Any:
        if function is None:  # ray.remote(num_cpus=0, ...)(Phases).remote(): the mailbox
            return lambda _cls: type("Actor", (), {"remote": lambda _self: _Mailbox(self.said)})()
        return type("Remote", (), {"options": lambda _self, **_: type("Sent", (), {"remote": lambda _s, *_: _Ref()})()})()

    def wait(self, refs: list[Any], num_returns: int, timeout: float) -> tuple[list[Any], list[Any]]:
        self.waits += 1
        if self.waits == 2:
            self.said.append((0, "start"))  # told after the first read: the driver has not read it
            if not self.cut_read:
                raise KeyboardInterrupt
        return [], refs

    def get(self, ref: _Ref, timeout: float | None = None) -> Any:
        self.reads += 1
        if self.cut_read and self.reads == 2:
            raise KeyboardInterrupt  # the mailbox has answered; the driver never saw the answer
        return ref.answer

    def cancel(self, ref: _Ref, force: bool = False) -> None:
        self.cancelled.append(ref)

    def kill(self, actor: Any) -> None:
        pass


@pytest.mark.parametrize("cut_read", [False, True], ids=["between reads", "during a read"])
def test_a_run_stopped_before_it_read_a_start_passes_it_on(tmp_path: Path, cut_read: bool) -> None:
    """A cell that started less than a read (0.5 s, longer on a loaded driver) before a Ctrl-C or
    SIGTERM, or whose start a read the stop cut short had taken from the mailbox, was not known to
    have started: the run recorded nothing of it."""
    cluster = _Cluster(cut_read)
    executor = ray_executor.RayExecutor.__new__(ray_executor.RayExecutor)
    executor.ray, executor.cpus_per_cell = cluster, 1
    task = CellTask(cell_id="c", label="c", request=WorkerRequest(cell=cell_config(), artifact_dir=str(tmp_path)),
                    artifacts=tmp_path, timeout_s=60, memory_limit_bytes=None, env_names=[], scratch_env={}, device="cpu")
    told: list[tuple[str, str]] = []
    with pytest.raises(KeyboardInterrupt):
        list(executor.run([task], lambda t, phase: told.append((t.cell_id, phase))))
    assert told == [("c", "start")]
    assert len(cluster.cancelled) == 1  # and the task is cancelled, as before
