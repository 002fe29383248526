"""On a GPU the harness traces the kernels itself (CUPTI names them) and Inductor names the kinds of
its Triton kernels from its generated code, as on the CPU: a Triton kernel that adds the bias of a
cuDNN convolution or a cuBLAS matrix multiply is of the kind of what it runs, not the library call's.

No GPU here, and Inductor generates no CUDA code without one (it asks the device for its
properties while lowering): the wrapper below is written by hand in the format of Inductor's CUDA
output code (torch 2.x: `async_compile.triton(name, source, device_str='cuda')`, the library calls
as `extern_kernels.*`, each Triton kernel launched by `.run(..., stream=stream0)`), its kernels
resnet18's stem and an LSTM step as the H200 bundles of 2026-12-04 record them
(docs/results/bundles/gpu-h200-2026-12-04-*); the trace's kernel names and times are theirs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from backends.inductor import InductorPrepared
from backends.inductor_code import kernel_calls
from harness.bundle.passes_record import Kernels
from harness.measure import passes
from harness.measure.kernel_kinds import KIND_METHOD_NAME, KIND_METHOD_NAMED
from harness.reporting.op_classes import CONVOLUTION, ELEMENTWISE, MATRIX_MULTIPLY, class_of
from tests.unit.test_inductor_code import TRITON_BIAS_RELU

VOCAB = {"convolution", "relu", "max_pool2d_with_indices", "add", "addmm", "cat", "mul", "sigmoid", "split", "tanh",
         "unbind", "view", "mm"}

# TRITON_BIAS_RELU: the convolution's bias (frozen from its batch norm) added to cuDNN's output, then
# the relu. The same bias and relu, then the 3x3 max pool over them (two of its nine taps shown).
BIAS_RELU_POOL = """
@triton.jit
def triton_poi_fused_convolution_max_pool2d_with_indices_relu_2(in_ptr0, in_ptr1, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    x1 = ((xindex // 56) % 56)
    x2 = ((xindex // 3136) % 64)
    tmp0 = tl.load(in_ptr0 + ((-113) + 2*x0 + 224*x1), tmp10, other=0.0)
    tmp1 = tl.load(in_ptr1 + (x2), tmp10, eviction_policy='evict_last', other=0.0)
    tmp2 = tmp0 + tmp1
    tmp3 = tl.full([1], 0, tl.int32)
    tmp4 = triton_helpers.maximum(tmp3, tmp2)
    tmp5 = tl.load(in_ptr0 + ((-112) + 2*x0 + 224*x1), tmp16, other=0.0)
    tmp6 = tmp5 + tmp1
    tmp7 = triton_helpers.maximum(tmp3, tmp6)
    tmp8 = triton_helpers.maximum(tmp7, tmp4)
    tl.store(out_ptr0 + (x3), tmp8, xmask)
"""
# An LSTM step after cuBLAS's two matrix multiplies: their sum and the biases, the gates, the new
# cell and hidden state (the input gate's part shown).
LSTM_GATES = """
@triton.jit
def triton_poi_fused_add_addmm_cat_mul_sigmoid_split_tanh_unbind_view_3(in_ptr0, in_ptr1, in_ptr2, in_ptr3, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    tmp0 = tl.load(in_ptr0 + (x0), xmask)
    tmp1 = tl.load(in_ptr1 + (x0), xmask)
    tmp2 = tmp0 + tmp1
    tmp3 = tl.load(in_ptr2 + (x0), xmask)
    tmp4 = tmp2 + tmp3
    tmp5 = tl.sigmoid(tmp4)
    tmp6 = tl.load(in_ptr3 + (x0), xmask)
    tmp7 = libdevice.tanh(tmp6)
    tmp8 = tmp5 * tmp7
    tl.store(out_ptr0 + (x0), tmp8, xmask)
"""

WRAPPER = f"""
triton_poi_fused_convolution_relu_1 = async_compile.triton('triton_poi_fused_convolution_relu_1', '''{TRITON_BIAS_RELU}''', device_str='cuda')
triton_poi_fused_convolution_max_pool2d_with_indices_relu_2 = async_compile.triton('triton_poi_fused_convolution_max_pool2d_with_indices_relu_2', '''{BIAS_RELU_POOL}''', device_str='cuda')
triton_poi_fused_add_addmm_cat_mul_sigmoid_split_tanh_unbind_view_3 = async_compile.triton('triton_poi_fused_add_addmm_cat_mul_sigmoid_split_tanh_unbind_view_3', '''{LSTM_GATES}''', device_str='cuda')

def call(args):
    arg0_1, arg1_1, arg2_1 = args
    args.clear()
    assert_size_stride(arg0_1, (32, 3, 224, 224), (150528, 50176, 224, 1))
    with torch.cuda._DeviceGuard(0):
        torch.cuda.set_device(0)
        buf0 = extern_kernels.convolution(arg0_1, _frozen_param0, stride=(2, 2), padding=(3, 3), dilation=(1, 1), transposed=False, output_padding=(0, 0), groups=1, bias=None)
        assert_size_stride(buf0, (32, 64, 112, 112), (802816, 12544, 112, 1))
        buf1 = buf0; del buf0
        stream0 = get_raw_stream(0)
        triton_poi_fused_convolution_relu_1.run(buf1, _frozen_param1, 25690112, stream=stream0)
        buf2 = extern_kernels.convolution(buf1, _frozen_param2, stride=(1, 1), padding=(1, 1), dilation=(1, 1), transposed=False, output_padding=(0, 0), groups=1, bias=None)
        buf3 = empty_strided_cuda((32, 64, 56, 56), (200704, 3136, 56, 1), torch.float32)
        triton_poi_fused_convolution_max_pool2d_with_indices_relu_2.run(buf2, _frozen_param3, buf3, 6422528, stream=stream0)
        buf4 = empty_strided_cuda((1, 1024), (1024, 1), torch.float32)
        extern_kernels.mm(arg1_1, reinterpret_tensor(_frozen_param4, (256, 1024), (1, 256), 0), out=buf4)
        buf5 = empty_strided_cuda((1, 1024), (1024, 1), torch.float32)
        extern_kernels.mm(arg2_1, reinterpret_tensor(_frozen_param5, (256, 1024), (1, 256), 0), out=buf5)
        buf6 = empty_strided_cuda((1, 256), (256, 1), torch.float32)
        triton_poi_fused_add_addmm_cat_mul_sigmoid_split_tanh_unbind_view_3.run(buf4, buf5, _frozen_param6, buf4, buf6, 256, stream=stream0)
    return (buf3, buf6, )
"""

CUDNN = ("sm80_xmma_fprop_implicit_gemm_f32f32_f32f32_f32_nchwkcrs_nchw_tilesize128x32x8_stage3_warpsize2x2x1_g1_ffma_"
         "aligna4_alignc4_execute_kernel__5x_cudnn")
CUBLAS = ("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x64x8_stage3_warpsize1x4x1_ffma_aligna4_alignc4_execute_"
          "kernel__5x_cublas")
# One inference as the trace gives it: each kernel and its microseconds (the H200 bundles' times).
LAUNCHED = ((CUDNN, 245.5), ("triton_poi_fused_convolution_relu_1", 51.4), (CUDNN, 245.5),
            ("triton_poi_fused_convolution_max_pool2d_with_indices_relu_2", 43.4), (CUBLAS, 4.8), (CUBLAS, 4.8),
            ("triton_poi_fused_add_addmm_cat_mul_sigmoid_split_tanh_unbind_view_3", 1.7))


def _trace(iters: int) -> list[dict[str, Any]]:
    events, at = [], 0.0
    for _ in range(iters):
        for name, us in LAUNCHED:
            events.append({"cat": "kernel", "name": name, "ts": at, "dur": us})
            at += us + 1.0
    return events


def _by_class(figures: dict[str, Any]) -> dict[str, float]:
    spent: dict[str, float] = {}
    for kind in figures["by_kind"]:
        spent[class_of(kind["kind"])] = spent.get(class_of(kind["kind"]), 0.0) + kind["ns_per_inference"]
    return spent


def test_a_triton_kernel_that_adds_a_library_calls_bias_is_timed_as_what_it_runs(tmp_path: Path,
                                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """resnet18 and an LSTM on Inductor (H200, 2026-12-04): the Triton kernels after cuDNN's
    convolutions and cuBLAS's matrix multiplies, named after `convolution` and `addmm`, were kinds
    of their names' (`triton_poi_fused_convolution_relu`), classed convolution and matrix multiply,
    their time counted beside cuDNN's and cuBLAS's, which run those operators (the LSTM's
    cell: 1.36 ms of its 1.43 ms of matrix multiply). Named by Inductor from its generated code,
    as on the CPU, they are the bias with what follows it, element-wise."""
    prepared = InductorPrepared(None, "cuda", kernel_calls(WRAPPER, VOCAB), graphs=1)
    monkeypatch.setattr(passes, "_cuda_trace", lambda prepared, batch, iters, workdir: _trace(iters))
    figures = passes.profile(prepared, None, 2, "cuda", tmp_path, 1e6)
    kinds = {kind["kind"]: kind["kernels"] for kind in figures["by_kind"]}
    assert {"triton_poi_fused_bias_relu", "triton_poi_fused_bias_max_pool2d_with_indices_relu",
            "triton_poi_fused_add_bias_cat_mul_sigmoid_tanh"} <= set(kinds)
    spent = _by_class(figures)
    assert spent[CONVOLUTION] == pytest.approx(2 * 245.5e3)  # cuDNN's alone
    assert spent[MATRIX_MULTIPLY] == pytest.approx(2 * 4.8e3)  # cuBLAS's alone
    assert spent[ELEMENTWISE] == pytest.approx((51.4 + 43.4 + 1.7) * 1e3)
    assert figures["kind_method"] == f"{KIND_METHOD_NAMED}; else {KIND_METHOD_NAME}"
    assert Kernels.model_validate(figures).by_kind[0].kind == "cudnn xmma_fprop_implicit_gemm"


def test_a_backend_that_names_no_kind_keeps_the_kinds_the_names_give() -> None:
    """The contract's default names none: every kind from its name, as the kept bundles record them."""
    figures = passes.cuda_kernel_figures(_trace(2), 2)
    assert class_of("triton_poi_fused_convolution_relu") == CONVOLUTION
    assert "triton_poi_fused_convolution_relu" in {kind["kind"] for kind in figures["by_kind"]}
    assert figures["kind_method"] == KIND_METHOD_NAME
