"""A worker that crashes, hangs or exits without an answer becomes a clear reason; nothing is left running."""

from __future__ import annotations

import os
from pathlib import Path

import psutil
import pytest

from harness.bundle.cell_record import Metrics
from harness.measure.protocol import WorkerAnswer, WorkerRequest
from harness.run.isolation import log_tail, run_worker
from tests.cell_configs import cell_config

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def importable_tests(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")


def fake(behaviour: str, tmp_path: Path, timeout_s: float = 60, memory_limit_bytes: int | None = None, **env):
    log = tmp_path / "worker.log"
    phases: list[str] = []
    request = WorkerRequest(cell=cell_config(), artifact_dir=str(tmp_path / behaviour))  # the fake reads the name
    outcome = run_worker(request, timeout_s=timeout_s,
                         log_path=log, on_phase=phases.append, module="tests.fakes.workers",
                         memory_limit_bytes=memory_limit_bytes, **env)
    return outcome, log, phases


def test_answer_is_read(tmp_path: Path) -> None:
    outcome, _, _ = fake("answer", tmp_path)
    assert outcome.answer == WorkerAnswer(status="valid", metrics=Metrics(prepare_s=1.5))
    assert outcome.answer.record() == {"status": "valid", "reasons": [], "metrics": {"prepare_s": 1.5}, "environment": {},
                                       "warnings": [], "phases_s": {}}
    assert outcome.returncode == 0 and not outcome.timed_out


def test_an_answer_of_another_protocol_version_is_no_answer(tmp_path: Path) -> None:
    outcome, log, _ = fake("garbled", tmp_path)
    assert outcome.answer is None
    assert "protocol version 99, this harness speaks 1" in log.read_text()


def test_the_worker_sees_only_the_whitelisted_environment_and_what_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    monkeypatch.setenv("SOME_SECRET_TOKEN", "x")
    monkeypatch.setenv("MKL_VERBOSE", "1")
    outcome, _, _ = fake("environment", tmp_path, env_names=["MKL_VERBOSE", "KMP_AFFINITY=compact"],
                         scratch_env={"TORCHINDUCTOR_CACHE_DIR": "inductor-cache"})
    seen = outcome.answer.environment
    assert "SOME_SECRET_TOKEN" not in seen and "OMP_NUM_THREADS" not in seen  # not whitelisted, not named
    assert seen["MKL_VERBOSE"] == "1" and seen["KMP_AFFINITY"] == "compact"
    assert seen["PATH"] == os.environ["PATH"] and seen["PYTHONPATH"].startswith(str(REPO))
    assert seen["TORCHINDUCTOR_CACHE_DIR"].endswith("inductor-cache")
    assert not seen["TORCHINDUCTOR_CACHE_DIR"].startswith(str(tmp_path))  # the cell's own scratch folder


def test_segfault_is_named(tmp_path: Path) -> None:
    outcome, log, _ = fake("segfault", tmp_path)
    assert outcome.answer is None
    assert outcome.failure_reason(60) == "worker killed by SIGSEGV (in phase prepare)"
    assert "fake worker starting segfault" in log_tail(log)


def test_hang_is_killed_with_its_children(tmp_path: Path) -> None:
    before = {p.pid for p in psutil.process_iter()}
    outcome, _, phases = fake("hang", tmp_path, timeout_s=3)
    assert outcome.timed_out and outcome.answer is None
    assert outcome.failure_reason(3) == "time limit of 3 s exceeded (in phase prepare)"
    assert 3 <= outcome.wall_s < 30
    assert phases == ["prepare"]
    leftovers = [p for p in psutil.process_iter(["cmdline", "status"]) if p.pid not in before
                 and p.info["status"] != psutil.STATUS_ZOMBIE
                 and "tests.fakes.workers" in " ".join(p.info["cmdline"] or [])]
    assert not leftovers


def test_exit_without_answer(tmp_path: Path) -> None:
    outcome, log, _ = fake("exit", tmp_path)
    assert outcome.failure_reason(60) == "worker exited with code 3 without an answer (in phase prepare)"
    assert "giving up" in log_tail(log)


def test_memory_held_by_a_child_counts_against_the_limit(tmp_path: Path) -> None:
    outcome, _, _ = fake("hog", tmp_path, timeout_s=60, memory_limit_bytes=256 << 20)
    assert not outcome.timed_out and outcome.answer is None
    assert outcome.memory_exceeded_bytes is not None and outcome.memory_exceeded_bytes > 256 << 20
    assert outcome.failure_reason(60).startswith("memory limit of 256 MiB exceeded (the worker's processes held ")
    assert outcome.wall_s < 30
