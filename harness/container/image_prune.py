"""`fusionbench image prune`: remove the images of recipes this checkout no longer builds.

Every change to a lock, pyproject.toml or the recipe gives the next build a new tag, and the image
of the old one (7 GB or more) stays in the engine. Prune looks at the `fusionbench-cpu`,
`fusionbench-cuda` and `fusionbench-base` images whose tag is none of this checkout's (the
registry-less recipe's, the Dockerfile's, the base cached for this base lock), and keeps, unless
told otherwise, the newest `keep` of them of each name (another checkout on a shared engine may be
using its current recipe) and any built within `keep_days` days; the rest goes. It says first what
it will remove and why it keeps each image it keeps, removes nothing under `--dry-run`, and skips an
image a container still uses, saying which, and carries on. Layers the kept images share are kept
by the engine. An old image can be made again bit for bit from the commit that built it (`image
build` with no registry), so nothing is lost that a checkout cannot give back. Images of other
projects are never touched.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from harness.container import image_build, launcher

NAMES = ("fusionbench-cpu", "fusionbench-cuda", "fusionbench-base")
KEEP_RECENT = 1
KEEP_DAYS = 1.0


@dataclass(frozen=True)
class Stale:
    """A fusionbench image of a recipe this checkout does not build, and whether prune keeps it."""

    tag: str
    size: int
    created: datetime | None
    kept: str = ""  # why it stays ("" where it goes)


def wanted_tags(repo: Path, cache: Path) -> set[str]:
    """The tags this checkout builds or uses: each kind's two recipes, and the cached base's."""
    tags = {tag for kind in launcher.KINDS for tag in (image_build.image_tag(repo, kind), launcher.image_tag(repo, kind))}
    _, digest_file = image_build.base_files(repo, cache)
    if digest_file.exists():
        tags.add(image_build.base_tag(digest_file.read_text().strip()))
    return tags


def _created(image: Any) -> datetime | None:
    text = str(image.attrs.get("Created") or "")
    try:
        stamp = datetime.fromisoformat(text[:26].rstrip("Z") if "." in text else text.rstrip("Z"))
    except ValueError:
        return None
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=timezone.utc)


def plan(client: Any, repo: Path, cache: Path, keep: int = KEEP_RECENT, keep_days: float = KEEP_DAYS,
         now: datetime | None = None) -> list[Stale]:
    """Each fusionbench image this checkout does not build or use, newest first by name, with why it
    is kept where it is (one of the `keep` newest of its name, or built within `keep_days` days)."""
    wanted = wanted_tags(repo, cache)
    now = now or datetime.now(timezone.utc)
    found: list[Stale] = []
    for name in NAMES:
        mine = []
        for image in client.images.list(name=name):
            for tag in image.tags:
                if tag.startswith(f"{name}:") and tag not in wanted:
                    mine.append((tag, int(image.attrs.get("Size") or 0), _created(image)))
        mine.sort(key=lambda item: (item[2] or datetime.min.replace(tzinfo=timezone.utc), item[0]), reverse=True)
        for rank, (tag, size, created) in enumerate(mine):
            kept = ""
            if rank < keep:
                kept = f"one of the {keep} newest {name} images of other recipes"
            elif created is not None and (now - created).total_seconds() < keep_days * 86400:
                kept = f"built within {keep_days:g} day(s)"
            found.append(Stale(tag, size, created, kept))
    return found


def prune(client: Any, repo: Path, cache: Path, write: Callable[[str], object], *, keep: int = KEEP_RECENT,
          keep_days: float = KEEP_DAYS, dry_run: bool = False) -> int:
    """Remove the stale images the plan does not keep (see the module's docstring); return how many
    were removed (under `dry_run`, how many would be)."""
    from docker.errors import APIError, ImageNotFound

    stale = plan(client, repo, cache, keep, keep_days)
    going = [s for s in stale if not s.kept]
    for s in stale:
        if s.kept:
            write(f"fusionbench: keeping {s.tag} ({s.size / 1e9:.2f} GB): {s.kept}\n")
    removed = 0
    for s in going:
        if dry_run:
            write(f"fusionbench: would remove {s.tag} ({s.size / 1e9:.2f} GB)\n")
            removed += 1
            continue
        try:
            client.images.remove(s.tag)
        except ImageNotFound:
            continue
        except APIError as exc:  # 409: a container (running or not) uses it
            write(f"fusionbench: skipped {s.tag}: {str(getattr(exc, 'explanation', None) or exc).splitlines()[0]}\n")
            continue
        removed += 1
        write(f"fusionbench: removed {s.tag} ({s.size / 1e9:.2f} GB; layers other images share are kept)\n")
    if not going:
        write("fusionbench: no image of an older recipe to remove" + (" (--keep 0 --keep-days 0 removes every one)"
                                                                      if stale else "") + "\n")
    return removed
