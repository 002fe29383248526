"""Tests that build a shared library in their tmp_path and load it: on a host whose temporary
folder is mounted noexec the library cannot be mapped, and the harness gives no figure there, as
its own tests of that show; these say so and skip."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.run.preflight import executable_mapping_refused, noexec_mount


def needs_exec(folder: Path) -> None:
    """Skip the test where `folder` lies on a file system mounted noexec, or where a security policy
    refuses to map a file there executable."""
    mount = noexec_mount(folder)
    if mount is not None:
        pytest.skip(f"{folder} is on a file system mounted noexec ({mount}): a library built there cannot be loaded")
    refused = executable_mapping_refused(folder)
    if refused is not None:
        pytest.skip(f"a file in {folder} cannot be mapped executable ({refused}): a library built there cannot be loaded")
