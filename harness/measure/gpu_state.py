"""The GPU's clocks, temperature, power and the reasons NVML gives for holding its clocks down,
read before and after each timed repetition (never inside it), so a figure taken while the GPU
throttled says so.

The reasons are NVML's clocks-event (formerly "throttle") bits; of them, the power cap and the
thermal and hardware slowdowns mean the GPU ran slower than it can, while "idle" and the
application-clock setting are normal states.
"""

from __future__ import annotations

from typing import Any

# nvmlClocksEventReason* bits (nvml.h)
REASONS = {
    0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap", 0x8: "hw_slowdown",
    0x10: "sync_boost", 0x20: "sw_thermal_slowdown", 0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown", 0x100: "display_clock_setting",
}
SLOWDOWNS = frozenset({"sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown",
                       "hw_power_brake_slowdown"})


def reasons(mask: int) -> list[str]:
    return [name for bit, name in REASONS.items() if mask & bit]


def read(nvml: Any = None) -> dict[str, Any]:
    """The state of torch's current GPU, or {"unavailable": why}."""
    try:
        if nvml is None:
            import pynvml

            pynvml.nvmlInit()
            nvml = pynvml
        from harness.measure.memory import device_handle

        handle = device_handle(nvml)
        state: dict[str, Any] = {
            "sm_clock_mhz": nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM),
            "mem_clock_mhz": nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM),
            "temperature_c": nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU),
            "power_w": nvml.nvmlDeviceGetPowerUsage(handle) / 1000,
        }
        event_reasons = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
            nvml.nvmlDeviceGetCurrentClocksThrottleReasons
        state["clocks_event_reasons"] = reasons(int(event_reasons(handle)))
        return state
    except Exception as exc:  # noqa: BLE001 - no NVML, no permission, an old driver: recorded, not fatal
        return {"unavailable": f"{type(exc).__name__}: {exc}"[:200]}


def slowdowns(states: list[dict[str, Any]]) -> list[str]:
    """The slowdown reasons seen in any of these states, in NVML's order."""
    seen = {reason for state in states for reason in state.get("clocks_event_reasons", [])}
    return [name for name in REASONS.values() if name in seen and name in SLOWDOWNS]
