"""What `compare` says of two runs' systems, first, since a difference between machines explains a
difference between figures: each fact of their machines and software that differs (harness, device,
CPU, memory, OS, Python, torch, GPUs and driver, container and its layers, input images, executor),
each backend's availability and versions, the package each plugin model came from, and the
installed packages, last.
"""

from __future__ import annotations

from typing import Any

from harness.bundle.header_record import BundleHeader, Container, Cpu, Gpus, OperatingSystem, Python, Torch, local_jobs
from harness.metric_table import format_bytes
from harness.plain_text import one_line


def system_differences(a: BundleHeader, b: BundleHeader) -> list[tuple[str, str, str]]:
    """(what, A, B) for each fact of the two runs' systems and software that differs."""
    rows = []
    for (what, left), (_, right) in zip(_facts(a), _facts(b)):
        if left != right:  # a fact one run did not record (synthetic inputs have no digest) is "-", never "None"
            rows.append((what, "-" if left is None else str(left), "-" if right is None else str(right)))
    if _gpus(a) != _gpus(b):
        rows.append(("GPUs", str(_gpus(a)), str(_gpus(b))))
    rows += _layer_differences((a.system.container or Container()).layers, (b.system.container or Container()).layers)
    backends_a, backends_b = _backends(a), _backends(b)  # a plugin one run had and the other not, or other versions
    for name in sorted(set(backends_a) | set(backends_b)):
        if backends_a.get(name) != backends_b.get(name):
            rows.append((f"backend {name}", backends_a.get(name, "-"), backends_b.get(name, "-")))
    models_a, models_b = _plugin_models(a), _plugin_models(b)  # the model is the plugin's code: another version, another model
    for name in sorted(set(models_a) | set(models_b)):
        if models_a.get(name) != models_b.get(name):
            rows.append((f"model {name}", models_a.get(name, "-"), models_b.get(name, "-")))
    packages_a, packages_b = a.system.packages or {}, b.system.packages or {}
    for name in sorted(set(packages_a) | set(packages_b)):  # last: two machines can differ in hundreds
        if packages_a.get(name) != packages_b.get(name):
            rows.append((f"{PACKAGE}{name}", str(packages_a.get(name, "-")), str(packages_b.get(name, "-"))))
    return rows


def _facts(header: BundleHeader) -> list[tuple[str, object]]:
    """(what, value) of each fact of a run's system and software that `system_differences` compares;
    None where the run did not record it."""
    system = header.system
    cpu, opsys, python, torch = system.cpu or Cpu(), system.os or OperatingSystem(), system.python or Python(), system.torch or Torch()
    gpu, container = system.gpu or Gpus(), system.container or Container()
    return [
        ("harness version", header.harness.version), ("harness git sha", header.harness.git_sha),
        ("device", header.device), ("CPU", cpu.model), ("CPU identity", cpu.identity),
        ("CPU vector extensions", " ".join(cpu.vector_extensions) if cpu.vector_extensions is not None else None),
        ("logical cores", cpu.logical_cores),
        ("memory", _memory(cpu.memory_bytes)), ("OS kernel", opsys.kernel),
        ("Python", python.version), ("torch", torch.version),
        ("CUDA (torch build)", torch.cuda_build), ("cuDNN", torch.cudnn),
        ("GPU driver", gpu.driver), ("in a container", container.in_container),
        ("container image", container.image), ("container image id", container.image_id),
        ("container digest", container.image_digest), ("container base", container.base),
        # the images an input folder held (its path is the cells' config): a resume refuses others,
        # and two runs on other images under the same names are told apart here
        ("input images (SHA-256)", header.inputs_sha256[:12] if header.inputs_sha256 else None),
        # how the cells shared the machine (--jobs, Ray): cells of other shares are never paired
        ("executor", _executor(header.executor)),
    ]


def _memory(count: int | None) -> str | None:
    """The machine's memory in binary units, and in bytes: two VMs of one kind can differ by a few
    hundred KiB, which `23.5 GiB` alone would hide, and 25276059648 alone does not read."""
    return None if count is None else f"{format_bytes(count)} ({count:,} bytes)"


def _gpus(header: BundleHeader) -> str | None:
    gpus = (header.system.gpu or Gpus()).gpus
    return ", ".join(str(g.name) for g in gpus) if gpus else None


def _layer_differences(a: list[str] | None, b: list[str] | None) -> list[tuple[str, str, str]]:
    """Which of two images' layers differ (by position, base first), when both recorded them."""
    if a is None or b is None:
        return []
    rows = []
    for index in range(max(len(a), len(b))):
        left, right = (a[index] if index < len(a) else "-"), (b[index] if index < len(b) else "-")
        if left != right:
            rows.append((f"container layer {index + 1} of {max(len(a), len(b))}", str(left), str(right)))
    return rows


def _executor(executor: dict[str, Any] | None) -> str | None:
    """The last start's executor in a few words (`local, 2 jobs`, `ray, 1 CPU(s) a cell`), or None
    where the header recorded none (bundles before --jobs)."""
    if not isinstance(executor, dict):
        return None
    name = str(executor.get("name", "?"))
    jobs = local_jobs(executor)
    if jobs is not None and jobs > 1:
        return f"{name}, {jobs} jobs"
    if isinstance(executor.get("cpus_per_cell"), int):
        return f"{name}, {executor['cpus_per_cell']} CPU(s) a cell"
    return name


def _backends(header: BundleHeader) -> dict[str, str]:
    """Each backend a run's probe recorded, as a line: available or why not, and its libraries' versions."""
    lines: dict[str, str] = {}
    for name, entry in header.backends.items():
        state = "available" if entry.available else f"not available ({one_line(entry.reason or '')})"
        lines[name] = state + "".join(f", {k} {v}" for k, v in sorted((entry.versions or {}).items()))
    return lines


def _plugin_models(header: BundleHeader) -> dict[str, str]:
    """Each plugin model a run ran, as the package and version it came from (bundle.json `model_plugins`)."""
    return {name: f"{entry.distribution} {entry.version}" for name, entry in (header.model_plugins or {}).items()}


#: How a row of `system_differences` names an installed package.
PACKAGE = "package "
