"""Where two settings trees differ, setting by setting: a resolved scenario against the one a
bundle stores (`run --resume FILE`), two cells' recorded configs (`compare`)."""

from __future__ import annotations

from typing import Any


def differences(mine: Any, theirs: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """Each setting whose value differs, as (its dotted path, "" for the whole; `mine`'s value;
    `theirs`'s value): mappings are walked key by key, in sorted order; anything else is compared
    whole (a list that differs anywhere is one difference)."""
    if isinstance(mine, dict) and isinstance(theirs, dict):
        return [found for key in sorted(set(mine) | set(theirs))
                for found in differences(mine.get(key), theirs.get(key), f"{path}.{key}" if path else str(key))]
    return [] if mine == theirs else [(path, mine, theirs)]
