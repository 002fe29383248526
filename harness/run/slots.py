"""What each cell of a parallel run may use, so that no two timed cells share a device or a core.

A slot is a set of CPU cores and, on a GPU run, one GPU. `--jobs N` on one machine cuts the
usable physical cores (each with its SMT siblings) into N disjoint sets (and gives each of N jobs a GPU of its own on a GPU run);
a cell's worker binds itself to its slot's cores (`FUSIONBENCH_CPUS`, read before torch is
imported), sees only its slot's GPU (CUDA_VISIBLE_DEVICES) and runs as many OpenMP/MKL threads as
its slot has cores.
A run with one job has no slot: the worker gets the machine as a plain run always did.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from harness import cgroup_limits
from harness.cpu_topology import physical_cores, siblings
from harness.errors import ConfigError
from harness.reporting.run_facts import share


@dataclass(frozen=True)
class Slot:
    index: int
    cpus: tuple[int, ...] = ()
    gpu: str | None = None  # an index or UUID as CUDA_VISIBLE_DEVICES takes it
    gpu_order: str | None = None  # CUDA_DEVICE_ORDER that `gpu` is an index in; None: the worker's
    threads: int | None = None  # the OpenMP/MKL threads it runs where fewer than its CPUs (a quota's share); None: one a CPU

    def environment(self, given: Mapping[str, str] | None = None) -> dict[str, str]:
        """What the slot sets in its cell's environment, over `given` (the worker's otherwise): a
        thread count `given` holds below the slot's cores is kept (fewer threads, as asked), and an
        OMP_NUM_THREADS given without MKL_NUM_THREADS is MKL's too, as MKL takes it outside a slot."""
        env: dict[str, str] = {}
        if self.cpus:
            cores = self.threads or len(self.cpus)
            omp, mkl = (_count((given or {}).get(name)) for name in THREAD_COUNTS)
            # torch sizes its pool by MKL_NUM_THREADS over OMP_NUM_THREADS: the slot's cores for MKL beside
            # `env: [OMP_NUM_THREADS=1]` ran torch on the slot's cores, where a run of one job ran it on 1
            env.update(OMP_NUM_THREADS=str(min(cores, omp or cores)), MKL_NUM_THREADS=str(min(cores, mkl or omp or cores)))
            env.update(FUSIONBENCH_CPUS=",".join(map(str, self.cpus)),
                       # TVM's thread pool pins its threads to cores of the whole machine (and widened the
                       # main thread's mask): unpinned, they keep the slot's; ONNX Runtime sizes its pool by
                       # the slot (backends/onnxruntime.py)
                       TVM_BIND_THREADS="0")
        if self.gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = self.gpu
            if self.gpu_order is not None:
                env["CUDA_DEVICE_ORDER"] = self.gpu_order
        return env

    def torch_threads(self, given: Mapping[str, str] | None = None) -> int | None:
        """The threads torch runs in the slot, `given` as `environment` takes it: the MKL_NUM_THREADS
        count it sets, which torch sizes its pool by over OMP_NUM_THREADS's; None for a slot of no
        cores (a GPU alone)."""
        return _count(self.environment(given).get("MKL_NUM_THREADS"))

    def record(self) -> dict[str, object]:
        return {"index": self.index, "cpus": list(self.cpus), "gpu": self.gpu, "gpu_order": self.gpu_order,
                "threads": self.threads}


def usable_cores() -> list[int]:
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))


