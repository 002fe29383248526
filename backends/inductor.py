"""TorchInductor through `torch.compile`: C++/OpenMP kernels on CPU, Triton kernels on GPU.

Options (scenario file, `options:`):
- `mode`: torch.compile mode: "default", "reduce-overhead", "max-autotune",
  "max-autotune-no-cudagraphs" (default "default")
- `freezing`: fold parameters into constants, which lets conv+bn fold and, on CPU, oneDNN
  conv+activation epilogues fuse (default true)

Compilation always starts cold (Inductor's caches disabled for the compile), so `prepare_s` is a
cold compile and the generated code is really produced, not replayed from a cache.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from backends.inductor_code import kernel_calls
from backends.torch_device import synchronize, torch_availability
from harness.contract import Availability, Backend, Prepared, Variant
from harness.errors import BackendFailed
from harness.fusion import FusionReport, KernelGroup

MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
OPTIONS = {"mode": str, "freezing": bool}


class InductorBackend(Backend):
    name = "inductor"

    def availability(self, device: str) -> Availability:
        basic = torch_availability(device)
        if not basic.ok:
            return basic
        if device == "cuda":
            from torch.utils._triton import has_triton

            if not has_triton():
                return Availability.no("Triton is not importable with a supported GPU; Inductor cannot generate GPU kernels")
        elif not (shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")):
            return Availability.no("no C++ compiler (g++, c++ or clang++) on PATH; Inductor compiles its CPU kernels with one")
        return Availability.yes()

    def supports(self, variant: Variant, dtype: str) -> Availability:
        if variant.fusion == "off":
            return Availability.no("inductor fusion=off is not implemented yet (it needs every FX node realized and max_fusion_size=1)")
        return Availability.yes()

    def versions(self) -> dict[str, str]:
        import torch

        versions = {"torch": torch.__version__}
        try:
            import triton

            versions["triton"] = triton.__version__
        except ImportError:
            pass
        return versions

    def prepare(
        self, model: Any, example: Any, *, device: str, dtype: str, variant: Variant, workdir: Path
    ) -> Prepared:
        options = _checked_options(variant.options)
        import torch
        import torch._inductor.config as inductor_config
        from torch._inductor.utils import run_and_get_code

        torch._dynamo.reset()
        with inductor_config.patch(force_disable_caches=True, freezing=options["freezing"]), torch.no_grad():
            compiled = torch.compile(model, mode=None if options["mode"] == "default" else options["mode"], dynamic=False)
            # Compilation happens on the first call; capture the wrapper code it generates.
            _, sources = run_and_get_code(compiled, example)
        if not sources:
            raise BackendFailed("torch.compile produced no Inductor code (the whole model fell back to eager)")
        aten = [name for name in dir(torch.ops.aten) if not name.startswith("__")]
        kernels = [group for source in sources for group in kernel_calls(source, aten)]
        return InductorPrepared(compiled, device, kernels, graphs=len(sources))


def _checked_options(options: dict[str, Any] | Any) -> dict[str, Any]:
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise BackendFailed(f"unknown inductor option(s) {', '.join(unknown)}; allowed: {', '.join(OPTIONS)}")
    resolved = {"mode": "default", "freezing": True, **options}
    for key, kind in OPTIONS.items():
        if not isinstance(resolved[key], kind):
            raise BackendFailed(f"inductor option {key} must be a {kind.__name__}, got {resolved[key]!r}")
    if resolved["mode"] not in MODES:
        raise BackendFailed(f"inductor option mode={resolved['mode']!r}; allowed: {', '.join(MODES)}")
    return resolved


class InductorPrepared(Prepared):
    prepare_cache = "cold"
    dispatch_definition = (
        "kernel calls in Inductor's generated wrapper per inference: generated C++/Triton kernels "
        "plus library (extern, oneDNN) calls"
    )

    def __init__(self, compiled: Any, device: str, kernels: list[KernelGroup], graphs: int) -> None:
        self.compiled = compiled
        self.device = device
        self.kernels = kernels
        self.graphs = graphs

    def __call__(self, batch: Any) -> Any:
        import torch

        with torch.no_grad():
            return self.compiled(batch)

    def synchronize(self) -> None:
        synchronize(self.device)

    def cpu_dispatches(self, batch: Any) -> int:
        return len(self.kernels)

    def fusion_report(self) -> FusionReport:
        return FusionReport(
            kernels=tuple(self.kernels),
            source=f"inductor generated wrapper code ({self.graphs} graph{'s' if self.graphs != 1 else ''})",
            notes="operators folded at compile time (batch norm under freezing) do not appear",
        )
