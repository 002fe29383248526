"""`fusionbench image prune`: remove the images of recipes this checkout no longer builds.

Every change to a lock, pyproject.toml or the recipe gives the next build a new tag, and the image
of the old one (7 GB or more) stays in the engine. Prune removes the `fusionbench-cpu` and
`fusionbench-cuda` images whose tag is neither of this checkout's (the registry-less recipe's nor
the Dockerfile's), and the `fusionbench-base` images other than the base cached for this base lock.
Layers the kept images share are kept by the engine. An old image can be made again bit for bit
from the commit that built it (`image build` with no registry), so nothing is lost that a checkout
cannot give back. Images of other projects are never touched.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.run import container, image_build


def wanted_tags(repo: Path, cache: Path) -> set[str]:
    """The tags this checkout builds or uses: each kind's two recipes, and the cached base's."""
    tags = {tag for kind in container.KINDS for tag in (image_build.image_tag(repo, kind), container.image_tag(repo, kind))}
    _, digest_file = image_build.base_files(repo, cache)
    if digest_file.exists():
        tags.add(image_build.base_tag(digest_file.read_text().strip()))
    return tags


def stale(client: Any, repo: Path, cache: Path) -> list[tuple[str, int]]:
    """(tag, size in bytes) of each fusionbench image this checkout does not build or use."""
    keep = wanted_tags(repo, cache)
    found: list[tuple[str, int]] = []
    for name in ("fusionbench-cpu", "fusionbench-cuda", "fusionbench-base"):
        for image in client.images.list(name=name):
            for tag in image.tags:
                if tag.startswith(f"{name}:") and tag not in keep:
                    found.append((tag, int(image.attrs.get("Size") or 0)))
    return sorted(found)


def prune(client: Any, repo: Path, cache: Path, write: Callable[[str], object]) -> int:
    """Remove the stale images (see the module's docstring); return how many were removed."""
    from docker.errors import ImageNotFound

    removed = 0
    for tag, size in stale(client, repo, cache):
        try:
            client.images.remove(tag)
        except ImageNotFound:
            continue
        removed += 1
        write(f"fusionbench: removed {tag} ({size / 1e9:.2f} GB; layers other images share are kept)\n")
    if not removed:
        write("fusionbench: no image of an older recipe to remove\n")
    return removed
