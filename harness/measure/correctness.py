"""Correctness of a backend's output against eager's on the same inputs and device; the eager
reference's dtype and the tolerance are the cell dtype's (harness/precision.py)."""

from __future__ import annotations

from typing import Any

from harness.precision import PRECISIONS, max_abs_limit


def compare(output: Any, reference: Any, dtype: str) -> dict[str, Any]:
    """Max abs error, cosine similarity and the verdict. Tensors may be on any device."""
    import torch

    precision = PRECISIONS[dtype]
    rtol, min_cosine = precision.rtol, precision.min_cosine
    result: dict[str, Any] = {"rtol": rtol, "min_cosine": min_cosine, "reference": f"eager, {precision.reference}"}
    # One tensor is compared: a model whose forward returns several (a plugin's tuple) is said to,
    # where the other backends' cells failed on the reference (`'tuple' object has no attribute 'shape'`)
    for whose, value in (("output", output), ("eager's output", reference)):
        if not isinstance(value, torch.Tensor):
            return {**result, "ok": False, "reason": (
                f"{whose} is a {type(value).__name__}, not a tensor: the harness compares a model's one output "
                "tensor (its forward returns one)")}
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
    limit = max_abs_limit(rtol, ref_max_abs)
    # A reference so flat that the constant at its middle would pass: any output near it passes.
    if ref.numel() > 1 and _within(*_errors(torch.full_like(ref, float(ref.max() + ref.min()) / 2), ref), limit, min_cosine):
        spread = (f"{float(ref[0]):.3g} everywhere" if bool((ref == ref[0]).all())
                  else f"{float(ref.min()):.6g} to {float(ref.max()):.6g}, within the tolerance")
        return {**result, "ok": False, "reason": (
            f"eager's output is constant ({spread}): the comparison cannot tell a right output from a wrong one")}
    max_abs_error, cosine = _errors(out, ref)
    ok = _within(max_abs_error, cosine, limit, min_cosine)
    error_text, limit_text = _apart(max_abs_error, limit)
    cosine_text, _ = _apart(cosine, min_cosine, 6, "f")
    reason = "" if ok else (
        f"output differs from eager: max abs error {error_text} (limit {limit_text}), "
        f"cosine similarity {cosine_text} (minimum {min_cosine})"
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


def batch_fault(model: Any, samples: list[Any], example: Any, reference: Any, dtype: str) -> str:
    """What is wrong with how `model` reads a batch, "" where nothing is: every pass stacks the
    samples on dim 0 (`example`, LoadGen's batches) and every check reads row i of the output as
    sample i's, so the output's dim 0 must be the batch and each row depend on its own sample alone.
    `reference` is eager's output on `example`; the model is called once more, on the example's last
    sample alone, or (a batch of one) after another sample. A model that took the batch on another dim
    (nn.LSTM without batch_first) or returned no batch dim ran every cell valid, on figures of another
    computation than the one the cell names."""
    import torch

    if not isinstance(reference, torch.Tensor):
        return ""  # `compare` says it: a model returns one tensor
    rows = example.shape[0]
    if reference.dim() == 0 or reference.shape[0] != rows:
        return (f"returned {list(reference.shape)} for a batch of {rows}, its input {list(example.shape)}: the harness "
                "stacks the samples on dim 0 and reads row i of the output as sample i's, so the output's dim 0 must be "
                "the batch (docs/adding_a_model.md)")
    if rows > 1:
        given, whole, alone = f"last in a batch of {rows}", reference, model(example[-1:])
    else:  # one more sample before it: any other sample's, where the set has one
        given, whole, alone = "after another in a batch of 2", model(torch.cat([samples[1 % len(samples)], example])), reference
    row = whole[-1:] if isinstance(whole, torch.Tensor) else whole
    if not (isinstance(row, torch.Tensor) and isinstance(alone, torch.Tensor)) or row.shape != alone.shape:
        shapes = [list(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__ for t in (row, alone)]
        return (f"returned a row of shape {shapes[0]} for a sample {given} and {shapes[1]} for it alone: the harness stacks "
                "the samples on dim 0, and each row of the output must be its own sample's (docs/adding_a_model.md)")
    # Held as `compare` holds a backend's output: the batch's, against it with the sample's row computed
    # alone, so the limit and the cosine are the batch's. A row on its own has no scale: a scorer's one
    # output near 0 (0 alone, 1.5e-07 in a batch) failed at cosine 0, its error 1.5e-07 under a limit of 0.001.
    out = whole.detach().to("cpu", torch.float64).flatten()
    ref = torch.cat([whole[:-1], alone]).detach().to("cpu", torch.float64).flatten()
    limit = max_abs_limit(PRECISIONS[dtype].rtol, float(ref.abs().max()) if ref.numel() else 0.0)
    max_abs_error, cosine = _errors(out, ref)
    if _within(max_abs_error, cosine, limit, PRECISIONS[dtype].min_cosine) or not bool(torch.isfinite(out).all()):
        return ""  # a NaN is the output's own fault, which `compare` says
    return (f"computed another row for a sample {given} than for it alone (max abs error {max_abs_error:.3g}, "
            f"limit {limit:.3g}; cosine similarity of the batch's output {cosine:.6f}): the harness stacks the samples on "
            "dim 0, and each row of the output must depend on its own sample alone (a forward that takes the batch on "
            "another dim, as nn.LSTM without batch_first=True, mixes them; docs/adding_a_model.md)")


def _errors(out: Any, ref: Any) -> tuple[float, float]:
    """Max abs error and cosine similarity of two flat float64 tensors of one size."""
    max_abs_error = float((out - ref).abs().max()) if out.numel() else 0.0
    norms = float(out.norm() * ref.norm())
    if norms > 0:
        return max_abs_error, float(out.dot(ref) / norms)
    return max_abs_error, 1.0 if max_abs_error == 0 else 0.0


def _within(max_abs_error: float, cosine: float, limit: float, min_cosine: float) -> bool:
    return max_abs_error <= limit and cosine >= min_cosine


def _apart(value: float, bound: float, digits: int = 3, kind: str = "g") -> tuple[str, str]:
    """`value` and the `bound` it is held to, with `digits` (significant, or decimals for kind "f")
    or as many more as tell them apart: an output 1.001 times eager's (1.001 in fp32 rounds just
    above it) failed with 'max abs error 0.00139 (limit 0.00139)'."""
    texts = f"{value:.{digits}{kind}}", f"{bound:.{digits}{kind}}"
    while texts[0] == texts[1] and value != bound and digits < 17:
        digits += 1
        texts = f"{value:.{digits}{kind}}", f"{bound:.{digits}{kind}}"
    return texts
