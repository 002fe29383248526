"""The one rule for every path a bundle names and every path a command writes to.

A bundle is hostile input: its records name folders (a cell's LoadGen, accuracy and compliance
logs) and its compliance tests name folders by key. Whatever reads such a path goes through
`inner_path`: a plain relative path (no `..`, nothing absolute, no backslash or control
character), no symbolic link on the way, resolved inside the bundle. Whatever reads a file a bundle
holds (through harness/bundle/snapshot.py, each file once), or a file the user names, goes through
`read_bytes`: regular files only (a FIFO, a device or a link is refused at once, never waited on)
and bounded in size.

Every `--out` goes through `output_path`: never a bundle's own folder or anything inside it (a
bundle is never written by the commands that read it; `report` writing into the bundle it
renders is the one exception, and asks for it).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from harness.bundle.manifest import check_path
from harness.errors import BundleError, BundleUnreadable, ConfigError
from harness.files.regular_file import read_regular
from harness.plain_text import visible

MAX_FILE_BYTES = 64 << 20
_SHOWN = 80  # characters of a hostile path a message quotes


def inner_path(root: Path, rel: object, where: str) -> Path:
    """`root / rel` for a path `rel` read from a bundle; BundleError naming `where` unless it is a
    plain relative path that stays inside `root` without passing through a symbolic link."""
    if not isinstance(rel, str):
        raise BundleError(f"{where}: {visible(str(rel)[:_SHOWN])!r} is not a path")
    problem = check_path(rel)
    if problem:
        raise BundleError(f"{where}: path {visible(rel[:_SHOWN])!r} is {problem}; a bundle names only paths inside itself")
    path = root
    for part in rel.split("/"):
        path = path / part
        if path.is_symlink():
            raise BundleError(f"{where}: path {visible(rel[:_SHOWN])!r} passes through a symbolic link; refused")
    # Cannot fail after the checks above but for a link made in between: kept as the last word.
    if not path.resolve().is_relative_to(root.resolve()):
        raise BundleError(f"{where}: path {visible(rel[:_SHOWN])!r} leads outside the bundle; refused")
    return path


def read_bytes(path: Path, where: str, *, max_bytes: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of the regular file at `path`; BundleError naming `where` for a missing file, a
    link, a FIFO or other special file (refused without waiting on it), or one over `max_bytes`;
    BundleUnreadable for one this user may not read, or the system fails to read."""
    return read_regular(path, where, max_bytes=max_bytes, error=BundleError, unreadable=BundleUnreadable)


def output_path(out: Path, bundles: Iterable[Path], option: str = "--out", *, may_be: Path | None = None) -> Path:
    """`out`, resolved, once it is known to lie outside every bundle: those in `bundles` (the ones
    read) and any other (a folder with a bundle.json and a cells/ folder) at or above it; `may_be`
    is the one bundle `out` may equal. A folder that merely holds a bundle is fine: what a command
    writes there are files of their own names beside it. ConfigError otherwise: nothing has been
    written."""
    resolved = out.resolve()
    allowed = may_be.resolve() if may_be is not None else None
    for bundle in bundles:
        root = bundle.resolve()
        if allowed is not None and resolved == allowed == root:
            continue
        if resolved == root or resolved.is_relative_to(root):
            raise ConfigError(f"{option} {visible(out)} is inside the bundle {visible(bundle)}: a command that reads a "
                              "bundle never writes into it; give a path outside it")
    for folder in (resolved, *resolved.parents):
        if folder != allowed and _is_bundle(folder):
            raise ConfigError(f"{option} {visible(out)} is inside the bundle {visible(folder)}: no command writes into a "
                              "bundle but the run that made it; give a path outside it")
    return resolved


def _is_bundle(folder: Path) -> bool:
    """Whether `folder` holds a bundle; False where this user cannot look into it (another user's
    0700 home, say): pathlib's is_file raises PermissionError there, and the caller's own write then
    says plainly that the path is not writable, naming the option, not a bundle.json it never asked for."""
    try:
        return (folder / "bundle.json").is_file() and (folder / "cells").is_dir()
    except PermissionError:
        return False
