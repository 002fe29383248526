"""JSON Schemas of a result bundle's files, one per file type and schema version.

`schema("bundle", 2)` is the schema of a v2 `bundle.json`, `schema("cell", 2)` of a v2
`cells/<id>.json`. The current version's schemas are generated from the typed records every
reader uses (harness/bundle/cell_record.py `CellRecord`, harness/bundle/header_record.py
`BundleHeader`) and checked in as docs/schemas/. The versions before it describe the files older
harnesses wrote: v1 to v3 each built from the one before by explicit additions, the way
`harness.bundle.migrations` upgrades records (harness/bundle/early_schemas.py), and v4 to v11 as
they were generated when the next version replaced them (harness/bundle/frozen/). Ranges are what
"sane" means in `fusionbench validate`: a figure outside them (a negative latency, a 10^30-byte
peak) is a problem, whatever produced it. `fusionbench schema --file cell --version 2` prints one;
harness/bundle/schema_check.py checks a record against one.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from harness.bundle.cell_record import CellRecord
from harness.bundle.early_schemas import bundle_v1, bundle_v2, bundle_v3, cell_v1, cell_v2, cell_v3
from harness.bundle.header_record import BundleHeader
from harness.bundle.migrations import OLDEST_READABLE, SCHEMA_VERSION

KINDS = ("bundle", "cell")
FROZEN = Path(__file__).with_name("frozen")


def _frozen(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((FROZEN / name).read_text())
    return loaded


def _bundle_v4() -> dict[str, Any]:
    """As generated from the typed header when v5 replaced it."""
    return _frozen("bundle-v4.schema.json")


def _cell_v4() -> dict[str, Any]:
    """As generated from the typed cell record when v5 replaced it."""
    return _frozen("cell-v4.schema.json")


def _bundle_v5() -> dict[str, Any]:
    """As generated from the typed header when v6 replaced it."""
    return _frozen("bundle-v5.schema.json")


def _cell_v5() -> dict[str, Any]:
    """As generated from the typed cell record when v6 replaced it."""
    return _frozen("cell-v5.schema.json")


def _bundle_v6() -> dict[str, Any]:
    """As generated from the typed header when v7 replaced it."""
    return _frozen("bundle-v6.schema.json")


def _cell_v6() -> dict[str, Any]:
    """As generated from the typed cell record when v7 replaced it."""
    return _frozen("cell-v6.schema.json")


def _bundle_v7() -> dict[str, Any]:
    """As generated from the typed header when v8 replaced it."""
    return _frozen("bundle-v7.schema.json")


def _cell_v7() -> dict[str, Any]:
    """As generated from the typed cell record when v8 replaced it."""
    return _frozen("cell-v7.schema.json")


def _bundle_v8() -> dict[str, Any]:
    """As generated from the typed header when v9 replaced it."""
    return _frozen("bundle-v8.schema.json")


def _cell_v8() -> dict[str, Any]:
    """As generated from the typed cell record when v9 replaced it."""
    return _frozen("cell-v8.schema.json")


def _bundle_v9() -> dict[str, Any]:
    """As generated from the typed header when v10 replaced it."""
    return _frozen("bundle-v9.schema.json")


def _cell_v9() -> dict[str, Any]:
    """As generated from the typed cell record when v10 replaced it."""
    return _frozen("cell-v9.schema.json")


def _bundle_v10() -> dict[str, Any]:
    """As generated from the typed header when v11 replaced it."""
    return _frozen("bundle-v10.schema.json")


def _cell_v10() -> dict[str, Any]:
    """As generated from the typed cell record when v11 replaced it."""
    return _frozen("cell-v10.schema.json")


def _bundle_v11() -> dict[str, Any]:
    """As generated from the typed header when v12 replaced it."""
    return _frozen("bundle-v11.schema.json")


def _cell_v11() -> dict[str, Any]:
    """As generated from the typed cell record when v12 replaced it."""
    return _frozen("cell-v11.schema.json")


def _bundle_v12() -> dict[str, Any]:
    """Generated from the typed header (harness/bundle/header_record.py)."""
    return BundleHeader.model_json_schema(mode="validation")


def _cell_v12() -> dict[str, Any]:
    """Generated from the typed record every reader uses: what validate accepts, they can read."""
    return CellRecord.model_json_schema(mode="validation")


_BUILDERS = {("bundle", 1): bundle_v1, ("bundle", 2): bundle_v2, ("bundle", 3): bundle_v3, ("bundle", 4): _bundle_v4,
             ("bundle", 5): _bundle_v5, ("bundle", 6): _bundle_v6, ("bundle", 7): _bundle_v7, ("bundle", 8): _bundle_v8,
             ("bundle", 9): _bundle_v9, ("bundle", 10): _bundle_v10, ("bundle", 11): _bundle_v11,
             ("bundle", 12): _bundle_v12,
             ("cell", 1): cell_v1, ("cell", 2): cell_v2, ("cell", 3): cell_v3, ("cell", 4): _cell_v4, ("cell", 5): _cell_v5,
             ("cell", 6): _cell_v6, ("cell", 7): _cell_v7, ("cell", 8): _cell_v8, ("cell", 9): _cell_v9,
             ("cell", 10): _cell_v10, ("cell", 11): _cell_v11, ("cell", 12): _cell_v12}


def schema(kind: str, version: int = SCHEMA_VERSION) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of `kind` ("bundle" or "cell") at `version`."""
    if kind not in KINDS:
        raise ValueError(f"no schema for {kind!r}; kinds: {', '.join(KINDS)}")
    if not OLDEST_READABLE <= version <= SCHEMA_VERSION:
        raise ValueError(f"no schema version {version}; versions: {OLDEST_READABLE}-{SCHEMA_VERSION}")
    if (kind, version) not in _BUILDERS:  # a version bumped without its builders
        raise ValueError(f"no {kind} schema of version {version} in harness/bundle/schema.py _BUILDERS "
                         "(docs/adding_a_metric.md, Bumping the schema version)")
    built = copy.deepcopy(_BUILDERS[(kind, version)]())
    title = "bundle.json" if kind == "bundle" else "cells/<cell-id>.json"
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": f"FusionBench {title}, schema version {version}", **built}
