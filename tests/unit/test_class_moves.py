"""Where a cell's kernel time differs from eager's, by operator class (harness/reporting/class_moves.py)."""

from __future__ import annotations

import pytest

from harness.bundle.passes_record import Kernels
from harness.reporting.class_moves import against, class_times


def _kernels(*kinds: tuple[str, float]) -> Kernels:
    return Kernels.model_validate({
        "kernels_per_inference": len(kinds), "kernel_count_method": "cpu dispatches",
        "by_kind": [{"kind": kind, "kernels": 1, "calls_per_inference": 1, "ns_per_inference": ns} for kind, ns in kinds]})


# BERT base, batch 1, 128 tokens, two threads (docs/results/bundles/cpu-2core-amd-2026-12-02-ort-bert-kinds,
# round 1's kinds): eager's operators and ONNX Runtime's fused nodes, which share no name.
EAGER = _kernels(("aten::linear", 150.2e6), ("aten::matmul", 5.25e6), ("aten::gelu", 3.37e6), ("aten::layer_norm", 1.2e6),
                 ("aten::softmax", 0.98e6), ("aten::add", 0.9e6), ("aten::mul", 0.86e6), ("aten::contiguous", 0.32e6),
                 ("aten::embedding", 0.26e6))
ORT = _kernels(("Gemm", 111.51e6), ("SkipLayerNormalization", 6.96e6), ("Reshape", 1.87e6), ("Transpose", 1.79e6),
               ("FusedMatMul", 1.63e6), ("MatMul", 1.51e6), ("Erf", 1.46e6), ("Add", 1.2e6), ("Mul", 1.08e6),
               ("Div", 1.03e6), ("Softmax", 0.67e6), ("Gather", 0.07e6))


def test_kinds_of_two_backends_are_set_against_each_other_by_class_the_largest_difference_first() -> None:
    """ONNX Runtime's Gemm, MatMul and FusedMatMul against eager's linear and matmul; its
    SkipLayerNormalization, which took in two adds each, against eager's layer norms: more
    normalization time, less element-wise."""
    assert against(ORT, EAGER, ("onnxruntime", "eager")) == [
        "kernels in all -32.6 ms (eager 163 ms, onnxruntime 131 ms)",
        "matrix multiply -40.8 ms (eager 155 ms, onnxruntime 115 ms)",
        "normalization +5.76 ms (eager 1.20 ms, onnxruntime 6.96 ms)",
        "data movement +3.15 ms (eager 580 us, onnxruntime 3.73 ms)",
        "element-wise and reductions -670 us (eager 6.11 ms, onnxruntime 5.44 ms)",
    ]


def test_a_class_one_side_never_runs_says_none_there_and_each_side_is_scaled_to_its_time_over_rounds() -> None:
    tvm = _kernels(("fused_conv2d_subtract_divide_multiply_add_relu", 30e6), ("fused_matmul_add", 1e6))
    eager = _kernels(("aten::conv2d", 10e6), ("aten::batch_norm", 2e6), ("aten::relu_", 1e6), ("aten::linear", 1e6))
    assert against(tvm, eager, ("tvm", "eager"), (0.5, 1.0))[:3] == [
        "kernels in all +1.50 ms (eager 14.0 ms, tvm 15.5 ms)",
        "convolution +5.00 ms (eager 10.0 ms, tvm 15.0 ms)",
        "normalization -2.00 ms (eager 2.00 ms, tvm none)",
    ]
    assert class_times(tvm) == {"convolution": 30e6, "matrix multiply": 1e6}


def test_nothing_is_said_where_either_side_lists_no_kinds() -> None:
    bare = Kernels.model_validate({"kernels_per_inference": 3, "kernel_count_method": "cpu dispatches"})
    assert against(ORT, bare, ("onnxruntime", "eager")) == [] and against(None, EAGER, ("tvm", "eager")) == []


