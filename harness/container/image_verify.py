"""`fusionbench image verify cpu|cuda`: the engine's image of this recipe built again from nothing
(the base again by mmdebstrap, the packages installed again from the hash-checked wheels) and
compared layer by layer, and by id, with the one the engine holds."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.container import image_base
from harness.container.image_archive import Layer, image_id
from harness.container.image_build import (
    ImageBuildError,
    Steps,
    base_history,
    base_lock,
    existing,
    image_config_bytes,
    image_tag,
    labels,
    make_base,
    upper_layers,
)


@dataclass(frozen=True)
class Rebuilt:
    """The engine's image of this recipe and the same image built again from nothing."""

    tag: str
    held_id: str
    built_id: str
    held_layers: list[str]
    built_layers: list[str]
    made_by: list[str]

    @property
    def same(self) -> bool:
        return self.held_id == self.built_id and self.held_layers == self.built_layers

    def lines(self) -> list[str]:
        said = [f"image {self.tag}: held {self.held_id}, built again {self.built_id}: "
                f"{'the same' if self.held_id == self.built_id else 'DIFFERENT'}"]
        for index, (made_by, built) in enumerate(zip(self.made_by, self.built_layers)):
            held = self.held_layers[index] if index < len(self.held_layers) else "(none)"
            said.append(f"  layer {index + 1} ({made_by}): {'the same' if held == built else 'DIFFERENT'} "
                        f"held {held} built {built}")
        if len(self.held_layers) != len(self.built_layers):
            said.append(f"  the held image has {len(self.held_layers)} layers, the build {len(self.built_layers)}")
        return said


def rebuild_and_compare(client: Any, repo: Path, kind: str, cache: Path, write: Callable[[str], object]) -> Rebuilt:
    """Build the image of `image_tag(repo, kind)` again from nothing, as `build` does but with the
    base made again by mmdebstrap (the cached base is neither used nor replaced) and the packages
    installed again from the hash-checked wheels, and compare its layer digests and id with the
    image the engine holds under that tag. Nothing is tagged or loaded but the new base, and that
    only where it differs from every base the engine has (the install runs in a container of it);
    the upper layers are hashed as they are written, not kept."""
    steps = Steps(write)
    tag = image_tag(repo, kind)
    held = existing(client, [tag])
    if held is None:
        raise ImageBuildError(f"the engine holds no {tag} to compare with: build it first (./run.sh image build {kind})")
    found = (held.attrs.get("Config") or {}).get("Labels") or {}
    wanted = labels(repo, kind)
    differing = sorted(key for key in ("io.fusionbench.kind", "io.fusionbench.lock-sha256", "io.fusionbench.base")
                       if found.get(key) != wanted[key])
    if differing:
        raise ImageBuildError(f"the image tagged {tag} ({held.id}) is not a fusionbench build of this recipe (its labels "
                              f"{', '.join(differing)} differ or are missing): nothing was rebuilt; remove it "
                              f"(docker rmi {tag}) and build it (./run.sh image build {kind})")
    lock = image_base.BaseLock.parse(base_lock(repo).read_text())
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="fusionbench-rebuild-", dir=cache) as scratch_name:
        scratch = Path(scratch_name)
        base_file = scratch / "base.layer.tar"
        base_layer = Layer(base_file, make_base(lock, scratch, base_file, steps), base_history(lock))
        layers = upper_layers(client, repo, kind, cache, scratch, base_layer, steps, keep=False)
    steps.say("compared with the engine's image")
    return Rebuilt(tag=tag, held_id=str(held.id), built_id=image_id(image_config_bytes(repo, kind, lock, layers)),
                   held_layers=list((held.attrs.get("RootFS") or {}).get("Layers") or []),
                   built_layers=[layer.diff_id for layer in layers], made_by=[layer.created_by for layer in layers])
