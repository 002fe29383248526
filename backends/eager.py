"""PyTorch eager: the baseline every other backend is compared with."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from backends import torch_kernel_time
from backends.torch_device import synchronize, torch_availability
from harness.contract import Availability, Backend, CpuKernelTimes, Prepared, Variant
from harness.fusion import FusionReport, KernelGroup
from harness.fusion.ops import is_view_op
from harness.options import BackendOptions, expect

# Allocations that run no kernel of their own.
_NO_COMPUTE = frozenset({"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"})


class EagerBackend(Backend):
    """Runs the nn.Module as it is. Eager has no fusion switch: `fusion: on` and `off` run the
    same code (the vendor libraries under it, oneDNN or cuDNN, keep their own internal fusions).

    `graphs: on` (GPU): the model's forward is captured once into a CUDA graph (after three
    warm-up calls on a side stream, as torch.cuda.graphs asks) and each call copies the batch into
    the graph's static input and replays it: the same kernels, one launch. The copy is part of
    the call, as it is for any graph fed from outside."""

    name = "eager"
    cuda_graphs = True
    fusion_switch = False

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
        expect(self.name, BackendOptions, variant.options)  # eager takes none
        if variant.graphs == "on":
            return EagerGraphPrepared(model, device, example)
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
                # A view by the harness's list too: `_unsafe_view` (what a batched matmul's result is
                # reshaped by) aliases its input, but its schema does not say so (`is_view` False),
                # and it was counted as a kernel: 24 of BERT base's 223.
                if not (func.is_view or is_view_op(f"aten.{name}") or name in _NO_COMPUTE):
                    ops.append(f"aten.{name}")
                return func(*args, **(kwargs or {}))

        with torch.no_grad(), Recorder():
            self.model(batch)
        return ops

    def cpu_dispatches(self, batch: Any) -> int:
        return len(self._trace(batch))

    kernel_time_definition = torch_kernel_time.DEFINITION

    def cpu_kernel_times(self, batch: Any) -> CpuKernelTimes:
        return torch_kernel_time.kernel_times(lambda: self.model(batch))

    def fusion_report(self) -> FusionReport:
        return FusionReport(
            kernels=tuple(KernelGroup(kernel=op, ops=(op,)) for op in self._trace(self.example)),
            source="eager: one ATen operator per dispatch (TorchDispatchMode trace)",
        )


class EagerGraphPrepared(EagerPrepared):
    """The forward captured as one CUDA graph, replayed per call on a copy of the batch."""

    #: Warm-up calls before capture, on a side stream (torch.cuda.graphs' own recipe).
    WARMUP_CALLS = 3

    def __init__(self, model: Any, device: str, example: Any) -> None:
        import torch

        super().__init__(model, device, example)
        self.static_input = example.clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.no_grad(), torch.cuda.stream(side):
            for _ in range(self.WARMUP_CALLS):
                model(self.static_input)
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.no_grad(), torch.cuda.graph(self.graph):
            self.static_output = model(self.static_input)

    def __call__(self, batch: Any) -> Any:
        self.static_input.copy_(batch)
        self.graph.replay()
        return self.static_output

    def rewrites(self) -> dict[str, Any]:
        return {"cuda_graph": "the forward captured once and replayed per call"}

    def close(self) -> None:
        self.graph = None
