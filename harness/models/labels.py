"""A labels file of ImageNet's validation layout (`val_map.txt`): one `<image file> <class>` per
line, the class an index in the model's own order (0..999 for torchvision's ImageNet classifiers).
Its order is the order of the sample library built from the folder."""

from __future__ import annotations

from pathlib import Path

from harness.errors import HarnessError

MAX_LABELS_BYTES = 64 << 20  # ImageNet's 50,000 lines are 1.6 MB


def read_labels(path: Path) -> list[tuple[str, int]]:
    """The (file name, class) pairs of a labels file, in its order; a clear error for a bad line."""
    try:
        if path.stat().st_size > MAX_LABELS_BYTES:
            raise HarnessError(f"labels file {path} is over {MAX_LABELS_BYTES >> 20} MiB")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise HarnessError(f"cannot read labels file {path}: {exc}") from None
    pairs = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 2 or not parts[1].isdigit() or "/" in parts[0] or parts[0] in (".", ".."):
            raise HarnessError(f"{path}:{number}: expected '<image file name> <class index>', got {line[:80]!r}")
        pairs.append((parts[0], int(parts[1])))
    if not pairs:
        raise HarnessError(f"labels file {path} lists no image")
    return pairs
