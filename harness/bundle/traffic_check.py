"""Validate's check of a cell's measured DRAM traffic (`metrics.memory_traffic`, from schema 9)
against what the record itself cannot see.

That the total is the read and write bytes together, and that a measured record has all three, the
typed record checks (harness/bundle/passes_record.py `MemoryTraffic`), which validate reads every cell
as. Here: the kernels a record lists move no more than its total; and with the caches flushed
before each kernel (how harness/measure/memory_traffic.py runs Nsight Compute), every kernel reads
its inputs from DRAM, so one inference's reads cannot fall below the weights the forward reads and
the input batch, the roofline's compulsory reads: measured reads under them (by more than
`READ_SHORTFALL`) are counters that undercount or a record that does not belong to its model.
Writes are not held to the output's bytes: a kernel's last writes may stay in the L2 cache when it
ends, where the counters do not see them.

Where the cell kept the counter tool's log (`ncu_log.KEPT_AS` in its folder; cells measured before
the pass kept it have none), its figures are read from the log again (`log_problems`): the bytes,
the launches and the kernels listed must be the log's, as a cell's LoadGen figures must be
LoadGen's logs'.
"""

from __future__ import annotations

from typing import Any

from harness.bundle.files import CELLS
from harness.bundle.ncu_log import KEPT_AS, CounterLogError, launches, per_inference
from harness.bundle.snapshot import Snapshot
from harness.bundle.tolerance import close, number
from harness.errors import BundleError

# How far the measured reads may fall under the compulsory reads: the weights a backend folds away
# (a batch norm's statistics folded into its convolution) are no longer read.
READ_SHORTFALL = 0.10
_FIGURES = ("dram_read_bytes_per_inference", "dram_write_bytes_per_inference", "dram_bytes_per_inference",
            "kernels_per_inference")


def problems(metrics: dict[str, Any]) -> list[str]:
    """What in a cell's memory-traffic record disagrees with its top kernels or the roofline's costs."""
    traffic = metrics.get("memory_traffic")
    if not isinstance(traffic, dict) or traffic.get("absent") is not None:
        return []
    read, total = number(traffic.get("dram_read_bytes_per_inference")), number(traffic.get("dram_bytes_per_inference"))
    if read is None or total is None:  # the typed record's finding
        return []
    lines = []
    tops = traffic.get("top_kernels")
    listed = [kernel for kernel in (tops if isinstance(tops, list) else []) if isinstance(kernel, dict)]
    listed_bytes = sum((number(k.get("dram_read_bytes_per_inference")) or 0.0)
                       + (number(k.get("dram_write_bytes_per_inference")) or 0.0) for k in listed)
    if listed_bytes > total and not close(listed_bytes, total):
        lines.append(f"memory_traffic: its top kernels move {listed_bytes:.6g} bytes per inference, more than its "
                     f"total {total:.6g}")
    found = metrics.get("roofline")
    roofline: dict[str, Any] = found if isinstance(found, dict) else {}
    weights, batch = number(roofline.get("weight_bytes")), number(roofline.get("input_bytes"))
    if traffic.get("caches_flushed") is True and weights is not None and batch is not None:
        compulsory = weights + batch
        if read < compulsory * (1 - READ_SHORTFALL):
            lines.append(f"memory_traffic: the DRAM reads, {read:.6g} bytes per inference with the caches flushed "
                         f"before each kernel, are below the weights and input the model must read, {compulsory:.6g} "
                         f"bytes (roofline): counters that undercount, or a record of another model")
    return lines


def log_problems(files: Snapshot, cell: dict[str, Any]) -> list[str]:
    """Where a cell's memory-traffic figures disagree with the counter log its bundle keeps."""
    traffic = cell["metrics"].get("memory_traffic")
    rel = f"{CELLS}/{cell['id']}/{KEPT_AS}"
    regular, other = files.walk()
    if not isinstance(traffic, dict) or traffic.get("absent") is not None or (rel not in regular and rel not in other):
        return []
    iters = traffic.get("profiled_iters")
    if not isinstance(iters, int) or isinstance(iters, bool) or iters < 1:
        return [f"{rel}: the record's profiled_iters, {iters!r}, cannot divide the log's launches"]
    try:
        read = per_inference(launches(files.inner_text(rel)), iters)
    except BundleError as exc:
        return [f"{exc} (the cell's DRAM figures cannot be checked)"]
    except CounterLogError as exc:
        return [f"{rel}: {exc}"]
    lines = []
    for name in _FIGURES:
        kept = number(traffic.get(name))
        if kept is None or not close(kept, read[name]):
            lines.append(f"memory_traffic: {name} is {traffic.get(name)!r}, its counter log {rel} gives {read[name]:.6g}")
    if not _same_kernels(traffic.get("top_kernels"), read["top_kernels"]):
        lines.append(f"memory_traffic: its top kernels are not the ones its counter log {rel} gives")
    return lines


def _same_kernels(kept: Any, found: list[dict[str, Any]]) -> bool:
    """Whether a record's `top_kernels` are the log's: the same kernels in the same order, each with
    the same calls and bytes."""
    if not isinstance(kept, list) or len(kept) != len(found):
        return False
    for entry, truth in zip(kept, found):
        if not isinstance(entry, dict) or entry.get("name") != truth["name"]:
            return False
        for key in ("calls_per_inference", "dram_read_bytes_per_inference", "dram_write_bytes_per_inference"):
            value = number(entry.get(key))
            if value is None or not close(value, truth[key]):
                return False
    return True
