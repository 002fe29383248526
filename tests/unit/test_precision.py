"""The precision policy: fp32 means IEEE fp32, tf32 is asked for, the flags are read back, and a
cell whose math is not what its dtype asked for is caught."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from harness import precision
from harness.measure.correctness import compare
from harness.precision import PRECISIONS, math_record, set_torch_math, torch_math_state, unsupported_reason


@pytest.fixture(autouse=True)
def restore_torch_math() -> Any:
    yield
    set_torch_math("fp32")


def test_fp32_turns_tf32_off_everywhere_and_tf32_turns_it_on() -> None:
    set_torch_math("tf32")
    state = torch_math_state()
    assert state["cuda_matmul_fp32_precision"] == "tf32" and state["cudnn_conv_fp32_precision"] == "tf32"
    assert state["cudnn_fp32_precision"] == "tf32" and state["cuda_matmul_allow_tf32"] is True
    set_torch_math("fp32")
    state = torch_math_state()
    assert state["cuda_matmul_fp32_precision"] == "ieee" and state["cudnn_conv_fp32_precision"] == "ieee"
    assert state["cudnn_allow_tf32"] is False and state["float32_matmul_precision"] == "highest"
    # nothing read raised: a mix of torch's legacy and new APIs would make a getter raise
    assert not [k for k, v in state.items() if isinstance(v, str) and v.startswith("unreadable")]


def test_torch_defaults_are_not_ieee_on_a_gpu() -> None:
    """What the harness got wrong before: cuDNN allows TF32 unless told otherwise."""
    torch.backends.cudnn.allow_tf32 = True  # torch's default
    record = math_record("fp32", "cuda", torch_math_state(), {})
    assert record["effective"] == "mixed"
    assert "TF32 was allowed in: torch cuDNN convolution" in record["problems"][0]


def test_read_back_ieee_and_tf32_agree_with_what_was_asked() -> None:
    set_torch_math("fp32")
    ieee = math_record("fp32", "cuda", torch_math_state(), {})
    assert (ieee["requested"], ieee["effective"], ieee["problems"]) == ("ieee", "ieee", [])
    set_torch_math("tf32")
    tf32 = math_record("tf32", "cuda", torch_math_state(), {"tf32": True})
    assert (tf32["requested"], tf32["effective"], tf32["problems"]) == ("tf32", "tf32", [])


def test_a_backend_library_that_kept_tf32_makes_an_fp32_cell_wrong() -> None:
    set_torch_math("fp32")
    record = math_record("fp32", "cuda", torch_math_state(), {"tf32": True, "use_tf32": "1"})
    assert record["effective"] == "mixed" and "backend library" in record["problems"][0]
    unreadable = math_record("fp32", "cuda", torch_math_state(), {"unreadable": "no use_tf32 option"})
    assert any("unreadable" in problem for problem in unreadable["problems"])


def test_a_backend_tf32_that_is_not_a_bool_is_a_problem_not_read_as_on_or_off() -> None:
    """`{"tf32": "0"}` (ONNX Runtime's option as its session gives it, a string) was read as TF32 on and
    an fp32 cell called invalid for it; `{"tf32": None}` (a library that would not say) as IEEE, valid."""
    set_torch_math("fp32")
    for given in ("0", None):
        record = math_record("fp32", "cpu", torch_math_state(), {"tf32": given})
        assert record["effective"] == "ieee", record
        assert record["problems"] == [f"the backend's math_mode() gave tf32 as {given!r} ({type(given).__name__}), "
                                      "not a bool: whether its library ran TF32 is not known"]
    assert math_record("fp32", "cpu", torch_math_state(), {"tf32": False})["problems"] == []


def test_an_environment_override_that_forces_tf32_off_fails_a_tf32_cell(monkeypatch: pytest.MonkeyPatch) -> None:
    set_torch_math("tf32")
    monkeypatch.setenv("NVIDIA_TF32_OVERRIDE", "0")
    record = math_record("tf32", "cuda", torch_math_state(), {})
    assert record["effective"] == "ieee" and "asked for TF32, but it was off" in record["problems"][0]
    assert record["torch"]["env_NVIDIA_TF32_OVERRIDE"] == "0"


def test_cpu_fp32_is_ieee_and_half_precisions_are_recorded_not_judged() -> None:
    set_torch_math("fp32")
    assert math_record("fp32", "cpu", torch_math_state(), {})["effective"] == "ieee"
    half = math_record("fp16", "cuda", torch_math_state(), {})
    assert half["effective"] == "fp16" and half["problems"] == []
    assert "fp16_reduced_precision_reduction" in half["torch"]


@pytest.mark.parametrize(("dtype", "device", "capabilities", "refused"), [
    ("tf32", "cpu", [], "math mode of NVIDIA GPUs"),
    ("tf32", "cuda", ["7.5"], "compute capability 8.0 or newer; this GPU has 7.5"),
    ("tf32", "cuda", ["9.0"], None),
    ("fp32", "cpu", [], None),
    ("bf16", "cuda", ["7.0"], None),
])
def test_tf32_runs_only_on_gpus_that_have_it(dtype: str, device: str, capabilities: list[str], refused: str | None) -> None:
    reason = unsupported_reason(dtype, device, capabilities)
    assert (reason is None) if refused is None else (refused in reason)


def test_tf32_has_its_own_tolerance_and_an_ieee_reference() -> None:
    assert PRECISIONS["tf32"].reference == "fp32" and PRECISIONS["tf32"].tensor_dtype == "float32"
    assert PRECISIONS["tf32"].rtol > PRECISIONS["fp32"].rtol
    reference = torch.linspace(-1, 1, 1000, dtype=torch.float64)
    off_by_tf32 = reference * (1 + 2e-2)  # what resnet50's TF32 rounding does (benchmarks/tf32_tolerance.py)
    assert not compare(off_by_tf32, reference, "fp32")["ok"]
    verdict = compare(off_by_tf32, reference, "tf32")
    assert verdict["ok"] and verdict["reference"] == "eager, fp32"


def test_torch_dtype_of_each_precision() -> None:
    assert precision.torch_dtype("tf32") is torch.float32
    assert precision.torch_dtype("bf16") is torch.bfloat16
