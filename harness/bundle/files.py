"""The names of a bundle's files: the header, and the folder of cell records (cells/<id>.json, with
each cell's artifacts in cells/<id>/). The checksums' file is named in harness/bundle/manifest.py."""

from __future__ import annotations

HEADER = "bundle.json"
CELLS = "cells"
