"""The modes a plain file or folder gets under this process's umask, for what is made private first
(mkstemp's 0600, mkdtemp's 0700) and then put where another user of a shared bundle or cache reads it."""

from __future__ import annotations

import os
from pathlib import Path


def umask() -> int:
    """The process's umask: from /proc (Linux), which reads it without changing it; elsewhere by
    setting it and setting it back at once."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def plain_file_mode() -> int:
    """What `open(path, "w")` would have made the file: 0666 less the umask."""
    return 0o666 & ~umask()


def plain_folder_mode() -> int:
    """What `mkdir` would have made the folder: 0777 less the umask."""
    return 0o777 & ~umask()
