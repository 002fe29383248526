"""`fusionbench image prune` against a fake engine: only fusionbench images of recipes this checkout
does not build go; this checkout's images of both kinds, its cached base and other projects' stay;
the newest other recipe of each name and images built within a day stay unless told; an image a
container uses is skipped, saying so, and the rest still go; --dry-run removes nothing."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from docker.errors import APIError, ImageNotFound

from harness.container import image_build, image_prune, launcher

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

    in_use: set[str] = field(default_factory=set)

    def remove(self, tag: str) -> None:
        if tag in self.removed:
            raise ImageNotFound(tag)
        if tag in self.in_use:
            raise APIError("409 Client Error: Conflict", explanation=f"conflict: unable to remove repository reference "
                           f"\"{tag}\" (must force) - container 0123abcd is using its referenced image")
        self.removed.append(tag)


@dataclass
class FakeClient:
    images: FakeImages


def test_prune_removes_only_the_images_of_older_recipes(tmp_path: Path) -> None:
    layer, digest_file = image_build.base_files(REPO, tmp_path)
    layer.parent.mkdir(parents=True)
    digest_file.write_text("sha256:" + "b" * 64)
    current = [image_build.image_tag(REPO, "cpu"), image_build.image_tag(REPO, "cuda"),
               launcher.image_tag(REPO, "cpu"), image_build.base_tag("sha256:" + "b" * 64)]
    older = ["fusionbench-cpu:00000000000000aa", "fusionbench-cuda:00000000000000bb", "fusionbench-base:cccccccccccccccc"]
    others = ["python:3.11-slim", "someone/fusionbench-cpu:1"]
    images = FakeImages([FakeImage([tag], {"Size": 7_310_000_000}) for tag in current + older + others])
    said: list[str] = []
    assert image_prune.prune(FakeClient(images), REPO, tmp_path, said.append, keep=0, keep_days=0) == 3
    assert sorted(images.removed) == sorted(older)
    assert "removed fusionbench-cpu:00000000000000aa (7.31 GB" in "".join(said)
    said.clear()
    images.held = [FakeImage([tag], {}) for tag in current + others]
    assert image_prune.prune(FakeClient(images), REPO, tmp_path, said.append, keep=0, keep_days=0) == 0
    assert said == ["fusionbench: no image of an older recipe to remove\n"]


@pytest.mark.parametrize("args", [["image", "prune", "cpu"], ["image", "prune", "--no-cache"]])
def test_prune_takes_no_kind_or_build_options(args: list[str]) -> None:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.returncode == 2 and "image prune takes no kind" in done.stderr


def _aged(tag: str, days: float) -> FakeImage:
    created = (datetime.now(timezone.utc) - timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%S.%f123Z")
    return FakeImage([tag], {"Size": 7_000_000_000, "Created": created})


def test_by_default_the_newest_other_recipe_and_a_days_builds_stay(tmp_path: Path) -> None:
    images = FakeImages([_aged("fusionbench-cpu:0000000000000001", 30), _aged("fusionbench-cpu:0000000000000002", 20),
                         _aged("fusionbench-cpu:0000000000000003", 10), _aged("fusionbench-cuda:0000000000000004", 0.2),
                         _aged("fusionbench-cuda:0000000000000005", 0.1)])
    said: list[str] = []
    assert image_prune.prune(FakeClient(images), REPO, tmp_path, said.append) == 2
    assert sorted(images.removed) == ["fusionbench-cpu:0000000000000001", "fusionbench-cpu:0000000000000002"]
    text = "".join(said)
    assert "keeping fusionbench-cpu:0000000000000003 (7.00 GB): one of the 1 newest fusionbench-cpu images" in text
    assert "keeping fusionbench-cuda:0000000000000004 (7.00 GB): built within 1 day(s)" in text


def test_a_dry_run_says_what_would_go_and_removes_nothing(tmp_path: Path) -> None:
    images = FakeImages([_aged("fusionbench-cpu:0000000000000001", 30), _aged("fusionbench-cpu:0000000000000002", 20)])
    said: list[str] = []
    assert image_prune.prune(FakeClient(images), REPO, tmp_path, said.append, dry_run=True) == 1
    assert images.removed == [] and "would remove fusionbench-cpu:0000000000000001" in "".join(said)


def test_an_image_a_container_uses_is_skipped_and_the_rest_still_go(tmp_path: Path) -> None:
    images = FakeImages([_aged(f"fusionbench-cpu:000000000000000{i}", 30 - i) for i in range(1, 4)],
                        in_use={"fusionbench-cpu:0000000000000001"})
    said: list[str] = []
    assert image_prune.prune(FakeClient(images), REPO, tmp_path, said.append, keep=0, keep_days=0) == 2
    assert sorted(images.removed) == ["fusionbench-cpu:0000000000000002", "fusionbench-cpu:0000000000000003"]
    assert "skipped fusionbench-cpu:0000000000000001: conflict: unable to remove" in "".join(said)
    assert "container 0123abcd is using its referenced image" in "".join(said)
