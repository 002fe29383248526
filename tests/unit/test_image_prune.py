"""`fusionbench image prune` against a fake engine: only fusionbench images of recipes this checkout
does not build go; this checkout's images of both kinds, its cached base and other projects' stay."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from docker.errors import ImageNotFound

from harness.run import container, image_build, image_prune

REPO = Path(__file__).resolve().parents[2]


@dataclass
class FakeImage:
    tags: list[str]
    attrs: dict[str, Any]


@dataclass
class FakeImages:
    held: list[FakeImage]
    removed: list[str] = field(default_factory=list)

    def list(self, name: str) -> list[FakeImage]:
        return [image for image in self.held if any(tag.split(":")[0] == name for tag in image.tags)]

    def remove(self, tag: str) -> None:
        if tag in self.removed:
            raise ImageNotFound(tag)
        self.removed.append(tag)


@dataclass
class FakeClient:
    images: FakeImages


def test_prune_removes_only_the_images_of_older_recipes(tmp_path: Path) -> None:
    layer, digest_file = image_build.base_files(REPO, tmp_path)
    layer.parent.mkdir(parents=True)
    digest_file.write_text("sha256:" + "b" * 64)
    current = [image_build.image_tag(REPO, "cpu"), image_build.image_tag(REPO, "cuda"),
               container.image_tag(REPO, "cpu"), image_build.base_tag("sha256:" + "b" * 64)]
    older = ["fusionbench-cpu:00000000000000aa", "fusionbench-cuda:00000000000000bb", "fusionbench-base:cccccccccccccccc"]
    others = ["python:3.11-slim", "someone/fusionbench-cpu:1"]
    images = FakeImages([FakeImage([tag], {"Size": 7_310_000_000}) for tag in current + older + others])
    said: list[str] = []
    assert image_prune.prune(FakeClient(images), REPO, tmp_path, said.append) == 3
    assert sorted(images.removed) == sorted(older)
    assert "removed fusionbench-cpu:00000000000000aa (7.31 GB" in "".join(said)
    said.clear()
    images.held = [FakeImage([tag], {}) for tag in current + others]
    assert image_prune.prune(FakeClient(images), REPO, tmp_path, said.append) == 0
    assert said == ["fusionbench: no image of an older recipe to remove\n"]


@pytest.mark.parametrize("args", [["image", "prune", "cpu"], ["image", "prune", "--no-cache"]])
def test_prune_takes_no_kind_or_build_options(args: list[str]) -> None:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.returncode == 2 and "image prune takes no kind" in done.stderr
