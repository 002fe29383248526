"""The TVM backend's compiled model as a cell calls it: the Relax VM's `main` on torch's tensors,
zero-copy both ways, and what the profile pass reads from a second, instrumented VM (the kernels it
calls per inference and their times). backends/tvm.py compiles it."""

from __future__ import annotations

from typing import Any

from harness.contract import CpuKernelTimes, Prepared
from harness.fusion import FusionReport

#: tvm.runtime.from_dlpack refuses tensors whose data is not aligned this much (the generated
#: code may assume it).
ALIGNMENT = 64


class TVMPrepared(Prepared):
    dispatch_definition = (
        "calls the Relax VM makes per inference to compiled kernels (fused or single-op PrimFuncs), "
        "counted with VirtualMachine.set_instrument; VM builtins (vm.builtin.*: shape checks, "
        "allocation, reshape views) not counted"
    )

    def __init__(self, module: Any, device: str, report: FusionReport, passes: dict[str, Any] | None = None) -> None:
        import torch
        import tvm
        from tvm import relax

        self.module = module
        self.device = device
        self.report = report
        self.passes = passes or {}
        self._instrumented: Any = None  # a second VM that carries the profiling instrument
        self._instrument_slot: list[Any] = [None]
        #: The functions the instrumented VM called in its last inference: the same in every inference
        #: of the cell's shape, so the profile pass's figures share it.
        self._last_calls: list[tuple[str, int]] | None = None
        # Device 0 is torch's too: a cell sees its slot's GPU alone (CUDA_VISIBLE_DEVICES,
        # harness/run/slots.py), a serial run the first, and the harness never sets another current.
        self.tvm_device = tvm.cuda(0) if device == "cuda" else tvm.cpu(0)
        self.vm = relax.VirtualMachine(module, self.tvm_device)
        self._main = self.vm["main"]
        self._from_dlpack = tvm.runtime.from_dlpack
        self._to_torch = torch.from_dlpack
        self._tensor = torch.Tensor

    def __call__(self, batch: Any) -> Any:
        # Zero-copy in: TVM refuses (and its kernels may assume away) unaligned or strided data;
        # the harness's batches are whole tensors or row views of one, aligned, so this copy never
        # runs there. Passing the torch tensor itself (not a DLPack capsule) makes TVM launch on
        # torch's current CUDA stream, where the harness's events are recorded.
        if batch.data_ptr() % ALIGNMENT or not batch.is_contiguous():
            batch = _aligned_copy(batch)
        # Zero-copy out. The VM allocates the returned tensor per call from its pooled allocator
        # and the pool takes the memory back only when the last reference (here torch's) is
        # dropped, so one call's output is never overwritten by the next: no clone needed.
        out = self._main(batch)
        return out if isinstance(out, self._tensor) else self._to_torch(out)

    def synchronize(self) -> None:
        if self.device == "cuda":
            import torch

            # TVM launches on the device's default (legacy) stream, as torch does unless told
            # otherwise, so their work is ordered; wait for both runtimes all the same.
            self.tvm_device.sync()
            torch.cuda.synchronize()

    def _vm_calls(self, batch: Any) -> list[tuple[str, int]]:
        """(name, nanoseconds) of each function the VM calls during one inference (a separate,
        instrumented VM, so the timed one never carries the instrument). The time runs from the
        end of the instrument's call before the function to the start of its call after it."""
        from time import perf_counter_ns

        from tvm import relax

        calls: list[tuple[str, int]] = []
        started = [0]

        def instrument(func: Any, symbol: str, before_run: bool, ret_value: Any, *args: Any) -> int:
            if before_run:
                started[0] = perf_counter_ns()
            else:
                calls.append((symbol, perf_counter_ns() - started[0]))
            return 0  # VMInstrumentReturnKind.NO_OP

        if self._instrumented is None:
            self._instrumented = relax.VirtualMachine(self.module, self.tvm_device)
            self._instrumented.set_instrument(lambda *args: self._instrument_slot[0](*args))
        self._instrument_slot[0] = instrument
        aligned = batch.data_ptr() % ALIGNMENT == 0 and batch.is_contiguous()
        self._instrumented["main"](self._from_dlpack(batch if aligned else _aligned_copy(batch)))
        self.synchronize()
        self._last_calls = calls
        return calls

    def cpu_dispatches(self, batch: Any) -> int:
        return sum(1 for symbol, _ in self._vm_calls(batch) if not _is_vm_builtin(symbol))

    kernel_time_definition = ("one inference with the Relax VM's instrument: each compiled kernel it calls (fused or "
                              "single-op PrimFunc; builtins not counted), timed by the instrument; their share of the "
                              "call applied to the timed median")

    def cpu_kernel_times(self, batch: Any) -> CpuKernelTimes:
        from time import perf_counter_ns

        if self._last_calls is None:  # the first instrumented call pays for the new VM's first-use costs
            self._vm_calls(batch)
        start = perf_counter_ns()
        calls = self._vm_calls(batch)
        wall_ns = perf_counter_ns() - start
        return CpuKernelTimes(calls=tuple((symbol, float(ns)) for symbol, ns in calls if not _is_vm_builtin(symbol)),
                              wall_ns=float(wall_ns))

    def profile_figures(self, batch: Any) -> dict[str, Any]:
        calls = self._last_calls if self._last_calls is not None else self._vm_calls(batch)
        builtins = {"vm_builtin_calls_per_inference": sum(1 for symbol, _ in calls if _is_vm_builtin(symbol))}
        return builtins if self.device == "cuda" else {**builtins, "thread_pool_threads": self.thread_pool_threads()}

    def thread_pool_threads(self) -> int:
        """The threads of TVM's thread pool in this process (the pool is made here if it is not yet)."""
        import tvm

        return int(tvm.get_global_func("runtime.NumThreads")())

    def fusion_report(self) -> FusionReport:
        return self.report

    def rewrites(self) -> dict[str, Any]:
        return dict(self.passes)

    def close(self) -> None:
        self._main = None
        self._instrumented = None
        self._last_calls = None
        self.vm = None
        self.module = None


def _aligned_copy(batch: Any) -> Any:
    """A contiguous copy in a fresh allocation (torch aligns those to 64 bytes)."""
    import torch

    return batch.clone(memory_format=torch.contiguous_format)


def _is_vm_builtin(symbol: str) -> bool:
    return symbol.startswith("vm.") or symbol.startswith("shape_func")
