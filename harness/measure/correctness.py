"""Correctness of a backend's output against eager's on the same inputs and device; the eager
reference's dtype and the tolerance are the cell dtype's (harness/precision.py)."""

from __future__ import annotations

from typing import Any

from harness.precision import PRECISIONS


def compare(output: Any, reference: Any, dtype: str) -> dict[str, Any]:
    """Max abs error, cosine similarity and the verdict. Tensors may be on any device."""
    import torch

    precision = PRECISIONS[dtype]
    rtol, min_cosine = precision.rtol, precision.min_cosine
    result: dict[str, Any] = {"rtol": rtol, "min_cosine": min_cosine, "reference": f"eager, {precision.reference}"}
    if not isinstance(output, torch.Tensor):
        return {**result, "ok": False, "reason": f"output is a {type(output).__name__}, not a tensor"}
    if tuple(output.shape) != tuple(reference.shape):
        return {**result, "ok": False, "reason": f"output shape {tuple(output.shape)} != eager's {tuple(reference.shape)}"}
    if output.dtype != reference.dtype:  # compared in float64 below, a float16 output passed in an fp32 cell
        return {**result, "ok": False, "reason": (
            f"output dtype {str(output.dtype).removeprefix('torch.')} != eager's {str(reference.dtype).removeprefix('torch.')} "
            f"(a {dtype} cell's backend returns its output in that dtype)")}
    out = output.detach().to("cpu", torch.float64).flatten()
    ref = reference.detach().to("cpu", torch.float64).flatten()
    if not bool(torch.isfinite(out).all()):
        return {**result, "ok": False, "reason": "output has NaN or infinite values"}
    ref_max_abs = float(ref.abs().max()) if ref.numel() else 0.0
    limit = rtol * ref_max_abs if ref_max_abs > 0 else rtol
    # A reference so flat that the constant at its middle would pass: any output near it passes.
    if ref.numel() > 1 and _within(*_errors(torch.full_like(ref, float(ref.max() + ref.min()) / 2), ref), limit, min_cosine):
        spread = (f"{float(ref[0]):.3g} everywhere" if bool((ref == ref[0]).all())
                  else f"{float(ref.min()):.6g} to {float(ref.max()):.6g}, within the tolerance")
        return {**result, "ok": False, "reason": (
            f"eager's output is constant ({spread}): the comparison cannot tell a right output from a wrong one")}
    max_abs_error, cosine = _errors(out, ref)
    ok = _within(max_abs_error, cosine, limit, min_cosine)
    reason = "" if ok else (
        f"output differs from eager: max abs error {max_abs_error:.3g} (limit {limit:.3g}), "
        f"cosine similarity {cosine:.6f} (minimum {min_cosine})"
    )
    return {
        **result,
        "ok": ok,
        "reason": reason,
        "max_abs_error": max_abs_error,
        "max_abs_error_limit": limit,
        "reference_max_abs": ref_max_abs,
        "cosine_similarity": cosine,
    }


def _errors(out: Any, ref: Any) -> tuple[float, float]:
    """Max abs error and cosine similarity of two flat float64 tensors of one size."""
    max_abs_error = float((out - ref).abs().max()) if out.numel() else 0.0
    norms = float(out.norm() * ref.norm())
    if norms > 0:
        return max_abs_error, float(out.dot(ref) / norms)
    return max_abs_error, 1.0 if max_abs_error == 0 else 0.0


def _within(max_abs_error: float, cosine: float, limit: float, min_cosine: float) -> bool:
    return max_abs_error <= limit and cosine >= min_cosine
