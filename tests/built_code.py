"""Tests that build a shared library in their tmp_path and load it: on a host whose temporary
folder is mounted noexec the library cannot be mapped, and the harness gives no figure there, as
its own tests of that show; these say so and skip."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.run.preflight import noexec_mount


def needs_exec(folder: Path) -> None:
    """Skip the test where `folder` lies on a file system mounted noexec."""
    mount = noexec_mount(folder)
    if mount is not None:
        pytest.skip(f"{folder} is on a file system mounted noexec ({mount}): a library built there cannot be loaded")
