"""The system description (`systems/<name>.json`) of a submission: MLPerf's required fields, filled
from what the bundle captured, from the submitter's own file (`pack --system-info FILE`), and
otherwise left empty and listed, never guessed.

MLPerf's submission checker (v6.1) needs every field present, and most of them non-empty; a
field `pack` cannot know (the storage, the cooling, whether the system is `edge` or `datacenter`)
stays "" until the submitter gives it, and `pack` names each one so the checker's complaint is no
surprise.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.bundle.cell_record import CellRecord
from harness.bundle.confine import read_bytes
from harness.bundle.reader import lookup
from harness.bundle.safe_json import parse_json
from harness.errors import BundleError, ConfigError
from harness.plain_text import has_unsafe, visible

# MLPerf inference's required system-description fields (submission checker, v6.1).
SYSTEM_FIELDS = (
    "division", "submitter", "status", "system_name", "number_of_nodes", "host_processor_model_name",
    "host_processors_per_node", "host_processor_core_count", "host_memory_capacity", "host_storage_capacity",
    "host_storage_type", "accelerators_per_node", "accelerator_model_name", "accelerator_memory_capacity",
    "framework", "operating_system", "system_type", "other_software_stack", "host_processor_frequency",
    "host_processor_caches", "host_memory_configuration", "host_processor_interconnect", "host_networking",
    "host_networking_topology", "accelerator_frequency", "accelerator_host_interconnect", "accelerator_interconnect",
    "accelerator_interconnect_topology", "accelerator_memory_configuration", "accelerator_on-chip_memories",
    "cooling", "hw_notes", "sw_notes", "host_network_card_count", "system_type_detail",
)
# Set by pack itself from its arguments; a --system-info file may not change them.
PACK_FIELDS = ("division", "submitter", "status", "system_name")
SYSTEM_TYPES = ("edge", "datacenter", "datacenter,edge", "edge,datacenter")
MAX_INFO_BYTES = 1 << 20


def read_system_info(path: Path) -> dict[str, str]:
    """The submitter's values for fields the bundle cannot know: a JSON object of strings, read
    as hostile input (a regular file, bounded, strict JSON: no repeated key, bounded nesting; no
    control or bidirectional character in a value, which would reach the submission as it is)."""
    shown = visible(path)
    try:
        data = parse_json(read_bytes(path, f"--system-info {shown}", max_bytes=MAX_INFO_BYTES).decode("utf-8"),
                          f"--system-info {shown}", max_depth=2)
    except UnicodeDecodeError as exc:
        raise ConfigError(f"--system-info {shown}: not UTF-8 text (byte {exc.start})") from None
    except BundleError as exc:
        raise ConfigError(str(exc)) from None
    if not isinstance(data, dict):
        raise ConfigError(f"--system-info {shown}: expected a JSON object of MLPerf system fields")
    unknown = sorted(set(data) - set(SYSTEM_FIELDS))
    if unknown:
        raise ConfigError(f"--system-info {shown}: {', '.join(unknown)} are not MLPerf system fields")
    fixed = sorted(set(data) & set(PACK_FIELDS))
    if fixed:
        raise ConfigError(f"--system-info {shown}: {_fields(fixed, 'comes', 'come')} from pack's own arguments")
    bad = sorted(key for key, value in data.items() if not isinstance(value, str))
    if bad:
        raise ConfigError(f"--system-info {shown}: {_fields(bad, 'is', 'are')} not a string")
    unsafe = sorted(key for key, value in data.items() if has_unsafe(value))
    if unsafe:
        raise ConfigError(f"--system-info {shown}: {_fields(unsafe, 'holds', 'hold')} control or bidirectional characters")
    if "system_type" in data and data["system_type"] not in SYSTEM_TYPES:
        raise ConfigError(f"--system-info {shown}: system_type {data['system_type']!r}; allowed: {', '.join(SYSTEM_TYPES)}")
    return data


def _fields(keys: list[str], one: str, many: str) -> str:
    """`keys` and the verb that agrees with them: "cooling is", "cooling, hw_notes are"."""
    return f"{', '.join(keys)} {one if len(keys) == 1 else many}"


def captured(header: dict[str, Any], cell: CellRecord) -> dict[str, str]:
    """The fields the bundle knows for the system a cell ran on (read with `lookup`: a field of the
    wrong shape is a field the bundle does not know)."""
    def system(*path: str) -> Any:
        return lookup(header, "system", *path)

    gpus = system("gpu", "gpus") if header.get("device") == "cuda" else []
    gpus = gpus if isinstance(gpus, list) else []
    config = cell.config
    backend = config.backend
    versions = lookup(header, "backends", backend, "versions")
    versions = versions if isinstance(versions, dict) else {}
    stack = (("Python", system("python", "version")), ("torch", system("torch", "version")),
             ("CUDA", system("torch", "cuda_build")), ("cuDNN", system("torch", "cudnn")), ("driver", system("gpu", "driver")))
    known: dict[str, Any] = {
        "number_of_nodes": "1",
        "host_processor_model_name": system("cpu", "model"),
        "host_processor_core_count": system("cpu", "physical_cores"),
        "host_memory_capacity": _gigabytes(system("cpu", "memory_bytes")),
        "accelerators_per_node": "1" if gpus else "0",  # a cell runs on one GPU, however many the machine has
        "framework": ", ".join([f"FusionBench {lookup(header, 'harness', 'version')} ({backend}, "
                                f"fusion {config.variant.fusion})",
                                *(f"{k} {v}" for k, v in sorted(versions.items()))]),
        "operating_system": system("os", "platform"),
        "other_software_stack": ", ".join(f"{name} {value}" for name, value in stack if value),
        "hw_notes": f"the result ran on one of the machine's {len(gpus)} GPUs" if len(gpus) > 1 else "",
        "sw_notes": "; ".join(part for part in (
            f"backend options {json.dumps(config.variant.options, sort_keys=True)}",
            "pretrained weights" if config.model.pretrained else "random weights (no pretrained checkpoint)",
            _container_note(system("container")),
        ) if part),
    }
    if gpus:
        first = gpus[0]
        known["accelerator_model_name"] = lookup(first, "name")
        known["accelerator_memory_capacity"] = _gigabytes(lookup(first, "memory_bytes"))
        clock = lookup(first, "sm_clock_max_mhz")
        known["accelerator_frequency"] = f"{clock} MHz (max SM clock)" if clock else None
    else:  # no accelerator: each accelerator field is a fact, "none"
        known.update({key: "N/A" for key in SYSTEM_FIELDS if key.startswith("accelerator") and key != "accelerators_per_node"})
    return {key: str(value) for key, value in known.items() if value}


def _gigabytes(value: Any) -> str | None:
    return f"{value / 2**30:.0f} GB" if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else None


def _container_note(container: Any) -> str:
    if not isinstance(container, dict) or not container.get("in_container"):
        return ""
    image = container.get("image")
    return f"in container {image} {container.get('image_digest') or ''}".strip() if image else "in a container (image not recorded)"


def describe(header: dict[str, Any], cell: CellRecord, info: dict[str, str], *, org: str, division: str,
             status: str, name: str) -> tuple[dict[str, str], list[str], list[str]]:
    """The system JSON, the fields left empty for the submitter, and the captured fields the
    submitter's file replaced with another value (`host_processor_core_count 2 -> 64`): said, since
    a system JSON of 64 cores for a 2-core machine's figures went out in silence."""
    found = captured(header, cell)
    # What the bundle captured reaches the submission as it is: a control or bidirectional character
    # there (a forged or damaged bundle.json) is refused as it is in the submitter's own file.
    unsafe = sorted(key for key, value in found.items() if key not in info and has_unsafe(value))
    if unsafe:
        raise ConfigError(f"the system the bundle captured for {cell.config.shown_label}: "
                          f"{_fields(unsafe, 'holds', 'hold')} control or bidirectional characters "
                          f"({visible(found[unsafe[0]])}); give {'it' if len(unsafe) == 1 else 'them'} in --system-info")
    values = {**found, **info, "division": division, "submitter": org, "status": status, "system_name": name}
    described = {key: values.get(key, "") for key in SYSTEM_FIELDS}
    empty = [key for key in SYSTEM_FIELDS if not described[key] and key not in ("hw_notes", "sw_notes")]
    replaced = [f"{key} {found[key]!r} -> {value!r}" for key, value in info.items() if found.get(key) not in (None, "", value)]
    return described, empty, replaced
