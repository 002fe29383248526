"""The NVML sampler's figures (harness/measure/memory.py), from set readings: no GPU needed."""

from __future__ import annotations

from harness.bundle.passes_record import Memory
from harness.measure.memory import NvmlSampler


def readings(baseline: int, peak: int, process_peak: int | None) -> dict[str, object]:
    sampler = NvmlSampler(baseline)
    sampler.device_used_peak, sampler.process_peak, sampler.samples = peak, process_peak, 3
    return sampler.result()


def test_the_device_delta_is_the_peak_over_the_baseline() -> None:
    result = readings(500, 1_700, 1_200)
    assert result["nvml_device_used_delta_bytes"] == 1_200 and result["nvml_note"] == ""


def test_a_device_that_other_processes_freed_gives_no_delta_and_says_why() -> None:
    """Measured on an H100 with six runs sharing the GPU: the device's memory in use fell below its
    level before the model was built, and a negative delta failed the whole cell."""
    result = readings(5_000, 4_000, 1_200)
    assert result["nvml_device_used_delta_bytes"] is None
    assert "1000 bytes below its level before the model was built" in str(result["nvml_note"])
    assert Memory.model_validate(result).nvml_device_used_delta_bytes is None  # a negative one failed validation


def test_a_process_nvml_does_not_list_is_noted_beside_the_fallen_device() -> None:
    note = str(readings(5_000, 4_000, None)["nvml_note"])
    assert note.startswith("this PID not in NVML's process list") and "no device-wide delta" in note