# resnet18, batch 32, on an H200 (docs/results/bundles/gpu-h200-2026-12-04-inductor-layout, the kinds of
# eager's cell and of Inductor's with its channels-last layout, in us): cuDNN picks other convolutions
# for each, and Inductor's layout adds cuDNN's reorders.
GPU_EAGER = _kernels(("cudnn xmma_fprop_implicit_gemm", 3234.1e3), ("implicit_convolve_sgemm", 371.8e3),
                     ("cudnn::bn_fw_inf_1C11_kernel_NCHW", 276.1e3), ("at::native::vectorized_elementwise_kernel", 191.5e3),
                     ("cublas xmma_gemm", 187.7e3), ("fft2d_r2c_32x32", 138.0e3),
                     ("at::native::(anonymous namespace)::max_pool_forward_nchw", 103.8e3), ("flip_filter", 38.8e3),
                     ("fft2d_c2r_32x32", 31.6e3), ("cutlass_simt_sgemm", 7.2e3), ("at::native::reduce_kernel", 5.9e3),
                     ("cublasLt::splitKreduce_kernel", 2.5e3))
GPU_INDUCTOR = _kernels(("cudnn xmma_fprop_implicit_gemm", 2211.0e3), ("pointwise_mult_and_sum_complex", 789.5e3),
                        ("convolve_common_engine_float_NHWC", 435.2e3), ("fft2d_r2c_64x64", 253.3e3),
                        ("cudnn::engines_precompiled::nhwcToNchwKernel", 214.8e3), ("cublas xmma_gemm", 186.8e3),
                        ("fft2d_r2c_32x32", 135.7e3), ("cudnn::engines_precompiled::nchwToNhwcKernel", 112.7e3),
                        ("fft2d_c2r_64x64", 99.3e3), ("triton_poi_fused_convolution_relu", 96.5e3),
                        ("triton_poi_fused_add_convolution_relu", 65.6e3), ("flip_filter", 52.3e3),
                        ("triton_poi_fused_convolution_max_pool2d_with_indices_relu", 36.7e3), ("fft2d_c2r_32x32", 31.9e3),
                        ("triton_poi_fused_convolution", 25.9e3), ("cutlass_simt_sgemm", 7.2e3),
                        ("triton_per_fused_add_convolution_mean_relu", 3.4e3), ("cublasLt::splitKreduce_kernel", 2.6e3))


def test_a_gpu_librarys_kernels_are_set_against_eager_in_the_class_of_what_they_run() -> None:
    """cuDNN's implicit_convolve_sgemm, eager's first convolution, was a matrix multiply and Inductor's
    convolve_common_engine_float_NHWC other: the report said Inductor spent 373 us less on matrix
    multiplies (there is one, the classifier's, on each side) and 837 us more on other kernels, its
    cuDNN reorders and eager's cuDNN batch norm among them. Each is now in the class of what it runs
    (Inductor's Triton kinds as recorded, before Inductor named them: their 228 us in its convolution).
    And cuDNN's FFT convolution's product of transforms, pointwise_mult_and_sum_complex, which Inductor's
    channels-last layout led cuDNN to run and eager never runs, was read by its words as element-wise:
    `element-wise and reductions +488 us (eager 301 us, inductor 790 us)` said Inductor did more
    element-wise work than eager, where its 790 us were that product alone. It is other, as the FFT's
    transforms are."""
    assert class_times(GPU_EAGER)["matrix multiply"] == pytest.approx((187.7 + 7.2 + 2.5) * 1e3)
    assert against(GPU_INDUCTOR, GPU_EAGER, ("inductor", "eager")) == [
        "kernels in all +171 us (eager 4.59 ms, inductor 4.76 ms)",
        "other +1.14 ms (eager 170 us, inductor 1.31 ms)",
        "convolution -732 us (eager 3.61 ms, inductor 2.87 ms)",
        "data movement +341 us (eager 38.8 us, inductor 380 us)",
        "element-wise and reductions -301 us (eager 301 us, inductor none)",
    ]
