"""Top-1 accuracy from LoadGen's accuracy log, computed as MLPerf's ImageNet accuracy script does.

The labels (harness/models/labels.py) are ImageNet's validation layout (`val_map.txt`); line k is
LoadGen's sample k. Each response in `mlperf_log_accuracy.json` carries the predicted class as one
float32 (hex, as LoadGen writes a response's bytes); a sample answered more than once counts once;
accuracy is correct samples over distinct samples, printed as `accuracy=76.456%, good=..., total=...`.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

from harness.errors import HarnessError


def response_bytes(top1: int) -> bytes:
    """What the system under test answers for one sample: its top-1 class as a float32."""
    return struct.pack("<f", float(top1))


def score(log: Path, labels: list[int]) -> dict[str, Any]:
    """Top-1 accuracy of an accuracy log against `labels` (index = LoadGen's sample index)."""
    seen: set[int] = set()
    good = 0
    for entry in read_log(log):
        index = entry.get("qsl_idx")
        if not isinstance(index, int) or not 0 <= index < len(labels):
            raise HarnessError(f"{log}: a response names sample {index!r}, outside the {len(labels)} labelled")
        if index in seen:
            continue
        seen.add(index)
        good += predicted(entry, log) == labels[index]
    if not seen:
        raise HarnessError(f"{log}: no response was logged")
    return {"top1_percent": 100.0 * good / len(seen), "good": good, "total": len(seen)}


def read_log(log: Path) -> list[dict[str, Any]]:
    """The responses of a LoadGen accuracy log; a clear error for an unreadable or damaged one."""
    try:
        entries = json.loads(log.read_text())
    except (OSError, ValueError) as exc:
        raise HarnessError(f"cannot read the accuracy log {log}: {exc}") from None
    if not isinstance(entries, list) or not all(isinstance(entry, dict) for entry in entries):
        raise HarnessError(f"{log}: not a list of responses")
    return entries


def predicted(entry: dict[str, Any], log: Path) -> int:
    try:
        raw = bytes.fromhex(entry["data"])
        return int(struct.unpack_from("<f", raw)[0])
    except (KeyError, TypeError, ValueError, struct.error):
        raise HarnessError(f"{log}: sample {entry.get('qsl_idx')}'s response is not a float32 class") from None


def summary_line(result: dict[str, Any]) -> str:
    """accuracy.txt's line, in the format of MLPerf's script (the submission checker reads it)."""
    return f"accuracy={result['top1_percent']:.3f}%, good={result['good']}, total={result['total']}"
