"""Shared test setup.

- The example out-of-tree plugin (examples/fusionbench-torchscript) is pip-installed before
  collection into a private site directory put on sys.path and PYTHONPATH (so worker
  subprocesses see it too), exactly as an outside developer's package would be found: through
  its entry point. The project's own .venv is left as it was. It is installed once a session:
  under pytest-xdist by the controller, whose workers inherit its PYTHONPATH (tests/pip_sites.py).
- GPU tests are skipped with the reason where no CUDA device is visible; the whole hostile-bundle
  corpus (marked `corpus`) runs only when `-m corpus` asks for it.
- `--quick` is the inner loop's tier: the unit and contract tests that need no real run. It leaves
  out tests/integration, tests/backends and tests/gpu, and every test marked `slow` (one that
  starts the CLI, a run, the system probe, a preloaded parent, a worker or a compile of a real
  model: each imports torch at least once), so that it ends in under 90 seconds on 2 cores;
  `./run.sh test` without it runs everything.
- Backends' artifact caches go to a temporary directory, not the user's ~/.cache; the container
  image tests keep the machine's image build cache (FUSIONBENCH_IMAGE_CACHE: base layer, wheelhouse).
- Each pytest-xdist worker runs on a share of the machine's cores (one core on 2 cores, which two
  workers share: `pytest_xdist_auto_num_workers` below), and so does everything it starts
  (affinity is inherited; torch, OpenMP and a cell's worker size their thread pools by it). Two
  workers that each ran two threads on the same two cores waited on each other at every parallel
  operator: the suite models' run took 76 s alone and 290 s beside the other worker; two
  single-threaded workers on one core take turns instead. A module marked `whole_machine`
  (parallel runs on cores of their own, Ray with 2 CPUs, a probe pinned to each core in turn) gets
  every core back for its duration.
- Every run's machine-noise probe takes 4 x 0.1 s instead of 4 x 1.5 s (FUSIONBENCH_NOISE_PROBE_S):
  about 6 s less per `fusionbench run`, dozens of which the integration tests start; the probe's
  own tests call it with their own durations. Each pass still times 5 or 6 chunks of ~20 ms, and
  the pinned pass at least 3 a core; at 0.2 s the probe took 0.83 to 0.94 CPU-s, at 0.1 s 0.46 to
  0.52 (measure() in one process, the cross-core loop's thread included, under contention).
- Likewise the roofline's peak probe copies 32 MiB instead of 256 (FUSIONBENCH_PEAK_COPY_MIB): a
  probe of eager took 2.61 to 3.39 CPU-s with 256 and 2.33 to 2.42 with 32, most of the difference
  the system time of faulting in the two 256 MiB tensors (the probe process alone, pinned to one
  core, alternated, under contention). The tests read the peaks only as positive rates.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import cpu_topology
from harness.container import image_build
from harness.run import slots
from harness.run.preflight import executable_mapping_refused, noexec_mount
from tests import pip_sites

REPO = Path(__file__).resolve().parent.parent
PLUGIN = REPO / "examples" / "fusionbench-torchscript"
#: Where the suite's temporary files go where TMPDIR's folder is mounted noexec
#: (`_temporary_folder_with_exec`): the checkout's file system runs its .venv, so it is mounted with exec.
EXEC_TEMPORARY = REPO / ".test-tmp"


def _temporary_folder_with_exec() -> Path | None:
    """A hardened host mounts /tmp noexec, where the suite's stand-in tools (ncu, nvidia-smi, pip)
    cannot be run, the libraries it builds cannot be loaded and the harness refuses Inductor and
    TVM runs (harness/run/preflight.py): ten tests of the quick tier failed there. The suite's
    temporary files, tmp_path included, then go to `EXEC_TEMPORARY` (TMPDIR, which its xdist
    workers and every process it starts inherit). Returns the noexec folder left, or None."""
    default = Path(tempfile.gettempdir())
    if noexec_mount(default) is None and executable_mapping_refused(default) is None:  # a policy (SELinux) too
        return None
    EXEC_TEMPORARY.mkdir(exist_ok=True)
    os.environ["TMPDIR"] = str(EXEC_TEMPORARY)
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again
    return default


NOEXEC_TEMPORARY = _temporary_folder_with_exec()
_session_dir = Path(tempfile.mkdtemp(prefix="fusionbench-tests-"))


#: Every core this session may use, before an xdist worker takes its share.
WHOLE_MACHINE = frozenset(os.sched_getaffinity(0)) if hasattr(os, "sched_setaffinity") else frozenset()


def _share_of_the_cores() -> frozenset[int] | None:
    """This xdist worker's own cores: the machine cut into as many slots as there are workers, or
    as it has physical cores where there are more workers (as `--jobs` cuts it:
    harness/run/slots.py), `gwK` taking slot K modulo their number; or None: not an xdist worker, or
    a single one, or a machine of one core."""
    worker, count = os.environ.get("PYTEST_XDIST_WORKER"), int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    cores = sorted(WHOLE_MACHINE)
    shares = min(count, len(cpu_topology.physical_cores(cores)))
    if worker is None or shares < 2:
        return None
    return frozenset(slots.plan(shares, "cpu", cores, [])[int(worker.removeprefix("gw")) % shares].cpus)


SHARE = _share_of_the_cores()


def pytest_configure(config: pytest.Config) -> None:
    if SHARE is not None:  # before anything here imports torch: its thread pool is sized by it
        os.sched_setaffinity(0, SHARE)
    shared = pip_sites.shared_dir()
    if shared is None:  # the session's first process (a plain run, or xdist's controller): install
        os.environ[pip_sites.SHARED_VARIABLE] = str(_session_dir)
        site, error = pip_sites.install(PLUGIN, "plugin-site", _session_dir)
        if error:
            raise pytest.UsageError(f"could not pip-install the example plugin {PLUGIN}:\n{error}")
        os.environ.update(PYTHONPATH=pip_sites.with_site(dict(os.environ), site)["PYTHONPATH"])
    else:  # an xdist worker: its PYTHONPATH, inherited, names the controller's install
        site = shared / "plugin-site"
    if str(site) not in sys.path:
        sys.path.insert(0, str(site))
    # The image tests build with the machine's own build cache (its wheelhouse is GBs of hash-checked
    # inputs); every other cache is the session's.
    os.environ.setdefault(image_build.IMAGE_CACHE_VARIABLE, str(image_build.default_build_cache()))
    os.environ["XDG_CACHE_HOME"] = str(_session_dir / "cache")
    os.environ.setdefault("FUSIONBENCH_NOISE_PROBE_S", "0.1")
    os.environ.setdefault("FUSIONBENCH_PEAK_COPY_MIB", "32")


def pytest_report_header(config: pytest.Config) -> str | None:
    if NOEXEC_TEMPORARY is None:
        return None
    return f"temporary folder: {EXEC_TEMPORARY} ({NOEXEC_TEMPORARY}, TMPDIR's, cannot run what is built there)"


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(_session_dir, ignore_errors=True)


def _cuda_reason() -> str | None:
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA device visible to torch on this machine"
    return None


#: pytest-xdist's workers (`-n auto`, pyproject.toml): the whole suite's tests wait a third of their time
#: (a helper's start, a time limit running out, Ray, a pip install): four workers on 2 cores, two
#: to a core, ran it in 13.7 minutes where two took 22.2, the idle CPU time from 30% to 8%
#: (docs/results/cpu-2core-amd-2026-12-02-suite-time.md). The quick tier hardly waits, and four
#: workers' starts cost it more than they give back.
WORKERS, QUICK_WORKERS = 4, 2


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # the count asked for there: xdist's own hook reads it
    return QUICK_WORKERS if config.getoption("--quick") else WORKERS


#: The folders the quick tier leaves out whole: every test there runs the CLI, a backend or a GPU.
NOT_QUICK = ("integration", "backends", "gpu")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--quick", action="store_true",
                     help="the quick tier: unit and contract tests that need no real run (leaves out tests/integration, "
                     "tests/backends, tests/gpu and tests marked slow)")


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Under `--quick`, the folders it leaves out whole are not even imported: their modules import
    torch, torchvision and TVM at collection, which cost each of its workers seconds to deselect."""
    if config.getoption("--quick") and collection_path.parent == REPO / "tests" and collection_path.name in NOT_QUICK:
        return True
    return None


