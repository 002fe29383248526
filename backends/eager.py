"""PyTorch eager: the baseline every other backend is compared with."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from backends.torch_device import synchronize, torch_availability
from harness.contract import Availability, Backend, Prepared, Variant
from harness.fusion import FusionReport, KernelGroup


# Allocations that run no kernel of their own.
_NO_COMPUTE = frozenset({"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"})


class EagerBackend(Backend):
    """Runs the nn.Module as it is. Eager has no fusion switch: `fusion: on` and `off` run the
    same code (the vendor libraries under it, oneDNN or cuDNN, keep their own internal fusions)."""

    name = "eager"

    def availability(self, device: str) -> Availability:
        return torch_availability(device)

    def versions(self) -> dict[str, str]:
        import torch

        return {"torch": torch.__version__}

    def prepare(
        self, model: Any, example: Any, *, device: str, dtype: str, variant: Variant, workdir: Path,
        cache_dir: Path,
    ) -> Prepared:
        del dtype, workdir
        if variant.options:
            from harness.errors import BackendFailed

            raise BackendFailed(f"eager takes no options; got {', '.join(sorted(variant.options))}")
        return EagerPrepared(model, device, example)


class EagerPrepared(Prepared):
    prepare_cache = "none"
    dispatch_definition = (
        "ATen operators that compute, dispatched per inference as a TorchDispatchMode sees them "
        "(composite operators decomposed; views and empty allocations not counted)"
    )

    def __init__(self, model: Any, device: str, example: Any) -> None:
        self.model = model
        self.device = device
        self.example = example

    def __call__(self, batch: Any) -> Any:
        import torch

        with torch.no_grad():
            return self.model(batch)

    def synchronize(self) -> None:
        synchronize(self.device)

    def _trace(self, batch: Any) -> list[str]:
        import torch
        from torch.utils._python_dispatch import TorchDispatchMode

        ops: list[str] = []

        class Recorder(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
                name = func.overloadpacket.__name__
                if not (func.is_view or name in _NO_COMPUTE):
                    ops.append(f"aten.{name}")
                return func(*args, **(kwargs or {}))

        with torch.no_grad(), Recorder():
            self.model(batch)
        return ops

    def cpu_dispatches(self, batch: Any) -> int:
        return len(self._trace(batch))

    def fusion_report(self) -> FusionReport:
        return FusionReport(
            kernels=tuple(KernelGroup(kernel=op, ops=(op,)) for op in self._trace(self.example)),
            source="eager: one ATen operator per dispatch (TorchDispatchMode trace)",
        )
