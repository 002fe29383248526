"""The operator class of a kind of kernel (harness/reporting/op_classes.py), on kinds the kept
bundles hold (docs/results/bundles/*/cells/*.json, `metrics.kernels.by_kind`)."""

from __future__ import annotations

import pytest

from harness.reporting.op_classes import (
    ATTENTION,
    CONVOLUTION,
    DATA_MOVEMENT,
    ELEMENTWISE,
    MATRIX_MULTIPLY,
    NORMALIZATION,
    OTHER,
    class_of,
)


@pytest.mark.parametrize(("kind", "cls"), [
    # eager's ATen operators
    ("aten::conv2d", CONVOLUTION), ("aten::linear", MATRIX_MULTIPLY), ("aten::matmul", MATRIX_MULTIPLY),
    ("aten::einsum", MATRIX_MULTIPLY), ("aten::_native_multi_head_attention", ATTENTION),
    ("aten::layer_norm", NORMALIZATION), ("aten::batch_norm", NORMALIZATION), ("aten::gelu", ELEMENTWISE),
    ("aten::relu_", ELEMENTWISE), ("aten::softmax", ELEMENTWISE), ("aten::max_pool2d", ELEMENTWISE),
    ("aten::contiguous", DATA_MOVEMENT), ("aten::cat", DATA_MOVEMENT), ("aten::embedding", DATA_MOVEMENT),
    # ONNX Runtime's node types, one word each
    ("Gemm", MATRIX_MULTIPLY), ("MatMul", MATRIX_MULTIPLY), ("FusedMatMul", MATRIX_MULTIPLY),
    ("SkipLayerNormalization", NORMALIZATION), ("LayerNormalization", NORMALIZATION), ("Erf", ELEMENTWISE),
    ("Reshape", DATA_MOVEMENT), ("Gather", DATA_MOVEMENT),
    # TVM's kernels: a fused one in its anchor's class
    ("fused_conv2d_subtract_divide_multiply_add_relu", CONVOLUTION), ("fused_matmul_add_relu", MATRIX_MULTIPLY),
    ("fused_layer_norm_pad", NORMALIZATION), ("fused_subtract_divide_multiply_add", NORMALIZATION),
    ("fused_reshape_gelu_reshape", ELEMENTWISE), ("fused_reshape_transpose_reshape", DATA_MOVEMENT),
    ("tir_sigmoid", ELEMENTWISE), ("strided_slice", DATA_MOVEMENT), ("matmul", MATRIX_MULTIPLY),
    # Inductor's generated kernels and library calls (golden v11)
    ("mkldnn::_convolution_pointwise_", CONVOLUTION), ("mkl::_mkl_linear", MATRIX_MULTIPLY),
    ("cpp_fused__native_batch_norm_legit_no_training", NORMALIZATION), ("cpp_fused_max_pool2d_with_indices", ELEMENTWISE),
    # NVIDIA's libraries on a GPU (the H200 bundles of 2026-12-04): cuDNN's older convolutions, a GEMM
    # word after `convolve` (was matrix multiply) or none (was other); cuBLAS's matrix-vector product,
    # the LSTM's costliest kind, and a split-K GEMM's sum (were other); cuDNN's batch norm, eager's,
    # and its layout reorders, Inductor's with its channels-last layout (were other)
    ("implicit_convolve_sgemm", CONVOLUTION), ("convolve_common_engine_float_NHWC", CONVOLUTION),
    ("internal::gemvx::kernel", MATRIX_MULTIPLY), ("cublasLt::splitKreduce_kernel", MATRIX_MULTIPLY),
    ("cudnn::bn_fw_inf_1C11_kernel_NCHW", NORMALIZATION), ("cudnn::engines_precompiled::nhwcToNchwKernel", DATA_MOVEMENT),
    ("cudnn::engines_precompiled::nchwToNhwcKernel", DATA_MOVEMENT),
    # cuDNN's FFT convolution, Inductor's on the H200: its transforms and their product (was element-wise)
    ("fft2d_r2c_32x32", OTHER), ("fft2d_c2r_64x64", OTHER), ("pointwise_mult_and_sum_complex", OTHER),
])
def test_each_backends_kinds_fall_in_one_class(kind: str, cls: str) -> None:
    assert class_of(kind) == cls


def test_words_are_whole_so_a_name_that_only_contains_one_is_not_read_as_it() -> None:
    """`pad` holds `add`, `QLinearAdd` holds `linear`, `layer_norm` holds `norm`: none is read as the
    word inside it; a kind no word of which is known is other, not guessed."""
    assert class_of("pad") == DATA_MOVEMENT
    assert class_of("QLinearAdd") == OTHER
    assert class_of("aten::norm") == ELEMENTWISE  # a vector norm: a reduction, not a normalization
    assert class_of("aten::lstm") == OTHER
