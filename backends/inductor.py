"""TorchInductor through `torch.compile`: C++/OpenMP kernels on CPU, Triton kernels on GPU.

Fusion on is Inductor as shipped (with freezing). Inductor has no switch for fusion off: it
fuses while lowering (pointwise producers are inlined into consumers) and again in the
scheduler. `fusion: off` therefore patches three places for the length of the compile:
every FX node's result is realized into a buffer of its own as soon as it is lowered, the
scheduler may fuse no two nodes, and the C++ backend emits each node as its own function
(instead of grouping consecutive loop nests into one). The result is one ATen operator (after
Inductor's decompositions: batch norm becomes its arithmetic) per generated kernel; freezing
is off by default, so batch norm is not folded into the convolution weights either.

Options (scenario file, `options:`):
- `mode`: torch.compile mode: "default", "reduce-overhead", "max-autotune",
  "max-autotune-no-cudagraphs" (default "default")
- `freezing`: fold parameters into constants, which lets conv+bn fold and, on CPU, oneDNN
  conv+activation epilogues fuse (default: true with fusion on, false with fusion off)

Compilation always starts cold (Inductor's caches disabled for the compile), so `prepare_s` is a
cold compile and the generated code is really produced, not replayed from a cache.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

from backends.inductor_code import kernel_calls
from backends.inductor_folding import FoldWatch
from backends.torch_device import synchronize, torch_availability
from harness.contract import Availability, Backend, Prepared, Variant
from harness.errors import BackendFailed
from harness.fusion import FusionReport, KernelGroup
from harness.options import checked

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
        self, model: Any, example: Any, *, device: str, dtype: str, variant: Variant, workdir: Path,
        cache_dir: Path,
    ) -> Prepared:
        options = _checked_options(variant)
        import torch
        import torch._inductor.config as inductor_config
        from torch._inductor.utils import run_and_get_code

        torch._dynamo.reset()
        unfused = _unfused_lowering() if variant.fusion == "off" else contextlib.nullcontext()
        watch = FoldWatch()
        hooks = {"pre_grad_custom_pass": _graph_pass(watch.pre_grad), "post_grad_custom_pre_pass": _graph_pass(watch.post_grad)}
        patches = {"force_disable_caches": True, "freezing": options["freezing"], **(hooks if options["freezing"] else {})}
        with inductor_config.patch(**patches), unfused, torch.no_grad():
            compiled = torch.compile(model, mode=None if options["mode"] == "default" else options["mode"], dynamic=False)
            # Compilation happens on the first call; capture the wrapper code it generates.
            _, sources = run_and_get_code(compiled, example)
        if not sources:
            raise BackendFailed("torch.compile produced no Inductor code (the whole model fell back to eager)")
        aten = [name for name in dir(torch.ops.aten) if not name.startswith("__")]
        per_graph = [kernel_calls(source, aten) for source in sources]
        if options["freezing"]:
            kernels, note = watch.attribute(per_graph)
        else:
            kernels, note = [group for groups in per_graph for group in groups], ""
        return InductorPrepared(compiled, device, kernels, graphs=len(sources), folding_note=note)


def _graph_pass(function: Any) -> Any:
    """`function` as an Inductor custom graph pass that only observes: no cache key (uuid None),
    which is right since every compile here runs with the caches off."""
    try:
        from torch._inductor.custom_graph_pass import CustomGraphPass
    except ImportError:  # older torch: a plain callable is a custom pass
        return function

    class Observer(CustomGraphPass):
        def __call__(self, graph: Any) -> None:
            function(graph)

        def uuid(self) -> None:
            return None

    return Observer()


def _checked_options(variant: Variant) -> dict[str, Any]:
    resolved = checked("inductor", variant.options, OPTIONS, {"mode": "default", "freezing": variant.fusion == "on"})
    if resolved["mode"] not in MODES:
        raise BackendFailed(f"inductor option mode={resolved['mode']!r}; allowed: {', '.join(MODES)}")
    return resolved


@contextlib.contextmanager
def _unfused_lowering() -> Iterator[None]:
    """One operator per kernel: realize every lowered FX node, forbid scheduler fusion, and flush
    the C++ kernel group after every node. Patches Inductor internals, checked to exist first."""
    from torch._inductor import ir
    from torch._inductor.codegen.cpp import CppScheduling
    from torch._inductor.graph import GraphLowering
    from torch._inductor.scheduler import Scheduler

    for owner, attribute in ((GraphLowering, "run_node"), (Scheduler, "can_fuse"), (CppScheduling, "ready_to_flush")):
        if not callable(getattr(owner, attribute, None)):
            raise BackendFailed(
                f"inductor fusion=off needs {owner.__name__}.{attribute}, which this torch does not have"
            )
    lower = GraphLowering.run_node

    def run_node_realized(self: Any, node: Any) -> Any:
        result = lower(self, node)
        if node.op == "call_function" and isinstance(result, ir.TensorBox) and isinstance(result.data, ir.StorageBox):
            result.realize()
        return result

    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(GraphLowering, "run_node", run_node_realized))
        stack.enter_context(mock.patch.object(Scheduler, "can_fuse", lambda self, *args, **kwargs: False))
        stack.enter_context(mock.patch.object(CppScheduling, "ready_to_flush", lambda self: True))
        yield


class InductorPrepared(Prepared):
    prepare_cache = "cold"
    dispatch_definition = (
        "kernel calls in Inductor's generated wrapper per inference: generated C++/Triton kernels "
        "plus library (extern, oneDNN) calls"
    )

    def __init__(self, compiled: Any, device: str, kernels: list[KernelGroup], graphs: int, folding_note: str = "") -> None:
        self.compiled = compiled
        self.device = device
        self.kernels = kernels
        self.graphs = graphs
        self.folding_note = folding_note

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
            notes=self.folding_note or "no operator was folded into weights at compile time (freezing off)",
        )
