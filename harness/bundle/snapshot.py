"""A bundle's files, each read at most once.

Opening a bundle (validate, `--resume`, compare, report, findings, pack) checks its manifest, which
hashes every file, and then reads the records and logs for what they say. A snapshot serves both:
the first time anything asks for a file (its hash, or its bytes) the file is read whole, under the
rules of `harness.bundle.confine` (a regular file only, never waited on, bounded in size; a path the
bundle names stays inside it), and its bytes are kept; every later hash or read of that file uses
them. A file over KEEP_BYTES, or beyond KEEP_TOTAL_BYTES kept in all, is hashed as it is streamed
and not kept: no reader takes a file that large, and a hostile bundle cannot fill the memory.

A file or folder the system would not let this user read is kept too, as what it said
(`unreadable`), and asked for again is refused again without another try: a reader that turns a
refusal into a problem line of its own cannot hide that the bundle was not read whole, and a refusal
is said once.

A snapshot is of the bundle as it was read: a run that writes to the bundle afterwards reads what it
wrote from its own records (`harness.bundle.writer.Bundle`), not from here.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from harness.bundle.confine import MAX_FILE_BYTES, inner_path, read_bytes
from harness.bundle.manifest import bundle_files, sha256_file
from harness.errors import BundleError, BundleUnreadable
from harness.files.regular_file import refused

#: The largest file a snapshot keeps: the largest any reader of a bundle takes.
KEEP_BYTES = MAX_FILE_BYTES
#: The most a snapshot keeps in all.
KEEP_TOTAL_BYTES = 1 << 30


class Snapshot:
    """The files of the bundle at `root`, read once each, on demand."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._kept: dict[str, bytes] = {}
        self._kept_bytes = 0
        self._digests: dict[str, str] = {}
        self._walked: tuple[list[str], list[str]] | None = None
        self._unlisted: BundleUnreadable | None = None  # the walk's refusal
        self._unread: dict[str, BundleUnreadable] = {}  # each file's refusal, by its relative path

    @property
    def unreadable(self) -> list[str]:
        """One line per folder or file of the bundle the system would not let this user read, as
        it was asked for: the walk's first, then the files' in the order they were read."""
        return [str(exc) for exc in (self._unlisted, *self._unread.values()) if exc is not None]

    def walk(self) -> tuple[list[str], list[str]]:
        """(regular files, other entries) as sorted relative paths: `manifest.bundle_files`, once.
        BundleUnreadable, kept, naming a folder this user may not list."""
        if self._unlisted is not None:
            raise self._unlisted
        if self._walked is None:
            try:
                self._walked = bundle_files(self.root)
            except BundleUnreadable as exc:
                self._unlisted = exc
                raise
        return self._walked

    def read(self, rel: str, where: str | None = None, *, max_bytes: int) -> bytes:
        """The bytes of the regular file `rel`; BundleError naming `where` (default: `rel`) for a
        missing file, a link, a special file or one over `max_bytes`, as `confine.read_bytes` says it."""
        label = where or rel
        if rel in self._unread:
            raise self._unread[rel]
        data = self._kept.get(rel)
        if data is None:
            try:
                data = read_bytes(self.root / rel, label, max_bytes=max_bytes)
            except BundleUnreadable as exc:
                self._unread[rel] = exc
                raise
            self._keep(rel, data)
        elif len(data) > max_bytes:
            raise BundleError(f"{label}: {len(data)} bytes, over the {max_bytes}-byte limit for this file")  # as read_bytes says it
        return data

    def text(self, rel: str, where: str | None = None, *, max_bytes: int) -> str:
        """`read` as UTF-8 text; BundleError for bytes that are not."""
        try:
            return self.read(rel, where, max_bytes=max_bytes).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BundleError(f"{where or rel}: not UTF-8 text (byte {exc.start})") from None

    def inner_text(self, rel: object, *, max_bytes: int = MAX_FILE_BYTES) -> str:
        """A text file the bundle names by `rel` (named so in errors): the path first checked by
        `confine.inner_path` (plain, relative, no link on the way, inside the bundle)."""
        inner_path(self.root, rel, str(rel))
        assert isinstance(rel, str)  # inner_path refuses anything else
        return self.text(rel, max_bytes=max_bytes)

    def inner_bytes(self, rel: object, where: str, *, max_bytes: int = MAX_FILE_BYTES) -> bytes:
        """As `inner_text`, the bytes, named `where` in errors."""
        inner_path(self.root, rel, where)
        assert isinstance(rel, str)
        return self.read(rel, where, max_bytes=max_bytes)

    def sha256(self, rel: str) -> str:
        """The SHA-256 of the regular file `rel`, from the bytes kept or read now (and kept); a file
        too large to keep is hashed as it streams. BundleError when it cannot be read (BundleUnreadable,
        kept, where the system would not let this user read it)."""
        digest = self._digests.get(rel)
        if digest is not None:
            return digest
        data = self._kept.get(rel)
        if data is None:
            try:
                data = self.read(rel, max_bytes=KEEP_BYTES)
            except BundleUnreadable:
                raise
            except BundleError:
                if not (self.root / rel).is_file():
                    raise
                data = None  # over KEEP_BYTES: hashed below as it streams
        digest = hashlib.sha256(data).hexdigest() if data is not None else self._streamed(rel)
        self._digests[rel] = digest
        return digest

    def _keep(self, rel: str, data: bytes) -> None:
        if len(data) <= KEEP_BYTES and self._kept_bytes + len(data) <= KEEP_TOTAL_BYTES:
            self._kept[rel] = data
            self._kept_bytes += len(data)

    def _streamed(self, rel: str) -> str:
        """The SHA-256 of a file too large to keep, read as it streams (it opened a moment ago)."""
        try:
            return sha256_file(self.root / rel)
        except OSError as exc:
            if not refused(exc):
                raise BundleError(f"{rel}: unreadable ({exc.strerror})") from None
            self._unread[rel] = BundleUnreadable(f"{rel}: unreadable ({exc.strerror})")
            raise self._unread[rel] from None
