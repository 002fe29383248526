"""A fake `pynvml`: one NVIDIA H100 as NVML describes it, for the tests of what reads NVML
(harness/run/system.py's `gpu_info`, and the benchmarks' machine line) on a machine without a GPU."""

from __future__ import annotations

import types


def fake_pynvml() -> types.ModuleType:
    """A `pynvml` module that answers as NVML does on one H100 (application clocks not supported):
    a test puts it in `sys.modules` and changes what it needs."""
    nvml = types.ModuleType("pynvml")

    class NVMLError(Exception):
        pass

    nvml.NVMLError = NVMLError
    nvml.NVML_CLOCK_SM, nvml.NVML_CLOCK_MEM = 1, 2
    nvml.nvmlInit = lambda: None
    nvml.nvmlShutdown = lambda: None
    nvml.nvmlDeviceGetCount = lambda: 1
    nvml.nvmlDeviceGetHandleByIndex = lambda i: f"h{i}"
    nvml.nvmlDeviceGetName = lambda h: b"NVIDIA H100 80GB HBM3"
    nvml.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(total=80 * 2**30, used=2**20)
    nvml.nvmlDeviceGetMaxClockInfo = lambda h, kind: {1: 1980, 2: 2619}[kind]

    def no_app_clocks(h, kind):
        raise NVMLError("Not Supported")

    nvml.nvmlDeviceGetApplicationsClock = no_app_clocks
    nvml.nvmlDeviceGetPowerManagementLimit = lambda h: 700_000
    nvml.nvmlDeviceGetPciInfo = lambda h: types.SimpleNamespace(busId=b"00000000:19:00.0")
    nvml.nvmlSystemGetDriverVersion = lambda: "580.65.06"
    nvml.nvmlSystemGetCudaDriverVersion = lambda: 13000
    return nvml
