"""Keys, atomic writes and integrity for the artifacts backends keep between cells and runs.

An exported ONNX file or a compiled library is reusable only for the same weights, input shape,
dtype, library versions and settings. `fingerprint` hashes all of them (the weights by content,
so two models with different random seeds never share an artifact; the version of the library
that defines the model's class, torchvision's say, since its code is the model's forward, and of
the package a plugin's model came from, `PROVIDED_BY`, and a digest of that package's files,
`PLUGIN_CODE`, so that an edit of its forward at the same version is no hit), and `cached_dir` builds an
artifact into a temporary directory, seals it with the SHA-256 of every file it holds
(`.entry.sha256`) and renames it into place, so an interrupted or failed build never leaves an
entry that a later cell would load. Each use checks the seal: an entry edited, truncated or
emptied since (a full disk, a copy cut short, a hand), written before entries were sealed, or not
a directory of its own (a link, to another key's entry or elsewhere, or a file), is moved aside
(a link removed, never what it points to) and built again, with a one-line warning on standard error and on the cell
(`repairs`). What a killed build or repair left (`.partial`, `.broken`) is removed by the next
build in the same folder.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from importlib import metadata
from pathlib import Path
from typing import Any, Callable

from harness import dirlock
from harness.errors import BackendFailed
from harness.file_modes import plain_folder_mode

SEAL = ".entry.sha256"
PARTIAL = ".partial"  # an entry being built
BROKEN = ".broken"  # a damaged entry moved aside, removed at once
#: How old a leftover `.partial` or `.broken` folder must be before a sweep removes it.
ORPHAN_MIN_AGE_S = 60.0
#: The attribute a plugin's model carries (harness/models/zoo.py): its package's `name==version`,
#: which a key holds beside the defining library (a plugin's nn.Sequential is torch's class).
PROVIDED_BY = "fusionbench_provided_by"
#: The attribute a plugin's model carries beside it: the SHA-256 of its package's files
#: (harness/models/plugin_source.py), which an edit changes where the version stays.
PLUGIN_CODE = "fusionbench_plugin_code"
_CHUNK = 1 << 20
_repairs: list[str] = []
_swept: set[Path] = set()
_sweeping = threading.Lock()


def fingerprint(model: Any, example: Any, **settings: Any) -> str:
    """A hex key for `model`'s class and weights, `example`'s shape and dtype, and `settings`
    (JSON-serialisable: library versions, dtype, variant, options)."""
    return _key(model, example, settings, weights=True)


def structure_fingerprint(model: Any, example: Any, **settings: Any) -> str:
    """A hex key for what `model` computes but not its weights: its class, its parameters' and
    buffers' names, shapes and dtypes, `example`'s shape and dtype, and `settings`. For artifacts
    that depend on the shapes alone (a tuning database of kernel schedules)."""
    return _key(model, example, settings, weights=False)


def _key(model: Any, example: Any, settings: dict[str, Any], weights: bool) -> str:
    digest = hashlib.sha256()
    digest.update(f"{type(model).__module__}.{type(model).__qualname__}".encode())
    digest.update(defining_library(type(model).__module__).encode())
    digest.update(str(getattr(model, PROVIDED_BY, "")).encode())
    digest.update(str(getattr(model, PLUGIN_CODE, "")).encode())
    digest.update(f"{tuple(example.shape)}:{example.dtype}".encode())
    digest.update(json.dumps(settings, sort_keys=True, default=str).encode())
    for name, tensor in list(model.named_parameters()) + list(model.named_buffers()):
        digest.update(f"{name}:{tuple(tensor.shape)}:{tensor.dtype}".encode())
        if weights:
            data = tensor.detach().cpu().contiguous().reshape(-1)
            digest.update(data.view(_same_width_int(data)).numpy().tobytes())
    return digest.hexdigest()[:32]


@functools.lru_cache(maxsize=None)
def defining_library(module: str) -> str:
    """The installed distribution named as the top-level package of `module`, with its version
    (torchvision's for a torchvision model): its code is the model's forward, so another version
    may compute otherwise from the same weights and export another graph. "" where none is (a class
    defined in a script). Asked by name, not through every installed distribution's files, which
    takes a fifth of a second and would be counted in a cell's prepare time."""
    top = module.partition(".")[0]
    try:
        return f"{top}=={metadata.version(top)}"
    except metadata.PackageNotFoundError:
        return ""


def _same_width_int(tensor: Any) -> Any:
    """An integer dtype of the tensor's element width (numpy has no bfloat16)."""
    import torch

    return {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[tensor.element_size()]


def cached_dir(path: Path, build: Callable[[Path], None]) -> bool:
    """Make sure the artifact directory `path` exists and is intact, calling `build(tmp_dir)` when
    it does not or is not.

    `build` fills an empty temporary directory beside `path`, which is sealed and renamed to
    `path` only when `build` returns, so `path` is always complete. Returns True when `path` was
    already there and intact (a cache hit: nothing was built here), False when this call built
    it, even where a concurrent build of the same artifact was renamed into place first (this
    call's build is then dropped for that one, but its time was spent: the caller's compile was
    cold, not warm).
    """
    if os.path.lexists(path):
        _refuse_unreadable(path)
        damage = damage_of(path)
        if damage is None:
            return True
        _repair(path, damage)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _remove_orphans_once(path.parent)
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=PARTIAL, dir=path.parent))
    except PermissionError as exc:
        raise BackendFailed(f"the artifact cache folder {path.parent} is not writable by this user ({exc.strerror}; "
                            f"{_owner(path.parent)}): give --cache-dir a folder of your own, or make the shared one "
                            "group-writable (setgid folders and umask 002 for every user of it)") from None
    try:
        held = dirlock.lock(tmp)  # while it builds: another process's sweep leaves it alone
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    try:
        build(tmp)
        _seal(tmp)
        os.chmod(tmp, plain_folder_mode())  # mkdtemp's 0700 would hide the entry from every other user of the cache
        try:
            os.rename(tmp, path)
        except OSError:
            if not os.path.lexists(path):
                raise
            damage = damage_of(path)
            if damage is not None:  # the damaged entry is still there: it could not be moved aside
                raise BackendFailed(f"cache entry {path} is damaged ({damage}) and could not be moved aside to "
                                    "be replaced: remove it") from None
            # another process finished the same artifact first: its entry is kept
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        os.close(held)
    return False


