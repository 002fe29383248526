"""Slots of a parallel run: disjoint cores (and one GPU each) per job, clear refusals, and cores
claimed on a node so that no two cells hold the same one."""

from __future__ import annotations

import os
import threading
import time
import types
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from harness import cpu_topology
from harness.errors import ConfigError
from harness.run import slots
from tests.another_user import AS_ROOT, acting_as, root_folder_every_user_may_enter, under_umask


def test_plan_cuts_the_cores_into_disjoint_sets_and_gives_each_gpu_job_a_gpu() -> None:
    planned = slots.plan(2, "cpu", [0, 1, 2, 3, 4], [])
    assert [s.cpus for s in planned] == [(0, 1), (2, 3)]
    assert planned[0].environment() == {"OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2", "FUSIONBENCH_CPUS": "0,1",
                                        "TVM_BIND_THREADS": "0"}  # TVM's pool pinned threads outside the slot
    gpu = slots.plan(2, "cuda", [0, 1, 2, 3], ["0", "1", "2"])
    assert [(s.cpus, s.gpu) for s in gpu] == [((0, 1), "0"), ((2, 3), "1")]
    assert gpu[1].environment()["CUDA_VISIBLE_DEVICES"] == "1"


@pytest.mark.parametrize(("jobs", "device", "cores", "gpus", "words"), [
    (0, "cpu", [0, 1], [], "give 1 or more"),
    (3, "cpu", [0, 1], [], "each cell needs a core of its own and 2 are usable"),
    (2, "cuda", [0, 1, 2, 3], ["0"], "a GPU cell takes a GPU of its own and this machine has 1"),
])
def test_plan_refuses_what_the_machine_cannot_give(jobs: int, device: str, cores: list[int], gpus: list[str],
                                                    words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        slots.plan(jobs, device, cores, gpus)


def test_claims_never_share_a_core_and_wait_for_a_free_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slots, "usable_cores", lambda: [0, 1])
    held: list[tuple[int, ...]] = []
    order: list[str] = []
    with slots.claimed(1, tmp_path) as first, slots.claimed(1, tmp_path) as second:
        held += [first.cpus, second.cpus]

        decided = _claims_waiting(monkeypatch)

        def third() -> None:
            with slots.claimed(1, tmp_path) as slot:
                order.append(f"third got {slot.cpus}")
                decided.set()

        waiting = threading.Thread(target=third)
        waiting.start()
        assert decided.wait(timeout=10)  # it has tried: waiting for a core, or (wrongly) holding one
        order.append("released")
    waiting.join(timeout=10)
    assert sorted(held) == [(0,), (1,)]
    assert order[0] == "released" and order[1].startswith("third got"), order
    with pytest.raises(ConfigError, match="asks for 3 cores and 2 are usable"):
        with slots.claimed(3, tmp_path):
            pass


