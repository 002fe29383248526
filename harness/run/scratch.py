"""A cell's scratch folder under the temporary directory, and the removal of those left behind.

A run removes its cells' scratch folders when they end, but a run killed with SIGKILL (or a Ray
node process that dies) never reaches that code. Each folder is therefore held by its process with
an exclusive `flock` while it is in use; the kernel lets the lock go when the process dies, however
it dies. The first scratch folder a process makes sweeps the temporary directory for folders of
the same kind that nobody holds and removes them. A folder younger than a minute is left alone,
so one made a moment ago by another process that has not locked it yet is never taken.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from harness import dirlock

MIN_AGE_S = 60.0
_swept: set[str] = set()
_sweeping = threading.Lock()


@contextmanager
def scratch_dir(prefix: str) -> Iterator[Path]:
    """A new folder `<tmp>/<prefix>XXXXXXXX`, locked by this process while the block runs and removed
    after it. Orphans of the same prefix are removed first, once per process."""
    with _sweeping:
        if prefix not in _swept:
            _swept.add(prefix)
            remove_orphans(prefix)
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        fd = dirlock.lock(folder)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        os.close(fd)


def remove_orphans(prefix: str, min_age_s: float = MIN_AGE_S) -> list[Path]:
    """Remove the folders `<tmp>/<prefix>*` that no live process holds and that were last changed
    more than `min_age_s` ago; the folders removed (one only partly removed is not listed). Folders
    this user cannot open are left alone."""
    removed = []
    now = time.time()
    for folder in sorted(Path(tempfile.gettempdir()).glob(f"{prefix}*")):
        try:
            if not folder.is_dir() or folder.is_symlink() or now - folder.stat().st_mtime < min_age_s:
                continue
            fd = dirlock.try_lock(folder, follow_symlink=False)
        except OSError:
            continue
        if fd is None:  # held: a live run's cell
            continue
        try:
            shutil.rmtree(folder, ignore_errors=True)
        finally:
            os.close(fd)
        if not folder.exists():
            removed.append(folder)
    return removed
