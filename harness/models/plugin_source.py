"""A digest of a plugin package's own files, which the artifact cache's keys hold.

A key holds the plugin's `name==version` (harness/artifact_cache.py `PROVIDED_BY`), but a team
iterating on its model edits `forward` in an editable install (`pip install -e`) and runs again
without bumping the version; a reinstall of a changed checkout at the same version is alike. With
the same class, weights and shapes, the next cell loaded the artifact compiled from the old code
(tried: relu made sigmoid in an editable acme-models 1.0: its ONNX Runtime cell read the last run's
export, `prepare_cache: warm`, and was invalid, `output differs from eager: max abs error 0.833`; an
edit that leaves the outputs alike, `y + 0 * torch.tanh(y).exp()`, passed, its figures the old
code's: 4 kernels per inference where the new graph runs 11).

So the key holds a digest of the files under the plugin's top-level package (or its module file),
as they lie in the folder its code is imported from (`PluginModel.code_folder`): their paths and
contents, `__pycache__` left out. Reading is bounded for a big package: contents are read up to
`CONTENT_BUDGET_BYTES` in all, in path order, and a file that no longer fits is taken by its size
and modification time, which an edit changes too. Taken once a process per folder (a worker builds
one model): well under a millisecond for a package of a few files, about 0.15 CPU-seconds for
torch's 14,000 (measured on a 2-core AMD EPYC VM).
"""

from __future__ import annotations

import functools
import hashlib
import os

#: The bytes of file contents one digest reads; later files count by their size and modification time.
CONTENT_BUDGET_BYTES = 8 << 20
_SKIPPED_FOLDERS = ("__pycache__",)
_SKIPPED_SUFFIXES = (".pyc", ".pyo")


@functools.lru_cache(maxsize=None)
def digest(files: str) -> str:
    """The SHA-256 of the files under `files` (a package's folder, or a module's file:
    `PluginModel.package_files`), their relative paths and contents; "" where it is neither."""
    if os.path.isfile(files):
        found = [(os.path.basename(files), files)]
    elif os.path.isdir(files):
        found = sorted(_walk(files))
    else:
        return ""
    total = hashlib.sha256()
    budget = CONTENT_BUDGET_BYTES
    for rel, path in found:
        try:
            stat = os.stat(path)
            total.update(f"{rel}\0{stat.st_size}\0".encode())
            if stat.st_size <= budget:
                with open(path, "rb") as handle:
                    total.update(hashlib.sha256(handle.read()).digest())
                budget -= stat.st_size
            else:  # past the budget: an edit changes its modification time
                total.update(f"mtime {stat.st_mtime_ns}".encode())
        except OSError as exc:  # unreadable: said in the key as such, never skipped without a trace
            total.update(f"{rel}\0unreadable {exc.errno}".encode())
    return total.hexdigest()


def _walk(folder: str) -> list[tuple[str, str]]:
    """(path relative to `folder`, path) of each regular file under it, compiled bytecode left out."""
    found = []
    for root, dirs, names in os.walk(folder):
        dirs[:] = [name for name in dirs if name not in _SKIPPED_FOLDERS]
        for name in names:
            path = os.path.join(root, name)
            if not name.endswith(_SKIPPED_SUFFIXES) and os.path.isfile(path):
                found.append((os.path.relpath(path, folder).replace(os.sep, "/"), path))
    return found
