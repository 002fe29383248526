"""System description: what goes into every bundle. NVML is faked here, so the GPU branch is
exercised on machines without a GPU (the real one runs in tests/gpu)."""

from __future__ import annotations

import sys

import pytest

from harness.run import system
from tests.fakes.nvml import fake_pynvml


def test_gpu_info_reads_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml())
    info = system.gpu_info()
    assert info["available"] and info["driver"] == "580.65.06" and info["cuda_driver_version"] == 13000
    (gpu,) = info["gpus"]
    assert gpu["name"] == "NVIDIA H100 80GB HBM3" and gpu["memory_bytes"] == 80 * 2**30
    assert gpu["sm_clock_max_mhz"] == 1980 and gpu["power_limit_w"] == 700 and gpu["pci_bus_id"] == "00000000:19:00.0"
    assert gpu["sm_clock_app_mhz"] is None, "an unsupported query is recorded as unknown, not fatal"


def test_gpu_info_without_a_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    nvml = fake_pynvml()

    def missing():
        raise nvml.NVMLError("NVML Shared Library Not Found")

    nvml.nvmlInit = missing
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    assert system.gpu_info() == {"available": False, "reason": "NVML: NVML Shared Library Not Found"}


def test_a_gpu_nvml_will_not_open_is_recorded_with_its_reason_and_the_others_read(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A GPU this user may not open (or fallen off the bus) raised out of the probe: the run stopped
    with exit 2, a CPU run too. Now that GPU is recorded with NVML's reason and the others read."""
    nvml = fake_pynvml()
    nvml.nvmlDeviceGetCount = lambda: 2

    def handle(i):
        if i == 1:
            raise nvml.NVMLError("Insufficient Permissions")
        return f"h{i}"

    def no_driver_version():
        raise nvml.NVMLError("Unknown Error")

    nvml.nvmlDeviceGetHandleByIndex = handle
    nvml.nvmlSystemGetDriverVersion = no_driver_version
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    info = system.gpu_info()
    assert info["available"] and info["driver"] is None and info["cuda_driver_version"] == 13000
    first, second = info["gpus"]
    assert first["name"] == "NVIDIA H100 80GB HBM3" and first["memory_bytes"] == 80 * 2**30
    assert second == {"index": 1, "name": None, "reason": "NVML: Insufficient Permissions"}

    def no_count():
        raise nvml.NVMLError("GPU is lost")

    nvml.nvmlDeviceGetCount = no_count
    assert system.gpu_info() == {"available": False, "reason": "NVML: GPU is lost"}


def test_describe_has_every_section() -> None:
    described = system.describe()
    assert set(described) == {"os", "python", "cpu", "torch", "gpu", "container", "packages"}
    assert described["packages"]["mlcommons-loadgen"] and described["packages"]["torch"]
    assert described["cpu"]["logical_cores"] >= 1 and described["cpu"]["memory_bytes"] > 0


def test_harness_info_outside_git(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setattr(system, "SOURCE_ROOT", tmp_path)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))  # tmp_path may lie in a checkout (.test-tmp)
    info = system.harness_info()
    assert info["git_sha"] is None and info["git_dirty"] is None and info["version"]


def test_harness_info_in_this_checkout() -> None:
    if not (system.SOURCE_ROOT / ".git").exists():
        pytest.skip("the harness is not running from a git checkout")
    info = system.harness_info()
    assert len(info["git_sha"]) == 40 and isinstance(info["git_dirty"], bool)


def test_the_boot_id_names_this_start_of_the_machine(tmp_path) -> None:
    """Linux's boot id, the same for every read within one boot; None where there is none to read."""
    from harness.run.executors import node_info

    if sys.platform == "linux":
        here = system.boot_id()
        assert here is not None and len(here) == 36 and here == system.boot_id()
        assert node_info(None)["boot_id"] == here
    written = tmp_path / "boot_id"
    written.write_text("0b7c2f1e-9d1a-4c55-a2f3-6c1d2e3f4a5b\n")
    assert system.boot_id(written) == "0b7c2f1e-9d1a-4c55-a2f3-6c1d2e3f4a5b"
    written.write_text("")
    assert system.boot_id(written) is None
    assert system.boot_id(tmp_path / "absent") is None


