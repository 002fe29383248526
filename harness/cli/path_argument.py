"""The type of every path the command line takes: a path as given, never an empty string.

`Path("")` is the current directory, so `--out ''` (an unset shell variable, say) wrote a bundle,
a report or the artifact cache into whatever folder the command ran in.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def path_argument(text: str) -> Path:
    if not text:
        raise argparse.ArgumentTypeError("an empty path; give a path (the current directory is '.')")
    return Path(text)