def test_a_claim_takes_whole_physical_cores_so_no_two_cells_share_one(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Ray on a node of 2 cores with 2 threads each (CPUs 0 and 2 one core, 1 and 3 the other): the
    third single-CPU cell claimed CPU 2, the sibling of the first cell's CPU 0, and the two timed
    each other through the core they shared."""
    def smt(cpu: int) -> set[int]:
        return {cpu % 2, cpu % 2 + 2}

    monkeypatch.setattr(slots, "usable_cores", lambda: [0, 1, 2, 3])
    with slots.claimed(1, tmp_path, smt) as first, slots.claimed(1, tmp_path, smt) as second:
        assert (first.cpus, second.cpus) == ((0,), (1,))  # CPUs 2 and 3 idle: their cores are held
        assert first.environment()["OMP_NUM_THREADS"] == "1"  # one thread a claimed core, as Ray reserved
        third, waited = _claim_in_the_background(tmp_path, smt, monkeypatch)
        assert waited == [], "a third cell took a sibling of a held core"
    third.join(timeout=10)
    assert waited == [(0,)]
    with slots.claimed(3, tmp_path, smt) as wide:  # more than the 2 physical cores: both, and a sibling
        assert wide.cpus == (0, 1, 2)
    with pytest.raises(ConfigError, match=r"asks for 5 cores and 4 are usable on this node"):
        with slots.claimed(5, tmp_path, smt):
            pass
    # a claimant bound to CPUs 2 and 3 (taskset) names its cores' locks as one with the whole node does
    monkeypatch.setattr(slots, "usable_cores", lambda: [2, 3])
    with slots.claimed(2, tmp_path, smt) as bound:
        assert bound.cpus == (2, 3) and sorted(p.name for p in tmp_path.glob("core-*.lock")) == ["core-0.lock",
                                                                                                 "core-1.lock"]
        monkeypatch.setattr(slots, "usable_cores", lambda: [0, 1, 2, 3])
        other, got = _claim_in_the_background(tmp_path, smt, monkeypatch)
        assert got == [], "a claimant with the whole node took a core the bound one holds"
    other.join(timeout=10)
    assert got == [(0,)]


def _claims_waiting(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """An event set once a claim has found too few free cores and waits to try again."""
    decided = threading.Event()

    def sleep(seconds: float) -> None:
        decided.set()
        time.sleep(seconds)

    monkeypatch.setattr(slots, "time", types.SimpleNamespace(sleep=sleep))
    return decided


def _claim_in_the_background(folder: Path, siblings_of: Callable[[int], set[int]], monkeypatch: pytest.MonkeyPatch
                             ) -> tuple[threading.Thread, list[tuple[int, ...]]]:
    """A claim of one core in a thread of its own, returned once it has tried (it waits for a core,
    or holds one), and the list its CPUs land in once it has one."""
    got: list[tuple[int, ...]] = []
    decided = _claims_waiting(monkeypatch)

    def claim() -> None:
        with slots.claimed(1, folder, siblings_of) as slot:
            got.append(slot.cpus)
            decided.set()

    thread = threading.Thread(target=claim)
    thread.start()
    assert decided.wait(timeout=10), "the claim neither took a core nor waited for one"
    return thread, got


def _claim_as(uid: int, count: int, folder: Path, monkeypatch: pytest.MonkeyPatch, cores: list[int]) -> str:
    """A claim of `count` of `cores` by user `uid`."""
    monkeypatch.setattr(slots, "usable_cores", lambda: cores)
    try:
        with acting_as(uid), slots.claimed(count, folder) as slot:
            return f"claimed {slot.cpus}"
    except ConfigError as exc:
        return f"ConfigError {exc}"


@pytest.fixture
def open_folder() -> Iterator[Path]:
    """A folder under /tmp every user may enter, for a lock folder two users share."""
    with root_folder_every_user_may_enter() as folder:
        yield folder


@AS_ROOT
def test_a_root_runs_core_locks_do_not_lock_out_a_later_user(open_folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Ray node where root ran first: its lock folder (0755) and files (0644) refused the next
    user's cells with PermissionError out of `claimed`."""
    folder = open_folder / "cores"
    assert _claim_as(0, 1, folder, monkeypatch, [0, 1]) == "claimed (0,)"
    assert folder.stat().st_mode & 0o7777 == 0o1777, oct(folder.stat().st_mode)
    assert [p.name for p in open_folder.iterdir()] == ["cores"]  # nothing left of its making
    assert _claim_as(65534, 3, folder, monkeypatch, [0, 1, 2]) == "claimed (0, 1, 2)"  # root's core-0, its own 1 and 2
    os.chmod(folder, 0o755)  # a folder an older harness made
    for lock in folder.iterdir():
        if lock.name != "core-0.lock":
            lock.unlink()
    answer = _claim_as(65534, 3, folder, monkeypatch, [0, 1, 2])
    assert answer.startswith("ConfigError the core lock") and f"chmod 1777 {folder}" in answer, answer


@AS_ROOT
def test_a_core_lock_made_under_a_strict_umask_is_usable_by_another_user(
        open_folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """root with umask 077 (a hardened host) made core-0.lock 0600: no other user could open it."""
    with under_umask(0o077):
        assert _claim_as(0, 1, open_folder / "cores", monkeypatch, [0]) == "claimed (0,)"
    assert _claim_as(65534, 1, open_folder / "cores", monkeypatch, [0]) == "claimed (0,)"


def _protected_regular() -> int:
    try:
        return int(Path("/proc/sys/fs/protected_regular").read_text())
    except (OSError, ValueError):
        return 0


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0 or _protected_regular() == 0,
                    reason="needs root and fs.protected_regular 1 or 2 (systemd's default; this machine's is 0)")
def test_a_claim_opens_a_lock_file_another_user_made_in_the_sticky_folder(
        open_folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """fs.protected_regular refuses O_CREAT on an existing file of a sticky world-writable folder
    that neither the opener nor the folder's owner owns, root included: root made the folder and
    core-0, nobody core-1, and root's next claim of two cores was refused."""
    folder = open_folder / "cores"
    assert _claim_as(0, 1, folder, monkeypatch, [0]) == "claimed (0,)"
    assert _claim_as(65534, 2, folder, monkeypatch, [0, 1]) == "claimed (0, 1)"
    assert _claim_as(0, 2, folder, monkeypatch, [0, 1]) == "claimed (0, 1)"


def test_the_gpus_jobs_hands_out_are_the_ones_this_process_was_given() -> None:
    """A resume has no system description: its GPUs were counted as one ('--jobs 2: ... this machine
    has 1' on an 8-GPU machine); a parent restricted to GPUs 2 and 3 handed out 0 and 1."""
    from harness.run.executor_choice import slot_gpus
    from harness.run.probe_answer import ProbeAnswer

    resumed = ProbeAnswer(device="cuda", cuda_available=True, cuda_devices=8)
    assert slot_gpus(resumed, "cuda", {}) == [str(i) for i in range(8)]
    assert slot_gpus(resumed, "cuda", {"CUDA_VISIBLE_DEVICES": "2, 3"}) == ["2", "3"]
    described = ProbeAnswer(device="cuda", cuda_devices=2, system={"gpu": {"gpus": [{"index": 4}, {"index": 5}]}})
    assert slot_gpus(described, "cuda", {}) == ["4", "5"]
    assert slot_gpus(ProbeAnswer(device="cuda"), "cuda", {}) == ["0"]  # nothing asked: nothing left to run
    assert slot_gpus(ProbeAnswer(device="cpu"), "cpu", {}) == []


def test_a_slot_numbers_the_machines_gpus_as_nvml_does_and_the_given_ones_as_the_process_does() -> None:
    """The GPUs a slot is handed are NVML's indices (PCI order); CUDA numbers the fastest first by
    default, so on a machine of mixed GPUs slot 0 ran on another GPU than the one recorded. Those
    this process was given (CUDA_VISIBLE_DEVICES) are read in its own CUDA_DEVICE_ORDER."""
    from harness.run.executor_choice import slot_gpu_order

    assert slot_gpu_order({}) == "PCI_BUS_ID"
    assert slot_gpu_order({"CUDA_VISIBLE_DEVICES": "2,3", "CUDA_DEVICE_ORDER": "FASTEST_FIRST"}) is None
    gpu = slots.plan(2, "cuda", [0, 1, 2, 3], ["0", "1"], gpu_order="PCI_BUS_ID")
    assert gpu[1].environment()["CUDA_VISIBLE_DEVICES"] == "1"
    assert gpu[1].environment()["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert "CUDA_DEVICE_ORDER" not in slots.plan(2, "cuda", [0, 1, 2, 3], ["2", "3"])[0].environment()
    assert "CUDA_DEVICE_ORDER" not in slots.plan(2, "cpu", [0, 1, 2, 3], [], gpu_order="PCI_BUS_ID")[0].environment()
    assert gpu[1].record()["gpu_order"] == "PCI_BUS_ID"  # the cell's node says which order its gpu is in
    with pytest.raises(ConfigError, match="env sets CUDA_DEVICE_ORDER"):
        slots.check_jobs(2, ["CUDA_DEVICE_ORDER=FASTEST_FIRST"], "cuda")
    slots.check_jobs(2, ["CUDA_DEVICE_ORDER=FASTEST_FIRST"], "cpu")


def test_slots_are_cut_by_physical_core_never_splitting_a_cores_smt_siblings() -> None:
    """Linux numbers a core's second thread apart from its first (cores 0-3, their siblings 4-7): a cut
    of the sorted CPUs gave slot 0 the CPUs 0-3 and slot 1 their siblings 4-7, every core shared."""
    def smt(cpu: int) -> set[int]:
        return {cpu % 4, cpu % 4 + 4}

    planned = slots.plan(2, "cpu", list(range(8)), [], siblings_of=smt)
    assert [s.cpus for s in planned] == [(0, 1, 4, 5), (2, 3, 6, 7)]
    assert planned[0].environment()["OMP_NUM_THREADS"] == "4"
    with pytest.raises(ConfigError, match="each cell needs a core of its own and 4 are usable here \\(8 logical CPUs\\)"):
        slots.plan(5, "cpu", list(range(8)), [], siblings_of=smt)
    assert cpu_topology.physical_cores([0, 1, 4], smt) == [(0, 4), (1,)]  # a sibling outside the usable set is not counted


def test_more_jobs_than_one_refuse_an_env_that_sets_what_a_slot_sets_and_keep_fewer_threads() -> None:
    """`env: [CUDA_VISIBLE_DEVICES=3]` with --jobs 2 on a GPU: the slot's GPU replaced it, without a
    word. A thread count below the slot's is what the file asked for: kept, not raised to the slot's."""
    slots.check_jobs(1, ["CUDA_VISIBLE_DEVICES=3"], "cuda")
    slots.check_jobs(2, ["OMP_NUM_THREADS=1", "KMP_BLOCKTIME"], "cuda")
    slots.check_jobs(2, ["CUDA_VISIBLE_DEVICES="], "cpu")  # a CPU slot sets no GPU
    with pytest.raises(ConfigError, match="--jobs 2: the scenario's env sets TVM_BIND_THREADS, CUDA_VISIBLE_DEVICES"):
        slots.check_jobs(2, ["TVM_BIND_THREADS=1", "CUDA_VISIBLE_DEVICES"], "auto")
    slot = slots.Slot(index=0, cpus=(0, 1, 2, 3))
    assert slot.environment({"OMP_NUM_THREADS": "1"})["OMP_NUM_THREADS"] == "1"
    assert slot.environment({"OMP_NUM_THREADS": "16", "MKL_NUM_THREADS": "x"}) == {
        "OMP_NUM_THREADS": "4", "MKL_NUM_THREADS": "4", "FUSIONBENCH_CPUS": "0,1,2,3", "TVM_BIND_THREADS": "0"}


def test_a_thread_count_the_env_gives_openmp_alone_is_the_one_torch_runs_in_a_slot() -> None:
    """`env: [OMP_NUM_THREADS=1]` (the advice trust.py gives a noisy cell) under `--jobs`: the slot
    set MKL_NUM_THREADS to its cores beside it, and torch, which sizes its pool by MKL's count over
    OpenMP's, ran the slot's 2 threads where a run of one job ran 1 (`torch.get_num_threads()` with
    OMP_NUM_THREADS=1 and MKL_NUM_THREADS=2: 2). MKL's count follows OpenMP's, as MKL takes it
    where its own is unset; one given for MKL alone is kept and OpenMP's stays the slot's."""
    slot = slots.Slot(index=0, cpus=(0, 1, 2, 3))
    assert {name: slot.environment({"OMP_NUM_THREADS": "1"})[name] for name in slots.THREAD_COUNTS} == {
        "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    assert slot.torch_threads({"OMP_NUM_THREADS": "1"}) == 1
    assert slot.torch_threads({"OMP_NUM_THREADS": "3", "MKL_NUM_THREADS": "2"}) == 2
    assert {name: slot.environment({"MKL_NUM_THREADS": "2"})[name] for name in slots.THREAD_COUNTS} == {
        "OMP_NUM_THREADS": "4", "MKL_NUM_THREADS": "2"}
    assert slot.torch_threads({}) == 4


def test_a_cgroup_cpu_quota_bounds_the_jobs() -> None:
    """`docker --cpus 4` on a 64-core host: the affinity mask lists 64, and 16 jobs were planned."""
    assert [len(s.cpus) for s in slots.plan(4, "cpu", list(range(64)), [], quota=4.0)] == [1, 1, 1, 1]  # not 16 each
    assert slots.plan(2, "cpu", list(range(64)), [], quota=4.0)[1].environment()["OMP_NUM_THREADS"] == "2"
    with pytest.raises(ConfigError, match=r"--jobs 16: this process may use 4 CPUs' worth .* give at most 4"):
        slots.plan(16, "cpu", list(range(64)), [], quota=4.0)
    def smt(cpu: int) -> set[int]:
        return {cpu % 32, cpu % 32 + 32}

    # `docker --cpus 4` on 32 cores of two threads each: a slot of 2 physical cores is 4 CPUs, and ran 4
    # threads on a quota's share of 2
    planned = slots.plan(2, "cpu", list(range(64)), [], siblings_of=smt, quota=4.0)
    assert [s.cpus for s in planned] == [(0, 1, 32, 33), (2, 3, 34, 35)] and [s.threads for s in planned] == [2, 2]
    assert planned[0].environment()["OMP_NUM_THREADS"] == "2" and planned[0].record()["threads"] == 2
    assert slots.plan(2, "cpu", list(range(64)), [], siblings_of=smt)[0].threads is None  # no quota: one a CPU


def test_the_run_hands_its_slots_the_order_their_gpus_are_numbered_in(monkeypatch: pytest.MonkeyPatch) -> None:
    from contextlib import ExitStack
    from types import SimpleNamespace

    from harness.run import executor_choice
    from harness.run.probe_answer import ProbeAnswer

    planned: list[dict[str, object]] = []
    monkeypatch.setattr(slots, "plan", lambda *args, **kwargs: planned.append(kwargs) or [])
    monkeypatch.setattr(slots, "usable_cores", lambda: [0, 1])
    monkeypatch.setattr(executor_choice, "LocalPool", lambda planned_slots, parents: planned_slots)
    request = SimpleNamespace(jobs=2, fresh_workers=True)
    probe = ProbeAnswer(device="cuda", cuda_devices=2)
    for environ, order in (({}, "PCI_BUS_ID"), ({"CUDA_VISIBLE_DEVICES": "1,0"}, None)):
        monkeypatch.setattr(executor_choice.os, "environ", environ)
        with ExitStack() as closing:
            executor_choice.local_executor(request, "cuda", probe, ["eager"], closing)  # type: ignore[arg-type]
        assert planned.pop()["gpu_order"] == order


def test_a_thread_count_above_the_slots_cores_is_refused_not_replaced() -> None:
    """`env: [OMP_NUM_THREADS=8]` with --jobs 2 on two cores ran with 1 and recorded 1, without a
    word, where FUSIONBENCH_CPUS and the others a slot sets are refused."""
    slots.check_thread_counts(4, ["OMP_NUM_THREADS=4", "MKL_NUM_THREADS=1", "KMP_BLOCKTIME=0"], "--jobs 2", {})
    with pytest.raises(ConfigError, match="--jobs 2: the scenario's env sets MKL_NUM_THREADS=8, more threads than a "
                                          "slot's 4 core"):
        slots.check_thread_counts(4, ["OMP_NUM_THREADS=2", "MKL_NUM_THREADS=8"], "--jobs 2", {})


def test_a_thread_count_passed_on_from_the_shell_is_held_to_the_slots_cores_too() -> None:
    """`env: [OMP_NUM_THREADS]` with OMP_NUM_THREADS=8 in the shell was replaced by the slot's count
    without a word: only a count written in the scenario was read."""
    slots.check_thread_counts(4, ["OMP_NUM_THREADS"], "--jobs 2", {"OMP_NUM_THREADS": "4"})
    slots.check_thread_counts(4, ["OMP_NUM_THREADS"], "--jobs 2", {})  # not set: nothing is passed
    with pytest.raises(ConfigError, match="--jobs 2: the scenario's env sets OMP_NUM_THREADS=8, more threads"):
        slots.check_thread_counts(4, ["OMP_NUM_THREADS"], "--jobs 2", {"OMP_NUM_THREADS": "8"})


def test_a_thread_count_of_digits_int_cannot_read_is_no_number() -> None:
    """`OMP_NUM_THREADS=²` (a digit to str.isdigit) ended the run with int()'s ValueError and a traceback."""
    assert slots.env_warnings(["OMP_NUM_THREADS"], {"OMP_NUM_THREADS": "²"}, 4) == [
        "env: OMP_NUM_THREADS=² is no number of threads: the libraries ignore it"]
    slots.check_thread_counts(1, ["MKL_NUM_THREADS=٣"], "--jobs 2", {})  # an Arabic-Indic 3: none to the libraries


@pytest.mark.slow
def test_a_run_with_jobs_refuses_more_threads_than_its_slots_have(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli.main import main

    # the machine's first two CPUs as the run's, whatever core the test worker is pinned to (no cell
    # runs: the refusal comes as the slots are cut)
    cpus = list(range(os.cpu_count() or 1))[:2]
    if len(cpu_topology.physical_cores(cpus)) < 2:
        pytest.skip(f"--jobs 2 needs two physical cores; CPUs {cpus} are one")
    monkeypatch.setattr(slots, "usable_cores", lambda: cpus)
    scenario = tmp_path / "s.yaml"
    scenario.write_text("models: [resnet18]\nbackends: [null]\nscenarios: [Offline]\nenv: [OMP_NUM_THREADS=4096]\n")
    cache = tmp_path / "new" / "cache"
    assert main(["run", str(scenario), "--jobs", "2", "--device", "cpu", "--out", str(tmp_path / "out"),
                 "--cache-dir", str(cache)]) == 2
    assert "--jobs 2: the scenario's env sets OMP_NUM_THREADS=4096, more threads than a slot's" in capsys.readouterr().err
    assert not any((tmp_path / "out").glob("*/bundle.json"))
    # the cache folder the run made goes with the noise probe's loop it built there (it stayed)
    assert not (tmp_path / "new").exists(), sorted(map(str, (tmp_path / "new").rglob("*")))


@pytest.mark.parametrize("options, said", [
    (["--jobs", "2"], "--jobs 2: the scenario's env sets OMP_NUM_THREADS=4096, more threads than a slot's"),
    (["--executor", "ray"], "--cpus-per-cell 1: the scenario's env sets OMP_NUM_THREADS=4096, more threads than a slot's 1"),
])
def test_a_dry_run_refuses_more_threads_than_a_cell_has(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str], options: list[str],
                                                         said: str) -> None:
    """`--dry-run` listed the cells and exited 0 where the run, once its probe answered, is refused."""
    from harness.cli.main import main
    from harness.run import plan
    from harness.run.probe_answer import ProbeAnswer

    cpus = list(range(os.cpu_count() or 1))[:2]
    if "--jobs" in options and len(cpu_topology.physical_cores(cpus)) < 2:
        pytest.skip(f"--jobs 2 needs two physical cores; CPUs {cpus} are one")
    monkeypatch.setattr(slots, "usable_cores", lambda: cpus)
    monkeypatch.setattr(plan, "run_probe", lambda *a, **k: ProbeAnswer(device="cpu"))
    scenario = tmp_path / "s.yaml"
    scenario.write_text("models: [resnet18]\nbackends: [null]\nscenarios: [Offline]\nenv: [OMP_NUM_THREADS=4096]\n")
    assert main(["run", str(scenario), "--dry-run", "--device", "cpu", "--out", str(tmp_path / "out"), *options]) == 2
    assert said in capsys.readouterr().err


def test_more_jobs_than_cores_is_refused_before_the_probe(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--jobs 3` on two cores was refused after the system probe (8 s), the output folder made."""
    from harness.cli.main import main

    jobs = len(cpu_topology.physical_cores(slots.usable_cores())) + 1
    scenario = tmp_path / "s.yaml"
    scenario.write_text("models: [resnet18]\nbackends: [null]\nscenarios: [Offline]\n")
    assert main(["run", str(scenario), "--jobs", str(jobs), "--device", "cpu", "--out", str(tmp_path / "out")]) == 2
    assert f"--jobs {jobs}: each cell needs a core of its own" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # refused before the folders and the probe


def test_what_the_env_asks_for_and_will_not_get_is_said() -> None:
    """`env: [MY_UNSET_VAR]` passed nothing, `OMP_NUM_THREADS=abc` was passed on for the libraries to
    ignore, and `OMP_NUM_THREADS=8` on 2 cores ran oversubscribed: none of it was said."""
    from harness.run.slots import env_warnings

    found = env_warnings(["MY_UNSET_VAR", "HOME", "OMP_NUM_THREADS=abc", "MKL_NUM_THREADS"], {"HOME": "/root",
                         "MKL_NUM_THREADS": "8"}, 2)
    assert found == ["env: MY_UNSET_VAR is not set in this shell: nothing is passed to the cells",
                     "env: OMP_NUM_THREADS=abc is no number of threads: the libraries ignore it",
                     "env: MKL_NUM_THREADS=8, more threads than the 2 core(s) the run may use: they share them, each "
                     "waiting for another at every parallel region"]
    assert env_warnings(["OMP_NUM_THREADS=2", "HOME"], {"HOME": "/root"}, 2) == []
    assert env_warnings(["OMP_NUM_THREADS=8"], {}, None) == [], "on Ray the cores are the cluster's nodes'"


def test_a_serial_run_under_a_cpu_quota_below_its_cpus_is_told_to_set_its_threads() -> None:
    """`docker --cpus 2` on a 64-core host, one cell at a time: torch ran 64 threads on 2 CPUs'
    worth, each parallel region waiting on throttled threads, and nothing was said (a `--jobs` slot
    sets its threads by the quota)."""
    from harness.run.slots import quota_warning

    found = quota_warning([], {}, 64, 2.0)
    assert found.startswith("this process's cgroup allows 2 CPUs' worth and 64 CPUs are usable")
    assert "OMP_NUM_THREADS=2, MKL_NUM_THREADS=2" in found
    assert quota_warning([], {}, 64, None) == "" and quota_warning([], {}, 2, 4.0) == ""
    assert quota_warning(["OMP_NUM_THREADS=2"], {}, 64, 2.5) == ""  # the scenario set it within the quota
    assert quota_warning(["OMP_NUM_THREADS"], {"OMP_NUM_THREADS": "1"}, 64, 2.0) == ""  # passed on from the shell
    assert quota_warning(["OMP_NUM_THREADS=8"], {}, 64, 2.0) != ""
    assert "OMP_NUM_THREADS=1," in quota_warning([], {}, 2, 0.5)  # never zero threads


@pytest.mark.slow
def test_a_run_under_a_cpu_quota_says_so_as_it_starts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from harness import cgroup_limits
    from harness.cli.main import main

    scenario = tmp_path / "s.yaml"
    scenario.write_text("models: [resnet18]\nbackends: [null]\nscenarios: [Offline]\n")
    monkeypatch.setattr(cgroup_limits, "cpu_quota", lambda: 0.5)
    monkeypatch.setattr(slots, "usable_cores", lambda: [0, 1])
    assert main(["run", str(scenario), "--dry-run", "--device", "cpu"]) == 0
    assert "this process's cgroup allows 0.5 CPUs' worth and 2 CPUs are usable" in " ".join(capsys.readouterr().out.split())


def test_the_core_locks_are_the_nodes_whatever_tmpdir_says(tmp_path: Path) -> None:
    """Two runs with different TMPDIRs (two users', a scheduler's per-job one) kept their core locks
    in two folders and claimed the same cores without seeing each other."""
    import subprocess
    import sys

    said = subprocess.run([sys.executable, "-c", "from harness.run import slots; print(slots.LOCK_DIR)"],
                          env={**os.environ, "TMPDIR": str(tmp_path)}, capture_output=True, text=True, check=True)
    assert said.stdout.strip() == "/tmp/fusionbench-cores"