def test_the_cpu_is_told_apart_by_its_generation_and_vector_extensions_where_its_name_is_not() -> None:
    """A VM names its CPU "AMD EPYC" whichever generation it is, and hides extensions the host has:
    oneDNN, MLAS and LLVM choose AVX2, AVX-512 or AMX kernels by them, so two runs under one name can
    time different code. An x86 and an Arm /proc/cpuinfo, as each writes it (its first processor)."""
    x86 = ("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\nmodel name\t: AMD EPYC\n"
           "stepping\t: 1\nflags\t\t: fpu sse sse2 sse4_1 sse4_2 avx f16c fma avx2 sha_ni\n\n"
           "processor\t: 1\nvendor_id\t: GenuineIntel\nflags\t\t: avx512f amx_tile\n")
    assert system.cpu_identity(x86) == {
        "model": "AMD EPYC", "identity": "vendor_id AuthenticAMD, cpu family 25, model 1, stepping 1",
        "vector_extensions": ["avx", "avx2", "f16c", "fma", "sse4_1", "sse4_2"]}
    arm = ("processor\t: 0\nBogoMIPS\t: 243.75\nFeatures\t: fp asimd evtstrm aes sve asimddp bf16 i8mm\n"
           "CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x1\nCPU part\t: 0xd40\nCPU revision\t: 1\n")
    assert system.cpu_identity(arm) == {  # Arm names no model: the core is named from its implementer and part
        "model": "Arm Neoverse-V1", "identity": "CPU implementer 0x41, CPU part 0xd40, CPU variant 0x1, CPU revision 1",
        "vector_extensions": ["asimd", "asimddp", "bf16", "i8mm", "sve"]}
    assert system.cpu_identity("") == {"model": None, "identity": None, "vector_extensions": None}
    unknown = arm.replace("0xd40", "0xfff")
    assert system.cpu_identity(unknown)["model"] == "Arm CPU (implementer 0x41, part 0xfff)"
    assert system.cpu_identity("processor\t: 0\nflags\t\t: fpu sse\n")["vector_extensions"] == []  # none of them


def test_the_benchmarks_machine_line_names_the_cpu_not_only_its_architecture(monkeypatch: pytest.MonkeyPatch) -> None:
    """`platform.processor()` is empty on Linux: the benchmarks that printed it printed "x86_64"."""
    monkeypatch.setattr(system.platform, "processor", lambda: "")
    cpu = {"model": "AMD EPYC", "identity": "vendor_id AuthenticAMD, cpu family 25, model 17, stepping 1",
           "architecture": "x86_64", "logical_cores": 16, "usable_cores": 2}
    assert system.machine_line(cpu) == ("AMD EPYC (vendor_id AuthenticAMD, cpu family 25, model 17, stepping 1), "
                                        "2 of 16 cores usable, x86_64")
    assert system.machine_line({**cpu, "model": "", "identity": None}) == "unknown CPU, 2 of 16 cores usable, x86_64"
    assert system.machine_line().startswith(system.cpu_info()["model"] or "unknown CPU")


def test_the_benchmarks_machine_line_names_the_gpu_on_a_cuda_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """NVML faked, nothing else: a benchmark run on the GPU printed the CPU alone, so two runs on
    two GPUs of one host read as the same machine. The CPU run's line stays as it was."""
    cpu = {"model": "AMD EPYC", "identity": None, "architecture": "x86_64", "logical_cores": 16, "usable_cores": 16}
    nvml = fake_pynvml()
    nvml.nvmlDeviceGetCount = lambda: 2
    nvml.nvmlDeviceGetName = lambda h: {"h0": b"NVIDIA H100 80GB HBM3", "h1": b"NVIDIA A100-SXM4-40GB"}[h]
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert system.machine_line(cpu) == "AMD EPYC, 16 of 16 cores usable, x86_64"
    assert system.machine_line(cpu, device="cuda") == (
        "AMD EPYC, 16 of 16 cores usable, x86_64; GPUs NVIDIA H100 80GB HBM3 (NVML index 0), "
        "NVIDIA A100-SXM4-40GB (NVML index 1), driver 580.65.06")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")  # what the run's cells see
    assert system.machine_line(cpu, device="cuda").endswith("; GPU NVIDIA A100-SXM4-40GB (NVML index 1), driver 580.65.06")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert system.machine_line(cpu, device="cuda").endswith("; no GPU named (NVML sees 2, CUDA_VISIBLE_DEVICES='')")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")  # CUDA sees none: the line named both
    assert system.machine_line(cpu, device="cuda").endswith("; no GPU named (NVML sees 2, CUDA_VISIBLE_DEVICES='-1')")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,-1,0")  # CUDA stops at the first index that is none
    assert system.machine_line(cpu, device="cuda").endswith("; GPU NVIDIA A100-SXM4-40GB (NVML index 1), driver 580.65.06")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,1")  # a repeat leaves CUDA none
    assert system.machine_line(cpu, device="cuda").endswith("; no GPU named (NVML sees 2, CUDA_VISIBLE_DEVICES='1,1')")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-5a1b,MIG-0c2d")  # not read: every GPU named
    assert "GPUs NVIDIA H100 80GB HBM3 (NVML index 0), NVIDIA A100" in system.machine_line(cpu, device="cuda")

    def missing() -> None:
        raise nvml.NVMLError("NVML Shared Library Not Found")

    nvml.nvmlInit = missing
    assert system.machine_line(cpu, device="cuda").endswith("; no GPU named (NVML: NVML Shared Library Not Found)")
