"""A directory lock: one holder at a time, let go when the holder's process dies, and a symlink
refused where the caller asks."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness import dirlock

HOLDER = """
import sys, time
from pathlib import Path
from harness import dirlock
fd = dirlock.try_lock(Path(sys.argv[1]))
print("held" if fd is not None else "refused", flush=True)
time.sleep(60)
"""


def test_a_second_holder_is_refused_until_the_first_dies(tmp_path: Path) -> None:
    repo = Path(__file__).resolve().parents[2]
    child = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(repo)})
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "held"
        assert dirlock.try_lock(tmp_path) is None
    finally:
        child.kill()
        child.wait(timeout=30)
    fd = dirlock.try_lock(tmp_path)
    assert fd is not None, "the lock outlived its killed holder"
    os.close(fd)


def test_a_symlink_is_refused_when_asked_and_a_missing_folder_raises(tmp_path: Path) -> None:
    target = tmp_path / "real"
    target.mkdir()
    link = tmp_path / "link"
    link.symlink_to(target)
    with pytest.raises(OSError):
        dirlock.try_lock(link, follow_symlink=False)
    with pytest.raises(OSError):
        dirlock.try_lock(tmp_path / "missing")
    os.close(dirlock.lock(link))  # followed by default


def test_a_bounded_wait_gives_up_on_a_holder_that_never_lets_go_and_takes_the_lock_once_free(tmp_path: Path) -> None:
    """A holder that is suspended or hung kept `lock` waiting for as long as it lived; `lock_within`
    answers None once its bound has passed, and the lock once the holder is gone."""
    held = dirlock.lock(tmp_path)  # another open file: flock holds it against this process's own too
    try:
        began = time.monotonic()
        assert dirlock.lock_within(tmp_path, 0.3) is None
        assert 0.3 <= time.monotonic() - began < 5
    finally:
        os.close(held)
    fd = dirlock.lock_within(tmp_path, 0.3)
    assert fd is not None
    os.close(fd)
