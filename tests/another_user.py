"""Acting as a user who is not root, within one test: what a non-root user meets after root ran
the harness on the same machine (folders, lock files and cache entries root made)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

NOBODY = 65534

#: Tests that make files as root and then read them as another user.
AS_ROOT = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                             reason="needs root, to make files as root and act as another user")


@contextmanager
def acting_as(uid: int = NOBODY) -> Iterator[None]:
    """User and group `uid` as this process's effective ones for the block (root's again after)."""
    os.setegid(uid)
    os.seteuid(uid)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)


@contextmanager
def root_folder_every_user_may_enter() -> Iterator[Path]:
    """A folder root makes under /tmp (0755: every user may enter and read it, only root write),
    removed after the block; tmp_path's folders are closed to other users."""
    folder = Path(tempfile.mkdtemp(prefix="fusionbench-test-users-"))
    try:
        os.chmod(folder, 0o755)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def under_umask(mask: int) -> Iterator[None]:
    """This process's umask `mask` for the block, the one before it after."""
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)
