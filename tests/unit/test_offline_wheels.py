"""`fusionbench wheels`: the wheels a machine without network needs beside its own torch, at the
locks' versions, for that machine's Python, with a SHA256SUMS file to check the copy there."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.container import offline_wheels
from harness.container.offline_wheels import Target, WheelsError
from harness.container.package_lock import normalise
from harness.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
PINS = offline_wheels.lock_pins(REPO)


def test_the_harness_packages_are_what_run_sh_checks_for_beside_torch() -> None:
    listed = re.search(r'^required_modules="([^"]+)"', (REPO / "run.sh").read_text(), re.M)
    assert listed is not None
    modules = {"mlcommons_loadgen": "mlperf_loadgen", "PyYAML": "yaml"}
    gathered = {modules.get(name, name) for name in offline_wheels.HARNESS_PACKAGES}
    assert set(listed.group(1).split()) == gathered | {"torch", "torchvision", "numpy"}


def test_each_package_comes_at_the_locks_version_and_a_gpu_target_gets_onnxruntime_gpu() -> None:
    cpu = offline_wheels.requirements(REPO, ["onnxruntime", "tvm"], Target())
    assert f"pydantic=={PINS['pydantic']}" in cpu and f"mlcommons_loadgen=={PINS['mlcommons-loadgen']}" in cpu
    assert f"onnxruntime=={PINS['onnxruntime']}" in cpu and f"apache-tvm=={PINS['apache-tvm']}" in cpu
    assert f"onnxscript=={PINS['onnxscript']}" in cpu, "the ONNX exporter needs onnxscript"
    gpu = offline_wheels.requirements(REPO, ["onnxruntime"], Target(gpu=True))
    assert f"onnxruntime-gpu=={PINS['onnxruntime-gpu']}" in gpu
    assert not any(r.startswith("onnxruntime==") for r in gpu), "the CPU build would shadow the CUDA one"
    assert offline_wheels.requirements(REPO, [], Target()) == [
        f"{name}=={PINS[normalise(name)]}" for name in offline_wheels.HARNESS_PACKAGES]


@pytest.mark.parametrize("backend", ["tensorrt", "eager", "onnx"])
def test_a_backend_without_wheels_to_gather_is_refused_saying_which_are(backend: str) -> None:
    with pytest.raises(ConfigError, match="one of onnxruntime, tvm"):
        offline_wheels.requirements(REPO, [backend], Target())


@pytest.mark.parametrize(("field", "value"), [("python_version", "2.7"), ("python_version", "3.12; rm"),
                                              ("python_version", "3"), ("glibc", "2.28.1"), ("glibc", "musl")])
def test_a_target_that_is_not_a_cpython_3_and_glibc_version_is_refused(field: str, value: str) -> None:
    with pytest.raises(ConfigError):
        Target(**{field: value})


@pytest.mark.parametrize("version", ["3.0", "3.9"])
def test_a_python_older_than_the_harness_runs_on_is_refused_before_pip_runs(tmp_path: Path, version: str) -> None:
    with pytest.raises(ConfigError, match=f"--python-version {version}: the harness runs on CPython 3.10 or newer"):
        Target(python_version=version)
    Target(python_version="3.10")


def test_the_oldest_python_is_pyprojects() -> None:
    requires = re.search(r'^requires-python = ">=3\.(\d+)"$', (REPO / "pyproject.toml").read_text(), re.M)
    assert requires is not None and int(requires.group(1)) == offline_wheels.OLDEST_PYTHON_MINOR


def test_pip_is_asked_for_binary_wheels_of_the_target_held_to_the_locks(tmp_path: Path) -> None:
    seen: list[list[str]] = []
    constraints: list[str] = []

    def fake_pip(command: list[str]) -> int:
        seen.append(command)
        constraints.append(Path(command[command.index("--constraint") + 1]).read_text())
        dest = Path(command[command.index("--dest") + 1])
        (dest / "pydantic-2.14.3-py3-none-any.whl").write_bytes(b"wheel one")
        (dest / "psutil-7.2.2-cp36-abi3-manylinux_2_28_x86_64.whl").write_bytes(b"wheel two")
        return 0

    wanted = offline_wheels.gather(REPO, tmp_path / "out", ["tvm"], Target("3.13", "2.31"), run=fake_pip)
    command = seen[0]
    assert command[1:4] == ["-m", "pip", "download"] and "--only-binary=:all:" in command
    assert command[command.index("--python-version") + 1] == "3.13" and command[command.index("--abi") + 1] == "cp313"
    platforms = [arg.removeprefix("--platform=") for arg in command if arg.startswith("--platform=")]
    assert platforms[0] == "manylinux_2_31_x86_64" and "manylinux_2_32_x86_64" not in platforms
    assert command[-len(wanted):] == wanted and f"apache-tvm=={PINS['apache-tvm']}" in wanted
    assert f"pydantic-core=={PINS['pydantic-core']}\n" in constraints[0], "a dependency the lock pins is held to it"
    assert "torch==" not in constraints[0] and "nvidia-cublas==" not in constraints[0], "the target's torch is its own"
    assert "numpy==" not in constraints[0], "the target's numpy is its own (a 3.10 target has none of numpy 2.4)"
    assert (tmp_path / "out" / "requirements.txt").read_text().splitlines() == wanted, "the folder says what to install"
    sums = (tmp_path / "out" / offline_wheels.SUMS_FILE).read_text().splitlines()
    assert [line.split("  ")[1] for line in sums] == ["psutil-7.2.2-cp36-abi3-manylinux_2_28_x86_64.whl",
                                                      "pydantic-2.14.3-py3-none-any.whl", "requirements.txt"]
    assert _sums_check(tmp_path / "out").returncode == 0
    assert sorted(path.name for path in (tmp_path / "out").iterdir()) == [
        "SHA256SUMS", "psutil-7.2.2-cp36-abi3-manylinux_2_28_x86_64.whl", "pydantic-2.14.3-py3-none-any.whl",
        "requirements.txt"], "the folder pip downloaded into is gone once its wheels have joined the others"


def _sums_check(folder: Path) -> subprocess.CompletedProcess[str]:
    checked = subprocess.run(["sha256sum", "-c", offline_wheels.SUMS_FILE], cwd=folder,
                             capture_output=True, text=True, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    return checked


def _download(wheels: dict[str, bytes], status: int = 0) -> Callable[[list[str]], int]:
    """A pip that saves `wheels` in its --dest, then exits `status`."""
    def fake_pip(command: list[str]) -> int:
        for name, content in wheels.items():
            (Path(command[command.index("--dest") + 1]) / name).write_bytes(content)
        return status
    return fake_pip


def test_a_failed_download_leaves_the_last_gather_that_succeeded_as_it_was(tmp_path: Path) -> None:
    """A failed gather (`--python-version` pip had no wheel for) deleted the folder's SHA256SUMS and
    requirements.txt, and what pip had saved lay beside wheels the lists did not name."""
    out = tmp_path / "out"
    offline_wheels.gather(REPO, out, [], Target(), run=_download({"rich-1.0-py3-none-any.whl": b"earlier"}))
    before = {path.name: path.read_bytes() for path in out.iterdir()}
    with pytest.raises(WheelsError, match=f"pip download exited 1 .*{out} and its SHA256SUMS are as the last gather "
                                          f"that succeeded left them; what pip saved waits in {out}/.gathering"):
        offline_wheels.gather(REPO, out, ["tvm"], Target(), run=_download({"psutil-9-py3-none-any.whl": b"new"}, 1))
    assert {path.name: path.read_bytes() for path in out.iterdir() if path.is_file()} == before
    assert _sums_check(out).returncode == 0
    assert (out / offline_wheels.STAGING_FOLDER / "psutil-9-py3-none-any.whl").read_bytes() == b"new"
    # the next try takes what the failed one saved, and the earlier wheels, without downloading them again
    seen: list[str] = []

    def pip_that_looks(command: list[str]) -> int:
        seen.extend(sorted(path.name for path in Path(command[command.index("--dest") + 1]).iterdir()))
        return 0

    wanted = offline_wheels.gather(REPO, out, ["tvm"], Target(), run=pip_that_looks)
    assert seen == ["psutil-9-py3-none-any.whl", "rich-1.0-py3-none-any.whl"]
    assert (out / offline_wheels.REQUIREMENTS_FILE).read_text().splitlines() == wanted
    assert _sums_check(out).returncode == 0 and not (out / offline_wheels.STAGING_FOLDER).exists()


def test_a_failed_first_download_says_nothing_is_listed(tmp_path: Path) -> None:
    with pytest.raises(WheelsError, match=f"nothing in {tmp_path / 'out'} is listed in SHA256SUMS"):
        offline_wheels.gather(REPO, tmp_path / "out", [], Target(), run=lambda command: 1)
    assert not (tmp_path / "out" / offline_wheels.SUMS_FILE).exists()
    assert not (tmp_path / "out" / offline_wheels.REQUIREMENTS_FILE).exists()


def test_a_file_in_place_of_the_folder_is_refused_before_any_download(tmp_path: Path) -> None:
    (tmp_path / "out").write_text("notes")
    with pytest.raises(ConfigError, match="is a file"):
        offline_wheels.gather(REPO, tmp_path / "out", [], Target(), run=lambda command: pytest.fail("pip ran"))
    assert (tmp_path / "out").read_text() == "notes"


@pytest.mark.parametrize(("glibc", "legacy"), [
    ("2.28", ["manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"]),
    ("2.17", ["manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"]),
    ("2.16", ["manylinux2010_x86_64", "manylinux1_x86_64"]), ("2.12", ["manylinux2010_x86_64", "manylinux1_x86_64"]),
    ("2.11", ["manylinux1_x86_64"]), ("2.5", ["manylinux1_x86_64"]), ("2.4", [])])
def test_a_legacy_manylinux_tag_is_offered_only_to_a_glibc_as_new_as_it_needs(glibc: str, legacy: list[str]) -> None:
    """`--glibc 2.12` was offered manylinux2014 wheels, which need glibc 2.17."""
    platforms = Target(glibc=glibc).platforms()
    minor = int(glibc.split(".")[1])
    assert [tag for tag in platforms if not tag.startswith("manylinux_2_")] == [*legacy, "linux_x86_64"]
    assert [tag for tag in platforms if tag.startswith("manylinux_2_")] == [
        f"manylinux_2_{m}_x86_64" for m in range(minor, 4, -1)]


def test_a_folder_name_with_spaces_or_quotes_stays_one_word_in_the_instructions() -> None:
    lines = offline_wheels.install_lines(Path("/carry/my wheels's"), ["pydantic==2.14.3"])
    assert lines[0].startswith("(cd '/carry/my wheels'\"'\"'s' && ")
    assert lines[1].endswith("--find-links '/carry/my wheels'\"'\"'s' -r '/carry/my wheels'\"'\"'s/requirements.txt'")


def test_a_target_of_another_python_than_pips_is_told_apart() -> None:
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert not Target(python_version=here).markers_differ()
    assert Target(python_version="3.99").markers_differ()


def test_the_instructions_check_the_copy_and_swap_the_cpu_onnxruntime_for_the_gpu_one() -> None:
    lines = offline_wheels.install_lines(Path("/carry/wheels"), ["pydantic==2.14.3", "onnxruntime-gpu==1.31.1"])
    assert lines[0] == "(cd /carry/wheels && sha256sum -c --quiet SHA256SUMS)"
    assert lines[1].startswith("python3 -m pip uninstall -y onnxruntime ")
    assert lines[2] == "python3 -m pip install --no-index --find-links /carry/wheels -r /carry/wheels/requirements.txt"


def _wheel(folder: Path, name: str, version: str) -> None:
    stem = f"{name.replace('-', '_')}-{version}"
    with zipfile.ZipFile(folder / f"{stem}-py3-none-any.whl", "w") as wheel:
        wheel.writestr(f"{stem}.dist-info/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        wheel.writestr(f"{stem}.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        wheel.writestr(f"{stem}.dist-info/RECORD", "")


@pytest.mark.slow
def test_the_command_gathers_with_the_real_pip_from_an_index_and_prints_what_to_run_there(tmp_path: Path) -> None:
    index = tmp_path / "index"
    index.mkdir()
    for name in offline_wheels.HARNESS_PACKAGES:
        _wheel(index, name, PINS[normalise(name)])
    _wheel(index, "pydantic", "1.0")  # another version the index offers: the lock's is taken
    env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(index)}
    done = subprocess.run([sys.executable, "-m", "harness.cli", "wheels", str(tmp_path / "out"), "--python-version", "3.11"],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    gathered = sorted(path.name for path in (tmp_path / "out").glob("*.whl"))
    assert len(gathered) == len(offline_wheels.HARNESS_PACKAGES) and f"pydantic-{PINS['pydantic']}-py3-none-any.whl" in gathered
    assert "sha256sum -c --quiet SHA256SUMS" in done.stdout and "--no-index --find-links" in done.stdout
    # the far side: the folder alone (another path, no index) installs what its list names, at the lock's versions
    carried = tmp_path / "carried"
    shutil.copytree(tmp_path / "out", carried)
    installed = subprocess.run([sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "--no-index",
                                "--find-links", str(carried), "-r", str(carried / "requirements.txt"),
                                "--target", str(tmp_path / "site")],
                               capture_output=True, text=True, env={**os.environ, "PIP_FIND_LINKS": ""}, timeout=120,
                               check=False)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert (tmp_path / "site" / f"pydantic-{PINS['pydantic']}.dist-info").is_dir()
    missing = subprocess.run([sys.executable, "-m", "harness.cli", "wheels", str(tmp_path / "none"), "--backend", "tvm"],
                             capture_output=True, text=True, env=env, cwd=REPO, timeout=120, check=False)
    assert missing.returncode == 2 and "pip download exited 1" in missing.stderr
    assert not (tmp_path / "none" / "SHA256SUMS").exists()


def test_gpu_without_onnxruntime_says_before_the_download_that_it_changes_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`wheels DIR --gpu` gathered the same wheels as without it, without a word."""
    from harness.cli.main import main

    said_before_pip: list[str] = []

    def fake_pip(command: list[str]) -> int:
        said_before_pip.append(" ".join(capsys.readouterr().out.split()))
        return 0

    monkeypatch.setattr(offline_wheels, "_run_pip", fake_pip)
    assert main(["wheels", str(tmp_path / "out"), "--gpu", "--backend", "tvm"]) == 0
    assert "note: --gpu gathers onnxruntime-gpu in place of onnxruntime for --backend onnxruntime and changes nothing " \
           "else" in said_before_pip[0]
    assert main(["wheels", str(tmp_path / "out"), "--gpu", "--backend", "onnxruntime"]) == 0
    assert "note: --gpu" not in said_before_pip[1]
    assert offline_wheels.gpu_changes_nothing([], Target()) is None
