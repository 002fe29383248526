"""How far TF32 math moves the zoo's outputs from IEEE fp32: the measurement behind the `tf32`
tolerance in harness/precision.py.

TF32 keeps fp32's range but 10 mantissa bits: a TF32 matrix multiply or convolution rounds each
operand (activation and weight) to TF32, multiplies exactly and accumulates in fp32. This script
emulates that on the CPU (operands of every aten matmul and convolution rounded, computed in
fp32) and compares each model's output with the IEEE fp32 output on the same inputs, the way the
harness's correctness check does: max abs error relative to the reference's largest magnitude,
and cosine similarity. Rounding: to nearest-even (cuBLAS/cuDNN's conversion) and truncation
(what a tensor-core instruction does to unrounded fp32 bits, as Triton's `tl.dot` may), the
worse of the two counting in the JSON. The accumulation order of the real kernels is not reproduced, so
this measures the operand rounding, which dominates (2^-11 relative per operand against fp32's
2^-24).

Usage: .venv/bin/python benchmarks/tf32_tolerance.py [--models resnet18,...] [--batches 1,8] [--seed 0] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from harness.models import zoo
from harness.models.catalog import all_models
from harness.precision import PRECISIONS
from harness.run.system import machine_line

DEFAULT_MODELS = ("resnet18", "resnet50", "mobilenet_v3_small", "efficientnet_b0", "convnext_tiny", "vit_b_16")
MANTISSA_BITS = 23
TF32_MANTISSA_BITS = 10


def round_mantissa(x: torch.Tensor, keep_bits: int, mode: str) -> torch.Tensor:
    """fp32 `x` rounded to `keep_bits` explicit mantissa bits (still fp32): "rne" to nearest with
    ties to even, "rz" towards zero. Non-finite values pass unchanged; a rounding that overflows
    gives infinity, as IEEE rounding does."""
    drop = MANTISSA_BITS - keep_bits
    bits = x.contiguous().view(torch.int32)
    half = 1 << (drop - 1)
    if mode == "rne":
        bias = (half - 1) + ((bits >> drop) & 1)
    elif mode == "rz":
        bias = torch.zeros_like(bits)
    else:
        raise ValueError(f"unknown rounding mode {mode!r}")
    # Sign and magnitude: adding to the magnitude never reaches the sign bit, and a carry out of
    # the mantissa raises the exponent exactly as rounding up does.
    rounded = ((bits + bias) & -(1 << drop)).view(torch.float32)
    return torch.where(torch.isfinite(x), rounded, x).view(x.shape)


_aten = torch.ops.aten
# The operands a TF32 kernel reads in reduced precision (bias and C stay fp32, as in cuBLAS).
_OPERANDS = {
    _aten.mm.default: (0, 1), _aten.bmm.default: (0, 1), _aten.addmm.default: (1, 2),
    _aten.baddbmm.default: (1, 2), _aten._addmm_activation.default: (1, 2),
    _aten.convolution.default: (0, 1), _aten._convolution.default: (0, 1),
}


class TF32Emulation(TorchDispatchMode):
    """Inside it, the fp32 operands of matrix multiplies and convolutions are rounded to TF32."""

    def __init__(self, mode: str) -> None:
        super().__init__()
        self.mode = mode
        self.rounded_ops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        positions = _OPERANDS.get(func)
        if positions:
            args = list(args)
            for i in positions:
                if i < len(args) and isinstance(args[i], torch.Tensor) and args[i].dtype == torch.float32:
                    args[i] = round_mantissa(args[i], TF32_MANTISSA_BITS, self.mode)
            self.rounded_ops += 1
        return func(*args, **(kwargs or {}))


def self_check() -> None:
    """Known roundings: 1 + 2^-11 is a tie (to even: 1; truncated: 1), 1 + 3*2^-11 rounds up to
    1 + 2^-9, and the largest float overflows to infinity when rounded to nearest."""
    values = torch.tensor([1 + 2**-11, 1 + 3 * 2**-11, 1 + 3 * 2**-12, torch.finfo(torch.float32).max, -(1 + 3 * 2**-11)])
    nearest = round_mantissa(values, TF32_MANTISSA_BITS, "rne").tolist()
    truncated = round_mantissa(values, TF32_MANTISSA_BITS, "rz").tolist()
    assert nearest[:3] == [1.0, 1 + 2**-9, 1 + 2**-10] and math.isinf(nearest[3]) and nearest[4] == -(1 + 2**-9), nearest
    assert truncated[:3] == [1.0, 1 + 2**-10, 1.0] and truncated[4] == -(1 + 2**-10), truncated


def error(output: torch.Tensor, reference: torch.Tensor) -> tuple[float, float]:
    """(max abs error / the reference's largest magnitude, cosine similarity), in float64."""
    out, ref = output.double().flatten(), reference.double().flatten()
    relative = float((out - ref).abs().max() / ref.abs().max())
    cosine = float(out.dot(ref) / (out.norm() * ref.norm()))
    return relative, cosine


def measure(name: str, batch: int, seed: int) -> dict[str, Any]:
    model = zoo.build_model(name, pretrained=False, seed=seed, device="cpu", dtype="fp32")
    size = all_models()[name][1]
    example = torch.cat(zoo.make_samples(batch, seed=seed, model=name,
                                         input_size=size, device="cpu", dtype="fp32"))
    with torch.no_grad():
        reference = model(example)
        figures: dict[str, Any] = {"model": name, "batch": batch}
        for mode in ("rne", "rz"):
            with TF32Emulation(mode) as emulation:
                output = model(example)
            figures[f"{mode}_relative_error"], figures[f"{mode}_cosine"] = error(output, reference)
            figures["rounded_ops"] = emulation.rounded_ops
        # The fp32 baseline: IEEE fp32 against float64, the error fp32's tolerance already covers.
        figures["fp32_relative_error"], _ = error(reference, model.double()(example.double()))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS))
    parser.add_argument("--batches", default="1,8")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    unknown = [name for name in args.models.split(",") if name not in all_models()]
    if unknown:
        parser.error(f"--models: unknown model {', '.join(map(repr, unknown))}; `fusionbench models` lists the zoo's")
    if not all(batch.isdigit() and int(batch) >= 1 for batch in args.batches.split(",")):
        parser.error(f"--batches: {args.batches!r} is not a comma-separated list of batch sizes of at least 1")
    torch.set_grad_enabled(False)
    self_check()
    rows = [measure(name, int(batch), args.seed) for name in args.models.split(",") for batch in args.batches.split(",")]
    print(f"machine: {machine_line()}, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads; emulated TF32 against IEEE fp32")
    print(f"{'model':<22}{'batch':>6}{'ops':>6}{'fp32 vs fp64':>14}{'TF32 rne':>11}{'TF32 rz':>11}{'cosine (worst)':>16}")
    for r in rows:
        cosine = min(r["rne_cosine"], r["rz_cosine"])
        print(f"{r['model']:<22}{r['batch']:>6}{r['rounded_ops']:>6}{r['fp32_relative_error']:>14.2e}"
              f"{r['rne_relative_error']:>11.2e}{r['rz_relative_error']:>11.2e}{cosine:>16.7f}")
    tf32 = PRECISIONS["tf32"]
    for mode, about in (("rne", "rounded to nearest (cuBLAS, cuDNN): the tolerance covers this"),
                        ("rz", "truncated (Triton's tl.dot without rounding): judged invalid where over")):
        error = max(r[f"{mode}_relative_error"] for r in rows)
        cosine = min(r[f"{mode}_cosine"] for r in rows)
        print(f"TF32 {mode}: worst relative error {error:.3g} (tolerance {tf32.rtol:g}, {tf32.rtol / error:.1f}x the worst), "
              f"worst cosine {cosine:.7f} (minimum {tf32.min_cosine}); operands {about}")
    worst_error = max(max(r["rne_relative_error"], r["rz_relative_error"]) for r in rows)
    worst_cosine = min(min(r["rne_cosine"], r["rz_cosine"]) for r in rows)
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "worst_relative_error": worst_error,
                                         "worst_cosine": worst_cosine, "torch": torch.__version__}, indent=1) + "\n")


if __name__ == "__main__":
    main()
