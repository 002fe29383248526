"""The wheels a machine without network needs to run FusionBench with the Python it already has
(`FUSIONBENCH_NO_VENV=1 ./run.sh ...`): gathered here, where PyPI answers, for that machine's
Python version, and carried there.

That Python brings torch, torchvision and numpy (a GPU machine's image does); what the harness
needs beside them is small: LoadGen, pydantic, PyYAML, psutil, rich and jsonschema, and, per
backend asked for, its runtime (ONNX Runtime with the exporter's onnx and onnxscript; apache-tvm).
Each is pinned to requirements.lock's version (requirements-gpu.lock's for onnxruntime-gpu), and so
is every dependency the lock pins; pip resolves the rest for the target's Python. The folder gets
the list of what to install (requirements.txt) and a SHA256SUMS file of it and the wheels, so that
the copy can be checked on the far side (`sha256sum -c SHA256SUMS`) before `pip install --no-index
--find-links DIR -r DIR/requirements.txt` installs from it, taking from it only what that Python
lacks: the folder says how it is installed, whatever became of the lines `wheels` printed.

pip downloads into a folder inside it (`.gathering`), seeded with the wheels already there so that
none is downloaded twice; only once pip has succeeded do the wheels join the folder and its two
lists change. A gather that fails (no network, no wheel for that Python) leaves the folder as the
last one that succeeded left it, its lists still true of it, and what pip saved waiting in
`.gathering` for the next try (pip's `--find-links DIR` does not look into it).
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.container.package_lock import gpu_pins, native_pins, normalise
from harness.container.wheelhouse import file_sha256, linux_platforms
from harness.errors import ConfigError, HarnessError
from harness.files.atomic import write_files_atomic

#: What run.sh's FUSIONBENCH_NO_VENV=1 checks for beside torch, torchvision and numpy, as packages.
HARNESS_PACKAGES = ("mlcommons_loadgen", "pydantic", "PyYAML", "psutil", "rich", "jsonschema")
#: A backend's packages; "onnxruntime" is the CPU build or, for a GPU machine, onnxruntime-gpu.
BACKEND_PACKAGES = {"onnxruntime": ("onnxruntime", "onnx", "onnxscript"), "tvm": ("apache-tvm",)}
SUMS_FILE = "SHA256SUMS"
#: The folder's own list of what to install there: `name==version`, a line each.
REQUIREMENTS_FILE = "requirements.txt"
#: Where pip downloads, inside the folder, until the gather has succeeded.
STAGING_FOLDER = ".gathering"
#: The oldest CPython the harness runs on (pyproject.toml's requires-python): wheels for an older
#: one would install a harness that cannot start there.
OLDEST_PYTHON_MINOR = 10
_VERSION = re.compile(r"^3\.(\d{1,2})$")
_GLIBC = re.compile(r"^2\.(\d{1,2})$")


class WheelsError(HarnessError):
    """pip could not gather the wheels (no network, no wheel for that Python): the folder is as the
    last gather that succeeded left it, and what pip saved waits in its `.gathering` folder."""

    exit_code = 2


@dataclass(frozen=True)
class Target:
    """The machine the wheels are for: its CPython version, its glibc, and whether it has an NVIDIA
    GPU (the CUDA build of ONNX Runtime)."""

    python_version: str = "3.12"
    glibc: str = "2.28"
    gpu: bool = False

    def __post_init__(self) -> None:
        if not _VERSION.match(self.python_version):
            raise ConfigError(f"--python-version {self.python_version!r}: a CPython 3 version such as 3.12")
        if int(self.python_version.split(".")[1]) < OLDEST_PYTHON_MINOR:
            raise ConfigError(f"--python-version {self.python_version}: the harness runs on CPython "
                              f"3.{OLDEST_PYTHON_MINOR} or newer (pyproject.toml's requires-python)")
        if not _GLIBC.match(self.glibc):
            raise ConfigError(f"--glibc {self.glibc!r}: a glibc version such as 2.28 (`ldd --version` there says it)")

    def platforms(self) -> list[str]:
        """The Linux x86_64 wheel tags that install with this glibc, newest first."""
        return linux_platforms(int(self.glibc.split(".")[1]))

    def markers_differ(self) -> bool:
        """Whether pip, which judges a dependency's markers (`python_version < "3.12"`) by the Python
        running it, judges them for another version than the target's."""
        return f"{sys.version_info.major}.{sys.version_info.minor}" != self.python_version


def lock_pins(repo: Path) -> dict[str, str]:
    """Normalised name -> version, from requirements.lock and requirements-gpu.lock."""
    return {**native_pins(repo), **gpu_pins(repo)}


def requirements(repo: Path, backends: Sequence[str], target: Target) -> list[str]:
    """`name==version` for the harness's packages and each backend's, at the locks' versions."""
    pins = lock_pins(repo)
    names = list(HARNESS_PACKAGES)
    for backend in backends:
        if backend not in BACKEND_PACKAGES:
            raise ConfigError(f"--backend {backend!r}: one of {', '.join(BACKEND_PACKAGES)} "
                              "(eager and inductor come with torch; TensorRT's wheels are on NVIDIA's index)")
        names += [f"{name}-gpu" if name == "onnxruntime" and target.gpu else name for name in BACKEND_PACKAGES[backend]]
    wanted = []
    for name in dict.fromkeys(names):
        version = pins.get(normalise(name))
        if version is None:
            raise ConfigError(f"{name} is pinned in neither requirements.lock nor requirements-gpu.lock")
        wanted.append(f"{name}=={version}")
    return wanted


