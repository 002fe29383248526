"""What a run ran on: host, OS, Python, every installed package's version, GPUs, container,
and the harness's own version and git state. Gathered in the probe process (see probe.py)."""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys
from collections.abc import Callable
from importlib.metadata import distributions
from pathlib import Path
from typing import Any

import harness
from harness.distribution_names import name_and_version, normalized

SOURCE_ROOT = Path(harness.__file__).resolve().parent.parent


def harness_info() -> dict[str, Any]:
    """Version, git commit and whether the working tree had uncommitted changes."""
    sha = dirty = None
    try:
        sha = subprocess.run(
            ["git", "-C", str(SOURCE_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        status = subprocess.run(
            ["git", "-C", str(SOURCE_ROOT), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
        dirty = bool(status.strip())
    except (OSError, subprocess.SubprocessError):
        pass  # not a git checkout (an installed package): sha and dirty stay unknown
    return {"version": harness.__version__, "git_sha": sha, "git_dirty": dirty}


def packages() -> dict[str, str]:
    found = {}
    for dist in distributions():
        name, version = name_and_version(dist)
        if name:
            found[normalized(name)] = version
    return dict(sorted(found.items()))


BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def boot_id(path: Path = BOOT_ID) -> str | None:
    """This start of the machine: Linux's boot id, new at each boot of the kernel (a container
    reads its host's), or None where there is none to read. Two cells of one machine that differ
    in it ran on either side of a restart, which a VM may come back from as a slower machine."""
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return text or None


#: The instruction-set extensions a backend's kernels are chosen by (oneDNN, MLAS and LLVM pick AVX2,
#: AVX-512 or AMX code, NEON or SVE): two machines of one model name may differ in them (a VM hides some).
VECTOR_EXTENSIONS = frozenset({
    "sse4_1", "sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512dq", "avx512cd", "avx512bw", "avx512vl",
    "avx512_vnni", "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile", "amx_bf16", "amx_int8", "amx_fp16",
    "asimd", "asimdhp", "asimddp", "sve", "sve2", "bf16", "i8mm", "sme",
})


#: Arm's cores by (implementer, part) as /proc/cpuinfo writes them, which names no model on Arm:
#: the server cores (Graviton 2 to 4, Grace, Ampere Altra) and the common client ones.
ARM_CORES = {
    ("0x41", "0xd08"): "Arm Cortex-A72", ("0x41", "0xd0b"): "Arm Cortex-A76", ("0x41", "0xd0c"): "Arm Neoverse-N1",
    ("0x41", "0xd40"): "Arm Neoverse-V1", ("0x41", "0xd41"): "Arm Cortex-A78", ("0x41", "0xd44"): "Arm Cortex-X1",
    ("0x41", "0xd49"): "Arm Neoverse-N2", ("0x41", "0xd4f"): "Arm Neoverse-V2", ("0x41", "0xd8e"): "Arm Neoverse-N3",
    ("0x41", "0xd84"): "Arm Neoverse-V3", ("0xc0", "0xac3"): "Ampere-1", ("0x61", "0x022"): "Apple M1 Icestorm",
    ("0x61", "0x023"): "Apple M1 Firestorm",
}


def _arm_model(implementer: str | None, part: str | None) -> str | None:
    """A name for an Arm core, whose /proc/cpuinfo has no model name: from ARM_CORES, else its
    implementer and part as written; None where it says neither (not Arm)."""
    if not implementer or not part:
        return None
    return ARM_CORES.get((implementer.lower(), part.lower())) or f"Arm CPU (implementer {implementer}, part {part})"


def cpu_identity(cpuinfo: str) -> dict[str, Any]:
    """The first processor of /proc/cpuinfo: its model name, what tells one generation from another
    under a name a VM may shorten ("AMD EPYC": x86's vendor, family, model and stepping; Arm's
    implementer, part and variant) and its vector extensions. None for what it does not say."""
    first: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        if not line.strip():
            if first:
                break
            continue
        key, _, value = line.partition(":")
        first.setdefault(key.strip(), value.strip())
    x86 = ("vendor_id", "cpu family", "model", "stepping")
    arm = ("CPU implementer", "CPU part", "CPU variant", "CPU revision")
    fields = next((names for names in (x86, arm) if all(first.get(n) for n in names)), None)
    flags = (first.get("flags") or first.get("Features") or "").split()
    return {
        "model": first.get("model name") or _arm_model(first.get("CPU implementer"), first.get("CPU part")),
        "identity": ", ".join(f"{name} {first[name]}" for name in fields) if fields else None,
        "vector_extensions": sorted(VECTOR_EXTENSIONS.intersection(flags)) if flags else None,
    }


def cpu_info() -> dict[str, Any]:
    import psutil

    try:
        identity = cpu_identity(Path("/proc/cpuinfo").read_text())
    except OSError:
        identity = {}
    return {
        "model": identity.get("model") or platform.processor() or "",
        "identity": identity.get("identity"),
        "vector_extensions": identity.get("vector_extensions"),
        "architecture": platform.machine(),
        "logical_cores": os.cpu_count(),
        "physical_cores": psutil.cpu_count(logical=False),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "memory_bytes": psutil.virtual_memory().total,
    }


def machine_line(cpu: dict[str, Any] | None = None, device: str = "cpu") -> str:
    """This machine in one line, as the benchmarks under benchmarks/ print it beside their ratios:
    its CPU's model and identity (`platform.processor()` is empty on Linux, which left them
    printing only "x86_64"), the cores this process may use of all, and the architecture; on a
    CUDA run (`device` "cuda") the GPUs too, as `gpu_info` reads them."""
    cpu = cpu if cpu is not None else cpu_info()
    identity = f" ({cpu['identity']})" if cpu.get("identity") else ""
    line = (f"{cpu.get('model') or 'unknown CPU'}{identity}, {cpu.get('usable_cores')} of {cpu.get('logical_cores')} "
            f"cores usable, {cpu.get('architecture')}")
    return line if device != "cuda" else f"{line}; {gpu_line(gpu_info())}"


def gpu_line(gpu: dict[str, Any]) -> str:
    """The GPUs a CUDA run here may use, named by NVML (asked rather than torch, so that a benchmark's
    parent holds no CUDA context beside its cells' workers), or why none is named."""
    if not gpu.get("available"):
        return f"no GPU named ({gpu.get('reason') or 'NVML gave no reason'})"
    gpus = gpu.get("gpus") or []
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    shown = gpus if visible is None else _visible(gpus, visible)
    if not shown:
        return f"no GPU named (NVML sees {len(gpus)}, CUDA_VISIBLE_DEVICES={visible!r})"
    names = ", ".join(f"{g.get('name') or 'unnamed'} (NVML index {g.get('index')})" for g in shown)
    return f"GPU{'s' if len(shown) > 1 else ''} {names}, driver {gpu.get('driver') or 'unknown'}"


def _visible(gpus: list[dict[str, Any]], visible: str) -> list[dict[str, Any]]:
    """The GPUs of `gpus` (NVML's) that CUDA_VISIBLE_DEVICES=`visible` leaves CUDA, in its order, read
    as torch reads it for CUDA (torch.cuda._parse_visible_devices): each entry's leading digits, the
    entries before the first without any or that names no GPU, and none at all where one repeats:
    `-1` hides every GPU, `0,-1,1` leaves 0 (a list of digits alone named every GPU for `-1`).
    Indices are NVML's where CUDA_DEVICE_ORDER=PCI_BUS_ID, and on a machine of one kind of GPU in any
    order; UUIDs or MIG names are not read here, so with them every GPU is named."""
    if visible.startswith(("GPU-", "MIG-")):
        return gpus
    by_index = {g.get("index"): g for g in gpus}
    shown: list[dict[str, Any]] = []
    for part in visible.split(","):
        digits = re.match(r"\+?(\d+)", part.strip())
        index = int(digits.group(1)) if digits else None
        if index in (g.get("index") for g in shown):
            return []
        if index not in by_index:
            break
        shown.append(by_index[index])
    return shown


def container_info() -> dict[str, Any]:
    """Whether this runs in a container, and which image (`./run.sh --container` passes its tag,
    id, digest, layer digests, base and whether it holds TensorRT in the environment:
    harness/container/launcher.py)."""
    in_container = Path("/.dockerenv").exists() or Path("/run/.containerenv").exists()
    layers = os.environ.get("FUSIONBENCH_IMAGE_LAYERS")
    return {
        "in_container": in_container,
        "image": os.environ.get("FUSIONBENCH_IMAGE"),
        "image_id": os.environ.get("FUSIONBENCH_IMAGE_ID"),
        "image_digest": os.environ.get("FUSIONBENCH_IMAGE_DIGEST"),
        "layers": layers.split(",") if layers else None,
        "base": os.environ.get("FUSIONBENCH_IMAGE_BASE"),
        "tensorrt": os.environ.get("FUSIONBENCH_IMAGE_TENSORRT"),
    }


def torch_info() -> dict[str, Any]:
    try:
        import torch
    except ImportError:
        return {"installed": False}
    cuda_available = torch.cuda.is_available()
    cudnn = None
    devices: list[dict[str, Any]] = []
    if cuda_available:
        cudnn = torch.backends.cudnn.version()
        for i in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(i)
            devices.append(
                {
                    "name": props.name,
                    "capability": f"{props.major}.{props.minor}",
                    "memory_bytes": props.total_memory,
                    "multiprocessors": props.multi_processor_count,
                }
            )
    return {
        "installed": True,
        "version": torch.__version__,
        "cuda_build": torch.version.cuda,
        "cuda_available": cuda_available,
        "cudnn": cudnn,
        "devices": devices,
    }


_NVML_READERS: dict[str, Callable[[Any, Any], Any]] = {
    "memory_bytes": lambda nvml, h: nvml.nvmlDeviceGetMemoryInfo(h).total,
    "sm_clock_max_mhz": lambda nvml, h: nvml.nvmlDeviceGetMaxClockInfo(h, nvml.NVML_CLOCK_SM),
    "mem_clock_max_mhz": lambda nvml, h: nvml.nvmlDeviceGetMaxClockInfo(h, nvml.NVML_CLOCK_MEM),
    "sm_clock_app_mhz": lambda nvml, h: nvml.nvmlDeviceGetApplicationsClock(h, nvml.NVML_CLOCK_SM),
    "power_limit_w": lambda nvml, h: nvml.nvmlDeviceGetPowerManagementLimit(h) / 1000,
    "pci_bus_id": lambda nvml, h: _text(nvml.nvmlDeviceGetPciInfo(h).busId),
}


def gpu_info() -> dict[str, Any]:
    """GPUs as NVML sees them: name, driver, memory, clocks, power limit."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception as exc:  # no NVIDIA driver here: say so in the bundle
        return {"available": False, "reason": f"NVML: {exc}"}
    # A GPU this user may not open, one fallen off the bus, a driver that answers only some calls
    # (WSL2, vGPU): what cannot be read is recorded with NVML's reason, never a failed probe (which
    # would stop a CPU run too).
    try:
        try:
            count = pynvml.nvmlDeviceGetCount()
        except pynvml.NVMLError as exc:
            return {"available": False, "reason": f"NVML: {exc}"}
        gpus = []
        for i in range(count):
            try:
                h = pynvml.nvmlDeviceGetHandleByIndex(i)
                gpu: dict[str, Any] = {"index": i, "name": _text(pynvml.nvmlDeviceGetName(h))}
            except pynvml.NVMLError as exc:
                gpus.append({"index": i, "name": None, "reason": f"NVML: {exc}"})
                continue
            for key, read in _NVML_READERS.items():
                try:
                    gpu[key] = read(pynvml, h)
                except pynvml.NVMLError:
                    gpu[key] = None
            gpus.append(gpu)
        return {
            "available": True,
            "driver": _nvml_or_none(lambda: _text(pynvml.nvmlSystemGetDriverVersion()), pynvml.NVMLError),
            "cuda_driver_version": _nvml_or_none(pynvml.nvmlSystemGetCudaDriverVersion, pynvml.NVMLError),
            "gpus": gpus,
        }
    finally:
        pynvml.nvmlShutdown()


def _nvml_or_none(read: Callable[[], Any], error: type[Exception]) -> Any:
    """What `read` gives, or None where NVML refuses it (`error`)."""
    try:
        return read()
    except error:
        return None


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def describe() -> dict[str, Any]:
    """The system section of a bundle."""
    return {
        "os": {"platform": platform.platform(), "kernel": platform.release(), "system": platform.system()},
        "python": {
            "version": platform.python_version(),
            "implementation": platform.python_implementation(),
            "executable": sys.executable,
        },
        "cpu": cpu_info(),
        "torch": torch_info(),
        "gpu": gpu_info(),
        "container": container_info(),
        "packages": packages(),
    }
