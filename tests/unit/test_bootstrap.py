"""run.sh's bootstrap: the GPU stack on a host with a GPU, the plain stack elsewhere, and a run
without a virtual environment (a machine without network whose Python has the packages)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import venv
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from harness import registry
from harness.scenario import loading
from tests.another_user import AS_ROOT, NOBODY, root_folder_every_user_may_enter

REPO = Path(__file__).resolve().parents[2]


#: run.sh's own settings: each test sets those it is about. A suite run as `FUSIONBENCH_NO_VENV=1
#: ./run.sh test` (a machine whose Python has torch) failed the venv's tests, which inherited it.
_SETTINGS = ("FUSIONBENCH_NO_VENV", "FUSIONBENCH_VENV", "FUSIONBENCH_GPU_STACK", "PYTHON")


def run_sh(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    inherited = {name: value for name, value in os.environ.items() if name not in _SETTINGS}
    return subprocess.run(["bash", str(REPO / "run.sh"), *args], capture_output=True, text=True, timeout=120,
                          env={**inherited, **(env or {})}, cwd=REPO)


def words(plan: str) -> list[str]:
    """The plan's commands as the shell would read them (run.sh quotes a path with a space)."""
    return [word for line in plan.splitlines() if not line.startswith("#") for word in shlex.split(line)]


def fake_nvidia_smi(tmp_path: Path, listing: str) -> str:
    (tmp_path / "nvidia-smi").write_text(f"#!/bin/sh\nprintf '{listing}'\n")
    (tmp_path / "nvidia-smi").chmod(0o755)
    return f"{tmp_path}:{os.environ['PATH']}"


def test_a_gpu_host_gets_onnxruntime_gpu_and_tensorrt_from_their_lock(tmp_path: Path) -> None:
    path = fake_nvidia_smi(tmp_path, "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)\\n")
    done = run_sh("--install-plan", env={"PATH": path, "FUSIONBENCH_VENV": str(tmp_path / "venv")})
    assert done.returncode == 0, done.stderr
    plan = done.stdout
    assert plan.startswith("# GPU stack: yes")
    assert "requirements-gpu.lock" in plan and "--extra-index-url https://pypi.nvidia.com" in plan
    assert str(REPO / "requirements.lock") not in words(plan), "the CPU onnxruntime must not be installed beside the GPU one"


def test_a_host_without_a_gpu_gets_the_plain_lock(tmp_path: Path) -> None:
    path = fake_nvidia_smi(tmp_path, "")  # nvidia-smi present, no GPU listed
    done = run_sh("--install-plan", env={"PATH": path, "FUSIONBENCH_VENV": str(tmp_path / "venv")})
    assert done.stdout.startswith("# GPU stack: no")
    assert str(REPO / "requirements.lock") in words(done.stdout) and "requirements-gpu.lock" not in done.stdout
    forced = run_sh("--install-plan", env={"PATH": path, "FUSIONBENCH_GPU_STACK": "on"})
    assert forced.stdout.startswith("# GPU stack: yes")


def test_the_gpu_lock_pins_cuda13_builds_that_match_the_container() -> None:
    pins = dict(line.split("==") for line in (REPO / "requirements-gpu.lock").read_text().splitlines()
                if line and not line.startswith("#"))
    assert set(pins) == {"onnxruntime-gpu", "tensorrt-cu13", "tensorrt-cu13-bindings", "tensorrt-cu13-libs"}
    native = dict(line.split("==") for line in (REPO / "requirements.lock").read_text().splitlines()
                  if line and not line.startswith("#"))
    assert pins["onnxruntime-gpu"] == native["onnxruntime"], "the GPU build must be the CPU build's version"
    assert len({pins[name] for name in pins if name.startswith("tensorrt")}) == 1
    dockerfile = (REPO / "containers" / "Dockerfile").read_text()
    assert f"TENSORRT_LIBS_VERSION={pins['tensorrt-cu13-libs']}" in dockerfile


