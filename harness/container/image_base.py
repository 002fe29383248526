"""The images' base where no container registry answers: Debian, built from the distribution's
own packages by mmdebstrap, pinned by containers/base-debian.lock.

The lock names the suite, the mirror, SOURCE_DATE_EPOCH (every file time of the images is clamped
to it) and every package of the base with its version. mmdebstrap installs the minimal base and
the lock's top-level packages (`include`) at their pinned versions; the packages it ends up with
are then read from the base's dpkg database and must be exactly the lock's. When Debian replaces
a version the build stops and says which: `fusionbench image lock-base` writes the lock again from
a fresh base. mmdebstrap writes the same tar for the same packages and SOURCE_DATE_EPOCH, so the
base's layer digest follows from the lock alone.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

from harness.errors import HarnessError

LOCK_NAME = "base-debian.lock"
_HEADER = re.compile(r"^([a-z-]+):\s*(.*)$")
_PACKAGE = re.compile(r"^([a-z0-9][a-z0-9+.-]*):([a-z0-9]+)=(\S+)$")


class BaseImageError(HarnessError):
    """The base could not be built as the lock pins it."""

    exit_code = 2


@dataclass(frozen=True)
class BaseLock:
    suite: str
    mirror: str
    source_date_epoch: int
    include: tuple[str, ...]
    packages: dict[str, str]  # "name:arch" -> version

    @classmethod
    def parse(cls, text: str) -> BaseLock:
        headers: dict[str, str] = {}
        packages: dict[str, str] = {}
        for number, line in enumerate(text.splitlines(), 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            package = _PACKAGE.match(line)
            header = _HEADER.match(line)
            if package:
                packages[f"{package.group(1)}:{package.group(2)}"] = package.group(3)
            elif header:
                headers[header.group(1)] = header.group(2).strip()
            else:
                raise BaseImageError(f"{LOCK_NAME} line {number}: {line!r} is neither `key: value` nor `name:arch=version`")
        missing = [key for key in ("suite", "mirror", "source-date-epoch", "include") if key not in headers]
        if missing or not packages:
            raise BaseImageError(f"{LOCK_NAME}: missing {', '.join(missing) or 'packages'}")
        return cls(suite=headers["suite"], mirror=headers["mirror"], source_date_epoch=int(headers["source-date-epoch"]),
                   include=tuple(headers["include"].split()), packages=packages)

    def render(self) -> str:
        lines = ["# The images' base where no registry answers: Debian built by mmdebstrap from these packages.",
                 "# Written by `fusionbench image lock-base`; the build checks the base has exactly these.",
                 f"suite: {self.suite}", f"mirror: {self.mirror}", f"source-date-epoch: {self.source_date_epoch}",
                 f"include: {' '.join(self.include)}"]
        lines += [f"{name}={version}" for name, version in sorted(self.packages.items())]
        return "\n".join(lines) + "\n"

    def pinned_includes(self) -> list[str]:
        """The top-level packages as apt takes them pinned: NAME=VERSION."""
        versions = {name.split(":")[0]: version for name, version in self.packages.items()}
        return [f"{name}={versions[name]}" if name in versions else name for name in self.include]


def installed_packages(status_text: str) -> dict[str, str]:
    """{"name:arch": version} of the installed packages in a dpkg status file."""
    found = {}
    for block in status_text.split("\n\n"):
        fields = dict(re.findall(r"^([A-Za-z-]+): (.*)$", block, re.MULTILINE))
        if "Package" in fields and fields.get("Status", "").endswith(" installed"):
            found[f"{fields['Package']}:{fields.get('Architecture', 'all')}"] = fields["Version"]
    return found


def differences(locked: dict[str, str], built: dict[str, str]) -> list[str]:
    """How the built base's packages differ from the lock's, one line each."""
    lines = []
    for name in sorted(set(locked) | set(built)):
        if name not in built:
            lines.append(f"{name}: locked {locked[name]}, not installed")
        elif name not in locked:
            lines.append(f"{name}: installed {built[name]}, not in the lock")
        elif locked[name] != built[name]:
            lines.append(f"{name}: locked {locked[name]}, installed {built[name]}")
    return lines


def dpkg_status(base_tar: Path) -> str:
    with tarfile.open(base_tar) as tar:
        for name in ("./var/lib/dpkg/status", "var/lib/dpkg/status"):
            try:
                member = tar.extractfile(name)
            except KeyError:
                continue
            if member is not None:
                return member.read().decode()
    raise BaseImageError(f"{base_tar} has no dpkg database (var/lib/dpkg/status)")


def why_not_here() -> str | None:
    if shutil.which("mmdebstrap") is None:
        return "mmdebstrap is not installed (Debian or Ubuntu: apt-get install mmdebstrap)"
    if os.geteuid() != 0:
        return "building the base with mmdebstrap needs root here"
    return None


def build(lock: BaseLock, out: Path, *, check: bool = True) -> None:
    """mmdebstrap's tar of the base at `out`; with `check`, its packages must be the lock's."""
    refusal = why_not_here()
    if refusal:
        raise BaseImageError(f"no container registry answers, so the base is built from Debian's packages, and {refusal}")
    partial = out.with_name(out.name + ".partial")
    command = ["mmdebstrap", "--quiet", "--variant=minbase", "--format=tar", "--components=main",
               f"--include={','.join(lock.pinned_includes() if check else lock.include)}",
               '--aptopt=Acquire::Check-Valid-Until "false"', lock.suite, str(partial), lock.mirror]
    env = {**os.environ, "SOURCE_DATE_EPOCH": str(lock.source_date_epoch)}
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False, timeout=1800)
    if done.returncode != 0:
        partial.unlink(missing_ok=True)
        tail = " | ".join(done.stderr.strip().splitlines()[-6:])
        hint = (" (a pinned version Debian has replaced: update the lock with `fusionbench image lock-base`)"
                if "was not found" in done.stderr else "")
        raise BaseImageError(f"mmdebstrap failed (exit {done.returncode}){hint}: {tail}")
    if check:
        wrong = differences(lock.packages, installed_packages(dpkg_status(partial)))
        if wrong:
            partial.unlink(missing_ok=True)
            raise BaseImageError("the base's packages are not the lock's (Debian has moved on: update it with "
                                 "`fusionbench image lock-base`): " + "; ".join(wrong[:20]))
    partial.rename(out)


def relock(lock: BaseLock, scratch: Path) -> BaseLock:
    """The lock again, from a base built now with the same suite, mirror, epoch and includes."""
    tar = scratch / "base-relock.tar"
    build(lock, tar, check=False)
    try:
        return BaseLock(suite=lock.suite, mirror=lock.mirror, source_date_epoch=lock.source_date_epoch,
                        include=lock.include, packages=installed_packages(dpkg_status(tar)))
    finally:
        tar.unlink(missing_ok=True)