def _owner(path: Path) -> str:
    try:
        uid = path.stat().st_uid
    except OSError:
        return "its owner unknown"
    return f"owned by uid {uid}, this process runs as uid {os.geteuid()}"


def _refuse_unreadable(entry: Path) -> None:
    """BackendFailed where the entry is a folder this user may not read (another user's entry, made
    0700): it is not damaged, and moving it aside would fail in a folder this user cannot write."""
    if entry.is_symlink() or not entry.is_dir():
        return
    if not os.access(entry, os.R_OK | os.X_OK, effective_ids=os.access in os.supports_effective_ids):
        raise BackendFailed(f"cache entry {entry} cannot be read by this user ({_owner(entry)}): give --cache-dir a "
                            f"folder of your own, or have its owner run `chmod -R a+rX {entry.parent}`")


def remove_orphans(folder: Path, min_age_s: float = ORPHAN_MIN_AGE_S) -> list[Path]:
    """Remove what builds and repairs in `folder` left when their process was killed (a cell's
    time limit, a machine's OOM killer): the `.partial` folders no live build holds and the `.broken`
    ones, each last changed more than `min_age_s` ago (a build locks its folder a moment after making
    it). The folders removed; ones this user cannot open are left alone."""
    removed = []
    now = time.time()
    for leftover in sorted([*folder.glob(f".*{PARTIAL}"), *folder.glob(f".*{BROKEN}")]):
        try:
            if leftover.is_symlink() or not leftover.is_dir() or now - leftover.stat().st_mtime < min_age_s:
                continue
            fd = dirlock.try_lock(leftover, follow_symlink=False)
        except OSError:
            continue
        if fd is None:  # a live build's
            continue
        try:
            shutil.rmtree(leftover, ignore_errors=True)
        finally:
            os.close(fd)
        if not os.path.lexists(leftover):
            removed.append(leftover)
    return removed


