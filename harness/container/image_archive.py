"""An image assembled from its layers: the config (whose sha256 is the image id) and the archive
`docker load` takes.

The config holds nothing that changes from build to build: its creation time and every history
entry's is SOURCE_DATE_EPOCH, its JSON is written with sorted keys and no spaces, so the same layers
and settings give the same image id on any host and engine.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, BinaryIO


@dataclass(frozen=True)
class Layer:
    """A layer tar on disk, its diff_id and what made it (the config's history)."""

    path: Path
    diff_id: str
    created_by: str


def config(layers: list[Layer], *, epoch: int, env: dict[str, str], entrypoint: list[str], user: str,
           working_dir: str, labels: dict[str, str]) -> bytes:
    created = datetime.fromtimestamp(epoch, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    document: dict[str, Any] = {
        "architecture": "amd64",
        "os": "linux",
        "created": created,
        "config": {
            "Env": [f"{k}={v}" for k, v in sorted(env.items())],
            "Entrypoint": entrypoint,
            "User": user,
            "WorkingDir": working_dir,
            "Labels": dict(sorted(labels.items())),
        },
        "rootfs": {"type": "layers", "diff_ids": [layer.diff_id for layer in layers]},
        "history": [{"created": created, "created_by": layer.created_by} for layer in layers],
    }
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()


def image_id(config_bytes: bytes) -> str:
    return "sha256:" + hashlib.sha256(config_bytes).hexdigest()


def write_archive(out: BinaryIO, layers: list[Layer], config_bytes: bytes, tag: str) -> None:
    """Write the archive `docker load` takes (manifest.json, the config, each layer's tar) to the
    stream `out` (a pipe to the engine: the layers are not copied on disk)."""
    config_name = f"{image_id(config_bytes).removeprefix('sha256:')}.json"
    layer_names = [f"{layer.diff_id.removeprefix('sha256:')}/layer.tar" for layer in layers]
    manifest = [{"Config": config_name, "RepoTags": [tag], "Layers": layer_names}]
    with tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT) as archive:
        for name, data in ((config_name, config_bytes), ("manifest.json", json.dumps(manifest).encode())):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        for layer, name in zip(layers, layer_names):
            archive.add(str(layer.path), arcname=name)
