"""The memory pass: host RSS on every device; torch allocator peaks and NVML on GPU.

Host: the worker's peak RSS from its start to the end of the memory pass (`ru_maxrss`; one cell
per process makes it that cell's) and its delta over the baseline taken before the model was
built; plus the peak during the memory pass alone, by resetting the kernel's high-water mark (`/proc/self/clear_refs`), so the
eager reference's and the compiler's passing peaks do not count there; what they left allocated does
(the reset sets the mark to the RSS of the moment). The C library's freed heap is handed back to the
kernel first (`malloc_trim`): the default allocator (harness/allocator.py, `steady`) never does so
itself, so what a compile had freed stayed resident and the pass's peak was the lifetime's.
GPU: `torch.cuda.max_memory_allocated/reserved` over the pass (torch backends), and the NVML
peak of this process's device memory sampled from a thread (every backend). Inside a container
NVML may list host PIDs, so the device-wide used-memory delta is kept beside it.
"""

from __future__ import annotations

import ctypes
import os
import resource
import threading
from pathlib import Path
from typing import Any

from harness.bundle.passes_record import over_baseline
from harness.contract import Prepared

SAMPLE_INTERVAL_S = 0.005


def current_rss_bytes() -> int:
    import psutil

    return int(psutil.Process().memory_info().rss)


def lifetime_peak_rss_bytes() -> int:
    """Peak RSS so far. The kernel updates ru_maxrss lazily while VmHWM also counts the current
    RSS, so either can be the larger by a few pages: take both."""
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB
    return max(maxrss, _high_water_mark_bytes() or 0)


def _reset_high_water_mark() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _hand_back_freed_heap() -> bool:
    """Give the pages of every free heap block back to the kernel (glibc's `malloc_trim(0)`); False
    where the C library has no such call (musl). The blocks stay the allocator's: the first calls
    after it fault their pages in again, which the memory pass's own calls do."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return False
    trim.argtypes = [ctypes.c_size_t]
    trim(0)
    return True


def _high_water_mark_bytes() -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def memory_pass(
    prepared: Prepared, batch: Any, iters: int, device: str, baseline_rss: int, baseline_device_used: int | None
) -> dict[str, Any]:
    """`baseline_*`: taken by the worker before the model was built."""
    # Clearing the high-water mark also lowers ru_maxrss: read the lifetime peak first.
    peak_before_pass = lifetime_peak_rss_bytes()
    trimmed = _hand_back_freed_heap()
    reset = _reset_high_water_mark()
    sampler = NvmlSampler(baseline_device_used) if device == "cuda" else None
    if device == "cuda":
        import torch

        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    if sampler:
        sampler.start()
    try:
        for _ in range(iters):
            prepared(batch)
            prepared.synchronize()
    finally:
        if sampler:
            sampler.stop()
    pass_peak = _high_water_mark_bytes() if reset else None
    # The kernel's high-water marks lag the RSS psutil reads by a few pages: a baseline read at its
    # own peak stood above them, and a delta of -217 KB failed an eager cell. The baseline was an
    # RSS of this process: the lifetime peak is at least it.
    lifetime = max(peak_before_pass, lifetime_peak_rss_bytes(), baseline_rss)
    result: dict[str, Any] = {
        "rss_baseline_bytes": baseline_rss,
        "peak_rss_bytes": lifetime,
        "peak_rss_delta_bytes": over_baseline(lifetime, baseline_rss),
        "inference_peak_rss_bytes": pass_peak,
        "inference_peak_rss_delta_bytes": over_baseline(pass_peak, baseline_rss),
        "inference_peak_method": _inference_peak_method(reset, trimmed),
    }
    if device == "cuda":
        import torch

        result["torch_max_allocated_bytes"] = torch.cuda.max_memory_allocated()
        result["torch_max_reserved_bytes"] = torch.cuda.max_memory_reserved()
        result.update(sampler.result() if sampler else {})
    return result


def _inference_peak_method(reset: bool, trimmed: bool) -> str:
    if not reset:
        return "unavailable: /proc/self/clear_refs not writable"
    if not trimmed:
        return "VmHWM after clearing it; the freed heap not handed back first (no malloc_trim): what a compile freed counts"
    return "VmHWM after clearing it, the freed heap handed back first (malloc_trim)"


def device_handle(pynvml: Any) -> Any:
    """NVML's handle for torch's current device (matched by PCI address, which survives
    CUDA_VISIBLE_DEVICES renumbering)."""
    import torch

    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    bus = getattr(props, "pci_bus_id", None)
    if bus is not None:
        domain = getattr(props, "pci_domain_id", 0)
        dev = getattr(props, "pci_device_id", 0)
        return pynvml.nvmlDeviceGetHandleByPciBusId(f"{domain:08x}:{bus:02x}:{dev:02x}.0")
    return pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())


def device_used_bytes() -> int | None:
    """Memory in use on torch's current GPU, device-wide, per NVML; None without NVML."""
    try:
        import pynvml

        pynvml.nvmlInit()
        return int(pynvml.nvmlDeviceGetMemoryInfo(device_handle(pynvml)).used)
    except Exception:  # no NVML library or no permission: the caller records None
        return None


class NvmlSampler:
    """Samples this process's GPU memory (and the device's used memory) from a thread."""

    def __init__(self, device_used_baseline: int | None) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="nvml-sampler", daemon=True)
        self.process_peak: int | None = None
        self.device_used_baseline = device_used_baseline
        self.device_used_peak: int | None = None
        self.error: str | None = None
        self.samples = 0

    def start(self) -> None:
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml = pynvml
            self._handle = device_handle(pynvml)
        except Exception as exc:  # NVML missing or no permission: record why, measure the rest
            self.error = f"NVML unavailable: {exc}"
            return
        self._thread.start()

    def _sample(self) -> None:
        nvml = self._nvml
        used = nvml.nvmlDeviceGetMemoryInfo(self._handle).used
        self.device_used_peak = max(self.device_used_peak or 0, used)
        pid = os.getpid()
        for proc in nvml.nvmlDeviceGetComputeRunningProcesses(self._handle):
            if proc.pid == pid and proc.usedGpuMemory is not None:
                self.process_peak = max(self.process_peak or 0, proc.usedGpuMemory)
        self.samples += 1

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self._sample()
                self._stop.wait(SAMPLE_INTERVAL_S)
            self._sample()
        except Exception as exc:  # keep the pass alive; the reason goes into the cell
            self.error = f"NVML sampling failed: {exc}"

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def result(self) -> dict[str, Any]:
        delta, notes = None, []
        if self.device_used_peak is not None and self.device_used_baseline is not None:
            if self.device_used_peak >= self.device_used_baseline:
                delta = self.device_used_peak - self.device_used_baseline
            else:  # device-wide: another process on the GPU freed more than this cell took
                notes.append(f"the device's memory in use peaked {self.device_used_baseline - self.device_used_peak} bytes "
                             "below its level before the model was built (other processes on this GPU freed memory): "
                             "no device-wide delta")
        if self.error:
            notes.insert(0, self.error)
        elif self.process_peak is None:
            notes.insert(0, "this PID not in NVML's process list (container?): use the device delta")
        return {
            "nvml_process_peak_bytes": self.process_peak,
            "nvml_device_used_peak_bytes": self.device_used_peak,
            "nvml_device_used_delta_bytes": delta,
            "nvml_samples": self.samples,
            "nvml_note": "; ".join(notes),
        }
