"""The precision policy: what a scenario's `dtype` means, for tensors and for the math, stated once.

| dtype | tensors  | matrix multiply and convolution math                    | eager reference  |
|-------|----------|---------------------------------------------------------|------------------|
| fp32  | float32  | IEEE fp32: TF32 off everywhere                          | IEEE fp32        |
| tf32  | float32  | TF32 allowed (NVIDIA GPUs of compute capability 8.0+)   | IEEE fp32        |
| fp16  | float16  | half precision, the libraries' own reduction settings   | eager in fp16    |
| bf16  | bfloat16 | bfloat16, the libraries' own reduction settings         | eager in bf16    |

"TF32 off everywhere" means: cuBLAS (`torch.backends.cuda.matmul`), cuDNN
(`torch.backends.cudnn`), Inductor's Triton matmul and convolution templates (which read the
same flags when they compile), ONNX Runtime's CUDA provider (`use_tf32=0`) and TensorRT (builder
flag TF32 cleared). TVM's CUDA code is plain fp32 arithmetic and never uses TF32 (so it runs no
`tf32` cell). The torch flags are process-wide: the worker sets them (`set_torch_math`) before
the eager reference (always IEEE for fp32 and tf32 cells) and again, for the cell, before
`prepare`; backends translate the dtype for their own libraries. After the run the worker reads
the flags back (`torch_math_state`), asks the prepared model what its library ran with
(`Prepared.math_mode`), and `math_record` turns both into the cell's recorded math mode and into
problems when they disagree with what the dtype asked for: such a cell is invalid.

Tolerances (max abs error relative to the reference's largest magnitude; minimum cosine) are
here too, one per dtype; docs/metrics.md says how the tf32 one was measured.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Mapping

#: Library settings that force TF32 on or off whatever torch says; recorded with every cell.
TF32_ENVIRONMENT = ("NVIDIA_TF32_OVERRIDE", "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE")
#: TF32 exists on NVIDIA GPUs from Ampere (compute capability 8.0) on.
TF32_MIN_CAPABILITY = (8, 0)


@dataclass(frozen=True)
class Precision:
    """What one scenario dtype means."""

    name: str
    tensor_dtype: str  # torch dtype name of the model's tensors
    math: str  # "ieee" | "tf32" | "fp16" | "bf16": the math of matmul and convolution
    reference: str  # the dtype the eager reference is computed in
    rtol: float  # max abs error / the reference's largest magnitude
    min_cosine: float


PRECISIONS: dict[str, Precision] = {
    "fp32": Precision("fp32", "float32", "ieee", "fp32", rtol=1e-3, min_cosine=0.9999),
    # Measured by benchmarks/tf32_tolerance.py (TF32 rounding emulated against IEEE on six zoo
    # models; docs/metrics.md): worst 2.9e-2 (resnet50), cosine 0.99971. The limit is 3.4x that.
    "tf32": Precision("tf32", "float32", "tf32", "fp32", rtol=1e-1, min_cosine=0.999),
    "fp16": Precision("fp16", "float16", "fp16", "fp16", rtol=1e-2, min_cosine=0.999),
    "bf16": Precision("bf16", "bfloat16", "bf16", "bf16", rtol=5e-2, min_cosine=0.99),
}


def max_abs_limit(rtol: float, reference_max_abs: float) -> float:
    """The largest absolute error an output may have: `rtol` times the reference's largest magnitude,
    or `rtol` itself where the reference is all zeros. The worker's check and `validate` both hold a
    cell to it."""
    return rtol * reference_max_abs if reference_max_abs > 0 else rtol


def torch_dtype(name: str) -> Any:
    """The torch dtype of the model's tensors for scenario dtype `name`."""
    import torch

    return getattr(torch, PRECISIONS[name].tensor_dtype)


def unsupported_reason(dtype: str, device: str, capabilities: list[str] | None = None) -> str | None:
    """Why no backend can run `dtype` on `device` here, or None. `capabilities`: the compute
    capabilities ("9.0") of the GPUs the probe saw."""
    if PRECISIONS[dtype].math != "tf32":
        return None
    if device != "cuda":
        return (f"tf32 is a math mode of NVIDIA GPUs (compute capability {TF32_MIN_CAPABILITY[0]}.0 or newer); "
                f"on {device} run fp32")
    for capability in capabilities or []:
        try:
            major, minor = (int(part) for part in capability.split(".")[:2])
        except ValueError:
            continue
        if (major, minor) < TF32_MIN_CAPABILITY:
            return f"tf32 needs compute capability 8.0 or newer; this GPU has {capability}"
    return None


def set_torch_math(dtype: str) -> None:
    """Set torch's process-wide fp32 math for `dtype`: TF32 for tf32, IEEE for every other dtype.

    The legacy setters write the legacy and the new (`fp32_precision`) state together, so no
    getter of either API raises afterwards (torch 2.11 to 2.14); `cudnn.fp32_precision` is the
    node Inductor's Triton convolution templates read."""
    import torch

    tf32 = PRECISIONS[dtype].math == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    if hasattr(torch.backends.cudnn, "fp32_precision"):
        torch.backends.cudnn.fp32_precision = "tf32" if tf32 else "ieee"


