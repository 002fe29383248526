"""One ONNX export of a torch model, shared by the ONNX Runtime and TensorRT backends.

The graph keeps one node per eager operator: torch's dynamo exporter runs with its optimiser
off, then only constant folding and the onnxscript rewrites that fuse nothing (cast and
identity clean-ups) are applied. Batch norm therefore stays a node of its own, and each runtime's
own fusions (ONNX Runtime's ConvBNFusion, TensorRT's layer fusion) are what the fusion report
shows. An operator opset 18 has no node for is written as its parts: SiLU as Sigmoid and Mul, GELU
as Div, Erf, Add, Mul and Mul. Exports are cached by model weights, input shape, dtype and library versions.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.artifact_cache import cached_dir, fingerprint
from harness.errors import BackendFailed

MODEL_FILE = "model.onnx"
OPSET = 18


def exported_onnx(model: Any, example: Any, cache_dir: Path) -> tuple[Path, bool]:
    """The ONNX file for `model` on inputs shaped like `example`, and whether it came from the cache."""
    import onnx
    import onnxscript
    import torch

    key = fingerprint(
        model, example, torch=torch.__version__, onnx=onnx.__version__, onnxscript=onnxscript.__version__,
        opset=OPSET, exporter="dynamo-unfused-v1",
    )
    entry = cache_dir / "onnx" / key
    hit = cached_dir(entry, lambda tmp: _export(model, example, tmp / MODEL_FILE))
    return entry / MODEL_FILE, hit


def _export(model: Any, example: Any, path: Path) -> None:
    import onnxscript.optimizer as optimizer
    import onnxscript.rewriter as rewriter
    import torch
    from onnxscript import ir

    try:
        with torch.no_grad():
            program = torch.onnx.export(
                model, (example,), dynamo=True, optimize=False, opset_version=OPSET, verbose=False,
                input_names=["input"], output_names=["output"],
            )
    except Exception as exc:  # the exporter raises many types; the reason is what matters
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise BackendFailed(f"torch.onnx.export failed: {type(exc).__name__}: {first[:300]}") from exc
    graph = program.model
    optimizer.fold_constants_ir(graph)
    cleanups = [rule for rule in rewriter._DEFAULT_REWRITE_RULES if not str(rule).startswith("Fuse")]
    graph = rewriter.rewrite(graph, pattern_rewrite_rules=cleanups)
    optimizer.remove_unused_nodes(graph)
    # Weights go to a side file beside the graph when the model passes protobuf's 2 GiB limit.
    size = sum(v.const_value.nbytes for v in graph.graph.initializers.values() if v.const_value is not None)
    ir.save(graph, path, external_data=f"{MODEL_FILE}.data" if size > 1 << 30 else None)
