"""The wheels an image installs, gathered on the host: every requirement of a hash-locked
requirements file (containers/requirements-KIND.lock) downloaded for CPython 3.11 on Linux x86_64
into a wheelhouse folder of the build cache, each checked against the SHA-256s the lock lists
(`pip download --require-hashes`); nothing is downloaded where every wheel is already there with
a listed hash. The image's install then reads them with no index and no network
(harness/container/image_build.py)."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

from harness.errors import HarnessError

GLIBC_MINOR = 36  # Debian bookworm's glibc 2.36: wheels for manylinux_2_36 and older install


class WheelhouseError(HarnessError):
    """A lock that is not hash-locked as the build needs, or wheels pip could not gather: the image
    is not built, and nothing is tagged."""

    exit_code = 2


def locked_hashes(lock_text: str) -> dict[tuple[str, str], set[str]]:
    """(normalized name, version) -> the SHA-256s a hash-locked requirements file allows."""
    pins: dict[tuple[str, str], set[str]] = {}
    current: set[str] | None = None
    for line in lock_text.splitlines():
        line = line.strip().rstrip("\\").strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("--hash=sha256:"):
            if current is None:
                raise WheelhouseError(f"a hash before any requirement in the lock: {line[:80]}")
            current.add(line.removeprefix("--hash=sha256:"))
            continue
        name, _, version = line.partition("==")
        if not version:
            raise WheelhouseError(f"the lock pins every requirement with ==; this line does not: {line[:80]}")
        current = pins.setdefault((_normalized(name), version.strip()), set())
    return pins


def _normalized(name: str) -> str:
    return "".join("_" if c in "-." else c for c in name.strip().lower())


def holds(lock: Path, wheelhouse: Path) -> bool:
    """Whether `wheelhouse` already has, for every requirement of `lock`, a wheel whose SHA-256 the
    lock lists (checked here, file by file; seconds where pip would take half a minute)."""
    if not wheelhouse.is_dir():
        return False
    files = sorted(wheelhouse.glob("*.whl"))
    for (name, version), allowed in locked_hashes(lock.read_text()).items():
        candidates = [f for f in files if f.name.lower().startswith(f"{name}-{version}-")]
        if not any(file_sha256(f) in allowed for f in candidates):
            return False
    return True


def file_sha256(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


#: The legacy manylinux tags, each with the glibc 2.x it needs (PEP 600: manylinux_2_17, _2_12, _2_5).
LEGACY_TAGS = (("manylinux2014_x86_64", 17), ("manylinux2010_x86_64", 12), ("manylinux1_x86_64", 5))


def linux_platforms(glibc_minor: int) -> list[str]:
    """The Linux x86_64 wheel tags that install with glibc 2.`glibc_minor`, newest first (pip
    download takes the list as it is; it does not widen one tag to the older ones). A legacy tag
    is offered only where that glibc is as new as the one it stands for."""
    platforms = [f"manylinux_2_{minor}_x86_64" for minor in range(glibc_minor, 4, -1)]
    legacy = [tag for tag, needs in LEGACY_TAGS if glibc_minor >= needs]
    return platforms + legacy + ["linux_x86_64"]


def gather(lock: Path, wheelhouse: Path) -> None:
    """Download the lock's wheels for CPython 3.11 on Linux x86_64 into `wheelhouse`, each
    checked against the lock's SHA-256 (pip refuses a wheel whose hash is not listed); nothing
    to do where every one is there already with a listed hash."""
    if holds(lock, wheelhouse):
        return
    wheelhouse.mkdir(parents=True, exist_ok=True)
    platforms = linux_platforms(GLIBC_MINOR)
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--require-hashes",
               "--only-binary=:all:", "--python-version", "3.11", "--implementation", "cp", "--abi", "cp311",
               *[f"--platform={platform}" for platform in platforms],
               "--dest", str(wheelhouse), "--requirement", str(lock)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = " | ".join(done.stderr.strip().splitlines()[-6:])
        raise WheelhouseError(f"gathering the wheels of {lock.name} failed (exit {done.returncode}): {tail}")