#: Thread counts a slot sets to its cores, or keeps where the worker's environment asks for fewer
#: (`Slot.environment` reads them in this order).
THREAD_COUNTS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
#: What a slot sets in its cell's environment whatever the scenario's `env:` said: refused there with --jobs.
SLOT_VARIABLES = ("FUSIONBENCH_CPUS", "TVM_BIND_THREADS", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")
#: Those of them a slot sets on a GPU run only.
GPU_VARIABLES = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")


def shares_offered(cut: Sequence[Slot], with_quota: bool) -> set[str]:
    """The shares of the machine a local run's cells get, as a cell's record says one
    (`run_facts.machine_share`): each `--jobs` slot's cores (`cut`; equal in physical cores, not
    always in logical CPUs), or, one cell at a time, the whole machine, or the CPUs this process is
    bound to where they are fewer, under its cgroup's CPU quota where that is less and `with_quota`
    (its cells' workers inherit both)."""
    if cut:
        return {share(len(slot.cpus)) for slot in cut}
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {share(None, usable, os.cpu_count(), cgroup_limits.cpu_quota() if with_quota else None)}


def _count(text: str | None) -> int | None:
    # ASCII digits alone: str.isdigit takes "²" (which int() refuses) and "٣", which the libraries ignore
    return int(text) if text is not None and text.strip().isascii() and text.strip().isdigit() and int(text) > 0 else None


def check_jobs(jobs: int, env: Sequence[str] = (), device: str = "auto") -> None:
    """ConfigError unless `jobs` is 1 or more, and, with more than one, unless the scenario's `env:`
    leaves alone what a slot sets (the slot's value silently replaced it; CUDA_VISIBLE_DEVICES on a
    GPU run only): what needs no look at the machine."""
    if jobs < 1:
        raise ConfigError(f"--jobs {jobs}: give 1 or more")
    taken = [name for name in (item.partition("=")[0] for item in env)
             if name in SLOT_VARIABLES and not (name in GPU_VARIABLES and device == "cpu")]
    if jobs > 1 and taken:
        raise ConfigError(f"--jobs {jobs}: the scenario's env sets {', '.join(taken)}, which each job's slot sets "
                          "for its own cores and GPU; leave it out of env:, or run with --jobs 1")


def check_cores(jobs: int, cores: list[int], physical: list[tuple[int, ...]]) -> None:
    """ConfigError where `jobs` cells cannot each have a physical core of their own: asked before the
    probe (it took 8 s to refuse `--jobs 3` on two cores), and again as the slots are cut."""
    if jobs > len(physical):
        raise ConfigError(f"--jobs {jobs}: each cell needs a core of its own and {len(physical)} "
                          f"{'is' if len(physical) == 1 else 'are'} usable here"
                          + (f" ({len(cores)} logical CPUs)" if len(cores) != len(physical) else ""))


def check_jobs_fit_here(jobs: int) -> None:
    """`check_cores` for this machine's usable cores: what a local run asks before its probe."""
    if jobs > 1:
        cores = usable_cores()
        check_cores(jobs, cores, physical_cores(cores))


def _thread_counts(env: Sequence[str], environ: Mapping[str, str]) -> list[tuple[str, str, int | None]]:
    """Each OpenMP/MKL thread count the scenario's `env:` asks for: its name, its value as `NAME=VALUE`
    gives it or, for a NAME alone, as this shell sets it (none where it sets none: nothing is passed),
    and the count it makes (None: no number, which the libraries ignore)."""
    counts = []
    for item in env:
        name, given, value = item.partition("=")
        if name in THREAD_COUNTS and (given or name in environ):
            shown = value if given else environ[name]
            counts.append((name, shown, _count(shown)))
    return counts


def threads_given(env: Sequence[str], environ: Mapping[str, str]) -> dict[str, str]:
    """The OpenMP/MKL thread counts the scenario's `env:` gives a cell's worker, `NAME=VALUE` or a
    NAME passed on from `environ`, as `Slot.environment` takes them."""
    return {name: shown for name, shown, _ in _thread_counts(env, environ)}


def check_thread_counts(cores: int, env: Sequence[str], option: str, environ: Mapping[str, str]) -> None:
    """ConfigError where the scenario's `env:` asks for more OpenMP/MKL threads than a slot of
    `cores` cores runs, as `NAME=VALUE` or a NAME passed on from `environ`, this shell: the slot's
    count replaced it without a word (FUSIONBENCH_CPUS and the others a slot sets are refused for
    that in `check_jobs`)."""
    for name, asked in counts_over(cores, env, environ)[:1]:
        raise ConfigError(f"{option}: the scenario's env sets {name}={asked}, more threads than a slot's {cores} "
                          f"core(s) runs; give at most {cores} (fewer are kept), or give each cell more cores")


def counts_over(cores: int, env: Sequence[str], environ: Mapping[str, str]) -> list[tuple[str, int]]:
    """Each OpenMP/MKL thread count the scenario's `env:` asks for above `cores`, with its name, as
    `check_thread_counts` reads them."""
    return [(name, asked) for name, _, asked in _thread_counts(env, environ) if asked is not None and asked > cores]


def env_warnings(env: Sequence[str], environ: Mapping[str, str], cores: int | None) -> list[str]:
    """What the scenario's `env:` asks for that a cell will not get, said before the run (it was
    silent): a NAME to pass on that this shell does not set (nothing is passed), a thread count that
    is no number (the libraries ignore it), or one above the `cores` the run may use (threads then
    share cores, each waiting for another at every parallel region; None: the cells run elsewhere,
    on a Ray cluster's nodes, whose cores this machine cannot count)."""
    found = [f"env: {name} is not set in this shell: nothing is passed to the cells"
             for name, given, _ in (item.partition("=") for item in env) if not given and name not in environ]
    for name, value, asked in _thread_counts(env, environ):
        if asked is None:
            found.append(f"env: {name}={value} is no number of threads: the libraries ignore it")
        elif cores is not None and asked > cores:
            found.append(f"env: {name}={asked}, more threads than the {cores} core(s) the run may use: they share "
                         "them, each waiting for another at every parallel region")
    return found


def quota_warning(env: Sequence[str], environ: Mapping[str, str], usable: int, quota: float | None) -> str:
    """What a run one cell at a time says where its cgroup's CPU `quota` (`docker --cpus 2` on a
    64-core host) is below the `usable` CPUs and the scenario's `env:` sets no OpenMP thread count
    within it: each library then runs a thread per usable CPU, which the quota throttles; a `--jobs`
    slot sets its threads by the quota itself. "" where there is nothing to say."""
    if quota is None or quota >= usable:
        return ""
    within = max(int(quota), 1)
    if any(name == "OMP_NUM_THREADS" and asked is not None and asked <= within
           for name, _, asked in _thread_counts(env, environ)):
        return ""
    return (f"this process's cgroup allows {quota:g} CPUs' worth and {usable} CPUs are usable: a cell's libraries "
            f"run a thread per usable CPU, and the quota throttles them (each parallel region waits for the "
            f"slowest); set env: [OMP_NUM_THREADS={within}, MKL_NUM_THREADS={within}] in the scenario, or bind "
            f"the run to {within} core(s) (taskset)")


class QuotaBelowJobs(ConfigError):
    """`plan`'s refusal of `jobs` cells at once under a CPU quota of fewer CPUs' worth; `why` says the
    quota alone, for a caller that says itself what to do (a rerun, which takes no `--jobs`)."""

    def __init__(self, jobs: int, quota: float, listed: int) -> None:
        self.why = f"this process may use {quota:g} CPUs' worth (its cgroup's CPU quota)"
        super().__init__(f"--jobs {jobs}: {self.why}, though {listed} are listed; give at most {max(int(quota), 1)}")


def plan(jobs: int, device: str, cores: list[int], gpus: list[str],
         siblings_of: Callable[[int], set[int]] = siblings, quota: float | None = None,
         gpu_order: str | None = None) -> list[Slot]:
    """`jobs` disjoint slots of the machine, cut by physical core (two slots never share one through
    its SMT siblings: Linux numbers a core's second thread apart from its first, so a cut of the
    sorted CPUs put one thread of every core in each slot); a clear error where it has too few
    physical cores or GPUs. `gpus` are indices in `gpu_order` (CUDA_DEVICE_ORDER; None: the
    worker's own)."""
    check_jobs(jobs)
    if device == "cuda" and jobs > len(gpus):
        raise ConfigError(f"--jobs {jobs}: a GPU cell takes a GPU of its own and this machine has {len(gpus)}")
    physical = physical_cores(cores, siblings_of)
    if quota is not None and jobs > quota:
        raise QuotaBelowJobs(jobs, quota, len(cores))
    check_cores(jobs, cores, physical)
    share = len(physical) // jobs
    threads = None
    if quota is not None:  # as many cores as the quota's share: more threads than that only wait for it
        threads = max(int(quota // jobs), 1)  # and as many threads: a core's SMT siblings are CPUs the quota counts
        share = min(share, threads)
    slot_cpus = [tuple(sorted(cpu for group in physical[k * share:(k + 1) * share] for cpu in group)) for k in range(jobs)]
    return [Slot(index=k, cpus=cpus, gpu=gpus[k] if device == "cuda" else None,
                 gpu_order=gpu_order if device == "cuda" else None,
                 threads=threads if threads is not None and threads < len(cpus) else None)
            for k, cpus in enumerate(slot_cpus)]


#: The node's core locks: always /tmp's, not TMPDIR's, so that runs with different TMPDIRs (two
#: users', a job scheduler's per-job one) claim the same node's cores against each other.
LOCK_DIR = Path("/tmp/fusionbench-cores")
CLAIM_POLL_S = 0.2


def _shared_folder(lock_dir: Path) -> None:
    """The lock folder, made open to every user as /tmp is (sticky): the claims of one user's cells
    and another's on one node must see each other, and a root run's folder (0755 by its umask)
    refused every later user's lock file."""
    if lock_dir.is_dir():
        return
    try:  # made apart and renamed into place open to all: no user finds it half made
        lock_dir.parent.mkdir(parents=True, exist_ok=True)
        making = Path(tempfile.mkdtemp(prefix=f".{lock_dir.name}-", dir=lock_dir.parent))
        os.chmod(making, 0o1777)  # mkdtemp's 0700
    except OSError as exc:
        raise ConfigError(f"the cores' lock folder {lock_dir} cannot be made: {exc.strerror}") from exc
    try:
        making.rename(lock_dir)
    except OSError as exc:  # another claim made it first (it holds a lock file by now), or it cannot be
        making.rmdir()
        if not lock_dir.is_dir():
            raise ConfigError(f"the cores' lock folder {lock_dir} cannot be made: {exc.strerror}") from exc


def _lock_file(path: Path) -> int:
    """A file to flock for one core, opened read-only (flock needs no more), so a file another user
    made is usable too; a clear error where the folder is not open to this user."""
    try:
        while True:
            try:  # an existing file without O_CREAT: fs.protected_regular refuses O_CREAT on another user's file
                return os.open(path, os.O_RDONLY)  # in a sticky folder it does not own, whoever opens it
            except FileNotFoundError:
                pass
            try:
                fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                continue  # another claim made it first
            os.fchmod(fd, 0o644)  # readable by every user whatever this one's umask (027, 077)
            return fd
    except OSError as exc:
        raise ConfigError(f"the core lock {path} cannot be opened: {exc.strerror}; the folder or the file was made by "
                          "another user before they were made open to all (an older harness, a strict umask): "
                          f"`chmod 1777 {path.parent} && chmod 644 {path.parent}/*` as their owner, or root, once no "
                          "run uses them") from exc


@contextmanager
def claimed(count: int, lock_dir: Path = LOCK_DIR, siblings_of: Callable[[int], set[int]] = siblings) -> Iterator[Slot]:
    """`count` of this machine's usable physical cores no other cell holds, for as long as the block
    runs, as a slot of the first CPU of each: one lock file per physical core, named by that CPU,
    held with flock (released by the kernel if the holder dies). On a Ray node the scheduler
    already reserved the cores' worth (`num_cpus`, which counts logical CPUs); this says which
    ones. A claimed core's SMT siblings stay idle, held by the lock: a cell that would share a core
    with another through them waits instead, as `--jobs` slots never share one, and the cell runs
    `count` threads on `count` CPUs, as Ray reserved."""
    physical = physical_cores(usable_cores(), siblings_of)
    logical = sum(len(group) for group in physical)
    if count > logical:
        raise ConfigError(f"a cell asks for {count} cores and {logical} are usable on this node")
    cores = min(count, len(physical))  # more CPUs than physical cores: every core, and siblings for the rest
    _shared_folder(lock_dir)
    while True:
        held: list[tuple[tuple[int, ...], int]] = []
        for group in physical:  # the lock named by the core's first CPU, usable here or not: one name a core
            fd = _lock_file(lock_dir / f"core-{min(siblings_of(group[0]))}.lock")
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue
            held.append((group, fd))
            if len(held) == cores:
                break
        if len(held) == cores:
            # one CPU of each held core, then their siblings, until `count`
            ranked = sorted((rank, cpu) for group, _ in held for rank, cpu in enumerate(group))
            try:
                yield Slot(index=held[0][0][0], cpus=tuple(sorted(cpu for _, cpu in ranked[:count])))
            finally:
                for _, fd in held:
                    os.close(fd)
            return
        for _, fd in held:  # not enough free now: let go of all, so no two claims wait on each other
            os.close(fd)
        time.sleep(CLAIM_POLL_S)
