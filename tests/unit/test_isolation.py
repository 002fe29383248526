"""A worker that crashes, hangs or exits without an answer becomes a clear reason; nothing is left
running. Each case runs twice: the worker started as a fresh Python, and forked by a preloaded
parent (harness/run/preloaded_parents.py), which must be indistinguishable to the cell."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import psutil
import pydantic
import pytest

from harness import killed_wait, registry
from harness.bundle.cell_record import Metrics
from harness.measure.preloaded import ForkOrder, ParentReply, other_threads, why_not_fork
from harness.measure.protocol import WorkerAnswer, WorkerRequest
from harness.run import isolation
from harness.run.isolation import WorkerOutcome, log_tail, run_worker, worker_environment
from harness.run.preloaded_parents import PreloadedParents
from harness.run.system import SOURCE_ROOT
from tests.cell_configs import cell_config

REPO = Path(__file__).resolve().parents[2]


PYTHONPATH = f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"


@pytest.fixture(autouse=True)
def importable_tests(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", PYTHONPATH)


@pytest.fixture(scope="module")
def shared_parents():
    """One set of preloaded parents for the module (each imports torch once: seconds), preloading
    what every registered backend names: a forking parent shows that none of it starts a thread."""
    parents = PreloadedParents(registry.names())
    yield parents
    parents.close()


@pytest.fixture(params=["fresh", pytest.param("preloaded", marks=pytest.mark.slow)])
def parents(request: pytest.FixtureRequest) -> PreloadedParents | None:
    """No parent (each worker a fresh Python), or the module's preloaded ones: slow, since they import
    torch and every backend's modules first (about 11 s on 2 cores), so the quick tier runs the fresh."""
    return request.getfixturevalue("shared_parents") if request.param == "preloaded" else None


@pytest.fixture
def fake(parents: PreloadedParents | None):
    def run(behaviour: str, tmp_path: Path, timeout_s: float = 60, memory_limit_bytes: int | None = None, **env):
        log = tmp_path / "worker.log"
        phases: list[str] = []
        request = WorkerRequest(cell=cell_config(), artifact_dir=str(tmp_path / behaviour))  # the fake reads the name
        outcome = run_worker(
            request,
            timeout_s=timeout_s,
            log_path=log,
            on_phase=phases.append,
            module="tests.fakes.workers",
            memory_limit_bytes=memory_limit_bytes,
            parents=parents,
            **env,
        )
        return outcome, log, phases

    return run


@pytest.mark.slow
def test_answer_is_read(fake, tmp_path: Path) -> None:
    outcome, _, _ = fake("answer", tmp_path)
    assert outcome.answer == WorkerAnswer(status="valid", metrics=Metrics(prepare_s=1.5))
    assert outcome.answer.record() == {
        "status": "valid",
        "reasons": [],
        "metrics": {"prepare_s": 1.5},
        "environment": {},
        "warnings": [],
        "phases_s": {},
    }
    assert outcome.returncode == 0 and not outcome.timed_out


@pytest.mark.slow
def test_an_answer_of_another_protocol_version_is_no_answer(fake, tmp_path: Path) -> None:
    outcome, log, _ = fake("garbled", tmp_path)
    assert outcome.answer is None
    assert "protocol version 99, this harness speaks 1" in log.read_text()