def test_without_a_venv_missing_packages_are_named(tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    venv.create(bare, with_pip=False)
    # PYTHONPATH emptied: on a machine that adds the packages by it, the bare Python would find them
    done = run_sh("backends", env={"FUSIONBENCH_NO_VENV": "1", "PYTHON": str(bare / "bin" / "python"), "PYTHONPATH": ""})
    assert done.returncode == 2
    # named as pip installs them, as the wheels folder's list does
    assert "lacks: torch torchvision mlcommons-loadgen pydantic PyYAML" in done.stderr
    assert "--no-index --find-links WHEEL_DIR -r WHEEL_DIR/requirements.txt" in done.stderr
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"  # venv.create made the bare one of this Python
    assert f"./run.sh wheels WHEEL_DIR --python-version {version}" in done.stderr


def test_without_a_venv_a_python_that_is_not_there_is_named_once() -> None:
    done = run_sh("models", env={"FUSIONBENCH_NO_VENV": "1", "PYTHON": "/nonexistent/python3"})
    assert done.returncode == 2
    assert done.stderr == ("fusionbench: FUSIONBENCH_NO_VENV=1 runs $PYTHON as it is, and there is no "
                           "/nonexistent/python3 (PYTHON names the Python to use)\n")


def test_a_gpu_stack_setting_that_is_not_one_is_refused_in_one_line() -> None:
    done = run_sh("models", env={"FUSIONBENCH_GPU_STACK": "bogus"})
    assert (done.returncode, done.stderr) == (2, "fusionbench: FUSIONBENCH_GPU_STACK must be on, off or auto\n")


@pytest.mark.parametrize("value", ["true", "yes", "2"])
def test_a_no_venv_setting_that_is_not_1_or_0_is_refused_before_any_install(tmp_path: Path, value: str) -> None:
    """`FUSIONBENCH_NO_VENV=true` was read as 0: the virtual environment was made, torch downloaded."""
    # a PYTHON that makes no venv: where the setting were read as 0, the bootstrap stops at once, downloading nothing
    done = run_sh("models", env={"FUSIONBENCH_NO_VENV": value, "FUSIONBENCH_VENV": str(tmp_path / "venv"),
                                 "PYTHON": "/nonexistent/python3"})
    assert (done.returncode, done.stderr) == (2, "fusionbench: FUSIONBENCH_NO_VENV must be 1 (run $PYTHON as it is) "
                                                 "or 0 (the virtual environment)\n")
    assert not (tmp_path / "venv").exists()


@pytest.mark.parametrize("value", ["0", ""])
def test_a_no_venv_setting_of_0_or_nothing_is_the_virtual_environment(tmp_path: Path, value: str) -> None:
    done = run_sh("--install-plan", env={"FUSIONBENCH_NO_VENV": value, "FUSIONBENCH_VENV": str(tmp_path / "venv")})
    assert done.returncode == 0, done.stderr
    plan = words(done.stdout)
    assert plan[plan.index("venv") - 1:plan.index("venv") + 2] == ["-m", "venv", str(tmp_path / "venv")], done.stdout


def test_the_install_plan_refuses_an_argument_it_would_ignore(tmp_path: Path) -> None:
    done = run_sh("--install-plan", "--bogus", env={"FUSIONBENCH_VENV": str(tmp_path / "venv")})
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "fusionbench: --install-plan takes no other argument (given: --bogus)\n"


def test_the_install_plan_without_a_venv_says_it_installs_nothing_and_what_the_python_lacks(tmp_path: Path) -> None:
    """`FUSIONBENCH_NO_VENV=1 ./run.sh --install-plan` printed a plan to make a venv, which that mode never makes."""
    ready = run_sh("--install-plan", env={"FUSIONBENCH_NO_VENV": "1", "PYTHON": sys.executable})
    assert ready.returncode == 0, ready.stderr
    assert ready.stdout == (f"# FUSIONBENCH_NO_VENV=1: ./run.sh installs nothing; it runs {sys.executable} as it is, "
                            f"with this checkout on PYTHONPATH\n# {sys.executable} has every package the harness imports\n")
    bare = tmp_path / "bare"
    venv.create(bare, with_pip=False)
    lacking = run_sh("--install-plan", env={"FUSIONBENCH_NO_VENV": "1", "PYTHON": str(bare / "bin" / "python"),
                                            "PYTHONPATH": ""})
    assert lacking.returncode == 0 and "lacks: torch torchvision mlcommons-loadgen pydantic PyYAML" in lacking.stdout
    absent = run_sh("--install-plan", env={"FUSIONBENCH_NO_VENV": "1", "PYTHON": "/nonexistent/python3"})
    assert "# there is no /nonexistent/python3 (PYTHON names the Python to use)" in absent.stdout


def test_without_a_venv_the_current_python_runs_the_checkout() -> None:
    done = run_sh("models", "--family", "resnet", env={"FUSIONBENCH_NO_VENV": "1", "PYTHON": sys.executable})
    assert done.returncode == 0, done.stderr
    assert "resnet18" in done.stdout


def test_an_uninstalled_checkout_finds_its_backends_in_pyproject(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "entry_points", lambda group: [])
    monkeypatch.setattr(registry, "_installed", lambda: False)
    assert {"eager", "inductor", "onnxruntime", "tvm", "tensorrt", "null"} <= set(registry.names())
    assert registry.load("eager").name == "eager"
    monkeypatch.setattr(registry, "_installed", lambda: True)  # installed: metadata is the only source
    assert registry.names() == []


def test_pyproject_entry_points_are_read_as_declared(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\nname = "x"\n[project.entry-points."fusionbench.backends"]\nmine = "pkg.mod:Mine"\n')
    assert registry.source_entry_points(pyproject) == [EntryPoint("mine", "pkg.mod:Mine", registry.GROUP)]
    assert registry.source_entry_points(tmp_path / "missing.toml") == []


def test_two_packages_registering_one_backend_are_named_as_pip_knows_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The refusal gave the two classes' module paths ('fb_dupe.backend:Other'), not the packages to
    uninstall."""
    for package, version, target in (("fb-first", "1.0", "fb_first.backend:First"), ("fb-dupe", "0.2", "fb_dupe.backend:Other")):
        info = tmp_path / f"{package.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n")
        (info / "entry_points.txt").write_text(f"[{registry.GROUP}]\ndupe = {target}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(registry.ConfigError) as refused:
        registry.names()
    message = str(refused.value)
    assert message.startswith("two installed packages register the backend 'dupe': ")
    assert f"fb-first 1.0 (fb_first.backend:First, in {tmp_path})" in message
    assert f"fb-dupe 0.2 (fb_dupe.backend:Other, in {tmp_path})" in message
    assert message.endswith("; uninstall one (pip uninstall fb-first or pip uninstall fb-dupe), or take it off "
                            "PYTHONPATH") or message.endswith(
        "; uninstall one (pip uninstall fb-dupe or pip uninstall fb-first), or take it off PYTHONPATH")  # as found


def _plugin_metadata(where: Path, package: str, group: str, entry: str) -> None:
    info = where / f"{package.replace('-', '_')}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{group}]\n{entry}\n")


def test_a_plugin_that_takes_a_built_in_name_is_told_to_rename_it_not_to_uninstall_fusionbench(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The refusal said "uninstall one (pip uninstall fb-collide or pip uninstall fusionbench)": the
    second takes the harness with it."""
    _plugin_metadata(tmp_path, "fb-collide", registry.GROUP, "eager = fb_collide.backend:Mine")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(registry.ConfigError) as refused:
        registry.names()
    assert str(refused.value) == (
        f"the backend name 'eager' is a built-in backend's, and fb-collide 0.1 (fb_collide.backend:Mine, in "
        f"{tmp_path}) registers it too: rename the plugin's backend (its entry point and its class's `name`)")


def test_a_backend_registered_under_a_misspelt_group_is_named_with_the_group_to_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plugin under "fusionbench.backend" was simply an unknown backend, with no word of why."""
    _plugin_metadata(tmp_path, "fb-wrong", "fusionbench.backend", "wronggroup = fb_wrong.backend:Mine")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(registry.ConfigError) as refused:
        registry.load("wronggroup")
    assert str(refused.value).endswith(
        f"; fb-wrong 0.1 (fb_wrong.backend:Mine, in {tmp_path}) registers it under the entry-point group "
        "'fusionbench.backend': a backend is registered under 'fusionbench.backends'")
    assert registry.misfiled("eagre") == ""


def test_an_unknown_backend_reads_alike_wherever_it_is_named() -> None:
    """A scenario's `eagre` got "did you mean 'eager'?"; the same name reaching `registry.load` (a
    resume, a plugin's test) got the list alone."""
    with pytest.raises(registry.ConfigError) as refused:
        registry.load("eagre")
    assert str(refused.value) == registry.unknown("eagre")
    assert str(refused.value).startswith("unknown backend 'eagre' (did you mean 'eager'?); registered: eager, ")


def test_the_plan_for_an_environment_that_matches_the_locks_says_nothing_is_installed(tmp_path: Path) -> None:
    """On an up-to-date .venv the plan printed the whole install as if it would run."""
    env = {"FUSIONBENCH_VENV": str(tmp_path / "venv"), "FUSIONBENCH_GPU_STACK": "off"}
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    (tmp_path / "venv" / "bin" / "python").symlink_to(sys.executable)
    assert "installs nothing now" not in run_sh("--install-plan", env=env).stdout  # no stamp: it would install
    locks = f"{shlex.quote(str(REPO / 'requirements.lock'))} {shlex.quote(str(REPO / 'pyproject.toml'))}"
    wanted = subprocess.run(["bash", "-c", f"cat {locks} | sha256sum | cut -d' ' -f1"],
                            capture_output=True, text=True, check=True).stdout
    (tmp_path / "venv" / ".fusionbench-lock").write_text(wanted)
    plan = run_sh("--install-plan", env=env).stdout
    assert f"# {tmp_path / 'venv'} matches the locks: ./run.sh installs nothing now" in plan, plan


def test_a_scenario_file_named_in_capitals_is_run(tmp_path: Path) -> None:
    """`./run.sh Tiny.YAML` went to the CLI as a command, refused as no command."""
    scenario = tmp_path / "Tiny.YAML"
    scenario.write_text("models: [resnet18]\nbackends: [null]\nscenarios: [Offline]\n")
    done = run_sh(str(scenario), "--dry-run", "--device", "cpu",
                  env={"FUSIONBENCH_NO_VENV": "1", "PYTHON": sys.executable})
    assert done.returncode == 0, done.stderr
    assert "resnet18" in done.stdout


@pytest.mark.parametrize("base", ["pydantic.BaseModel", "object"])
def test_an_options_model_that_is_not_backend_options_makes_the_backend_fail_to_load(
    base: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plain pydantic model let a scenario's typo through (`channel_last: true` ran with the default,
    the cell labelled `channel_last=True`); a dataclass stopped the scenario's loading with a traceback."""
    _plugin_metadata(tmp_path, "fb-loose", registry.GROUP, "loose = fb_loose:Loose")
    (tmp_path / "fb_loose.py").write_text(
        "import pydantic\n\nfrom harness.contract import Backend\n\n\n"
        f"class LooseOptions({base}):\n    channels_last: bool = False\n\n\n"
        "class Loose(Backend):\n    name = 'loose'\n    options_model = LooseOptions\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(registry.ConfigError) as refused:
        registry.load("loose")
    assert str(refused.value) == (
        "backend fb_loose:Loose has an options_model, LooseOptions, that is not a harness.options.BackendOptions "
        "subclass (which refuses unknown keys and wrong types)")


@pytest.mark.parametrize(("scratch_env", "said"), [
    ({"MYLIB_CACHE": "/tmp/mylib"}, "folder '/tmp/mylib' for MYLIB_CACHE: give a folder's name alone"),
    ({"MYLIB_CACHE": "../mylib"}, "folder '../mylib' for MYLIB_CACHE: give a folder's name alone"),
    ({"PYTHONPATH": "mylib"}, "variable 'PYTHONPATH' that the harness sets for every worker"),
    ({"FUSIONBENCH_CPUS": "mylib"}, "variable 'FUSIONBENCH_CPUS' that the harness sets for every worker"),
])
def test_a_scratch_env_that_is_not_a_folder_of_the_cells_own_makes_the_backend_fail_to_load(
    scratch_env: dict[str, str], said: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An absolute or `..` folder was shared by every cell (the second cell's compile found the first's
    cache: `prepare_cache` warm in its first round); PYTHONPATH made the workers lose the plugin
    ("unknown backend 'mine'" for a backend the probe had found)."""
    _plugin_metadata(tmp_path, "fb-scratch", registry.GROUP, "scratchy = fb_scratch:Scratchy")
    (tmp_path / "fb_scratch.py").write_text(
        "from harness.contract import Backend\n\n\n"
        f"class Scratchy(Backend):\n    name = 'scratchy'\n    scratch_env = {scratch_env!r}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "fb_scratch", raising=False)  # the module of the parameters before
    with pytest.raises(registry.ConfigError) as refused:
        registry.load("scratchy")
    assert str(refused.value).startswith(f"backend fb_scratch:Scratchy has a scratch_env {said}")
    (tmp_path / "fb_scratch.py").write_text(
        "from harness.contract import Backend\n\n\n"
        "class Scratchy(Backend):\n    name = 'scratchy'\n    scratch_env = {'MYLIB_CACHE': 'mylib-cache'}\n")
    del sys.modules["fb_scratch"]
    assert registry.load("scratchy").scratch_env == {"MYLIB_CACHE": "mylib-cache"}


@pytest.mark.parametrize(("requires", "loads"), [("fusionbench>=9.0", False), ("fusionbench>=0.1", True),
                                                 ("fusionbench>=9.0; python_version < '3'", True)])
def test_a_plugin_made_for_another_fusionbench_fails_to_load_saying_which(
    requires: str, loads: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Installed with `--no-deps`, as the guide says, a plugin requiring fusionbench>=9.0 was listed as
    available and its cells failed in "prepare() missing 1 required keyword-only argument"."""
    _plugin_metadata(tmp_path, "fb-future", registry.GROUP, "future = fb_future:Future")
    with (tmp_path / "fb_future-0.1.dist-info" / "METADATA").open("a") as metadata:
        metadata.write(f"Requires-Dist: {requires}\nRequires-Dist: torch>=2.11\n")
    (tmp_path / "fb_future.py").write_text(
        "from harness.contract import Backend\n\n\nclass Future(Backend):\n    name = 'future'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    if loads:
        assert registry.load("future").name == "future"
        return
    with pytest.raises(registry.ConfigError) as refused:
        registry.load("future")
    from harness import __version__

    assert str(refused.value) == ("backend fb_future:Future: fb-future 0.1 requires fusionbench>=9.0, and this harness "
                                  f"is {__version__}: install a version of fb-future made for it")


def test_a_plugin_in_a_package_named_as_fusionbenchs_own_is_told_to_rename_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plugin whose package is `backends` (FusionBench's built-ins' own) failed to load as "No module
    named 'backends.mine'", which said nothing of the clash."""
    _plugin_metadata(tmp_path, "fb-mine", registry.GROUP, "mine = backends.mine:Mine")
    (tmp_path / "backends").mkdir()
    (tmp_path / "backends" / "mine.py").write_text("raise AssertionError('never found')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(registry.ConfigError) as refused:
        registry.load("mine")
    assert str(refused.value).startswith(
        "backend backends.mine:Mine lies in a package named 'backends', as FusionBench's own is, which Python finds "
        "instead: rename the plugin's package (fb-mine 0.1 (backends.mine:Mine, in ")


def test_a_preload_given_as_one_str_makes_the_backend_fail_to_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`preload = ("mylib")`, the comma left out, is a str: the preloaded parent imported "m", "y", ...,
    each failing, and no line of the run said so."""
    _plugin_metadata(tmp_path, "fb-preload", registry.GROUP, "preloading = fb_preload:Preloading")
    (tmp_path / "fb_preload.py").write_text(
        "from harness.contract import Backend\n\n\n"
        "class Preloading(Backend):\n    name = 'preloading'\n    preload = ('mylib')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(registry.ConfigError) as refused:
        registry.load("preloading")
    assert str(refused.value) == ("backend fb_preload:Preloading has a preload that is str 'mylib', not a tuple of "
                                  "module names: ('mylib',)")


def test_the_entry_points_are_read_once_while_held_and_anew_outside(monkeypatch: pytest.MonkeyPatch) -> None:
    """A scenario file's checks asked for its backends a score of times, each a scan of every
    installed package's metadata: offline.yaml loaded in 96 ms, 21 ms held."""
    reads = []
    real = registry._read_entry_points
    monkeypatch.setattr(registry, "_read_entry_points", lambda: reads.append(1) or real())
    with registry.held():
        for name in ("eager", "inductor", "eager"):
            registry.load(name)
        with registry.held():  # a piece of work inside another reads nothing more
            registry.names()
    assert len(reads) == 1
    registry.names()
    registry.names()
    assert len(reads) == 3  # outside, a package installed meanwhile is found


def test_a_scenario_file_reads_the_entry_points_once(monkeypatch: pytest.MonkeyPatch) -> None:
    reads = []
    real = registry._read_entry_points
    monkeypatch.setattr(registry, "_read_entry_points", lambda: reads.append(1) or real())
    loading.load(REPO / "scenarios" / "offline.yaml")
    assert len(reads) == 1


def test_the_gpu_stack_installs_under_a_tmpdir_this_user_cannot_write(tmp_path: Path) -> None:
    """The GPU stack's lock without the CPU onnxruntime was written to $TMPDIR: where TMPDIR named a
    folder that is gone or not this user's (a scheduler's per-job folder), the bootstrap stopped at
    "run.sh: line 68: .../fusionbench-requirements-host-NNN.txt: Permission denied", nothing installed.
    A stand-in Python (the suite has no network for pip) records what each step was given."""
    venv_dir, calls = tmp_path / "venv", tmp_path / "calls.txt"
    (venv_dir / "bin").mkdir(parents=True)
    python = venv_dir / "bin" / "python"
    python.write_text(f'#!/bin/sh\necho "$*" >> {calls}\n'
                      f'for word in "$@"; do case "$word" in *host*.txt) cat "$word" >> {calls} ;; esac; done\n')
    python.chmod(0o755)
    done = run_sh("backends", env={"FUSIONBENCH_VENV": str(venv_dir), "FUSIONBENCH_GPU_STACK": "on",
                                   "TMPDIR": str(tmp_path / "gone")})
    assert done.returncode == 0, done.stderr
    said = calls.read_text()
    assert "--extra-index-url https://pypi.nvidia.com" in said and "requirements-gpu.lock" in said
    assert "torch==" in said and "\nonnxruntime==" not in said  # the host lock, less the CPU onnxruntime
    assert said.splitlines()[-1] == "-m harness.cli backends"  # installed, then the command ran
    assert not list(venv_dir.glob("*host*.txt")) and not (tmp_path / "gone").exists()
    # asked for, not detected: it said "(nvidia-smi lists a GPU)" on a machine with none
    assert "requirements-gpu.lock (FUSIONBENCH_GPU_STACK=on)" in done.stderr and "nvidia-smi" not in done.stderr


@AS_ROOT
def test_a_venv_this_user_may_not_write_is_refused_in_one_line_before_any_install() -> None:
    """A checkout another user made and shares: its venv out of date for this user (a lock pulled,
    or a Python of theirs this user cannot run), `./run.sh` began remaking it and stopped at
    "Error: [Errno 13] Permission denied: 'CHECKOUT/.venv/pyvenv.cfg'", exit 1. The checkout and
    its venv are root's here, and run.sh runs as nobody."""
    with root_folder_every_user_may_enter() as shared:
        for name in ("run.sh", "requirements.lock", "requirements-gpu.lock", "pyproject.toml"):
            shutil.copy(REPO / name, shared / name)
        (shared / ".venv" / "bin").mkdir(parents=True)
        os.chmod(shared / ".venv", 0o755)
        os.chmod(shared / ".venv" / "bin", 0o755)
        (shared / ".venv" / "bin" / "python").write_text("#!/bin/sh\necho ran >&2\n")
        os.chmod(shared / ".venv" / "bin" / "python", 0o755)
        done = subprocess.run(["bash", str(shared / "run.sh"), "models"], capture_output=True, text=True, timeout=60,
                              env={"PATH": os.environ["PATH"], "FUSIONBENCH_GPU_STACK": "off"}, cwd=shared,
                              preexec_fn=lambda: (os.setgid(NOBODY), os.setuid(NOBODY)))
        assert (done.returncode, done.stderr) == (2, (
            f"fusionbench: {shared / '.venv'} needs preparing (first run or a lock changed), and this user may not "
            f"write {shared / '.venv'} (its owner: root); FUSIONBENCH_VENV=DIR names a folder of your own for it, or "
            "the owner runs ./run.sh once\n"))
        assert sorted(p.name for p in (shared / ".venv").iterdir()) == ["bin"]
