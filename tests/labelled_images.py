"""A labelled image folder in ImageNet's validation layout (images and `val_map.txt`), drawn by the
tests themselves: no dataset is downloaded."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

from PIL import Image

LABELS = "val_map.txt"


def draw(folder: Path, count: int, label: Callable[[int], int] = lambda k: k % 1000, seed: int = 0,
         size: int = 40) -> Path:
    """`count` flat-coloured PNGs with a speckle each, labelled `label(k)`; returns the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    lines = []
    for k in range(count):
        image = Image.new("RGB", (size, size), (rng.randrange(256), rng.randrange(256), rng.randrange(256)))
        for _ in range(size):
            image.putpixel((rng.randrange(size), rng.randrange(size)), (rng.randrange(256),) * 3)
        name = f"ILSVRC2012_val_{k + 1:08d}.png"
        image.save(folder / name)
        lines.append(f"{name} {label(k)}")
    (folder / LABELS).write_text("\n".join(lines) + "\n")
    return folder


def relabel(folder: Path, labels: list[int]) -> None:
    """Give the images of `folder` these labels, in the labels file's order."""
    names = [line.split()[0] for line in (folder / LABELS).read_text().splitlines() if line.strip()]
    (folder / LABELS).write_text("".join(f"{name} {label}\n" for name, label in zip(names, labels, strict=True)))
