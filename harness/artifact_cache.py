"""Keys and atomic writes for the artifacts backends keep between cells and runs.

An exported ONNX file or a compiled library is reusable only for the same weights, input shape,
dtype, library versions and settings. `fingerprint` hashes all of them (the weights by content,
so two models with different random seeds never share an artifact), and `cached_dir` builds an
artifact into a temporary directory and renames it into place, so an interrupted or failed build
never leaves a file that a later cell would load.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable


def fingerprint(model: Any, example: Any, **settings: Any) -> str:
    """A hex key for `model`'s class and weights, `example`'s shape and dtype, and `settings`
    (JSON-serialisable: library versions, dtype, variant, options)."""
    digest = hashlib.sha256()
    digest.update(f"{type(model).__module__}.{type(model).__qualname__}".encode())
    digest.update(f"{tuple(example.shape)}:{example.dtype}".encode())
    digest.update(json.dumps(settings, sort_keys=True, default=str).encode())
    for name, tensor in list(model.named_parameters()) + list(model.named_buffers()):
        digest.update(f"{name}:{tuple(tensor.shape)}:{tensor.dtype}".encode())
        data = tensor.detach().cpu().contiguous().reshape(-1)
        digest.update(data.view(_same_width_int(data)).numpy().tobytes())
    return digest.hexdigest()[:32]


def _same_width_int(tensor: Any) -> Any:
    """An integer dtype of the tensor's element width (numpy has no bfloat16)."""
    import torch

    return {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[tensor.element_size()]


def cached_dir(path: Path, build: Callable[[Path], None]) -> bool:
    """Make sure the artifact directory `path` exists, calling `build(tmp_dir)` when it does not.

    `build` fills an empty temporary directory beside `path`, which is renamed to `path` only
    when `build` returns, so `path` is always complete. Returns True when `path` was already
    there (a cache hit), or appeared meanwhile from a concurrent build.
    """
    if path.is_dir():
        return True
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent))
    try:
        build(tmp)
        try:
            os.rename(tmp, path)
        except OSError:
            if not path.is_dir():
                raise
            return True  # another process finished the same artifact first
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return False
