"""TorchScript: `torch.jit.trace`, then `torch.jit.freeze` for fusion on.

Freezing inlines the weights as constants and folds each batch norm that follows a convolution
into the convolution's weights and bias (and constant add/mul into convolutions), so `fusion: on`
runs one convolution where eager runs a convolution and a batch norm. `fusion: off` runs the
traced graph unfrozen, and switches off TorchScript's runtime fusers (NNC/TensorExpr), so every
traced operator runs on its own.

TorchScript is deprecated in recent torch releases (it warns) but still ships and is still a
common deployment path, which is why it makes a useful baseline beside Inductor.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from harness.contract import Availability, Backend, Prepared, Variant
from harness.errors import BackendFailed
from harness.fusion import FusionReport, KernelGroup
from harness.options import BackendOptions, expect

# Graph nodes that are bookkeeping, not computation.
_NOT_COMPUTE = ("prim::", "aten::size", "aten::Int", "aten::flatten", "aten::view", "aten::reshape")


class TorchScriptBackend(Backend):
    name = "torchscript"

    def availability(self, device: str) -> Availability:
        try:
            import torch
        except ImportError:
            return Availability.no("torch is not installed")
        if not hasattr(torch.jit, "trace") or not hasattr(torch.jit, "freeze"):
            return Availability.no(f"torch {torch.__version__} has no torch.jit.trace/freeze")
        if device == "cuda" and not torch.cuda.is_available():
            return Availability.no("torch sees no CUDA device here")
        return Availability.yes()

    def supports(self, variant: Variant, dtype: str, device: str) -> Availability:
        if dtype == "bf16" and device == "cpu":
            return Availability.no("torchscript: bf16 convolutions on CPU are not a deployment path worth measuring")
        return Availability.yes()

    def versions(self) -> dict[str, str]:
        import torch

        from fusionbench_torchscript import __version__

        return {"torch": torch.__version__, "fusionbench-torchscript": __version__}

    def prepare(
        self, model: Any, example: Any, *, device: str, dtype: str, variant: Variant, workdir: Path,
        cache_dir: Path,
    ) -> Prepared:
        del dtype, workdir, cache_dir  # tracing is quick; nothing worth caching
        expect(self.name, BackendOptions, variant.options)  # torchscript takes none
        import torch

        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore", FutureWarning)  # the deprecation notice, once per call
            try:
                traced = torch.jit.trace(model, example, check_trace=False)
            except Exception as exc:  # tracing raises whatever the model's Python raises
                raise BackendFailed(f"torch.jit.trace failed: {type(exc).__name__}: {exc}") from exc
            traced_graph = traced.inlined_graph
            if variant.fusion == "on":
                module = torch.jit.freeze(traced.eval())
                graph = module.graph
            else:
                module = traced
                graph = traced_graph
                torch._C._jit_set_texpr_fuser_enabled(False)  # this cell's process only
            # Freezing is how this backend fuses, but it also inlines the weights as constants: the
            # cell records that beside fusion, with the fuser's state read back, not assumed.
            rewrites = {"freezing": variant.fusion == "on", "texpr_fuser": bool(torch._C._jit_texpr_fuser_enabled())}
        return TorchScriptPrepared(module, device, _kernels(traced_graph, graph, folded=variant.fusion == "on"), rewrites)


def _compute_nodes(graph: Any) -> list[Any]:
    return [n for n in graph.nodes() if n.kind().startswith("aten::") and not n.kind().startswith(_NOT_COMPUTE)]


def _kernels(traced_graph: Any, graph: Any, *, folded: bool) -> list[KernelGroup]:
    """One group per compute node of the graph that runs. A convolution whose output went only
    into a batch norm in the traced graph carries that batch norm when freezing folded it away
    (matched by the module scope, which freezing keeps)."""
    absorbed: dict[str, str] = {}
    if folded:
        for node in _compute_nodes(traced_graph):
            if node.kind() != "aten::_convolution":
                continue
            users = [use.user for use in node.output().uses()]
            if len(users) == 1 and users[0].kind() == "aten::batch_norm":
                absorbed[node.scopeName()] = users[0].kind()
    groups = []
    for node in _compute_nodes(graph):
        ops = [node.kind().replace("::", ".")]
        if node.kind() == "aten::_convolution" and node.scopeName() in absorbed:
            ops.append(absorbed[node.scopeName()].replace("::", "."))
        groups.append(KernelGroup(kernel=node.kind(), ops=tuple(ops)))
    return groups


class TorchScriptPrepared(Prepared):
    prepare_cache = "none"
    dispatch_definition = "ATen compute nodes in the TorchScript graph that runs (each runs once per inference)"

    def __init__(self, module: Any, device: str, kernels: list[KernelGroup], rewrites: dict[str, Any]) -> None:
        self.module = module
        self.device = device
        self.kernels = kernels
        self.rewrite_record = rewrites

    def __call__(self, batch: Any) -> Any:
        import torch

        with torch.no_grad():
            return self.module(batch)

    def synchronize(self) -> None:
        if self.device == "cuda":
            import torch

            torch.cuda.synchronize()

    def fusion_report(self) -> FusionReport:
        return FusionReport(
            kernels=tuple(self.kernels),
            source="TorchScript graph after tracing (and freezing, with fusion on)",
            notes="batch norms folded by freezing are attributed to the convolution of the same module scope",
        )

    def cpu_dispatches(self, batch: Any) -> int:
        return len(self.kernels)

    def rewrites(self) -> dict[str, Any]:
        return dict(self.rewrite_record)
