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


LABELS = "labels.txt"  # the labels an accuracy run was scored against, kept beside its log


def score(log: Path, labels: list[int]) -> dict[str, Any]:
    """Top-1 accuracy of an accuracy log against `labels` (index = LoadGen's sample index)."""
    return score_entries(read_log(log), labels, str(log))


def score_entries(entries: list[dict[str, Any]], labels: list[int], where: str) -> dict[str, Any]:
    """`score` of an accuracy log's responses, already read (`where` names the log in errors)."""
    seen: set[int] = set()
    good = 0
    for entry in entries:
        index = entry.get("qsl_idx")
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(labels):
            raise HarnessError(f"{where}: a response names sample {index!r}, outside the {len(labels)} labelled")
        if index in seen:
            continue
        seen.add(index)
        good += predicted(entry, where) == labels[index]
    if not seen:
        raise HarnessError(f"{where}: no response was logged")
    return {"top1_percent": 100.0 * good / len(seen), "good": good, "total": len(seen)}


def read_log(log: Path) -> list[dict[str, Any]]:
    """The responses of a LoadGen accuracy log; a clear error for an unreadable or damaged one."""
    try:
        data = json.loads(log.read_text())
    except (OSError, ValueError) as exc:
        raise HarnessError(f"cannot read the accuracy log {log}: {exc}") from None
    return responses(data, str(log))


def responses(data: Any, where: str) -> list[dict[str, Any]]:
    """An accuracy log's parsed JSON as its list of responses; HarnessError for any other shape."""
    if not isinstance(data, list) or not all(isinstance(entry, dict) for entry in data):
        raise HarnessError(f"{where}: not a list of responses")
    return data


def labels_text(labels: list[int]) -> str:
    """The `LABELS` file: line k is sample k's class."""
    return "".join(f"{label}\n" for label in labels)


def parse_labels(text: str, where: str) -> list[int]:
    """The classes of a `LABELS` file; HarnessError naming the line that is not a class."""
    labels = []
    for number, line in enumerate(text.splitlines(), 1):
        if not (line.isascii() and line.isdigit()) or len(line) > 9:
            raise HarnessError(f"{where}:{number}: not a class index: {line[:40]!r}")
        labels.append(int(line))
    return labels


def predicted(entry: dict[str, Any], log: Path | str) -> int:
    """The class a response names (its float32, as `response_bytes` wrote it)."""
    try:
        raw = bytes.fromhex(entry["data"])
        value = struct.unpack_from("<f", raw)[0]
        return int(value)
    except (KeyError, TypeError, ValueError, OverflowError, struct.error):
        raise HarnessError(f"{log}: sample {str(entry.get('qsl_idx'))[:20]}'s response is not a float32 class") from None


def summary_line(result: dict[str, Any]) -> str:
    """accuracy.txt's line, in the format of MLPerf's script (the submission checker reads it)."""
    return f"accuracy={result['top1_percent']:.3f}%, good={result['good']}, total={result['total']}"