def _read(getter: Any) -> Any:
    try:
        return getter()
    except (RuntimeError, AttributeError) as exc:  # a mix of the legacy and new APIs raises
        return f"unreadable: {type(exc).__name__}"


def torch_math_state() -> dict[str, Any]:
    """torch's math settings as they are now: the ones its kernels consult, the legacy views,
    and the environment variables that override them."""
    import torch

    b = torch.backends
    state = {
        "cuda_matmul_fp32_precision": _read(lambda: b.cuda.matmul.fp32_precision),
        "cudnn_conv_fp32_precision": _read(lambda: b.cudnn.conv.fp32_precision),
        "cudnn_fp32_precision": _read(lambda: b.cudnn.fp32_precision),
        "mkldnn_matmul_fp32_precision": _read(lambda: b.mkldnn.matmul.fp32_precision),
        "mkldnn_conv_fp32_precision": _read(lambda: b.mkldnn.conv.fp32_precision),
        "cuda_matmul_allow_tf32": _read(lambda: b.cuda.matmul.allow_tf32),
        "cudnn_allow_tf32": _read(lambda: b.cudnn.allow_tf32),
        "float32_matmul_precision": _read(torch.get_float32_matmul_precision),
        "fp16_reduced_precision_reduction": _read(lambda: b.cuda.matmul.allow_fp16_reduced_precision_reduction),
        "bf16_reduced_precision_reduction": _read(lambda: b.cuda.matmul.allow_bf16_reduced_precision_reduction),
    }
    state.update({f"env_{name}": os.environ.get(name) for name in TF32_ENVIRONMENT})
    return state


def _torch_uses_tf32(state: Mapping[str, Any], device: str) -> dict[str, bool]:
    """Which of torch's fp32 paths on `device` may use reduced precision, per the state read."""
    if device == "cuda":
        forced_off = state.get("env_NVIDIA_TF32_OVERRIDE") == "0"
        paths = {
            "torch cuBLAS matmul": state.get("cuda_matmul_fp32_precision") == "tf32",
            "torch cuDNN convolution": state.get("cudnn_conv_fp32_precision") == "tf32",
            "Inductor Triton convolution templates": state.get("cudnn_fp32_precision") == "tf32",
        }
        return {path: used and not forced_off for path, used in paths.items()}
    return {
        "torch oneDNN matmul": state.get("mkldnn_matmul_fp32_precision") not in ("none", "ieee"),
        "torch oneDNN convolution": state.get("mkldnn_conv_fp32_precision") not in ("none", "ieee"),
    }


def math_record(dtype: str, device: str, torch_state: Mapping[str, Any],
                backend_state: Mapping[str, Any]) -> dict[str, Any]:
    """The math mode a cell ran with, and the problems when it is not what `dtype` asked for.

    `backend_state` is `Prepared.math_mode()`: `{"tf32": bool, ...}` for a backend that runs its
    own library, `{}` for one that runs through torch, `{"unreadable": why}` when the library
    would not say."""
    precision = PRECISIONS[dtype]
    record: dict[str, Any] = {"requested": precision.math, "torch": dict(torch_state),
                              "backend": dict(backend_state)}
    if precision.math not in ("ieee", "tf32"):
        record["effective"] = precision.math  # fp16/bf16: the reductions' settings are recorded, not judged
        record["problems"] = []
        return record
    paths = _torch_uses_tf32(torch_state, device)
    problems = []
    library_tf32 = backend_state.get("tf32")
    if isinstance(library_tf32, bool):
        paths["backend library"] = library_tf32
    elif "tf32" in backend_state:  # "0" read as a truth value would be TF32 on, None off
        problems.append(f"the backend's math_mode() gave tf32 as {library_tf32!r} ({type(library_tf32).__name__}), "
                        "not a bool: whether its library ran TF32 is not known")
    on = [path for path, used in paths.items() if used]
    off = [path for path, used in paths.items() if not used]
    effective = "tf32" if not off else "ieee" if not on else "mixed"
    if effective != precision.math:
        problems.append(f"asked for IEEE fp32, but TF32 was allowed in: {', '.join(on)}" if precision.math == "ieee"
                        else f"asked for TF32, but it was off in: {', '.join(off)}")
    unreadable = [key for key, value in torch_state.items() if isinstance(value, str) and value.startswith("unreadable")]
    if unreadable:
        problems.append(f"torch math settings unreadable after the run: {', '.join(unreadable)}")
    if backend_state.get("unreadable"):
        problems.append(f"the backend's math settings are unreadable: {backend_state['unreadable']}")
    record["effective"] = effective
    record["problems"] = problems
    return record