@pytest.mark.slow
def test_the_worker_sees_only_the_whitelisted_environment_and_what_is_named(
    fake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    monkeypatch.setenv("SOME_SECRET_TOKEN", "x")
    monkeypatch.setenv("MKL_VERBOSE", "1")
    outcome, _, _ = fake(
        "environment",
        tmp_path,
        env_names=["MKL_VERBOSE", "KMP_AFFINITY=compact"],
        scratch_env={"TORCHINDUCTOR_CACHE_DIR": "inductor-cache"},
    )
    seen = outcome.answer.environment
    assert "SOME_SECRET_TOKEN" not in seen and "OMP_NUM_THREADS" not in seen  # not whitelisted, not named
    assert seen["MKL_VERBOSE"] == "1" and seen["KMP_AFFINITY"] == "compact"
    assert seen["PATH"] == os.environ["PATH"] and seen["PYTHONPATH"].startswith(str(REPO))
    assert seen["TORCHINDUCTOR_CACHE_DIR"].endswith("inductor-cache")
    assert not seen["TORCHINDUCTOR_CACHE_DIR"].startswith(str(tmp_path))  # the cell's own scratch folder
    home = tmp_path / "rounds-home"  # a cell's rounds share one (harness/run/rounds.py)
    (tmp_path / "second").mkdir()
    outcome, _, _ = fake(
        "environment", tmp_path / "second", scratch_env={"TORCHINDUCTOR_CACHE_DIR": "inductor-cache"}, scratch_home=home
    )
    assert outcome.answer.environment["TORCHINDUCTOR_CACHE_DIR"] == str(home / "inductor-cache")


def test_a_worker_imports_the_harness_of_its_parent_where_it_is_not_installed(tmp_path: Path) -> None:
    """A checkout run as `python -m harness.cli` from its root: the worker starts in its scratch
    folder, so the source root goes on its PYTHONPATH (last: the parent's entries keep their order)."""
    root = str(SOURCE_ROOT)
    assert worker_environment({"PATH": "/bin"}, (), {}, tmp_path)["PYTHONPATH"] == root
    assert worker_environment({"PYTHONPATH": "/a:/b"}, (), {}, tmp_path)["PYTHONPATH"] == f"/a:/b:{root}"
    assert worker_environment({"PYTHONPATH": f"{root}:/a"}, (), {}, tmp_path)["PYTHONPATH"] == f"{root}:/a"


def test_a_relative_folder_on_pythonpath_reaches_the_worker_as_the_parent_s(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`PYTHONPATH=.` in the folder of a plugin's package: the parent found the plugin and planned its
    cells, and each worker, started in its scratch folder, read `.` there and failed `worker exited
    with code 2 without an answer (in phase start)`, `unknown model`. A relative folder, the shell's
    or env:'s, is the parent's working folder's."""
    monkeypatch.chdir(tmp_path)
    root = str(SOURCE_ROOT)
    for named in ((), ("PYTHONPATH=plugins:/a",)):
        given = {"PYTHONPATH": ".:plugins:/a"}
        expected = f"{tmp_path}:{tmp_path / 'plugins'}:/a:{root}" if not named else f"{tmp_path / 'plugins'}:/a:{root}"
        assert worker_environment(given, named, {}, tmp_path / "scratch")["PYTHONPATH"] == expected, named
    # the harness's own root among them (a checkout run from its root as `PYTHONPATH=.`): kept where it is
    monkeypatch.chdir(root)
    assert worker_environment({"PYTHONPATH": ".:/a"}, (), {}, tmp_path)["PYTHONPATH"] == f"{root}:/a"


def test_segfault_is_named(fake, tmp_path: Path) -> None:
    outcome, log, _ = fake("segfault", tmp_path)
    assert outcome.answer is None
    assert outcome.failure_reason(60) == "worker killed by SIGSEGV (in phase prepare)"
    assert "fake worker starting segfault" in log_tail(log)


def test_a_sigkill_is_not_blamed_on_the_oom_killer_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """A review's stray `kill -9` was read as an out-of-memory kill with none in the kernel's log:
    the reason names both senders. Under a cgroup memory limit (`docker --memory 8g`) it says the
    limit, and how to have the harness stop the worker first, with its peak."""
    from harness import cgroup_limits

    monkeypatch.setattr(cgroup_limits, "memory_limit_bytes", lambda: None)
    killed = WorkerOutcome(None, -signal.SIGKILL, False, "timing", 1.0)
    assert killed.failure_reason(60) == ("worker killed by SIGKILL (in phase timing; SIGKILL comes from the "
                                         "kernel's out-of-memory killer or from another process)")
    monkeypatch.setattr(cgroup_limits, "memory_limit_bytes", lambda: 8 << 30)
    assert killed.failure_reason(60).endswith(
        "from another process; this process's cgroup may hold 8192 MiB and the kernel kills a worker over it: "
        "`limits: {memory_limit_mib: N}` below that stops the worker first and says its peak)")
    segfault = WorkerOutcome(None, -signal.SIGSEGV, False, "timing", 1.0)
    assert "cgroup" not in segfault.failure_reason(60)


def test_a_worker_killed_by_its_time_limit_leaves_what_its_ended_phases_measured(fake, tmp_path: Path) -> None:
    """A cell stopped in LoadGen by its time limit kept no figure (`metrics: {}`), though its timing
    phase had ended: the worker keeps its answer as each phase ends, and the parent reads it."""
    outcome, _, _ = fake("measured_then_hang", tmp_path, timeout_s=3)
    assert outcome.timed_out and outcome.answer is None
    assert outcome.failure_reason(3) == "time limit of 3 s exceeded (in phase loadgen)"
    assert outcome.partial is not None and outcome.partial.metrics.prepare_s == 1.5
    assert set(outcome.partial.phases_s) == {"timing"}
    nothing_kept, _, _ = fake("segfault", tmp_path)  # killed before any phase ended: nothing
    assert nothing_kept.answer is None and nothing_kept.partial is None


@pytest.mark.timeout(120)  # the FIFO held the run for ever
@pytest.mark.parametrize("kind", ["fifo", "link", "nan", "typed", "large"])
def test_a_hostile_or_torn_answer_so_far_is_refused_unread_or_unused(
    fake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """What a killed worker left in place of its answer so far: a FIFO held the run for ever, a link
    to another cell's answer gave that cell's figures, NaN ended the run with a traceback when the
    record was written, a field of the wrong type wrote a record the bundle refuses, and a file of
    any size was read whole. Each is refused, said in the log, and the cell keeps nothing."""
    monkeypatch.setattr(isolation, "MAX_JSON_BYTES", 2048)  # "large" holds 4 KiB
    outcome, log, _ = fake(f"partial_{kind}", tmp_path)
    assert outcome.answer is None and outcome.returncode == 3
    assert outcome.partial is None, outcome.partial
    assert "fusionbench: what the worker kept of its answer is unreadable" in log_tail(log)


@pytest.mark.timeout(120)
def test_a_fifo_in_place_of_the_phase_file_holds_neither_the_parent_nor_the_time_limit(fake, tmp_path: Path) -> None:
    """The parent read the phase file ten times a second with a plain read: a FIFO there, with no
    writer, held it for ever, and the worker's time limit with it."""
    outcome, _, phases = fake("phase_fifo", tmp_path, timeout_s=3)
    assert outcome.timed_out and 3 <= outcome.wall_s < 30
    assert outcome.failure_reason(3) == f"time limit of 3 s exceeded (in phase {outcome.last_phase})"
    assert outcome.last_phase in ("start", "prepare") and phases in ([], ["prepare"])  # the last it said, if read


@pytest.mark.slow
def test_hang_is_killed_with_its_children(fake, tmp_path: Path) -> None:
    outcome, _, phases = fake("hang", tmp_path, timeout_s=3)
    assert outcome.timed_out and outcome.answer is None
    assert outcome.failure_reason(3) == "time limit of 3 s exceeded (in phase prepare)"
    assert 3 <= outcome.wall_s < 30
    assert phases == ["prepare"]
    worker, grandchild = map(int, (tmp_path / "hang" / "pids").read_text().split())
    assert not alive(worker) and not alive(grandchild)  # the run waited for its group to end, not merely the worker


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def ends(pid: int, within_s: float = 10.0) -> bool:
    """Whether process `pid` is gone (or a zombie) within `within_s`."""
    deadline = time.monotonic() + within_s
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)


def test_exit_without_answer(fake, tmp_path: Path) -> None:
    outcome, log, _ = fake("exit", tmp_path)
    assert outcome.failure_reason(60) == "worker exited with code 3 without an answer (in phase prepare)"
    assert "giving up" in log_tail(log)
    # with its log, the reason quotes the last line it wrote, where the user saw the exit code alone
    assert outcome.failure_reason(60, log_tail(log)) == (
        "worker exited with code 3 without an answer (in phase prepare); it last wrote: giving up")


def test_memory_held_by_a_child_counts_against_the_limit(fake, tmp_path: Path) -> None:
    outcome, _, _ = fake("hog", tmp_path, timeout_s=60, memory_limit_bytes=256 << 20)
    assert not outcome.timed_out and outcome.answer is None
    assert outcome.memory_exceeded_bytes is not None and outcome.memory_exceeded_bytes > 256 << 20
    assert outcome.failure_reason(60).startswith("memory limit of 256 MiB exceeded (the worker's processes held ")
    assert outcome.wall_s < 30


def test_a_worker_is_its_own_process_whichever_way_it_started(fake, parents, tmp_path: Path) -> None:
    """Forked or fresh, a worker leads a session of its own, runs in its scratch folder with stdin
    empty, and names as the parent it dies with the process that started it."""
    outcome, log, _ = fake("process", tmp_path)
    seen = outcome.answer.environment
    assert seen["sid"] == seen["pgid"] == seen["pid"]
    assert Path(seen["cwd"]).name.startswith("fusionbench-cell-") and seen["stdin"] == ""
    assert seen["argv"][1].endswith("request.json")
    assert seen["ppid"] == seen["parent_pid"]
    if parents is None:
        assert seen["parent_pid"] == os.getpid() and seen["worker_start"] == "fresh" and not seen["torch_imported"]
    else:
        assert seen["parent_pid"] != os.getpid() and seen["worker_start"] == "preloaded" and seen["torch_imported"], log.read_text()[
            :500
        ]
    assert str(seen["pid"]) in log.read_text()  # its output went to the cell's log


@pytest.mark.slow
def test_a_forked_worker_sees_the_environment_a_fresh_one_sees(
    shared_parents: PreloadedParents, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MKL_VERBOSE", "1")
    seen = {}
    for start, parents in (("fresh", None), ("preloaded", shared_parents)):
        request = WorkerRequest(cell=cell_config(), artifact_dir=str(tmp_path / start / "environment"))
        outcome = run_worker(
            request,
            timeout_s=60,
            log_path=tmp_path / f"{start}.log",
            module="tests.fakes.workers",
            env_names=["MKL_VERBOSE"],
            scratch_env={"TORCHINDUCTOR_CACHE_DIR": "inductor-cache"},
            parents=parents,
        )
        seen[start] = outcome.answer.environment
    fresh, forked = seen["fresh"], seen["preloaded"]
    assert fresh["TORCHINDUCTOR_CACHE_DIR"] != forked["TORCHINDUCTOR_CACHE_DIR"]  # each cell's own folder
    assert forked["TORCHINDUCTOR_CACHE_DIR"].endswith("inductor-cache")
    assert {k: v for k, v in fresh.items() if k != "TORCHINDUCTOR_CACHE_DIR"} == {
        k: v for k, v in forked.items() if k != "TORCHINDUCTOR_CACHE_DIR"
    }


@pytest.mark.slow
def test_a_forked_worker_finds_what_the_runs_backends_preload_already_imported(
    shared_parents: PreloadedParents, tmp_path: Path
) -> None:
    preloads = {
        module
        for name in registry.names()
        for module in registry.load(name).preload
        if importlib.util.find_spec(module.split(".")[0]) is not None
    }
    assert "torch._inductor.compile_fx" in preloads
    seen = {}
    for start, parents in (("fresh", None), ("preloaded", shared_parents)):
        request = WorkerRequest(cell=cell_config(), artifact_dir=str(tmp_path / start / "process"))
        outcome = run_worker(request, timeout_s=60, log_path=tmp_path / f"{start}.log", module="tests.fakes.workers", parents=parents)
        assert outcome.answer.environment["worker_start"] == start, (tmp_path / f"{start}.log").read_text()[:500]
        seen[start] = set(outcome.answer.environment["modules"])
    assert preloads <= seen["preloaded"] and not preloads & seen["fresh"]


def _kill_once_written(path: Path, pid: int) -> None:
    """SIGKILL process `pid` once `path` exists: the worker that writes it is running (a fixed 2 s
    stood in for that, and a loaded machine may not have forked the worker by then)."""
    deadline = time.monotonic() + 60
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
def test_a_parent_that_dies_takes_its_worker_with_it_and_the_next_cell_starts_fresh(tmp_path: Path) -> None:
    parents = PreloadedParents()

    def cell(behaviour: str) -> WorkerOutcome:
        request = WorkerRequest(cell=cell_config(), artifact_dir=str(tmp_path / behaviour))
        return run_worker(request, timeout_s=60, log_path=tmp_path / f"{behaviour}.log", module="tests.fakes.workers", parents=parents)

    try:
        assert cell("process").answer.environment["worker_start"] == "preloaded"  # the parent is up
        [parent] = parents._all
        threading.Thread(target=_kill_once_written, args=(tmp_path / "hang" / "pids", parent.pid), daemon=True).start()
        outcome = cell("hang")
        assert outcome.answer is None and outcome.returncode == -signal.SIGKILL and outcome.wall_s < 30
        worker, grandchild = map(int, (tmp_path / "hang" / "pids").read_text().split())
        assert ends(worker)  # it died with its parent (PR_SET_PDEATHSIG), as with a killed run
        if alive(grandchild):  # a fork's child does not inherit PR_SET_PDEATHSIG: end it here
            os.kill(grandchild, signal.SIGKILL)
        second = cell("process").answer.environment
        assert second["worker_start"] == "fresh" and second["parent_pid"] == os.getpid()
    finally:
        parents.close()


@pytest.mark.slow
def test_a_parent_running_a_thread_refuses_to_fork_and_the_worker_starts_fresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(  # a library that starts a thread on import
        "import threading, time\nthreading.Thread(target=time.sleep, args=(600,), daemon=True).start()\n"
    )
    monkeypatch.setenv("PYTHONPATH", f"{site}{os.pathsep}{PYTHONPATH}")
    parents = PreloadedParents()
    try:
        request = WorkerRequest(cell=cell_config(), artifact_dir=str(tmp_path / "process"))
        outcome = run_worker(request, timeout_s=60, log_path=tmp_path / "worker.log", module="tests.fakes.workers", parents=parents)
        assert outcome.answer.status == "valid" and outcome.answer.environment["worker_start"] == "fresh"
        [parent] = parents._all
        assert parent.broken == (
            "after the imports, 2 threads run here (Python thread 'Thread-1 (sleep)' beside this one) and a fork would carry one"
        )
        assert (
            (tmp_path / "worker.log")
            .read_text()
            .startswith(
                "fusionbench: this worker started as a fresh Python: its preloaded parent after the imports, 2 threads run here"
            )
        )
    finally:
        parents.close()


def test_a_refusal_names_the_threads_beside_the_parent_a_native_ones_by_its_kernel_name() -> None:
    """A thread no Python code knows of (an OpenMP pool's, a driver's) is named as the kernel names it."""
    import _thread
    import ctypes

    started, done = threading.Event(), threading.Event()

    def native() -> None:  # started by _thread: not in threading.enumerate(), like a library's thread
        ctypes.CDLL(None).prctl(15, b"fb-test-pool", 0, 0, 0)  # PR_SET_NAME
        started.set()
        done.wait(30)

    _thread.start_new_thread(native, ())
    started.wait(10)
    try:
        assert "'fb-test-pool'" in other_threads()
        refusal = why_not_fork()
        assert refusal is not None and "'fb-test-pool'" in refusal and "a fork would carry one" in refusal
    finally:
        done.set()


@pytest.mark.slow
def test_a_forked_real_worker_logs_what_a_fresh_one_would(shared_parents: PreloadedParents, tmp_path: Path) -> None:
    """The parent imported the worker's module already; running it as the child's __main__ must not
    leave runpy's warning about that in the cell's log."""
    log = tmp_path / "worker.log"
    brief = cell_config(backend="null", min_duration_s=0.2, timing={"min_time_s": 0.1, "max_warmup_s": 0.5},
                        passes={"memory_iters": 1, "profile_iters": 1})  # the log is tested, not the figures
    request = WorkerRequest(cell=brief, artifact_dir=str(tmp_path / "cell"))
    outcome = run_worker(request, timeout_s=120, log_path=log, parents=shared_parents)
    assert outcome.answer is not None and outcome.answer.status == "valid", log.read_text()[-2000:]
    assert outcome.answer.metrics.memory is not None and outcome.answer.metrics.memory.worker_start == "preloaded"
    assert "found in sys.modules" not in log.read_text()


def test_a_preloaded_parent_s_replies_carry_only_what_they_say() -> None:
    """The protocol's replies on the wire ({"ready": PID}, {"pid": CHILD}, {"pid": CHILD,
    "returncode": CODE}, {"refused": WHY}), read back as written; anything else is refused."""
    for reply, line in ((ParentReply(ready=7), '{"ready": 7}'), (ParentReply(pid=9), '{"pid": 9}'),
                        (ParentReply(pid=9, returncode=-9), '{"pid": 9, "returncode": -9}'),
                        (ParentReply(refused="why"), '{"refused": "why"}')):
        assert reply.to_line() == line + "\n"
        assert ParentReply.from_line(line.encode()) == reply
    for bad in ('{"pid": "9"}', '{"child": 9}', "[]", "not json"):
        with pytest.raises(pydantic.ValidationError):
            ParentReply.from_line(bad)


def test_an_order_to_a_preloaded_parent_is_one_line_of_json_read_back_as_written() -> None:
    order = ForkOrder(
        module="harness.measure.worker",
        request="/s/request.json",
        cwd="/s",
        log="/b/worker.log",
        env={"PATH": "/usr/bin", "OMP_NUM_THREADS": "2"},
    )
    line = order.to_line()
    assert (
        line
        == json.dumps(
            {
                "module": "harness.measure.worker",
                "request": "/s/request.json",
                "cwd": "/s",
                "log": "/b/worker.log",
                "env": {"PATH": "/usr/bin", "OMP_NUM_THREADS": "2"},
            }
        )
        + "\n"
    )
    assert ForkOrder.from_line(line) == order
    written = json.loads(line)
    for bad in (
        "not json",
        "[]",
        json.dumps({k: v for k, v in written.items() if k != "cwd"}),
        json.dumps({**written, "shell": "sh"}),
        json.dumps({**written, "env": {"PATH": 1}}),
        json.dumps({**written, "module": None}),
    ):
        with pytest.raises(pydantic.ValidationError):
            ForkOrder.from_line(bad)


@pytest.mark.slow
def test_a_line_that_is_no_order_is_refused_and_the_parent_forks_the_next(shared_parents: PreloadedParents,
                                                                           tmp_path: Path) -> None:
    """The refusal names what is wrong, never the values (an environment's), and the parent stays up.
    The module's parent of the fake workers' environment, which the tests before this one started
    (one of its own imported torch and torchvision again: about 4 CPU-s)."""
    with shared_parents.lent(worker_environment(os.environ, [], {}, tmp_path)) as parent:
        assert parent.broken is None
        assert parent.proc.stdin is not None
        parent.proc.stdin.write((json.dumps({"module": "json.tool", "env": {"TOKEN": 424242}}) + "\n").encode())
        parent.proc.stdin.flush()
        refusal = parent.lines.next(60)
        assert refusal is not None and refusal.model_dump(exclude_none=True).keys() == {"refused"}
        why = str(refusal.refused)
        assert why.startswith("not an order this parent reads: ") and "env.TOKEN" in why and "cwd" in why
        assert "424242" not in why and "For further information" not in why
        request = tmp_path / "request.json"
        request.write_text('{"a": 1}')
        worker = parent.fork("json.tool", request, tmp_path, tmp_path / "child.log", {"PATH": os.environ["PATH"]})
        assert worker is not None and worker.wait(60) == 0
        assert json.loads((tmp_path / "child.log").read_text()) == {"a": 1}


def test_a_killed_workers_group_has_ended_before_the_next_cell_may_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker killed at its limit ends at once; a compile worker in its group ends a few reads of
    /proc later, holding its memory (and on a GPU its context) till then: `_kill_group` returns after."""
    reads = {"left": 4}

    def group_running(pgid: int, proc: Path | None = None) -> bool:
        reads["left"] -= 1
        return reads["left"] > 0

    class Worker:
        pid = 4_000_000

        def wait(self) -> int:
            return -9

    monkeypatch.setattr(isolation.os, "killpg", lambda pgid, sig: None)
    monkeypatch.setattr(killed_wait, "group_running", group_running)
    isolation._kill_group(Worker())  # type: ignore[arg-type]
    assert reads["left"] == 0, "the next cell would start beside a member of the killed group still ending"


def test_a_process_group_runs_while_a_member_outlives_its_leader() -> None:
    leader = subprocess.Popen(["bash", "-c", "sleep 60 & echo $!; exit 0"], start_new_session=True, stdout=subprocess.PIPE)
    member = int(leader.stdout.readline())  # type: ignore[union-attr]
    leader.wait()
    try:
        assert killed_wait.group_running(leader.pid), "the leader ended; its reparented member runs on in its group"
    finally:
        os.killpg(leader.pid, signal.SIGKILL)
        leader.stdout.close()  # type: ignore[union-attr]
    assert killed_wait.wait_until_ended(lambda: killed_wait.group_running(leader.pid)) and not alive(member)
    assert not killed_wait.group_running(leader.pid)
