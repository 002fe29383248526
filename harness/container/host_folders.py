"""Folders of the host that fusionbench never takes for its own: the root and the system's folders.
An engine's data root (harness/container/engine.py: it writes there, and `--purge` deletes it) and a
folder the launcher mounts read-write into a container (harness/container/launcher.py: `--out`,
`--cache-dir`) must be folders of their own, never one of these nor, for the system's trees,
inside one, however a link or a relative path names them."""

from __future__ import annotations

from pathlib import Path

#: Trees no such folder may be or lie inside.
SYSTEM_TREES = tuple(Path(p) for p in ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc",
                                        "/sbin", "/sys", "/usr"))
#: Folders such a folder may lie inside but not be.
SYSTEM_FOLDERS = tuple(Path(p) for p in ("/", "/home", "/media", "/mnt", "/opt", "/root", "/run", "/srv", "/tmp", "/var",
                                          "/var/lib", "/var/run", "/var/tmp"))


def system_folder(path: Path) -> str | None:
    """Why `path` (resolved, links followed) is not a folder of its own, or None."""
    resolved = path.resolve()
    if resolved in SYSTEM_FOLDERS:
        return f"{path} is {resolved}, a system folder"
    for tree in SYSTEM_TREES:
        if resolved == tree or resolved.is_relative_to(tree):
            return f"{path} is{' in' if resolved != tree else ''} {tree}, a system folder"
    return None
