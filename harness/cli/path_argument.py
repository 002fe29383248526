"""The type of every path the command line takes: a path as given, never an empty string.

`Path("")` is the current directory, so `--out ''` (an unset shell variable, say) wrote a bundle,
a report or the artifact cache into whatever folder the command ran in. A path that begins with
`~/` reached the harness unexpanded (the shell expands it only at the start of a word, so not in
`--out=~/x`), and made a folder named `~`. A file's path that ends in `/` (`file_path_argument`)
names a folder, which pathlib's `Path` forgets: `compare --out cmp/` wrote a file named `cmp`.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def path_argument(text: str) -> Path:
    if not text:
        raise argparse.ArgumentTypeError("an empty path; give a path (the current directory is '.')")
    if text == "~" or text.startswith("~/"):
        raise argparse.ArgumentTypeError(f"{text!r} begins with a ~ the shell did not expand (it does so only at the "
                                         "start of a word, not after `=`); give $HOME in its place, or a space for the `=`")
    return Path(text)


def file_path_argument(text: str) -> Path:
    """The path of a file to write: as `path_argument`, and not one that ends in `/` (a folder's)."""
    if text.endswith("/"):
        raise argparse.ArgumentTypeError(f"{text!r} ends in /, which names a folder; give the path of the file to write")
    return path_argument(text)
