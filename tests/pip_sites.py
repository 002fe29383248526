"""Packages the tests pip-install into private site directories, once per test session.

Under pytest-xdist the controller process makes the session's shared directory and names it in
`SHARED_VARIABLE` before it starts its workers, which inherit the variable: the example plugin is
installed there once (tests/conftest.py) instead of once in every process, and a package that
only some tests need (tests/faults) by whichever worker needs it first, the others waiting for it
and then using that install. The variable does not start with FUSIONBENCH_, so cell workers,
which inherit those, never see it.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

SHARED_VARIABLE = "PYTEST_FUSIONBENCH_SHARED_DIR"
_DONE = ".installed"


def shared_dir() -> Path | None:
    """The session's shared directory, once the first process of the session has made it."""
    named = os.environ.get(SHARED_VARIABLE)
    return Path(named) if named else None


def install(source: Path, name: str, root: Path) -> tuple[Path, str]:
    """pip-install `source` (built from a copy: pip builds in the source tree, which must stay
    clean) into `root`/`name`, unless this session did already; returns the site directory and
    pip's error output ("" when installed)."""
    site = root / name
    with open(root / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another worker installing it: wait, then use its install
        if (site / _DONE).exists():
            return site, ""
        shutil.rmtree(site, ignore_errors=True)
        copy = root / f"{name}-src"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(source, copy, ignore=shutil.ignore_patterns("build", "*.egg-info"))
        isolation = ["--no-build-isolation"] if builds_wheels_here() else []  # else pip fetches setuptools
        done = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps",
             *isolation, "--target", str(site), str(copy)],
            capture_output=True, text=True, timeout=300,
        )
        if done.returncode != 0:
            return site, done.stderr or done.stdout or f"pip exited with {done.returncode}"
        (site / _DONE).touch()
    return site, ""


def builds_wheels_here() -> bool:
    """Whether this Python's own setuptools can build a wheel (its bdist_wheel: setuptools 70.1 on,
    or the `wheel` package): then pip builds without fetching a build environment. A venv made by
    ensurepip has setuptools 65.5 and no `wheel`."""
    from importlib import metadata

    try:
        major, minor = (int(part) for part in metadata.version("setuptools").split(".")[:2])
    except (metadata.PackageNotFoundError, ValueError):
        return False
    if (major, minor) >= (70, 1):
        return True
    try:
        metadata.version("wheel")
    except metadata.PackageNotFoundError:
        return False
    return True


def with_site(environ: dict[str, str], site: Path) -> dict[str, str]:
    """`environ` with `site` first on PYTHONPATH."""
    return {**environ, "PYTHONPATH": os.pathsep.join(p for p in (str(site), environ.get("PYTHONPATH")) if p)}
