"""A labels file of ImageNet's validation layout (`val_map.txt`): one `<image file> <class>` per
line, the class an index in the model's own order (0..999 for torchvision's ImageNet classifiers).
Its order is the order of the sample library built from the folder."""

from __future__ import annotations

from pathlib import Path

from harness.errors import HarnessError
from harness.files.regular_file import read_regular
from harness.models.catalog import CLASSIFICATION_MODELS

MAX_LABELS_BYTES = 64 << 20  # ImageNet's 50,000 lines are 1.6 MB
# Every torchvision classifier of the zoo scores ImageNet-1k's classes, pretrained or not
# (tests/unit/test_input_checks.py holds this against torchvision's own weight records).
IMAGENET_CLASSES = 1000
# More digits than any class index needs; Python refuses to read an int of over 4,300 digits.
MAX_CLASS_DIGITS = 18


def output_classes(model: str) -> int | None:
    """How many classes model `model` scores (its class indices run 0..n-1); None for a model of
    the zoo that is no image classifier."""
    return IMAGENET_CLASSES if model in CLASSIFICATION_MODELS else None


def read_labels(path: Path, classes: int | None = None, scorer: str = "the model") -> list[tuple[str, int]]:
    """The (file name, class) pairs of a labels file, in its order; a clear error naming the file
    and line for a bad line, and, given `classes`, for a class outside `scorer`'s 0..classes-1
    (a class the model can never answer would score 0% without saying why)."""
    try:  # a FIFO is refused at once, not waited on
        text = read_regular(path, f"labels file {path}", max_bytes=MAX_LABELS_BYTES, follow_links=True).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HarnessError(f"cannot read labels file {path}: not UTF-8 text (byte {exc.start})") from None
    pairs = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split()
        # isdigit() alone takes "²" and "٣", which int() refuses or reads as another digit.
        if len(parts) != 2 or not (parts[1].isascii() and parts[1].isdigit()) or "/" in parts[0] \
                or parts[0] in (".", ".."):
            raise HarnessError(f"{path}:{number}: expected '<image file name> <class index>' (the index in "
                               f"digits 0-9), got {line[:80]!r}")
        digits = parts[1]
        if len(digits) > MAX_CLASS_DIGITS or (classes is not None and int(digits) >= classes):
            shown = digits if len(digits) <= 20 else f"{digits[:20]}... ({len(digits)} digits)"
            limit = f"{scorer}'s classes 0..{classes - 1}" if classes is not None else "any model's classes"
            raise HarnessError(f"{path}:{number}: class {shown} is outside {limit}")
        pairs.append((parts[0], int(digits)))
    if not pairs:
        raise HarnessError(f"labels file {path} lists no image")
    return pairs
