"""Image layers written bit for bit the same from the same files: the tar of a layer depends on
the files' paths, contents, modes, owners and link targets only.

What a tar records besides content, and what is done with it here:
- order: entries sorted by path (directories before what they hold);
- times: every mtime clamped to SOURCE_DATE_EPOCH (a file older keeps its own), no atime or ctime;
- owners: numeric uid and gid kept, user and group names dropped;
- format: POSIX (pax) headers only where a path or value needs one, never for times;
- device nodes and sockets are left out (the engine gives a container its own /dev).
The layer's digest (its diff_id, sha256 of the uncompressed tar) is computed while it is written.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tarfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO


class _Digesting:
    """A binary file that hashes what is written to it."""

    def __init__(self, out: BinaryIO) -> None:
        self.out, self.digest, self.size = out, hashlib.sha256(), 0

    def write(self, data: bytes) -> int:
        self.digest.update(data)
        self.size += len(data)
        return self.out.write(data)

    def tell(self) -> int:
        return self.size


def _normalised(info: tarfile.TarInfo, epoch: int, owner: tuple[int, int] | None = None) -> tarfile.TarInfo:
    info.mtime = min(int(info.mtime), epoch)
    if owner is not None:
        info.uid, info.gid = owner
    info.uname = info.gname = ""
    info.pax_headers = {}
    return info


def _key(name: str) -> tuple[str, ...]:
    return tuple(name.strip("/").split("/"))


def _clean(name: str) -> str:
    name = name[2:] if name.startswith("./") else name
    return name.strip("/") or "."


def _wanted(info: tarfile.TarInfo) -> bool:
    return not (info.ischr() or info.isblk() or info.isfifo() or info.type not in tarfile.SUPPORTED_TYPES)


def write_from_tar(source: Path, out: Path, epoch: int, leave_out: Iterable[str] = ()) -> str:
    """Rewrite the tar `source` as a layer at `out`; return its diff_id (sha256:...). Paths under
    any of `leave_out` (e.g. "dev") are kept as the directory itself, without what it holds."""
    prefixes = tuple(_key(p) for p in leave_out)
    with tarfile.open(source, "r:*") as src:
        members = [m for m in src.getmembers() if _clean(m.name) != "."]
        by_name: dict[str, tarfile.TarInfo] = {}
        for member in members:
            member.name = _clean(member.name)
            if member.islnk():
                member.linkname = _clean(member.linkname)
            if any(_key(member.name)[:len(p)] == p and len(_key(member.name)) > len(p) for p in prefixes):
                continue
            if _wanted(member):
                by_name[member.name] = member  # a later entry of the same path replaces an earlier one
        with out.open("wb") as raw:
            sink = _Digesting(raw)
            with tarfile.open(fileobj=sink, mode="w", format=tarfile.PAX_FORMAT) as layer:  # type: ignore[call-overload]
                for name in sorted(by_name, key=_key):
                    member = _normalised(by_name[name], epoch)
                    layer.addfile(member, src.extractfile(member) if member.isreg() else None)
    return "sha256:" + sink.digest.hexdigest()


def _walk(root: Path) -> Iterator[Path]:
    """Every path under `root`, sorted, directories before their content; links not followed."""
    for entry in sorted(os.scandir(root), key=lambda e: e.name):
        path = Path(entry.path)
        yield path
        if entry.is_dir(follow_symlinks=False):
            yield from _walk(path)


def write_from_directory(root: Path, out: Path, epoch: int, owner: tuple[int, int] | None = None) -> str:
    """The files under `root` as a layer at `out` (paths relative to `root`); return its diff_id.
    Hard links to a file already written become links to it. `owner` (uid, gid), when given, owns
    every entry (files installed as whichever user ran the install belong to root in the image)."""
    seen: dict[tuple[int, int], str] = {}
    with out.open("wb") as raw:
        sink = _Digesting(raw)
        with tarfile.open(fileobj=sink, mode="w", format=tarfile.PAX_FORMAT) as layer:  # type: ignore[call-overload]
            for path in _walk(root):
                name = path.relative_to(root).as_posix()
                status = path.lstat()
                if not (stat.S_ISREG(status.st_mode) or stat.S_ISDIR(status.st_mode) or stat.S_ISLNK(status.st_mode)):
                    continue
                info = layer.gettarinfo(str(path), arcname=name)
                identity = (status.st_dev, status.st_ino)
                if info.isreg() and status.st_nlink > 1 and identity in seen:
                    info.type, info.linkname, info.size = tarfile.LNKTYPE, seen[identity], 0
                elif info.isreg() and status.st_nlink > 1:
                    seen[identity] = name
                info = _normalised(info, epoch, owner)
                if info.isreg():
                    with path.open("rb") as content:
                        layer.addfile(info, content)
                else:
                    layer.addfile(info)
    return "sha256:" + sink.digest.hexdigest()