def _remove_orphans_once(folder: Path) -> None:
    with _sweeping:
        if folder in _swept:
            return
        _swept.add(folder)
    remove_orphans(folder)


def damage_of(entry: Path) -> str | None:
    """What is wrong with the cache entry `entry` against its seal, or None when it is intact."""
    # The cache makes each entry a directory of its own: a link there (to another key's entry, say)
    # would pass its target's seal, and a file there would stop every build of this key.
    if entry.is_symlink():
        return "it is a link, not a directory of its own"
    if not entry.is_dir():
        return "it is not a directory"
    try:
        lines = (entry / SEAL).read_text().splitlines()
    except FileNotFoundError:
        return "written before entries were hashed"
    except (OSError, UnicodeDecodeError) as exc:
        return f"its {SEAL} is unreadable: {exc}"
    listed = {}
    for line in lines:
        digest, _, rel = line.partition("  ")
        if len(digest) != 64 or not rel:
            return f"its {SEAL} is damaged"
        listed[rel] = digest
    present, others = _files(entry)
    if others:
        return f"{others[0]} is a link or special file"
    for rel, digest in listed.items():
        if rel not in present:
            return f"{rel} is missing"
        try:
            if _sha256(entry / rel) != digest:
                return f"{rel} differs from when it was built"
        except OSError as exc:
            return f"{rel} is unreadable: {exc.strerror}"
    extra = sorted(set(present) - set(listed))
    return f"{extra[0]} was added after it was built" if extra else None


def repairs() -> list[str]:
    """The warnings of the entries this process found damaged and rebuilt, for the cell's record."""
    return list(_repairs)


def warn_rebuilt(entry: Path, damage: str) -> None:
    """Say, on standard error and on the cell (`repairs`), that the cache entry `entry` was damaged
    and is built again."""
    message = f"cache entry {entry} was damaged ({damage}): rebuilt it"
    print(f"fusionbench: warning: {message}", file=sys.stderr, flush=True)
    _repairs.append(message)


def _repair(entry: Path, damage: str) -> None:
    # A folder of this repair's own: a name of its own could still be taken (by what an earlier
    # repair of the same pid could not delete), and the damaged entry would then stay and be loaded.
    try:
        aside = Path(tempfile.mkdtemp(prefix=f".{entry.name}.", suffix=BROKEN, dir=entry.parent))
    except OSError as exc:
        raise BackendFailed(f"cache entry {entry} is damaged ({damage}) and cannot be moved aside: {entry.parent} is "
                            f"not writable here ({exc.strerror}; {_owner(entry.parent)}); remove it, or give "
                            "--cache-dir a folder of your own") from None
    warn_rebuilt(entry, damage)
    try:
        os.rename(entry, aside / entry.name)  # at once: a concurrent reader sees the old entry whole or none
    except OSError:
        pass  # another process moved it first, or it cannot be moved (the build's rename then says so)
    shutil.rmtree(aside, ignore_errors=True)  # a link in it goes, never what it points to


def _seal(directory: Path) -> None:
    files, others = _files(directory)
    if others:
        raise BackendFailed(f"the build left {others[0]}, a link or special file, in {directory}; a cache entry "
                            "holds regular files")
    (directory / SEAL).write_text("".join(f"{_sha256(directory / rel)}  {rel}\n" for rel in sorted(files)))


def _files(directory: Path) -> tuple[list[str], list[str]]:
    """The regular files under `directory` (its seal apart) and anything else that is not a
    directory (links, FIFOs, sockets), as paths relative to it."""
    files, others = [], []
    for path in directory.rglob("*"):
        rel = path.relative_to(directory).as_posix()
        if path.is_symlink() or not (path.is_dir() or path.is_file()):
            others.append(rel)
        elif path.is_file() and rel != SEAL:
            files.append(rel)
    return files, others


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()