def _folder(item: pytest.Item) -> str:
    """The folder of tests/ the item's module is in (unit, contract, integration, ...)."""
    return Path(str(item.fspath)).relative_to(REPO / "tests").parts[0]


def _quick(item: pytest.Item) -> bool:
    return _folder(item) not in NOT_QUICK and "slow" not in item.keywords


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--quick"):
        left_out = [item for item in items if not _quick(item)]
        if left_out:
            config.hook.pytest_deselected(items=left_out)
            items[:] = [item for item in items if _quick(item)]
    if "corpus" not in (config.option.markexpr or ""):
        for item in items:
            if "corpus" in item.keywords:
                item.add_marker(pytest.mark.skip(reason="the whole hostile-bundle corpus takes hours: run it with -m corpus"))
    _longest_first(items)
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if not gpu_items:
        return
    reason = _cuda_reason()
    if reason:
        for item in gpu_items:
            item.add_marker(pytest.mark.skip(reason=reason))


def _longest_first(items: list[pytest.Item]) -> None:
    """Order the modules so that the long ones start first: tests/integration, tests/backends and
    tests/gpu, then the modules that hold a `slow` test, then the rest; each module's own order, and
    the folders' order within a rank, kept. pytest-xdist (`--dist loadscope --no-loadscope-reorder`,
    pyproject.toml) hands the workers whole modules in this order, so the many short unit
    modules fill in at the end instead of a long end-to-end module starting last and running alone."""
    slow_modules = {item.fspath for item in items if "slow" in item.keywords}

    def rank(item: pytest.Item) -> int:
        if _folder(item) in NOT_QUICK:
            return 0
        return 1 if item.fspath in slow_modules else 2

    items.sort(key=rank)


@pytest.fixture(autouse=True, scope="module")
def _whole_machine_where_marked(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every core back for a module marked `whole_machine` (see the module's docstring), its
    worker's share again after it."""
    if SHARE is None or request.node.get_closest_marker("whole_machine") is None:
        yield
        return
    os.sched_setaffinity(0, WHOLE_MACHINE)
    try:
        yield
    finally:
        os.sched_setaffinity(0, SHARE)


@pytest.fixture
def repo() -> Path:
    return REPO


@pytest.fixture
def whole_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process read as bound to every CPU of the machine, as the golden bundle's cells were: a
    resume of it is held to that share, and a pytest-xdist worker runs on a part of it (`SHARE`)."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(os.cpu_count() or 1)))