def gpu_changes_nothing(backends: Sequence[str], target: Target) -> str | None:
    """Where --gpu is given without --backend onnxruntime, what it does (nothing), to be said before
    the download: one who meant to gather onnxruntime-gpu learns it here, not on the target."""
    if not target.gpu or "onnxruntime" in backends:
        return None
    return ("--gpu gathers onnxruntime-gpu in place of onnxruntime for --backend onnxruntime and changes nothing "
            "else (the target's torch brings CUDA); without --backend onnxruntime these are the wheels any target gets")


def download_command(dest: Path, wanted: Sequence[str], constraints: Path, target: Target) -> list[str]:
    """pip download of `wanted` and what they need, binary wheels for the target only, every
    dependency the locks pin held to its version (`constraints`)."""
    minor = target.python_version.split(".")[1]
    return [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--progress-bar", "on",
            "--only-binary=:all:", "--python-version", target.python_version, "--implementation", "cp",
            "--abi", f"cp3{minor}", *[f"--platform={platform}" for platform in target.platforms()],
            "--constraint", str(constraints), "--dest", str(dest), *wanted]


#: What the target's Python brings with its torch: not held to the locks' versions.
_TARGETS_OWN = ("nvidia-", "cuda-", "tensorrt", "torch", "triton", "numpy")


def constraints_text(repo: Path) -> str:
    """The locks' pins but those of what the target's torch brings (its CUDA libraries, numpy)."""
    return "".join(f"{name}=={version}\n" for name, version in sorted(lock_pins(repo).items())
                   if not name.startswith(_TARGETS_OWN))


def _sums_text(digests: dict[str, str]) -> str:
    return "".join(f"{digests[name]}  {name}\n" for name in sorted(digests))


def gather(repo: Path, dest: Path, backends: Sequence[str], target: Target,
           run: Callable[[list[str]], int] | None = None) -> list[str]:
    """Download the wheels into `dest`, write what to install there in its requirements.txt and list
    both in its SHA256SUMS; returns those requirements. `run` runs pip (its output shown) and returns
    its exit status. Where pip fails, `dest` is left as it was (WheelsError)."""
    wanted = requirements(repo, backends, target)
    if dest.exists() and not dest.is_dir():
        raise ConfigError(f"{dest} is a file; give a folder for the wheels")
    staging = dest / STAGING_FOLDER
    staging.mkdir(parents=True, exist_ok=True)
    _seed(staging, dest)
    with tempfile.TemporaryDirectory(prefix="fusionbench-wheels-") as scratch:
        constraints = Path(scratch) / "constraints.txt"
        constraints.write_text(constraints_text(repo))
        status = (run or _run_pip)(download_command(staging, wanted, constraints, target))
    if status != 0:
        earlier = (f"{dest} and its {SUMS_FILE} are as the last gather that succeeded left them"
                   if (dest / SUMS_FILE).exists() else f"nothing in {dest} is listed in {SUMS_FILE}")
        raise WheelsError(f"pip download exited {status} (its message is above); {earlier}; what pip saved waits "
                          f"in {staging} for the next try")
    _take_in(staging, dest)
    _write_lists(dest, wanted)
    return wanted


def _seed(staging: Path, dest: Path) -> None:
    """The wheels `dest` holds, linked into `staging` (copied where the file system has no links),
    so that pip, which skips a file its --dest has, downloads none of them again."""
    for wheel in dest.glob("*.whl"):
        if wheel.is_file() and not (staging / wheel.name).exists():
            try:
                os.link(wheel, staging / wheel.name)
            except OSError:
                shutil.copy2(wheel, staging / wheel.name)


def _take_in(staging: Path, dest: Path) -> None:
    """Move what pip left in `staging` into `dest`, then remove `staging`. A wheel linked there from
    `dest` is only unlinked: rename(2) between two links of one file does nothing."""
    for wheel in list(staging.iterdir()):  # listed first: entries renamed away while read may be skipped
        there = dest / wheel.name
        if there.exists() and there.samefile(wheel):
            wheel.unlink()
        else:
            os.replace(wheel, there)
    staging.rmdir()


def _write_lists(dest: Path, wanted: Sequence[str]) -> None:
    """requirements.txt and SHA256SUMS, both new or (a full disk, a stop) both as they were."""
    listed = "".join(f"{requirement}\n" for requirement in wanted).encode()
    digests = {path.name: file_sha256(path) for path in dest.glob("*.whl") if path.is_file()}
    digests[REQUIREMENTS_FILE] = hashlib.sha256(listed).hexdigest()
    write_files_atomic({dest / REQUIREMENTS_FILE: listed, dest / SUMS_FILE: _sums_text(digests).encode()})


def _run_pip(command: list[str]) -> int:
    return subprocess.run(command, check=False).returncode


def install_lines(dest: Path, wanted: Sequence[str]) -> list[str]:
    """What to run on the machine without network, once the folder is there."""
    folder = shlex.quote(str(dest))
    lines = [f"(cd {folder} && sha256sum -c --quiet {SUMS_FILE})"]
    if any(requirement.startswith("onnxruntime-gpu==") for requirement in wanted):
        lines.append("python3 -m pip uninstall -y onnxruntime   # the CPU build: both install the onnxruntime module")
    requirements_file = shlex.quote(str(dest / REQUIREMENTS_FILE))
    lines.append(f"python3 -m pip install --no-index --find-links {folder} -r {requirements_file}")
    lines.append("FUSIONBENCH_NO_VENV=1 ./run.sh gpu-check   # or any scenario file")
    return lines
