"""Acting as a user who is not root, within one test: what a non-root user meets after root ran
the harness on the same machine (folders, lock files and cache entries root made)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

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
