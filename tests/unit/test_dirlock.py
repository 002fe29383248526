"""A directory lock: one holder at a time, let go when the holder's process dies, and a symlink
refused where the caller asks."""

from __future__ import annotations

import os
import subprocess
import sys
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
