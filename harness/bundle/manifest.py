"""MANIFEST.sha256: the SHA-256 of every file of a bundle, so that any edited, missing or added
file is found.

Format: one line per file, `<64 hex digits>  <path>`, paths relative to the bundle with `/`,
sorted. A manifest is read as hostile input: a path that is absolute, climbs out with `..`,
holds a backslash or a control character, or repeats, is refused before any file is opened, and
the bundle is walked without following symbolic links, so no path can lead outside it.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from harness.errors import BundleError, BundleUnreadable
from harness.files.atomic import write_bytes_atomic

MANIFEST = "MANIFEST.sha256"
MAX_MANIFEST_BYTES = 16 << 20
_LINE = re.compile(r"^([0-9a-f]{64})  (.+)$")
_BAD_CHARACTERS = re.compile(r"[\\\x00-\x1f\x7f]")


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def bundle_files(root: Path) -> tuple[list[str], list[str]]:
    """(regular files, other entries) under `root`, as sorted relative paths, without following
    links. Symbolic links and special files are "other": a bundle never holds them.
    BundleUnreadable naming a folder this user may not list, or an entry it may not look at: what
    lies there is unseen, not missing."""
    files: list[str] = []
    others: list[str] = []

    def unlisted(exc: OSError) -> None:
        if not isinstance(exc, (FileNotFoundError, NotADirectoryError)):  # not a folder gone or replaced meanwhile
            raise _unreadable(root, Path(exc.filename), exc)

    for directory, subdirs, names in os.walk(root, onerror=unlisted, followlinks=False):
        base = Path(directory)
        for name in list(subdirs):
            if stat.S_ISLNK(_mode(root, base / name)):
                others.append((base / name).relative_to(root).as_posix())
                subdirs.remove(name)
        for name in names:
            path = base / name
            rel = path.relative_to(root).as_posix()
            (files if stat.S_ISREG(_mode(root, path)) else others).append(rel)
    return sorted(files), sorted(others)


def _mode(root: Path, path: Path) -> int:
    """The mode of `path` itself (a link not followed); 0 for one gone meanwhile, which then reads
    as no regular file."""
    try:
        return os.lstat(path).st_mode
    except FileNotFoundError:
        return 0
    except OSError as exc:  # a folder this user may list but not enter
        raise _unreadable(root, path, exc) from None


def _unreadable(root: Path, path: Path, exc: OSError) -> BundleUnreadable:
    rel = path.relative_to(root).as_posix()
    return BundleUnreadable(f"{rel if rel != '.' else 'its folder'}: unreadable ({exc.strerror})")


def write(root: Path, coming: Mapping[str, bytes] | None = None) -> None:
    """Write `root`'s manifest: every regular file but the manifest itself and temporary files.
    `coming`: files about to be written, by their relative path, listed with the SHA-256 of the
    bytes given rather than of what the path holds now (or lacks)."""
    coming = coming or {}
    files, _ = bundle_files(root)
    listed = sorted({*(rel for rel in files if rel != MANIFEST and not rel.endswith(".tmp")), *coming})
    lines = [f"{hashlib.sha256(coming[rel]).hexdigest() if rel in coming else sha256_file(root / rel)}  {rel}\n"
             for rel in listed]
    write_bytes_atomic(root / MANIFEST, "".join(lines).encode())


def check_path(rel: str) -> str | None:
    """Why `rel` cannot name a file inside a bundle, or None when it can."""
    if not rel or len(rel) > 1024:
        return "empty or over 1024 characters"
    if rel.startswith("/"):
        return "an absolute path"
    if _BAD_CHARACTERS.search(rel):
        return "one with a backslash or a control character"
    if any(part in ("", ".", "..") for part in rel.split("/")):
        return "not a plain relative path (empty, '.' or '..' component)"
    return None


def parse(text: str, where: str = MANIFEST) -> dict[str, str]:
    """{relative path: sha256} from a manifest's text; BundleError on any line that is not one."""
    entries: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        match = _LINE.match(line)
        if match is None:
            raise BundleError(f"{where}:{number}: not '<sha256>  <path>': {line[:80]!r}")
        digest, rel = match.groups()
        problem = check_path(rel)
        if problem:
            raise BundleError(f"{where}:{number}: path {rel[:80]!r} is {problem}; refused")
        if rel in entries:
            raise BundleError(f"{where}:{number}: {rel[:80]} is listed twice")
        entries[rel] = digest
    return entries


class Files(Protocol):
    """A bundle's files as the integrity check reads them (harness.bundle.snapshot.Snapshot: each
    file read once, its hash and its content from the same bytes)."""

    root: Path

    def walk(self) -> tuple[list[str], list[str]]: ...

    def read(self, rel: str, where: str | None = None, *, max_bytes: int) -> bytes: ...

    def sha256(self, rel: str) -> str: ...


def read(files: Files) -> dict[str, str]:
    """The manifest of the bundle, read as a regular file, bounded, and parsed strictly."""
    data = files.read(MANIFEST, max_bytes=MAX_MANIFEST_BYTES)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise BundleError(f"{MANIFEST}: not UTF-8 text") from None
    return parse(text)


_MISSING = f": listed in {MANIFEST} but missing"
_EDITED = f": edited (its SHA-256 differs from {MANIFEST})"
_ADDED = f": added (not in {MANIFEST})"


def missing_file(problem: str) -> str | None:
    """The file a line of `problems` says is missing, or None for any other problem."""
    return problem.removesuffix(_MISSING) if problem.endswith(_MISSING) else None


def file_of(problem: str) -> str | None:
    """The file a line of `problems` names as missing, edited or added, or None for any other."""
    for suffix in (_MISSING, _EDITED, _ADDED):
        if problem.endswith(suffix):
            return problem.removesuffix(suffix)
    return None


def links_and_special_files(files: Files) -> list[str]:
    """One line per symbolic link or special file in the bundle: it holds regular files only."""
    return _link_lines(files.walk()[1])


def _link_lines(others: list[str]) -> list[str]:
    return [f"{rel}: a symbolic link or special file; a bundle holds regular files only" for rel in others]


def problems(files: Files) -> list[str]:
    """One line per file that is missing, edited, added, not a regular file, or unreadable."""
    try:
        listed = read(files)
    except BundleError as exc:
        return [str(exc)]
    regular, others = files.walk()  # one walk of the bundle serves both checks
    present = set(regular)
    lines = _link_lines(others)
    for rel, digest in listed.items():
        if rel not in present:
            lines.append(f"{rel}{_MISSING}")
            continue
        try:
            edited = files.sha256(rel) != digest
        except BundleError as exc:
            lines.append(str(exc))
            continue
        if edited:
            lines.append(f"{rel}{_EDITED}")
    for rel in regular:
        if rel != MANIFEST and rel not in listed:
            lines.append(f"{rel}{_ADDED}")
    return lines
