"""Where an inference's time goes: the GPU's busy time from kernel intervals, and the split of the
wall time into time inside kernels and overhead."""

from __future__ import annotations

from typing import Any

import pytest

from harness.bundle.passes_record import Kernels
from harness.contract import CpuKernelTimes
from harness.measure.passes import busy_us, cpu_kernel_figures, cuda_kernel_figures, time_split


def _kernels(**figures: Any) -> Kernels:
    """The profile pass's kernel figures, with a count that the split does not read."""
    return Kernels(kernels_per_inference=None, kernel_count_method="not counted here", **figures)


def test_busy_time_counts_overlapping_kernels_once() -> None:
    assert busy_us([(0, 10), (5, 15), (20, 25), (21, 22)]) == 20
    assert busy_us([]) == 0


def test_the_split_is_kernels_and_the_rest_of_the_wall_time() -> None:
    split = time_split(10e6, _kernels(kernel_time_ns_per_inference=7.5e6, kernel_time_method="the profiler"), "cuda")
    assert split["overhead_ns"] == pytest.approx(2.5e6) and split["kernel_share"] == pytest.approx(0.75)
    assert "launch and host overhead" in split["method"]
    cpu = time_split(10e6, _kernels(kernel_share=0.9, kernel_time_method="x"), "cpu")
    assert "dispatch overhead" in cpu["method"] and cpu["kernel_ns"] == pytest.approx(9e6)
    assert time_split(10e6, _kernels(kernel_time_ns_per_inference=None, kernel_time_method="not measured"), "cpu")["kernel_ns"] is None
    # a profiler's kernel time above the wall time (its own cost, or noise) leaves no negative overhead
    assert time_split(1e6, _kernels(kernel_time_ns_per_inference=1.2e6, kernel_time_method="x"), "cpu")["overhead_ns"] == 0


def test_the_trace_gives_each_kernels_calls_and_time_the_slowest_first() -> None:
    """Two profiled inferences: `mm` twice each (10 us a call), `fused_conv` once each (50 us), a copy
    and a CPU event beside them, which are not kernels."""
    events = []
    for i in range(2):
        t = i * 1000.0
        events += [
            {"cat": "kernel", "name": "mm", "ts": t, "dur": 10.0},
            {"cat": "kernel", "name": "mm", "ts": t + 20, "dur": 10.0},
            {"cat": "kernel", "name": "fused_conv", "ts": t + 40, "dur": 50.0},
            {"cat": "gpu_memcpy", "name": "Memcpy HtoD", "ts": t + 100, "dur": 30.0},
            {"cat": "cpu_op", "name": "aten::conv2d", "ts": t, "dur": 200.0},
        ]
    figures = cuda_kernel_figures(events, iters=2)
    assert figures["kernels_per_inference"] == 3
    assert figures["top_kernels"] == [
        {"name": "fused_conv", "calls_per_inference": 1, "ns_per_inference": 50e3},
        {"name": "mm", "calls_per_inference": 2, "ns_per_inference": 20e3},
    ]
    assert figures["kernel_time_ns_per_inference"] == figures["kernel_time_sum_ns_per_inference"] == 70e3


def test_graph_replays_whose_kernels_the_trace_left_out_leave_the_count_and_the_split_unmeasured() -> None:
    """A CUDA graph's replays traced without their kernels count no kernel, rather than 0 kernels
    and all of the wall time as launch overhead; a trace without graphs and without kernels (a
    backend that computes no model) still counts 0."""
    events = [{"cat": "cuda_runtime", "name": "cudaGraphLaunch", "ts": i * 100.0, "dur": 5.0} for i in range(2)]
    figures = cuda_kernel_figures(events, iters=2)
    kernels = Kernels.model_validate(figures)
    assert kernels.kernels_per_inference is None and "2 CUDA graph launch(es)" in kernels.kernel_count_method
    split = time_split(1e6, kernels, "cuda")
    assert split["kernel_ns"] is None and split["overhead_ns"] is None
    assert cuda_kernel_figures([{"cat": "cpu_op", "name": "aten::empty", "ts": 0.0, "dur": 1.0}], iters=2)[
        "kernels_per_inference"] == 0


def test_the_split_reads_the_figures_the_profile_pass_returned() -> None:
    """The worker hands the split what `profile` returned, read once as the cell's `Kernels`."""
    figures = {
        "kernels_per_inference": 3.0,
        "kernel_count_method": "CUDA kernels",
        "kernel_time_ns_per_inference": 7.5e6,
        "kernel_time_method": "the profiler",
        "top_kernels": [],
    }
    assert time_split(10e6, Kernels.model_validate(figures), "cuda")["kernel_share"] == pytest.approx(0.75)


def test_a_cpu_profile_gives_the_kernels_share_and_each_kernels_calls_and_time_the_slowest_first() -> None:
    """One profiled inference of 10 ms: `fused_conv` twice (3 ms a call), `relu` once (1 ms); 3 ms
    of dispatch between them. The timed median is 5 ms (the profiler slowed the call it watched):
    each kernel's time is its share of the profiled call applied to it."""
    times = CpuKernelTimes(calls=(("fused_conv", 3e6), ("relu", 1e6), ("fused_conv", 3e6)), wall_ns=10e6)
    figures = cpu_kernel_figures([times], 5e6)
    assert figures["kernel_share"] == pytest.approx(0.7)
    assert figures["top_kernels"] == [
        {"name": "fused_conv", "calls_per_inference": 2, "ns_per_inference": pytest.approx(3e6)},
        {"name": "relu", "calls_per_inference": 1, "ns_per_inference": pytest.approx(0.5e6)},
    ]
    assert Kernels.model_validate({"kernels_per_inference": 3, "kernel_count_method": "x", **figures}).profiled_iters == 1
    # kernels timed past the call's own clock (rounding) still give a share of at most 1
    assert cpu_kernel_figures([CpuKernelTimes(calls=(("k", 11e6),), wall_ns=10e6)], 5e6)["kernel_share"] == 1.0


def test_one_profiled_inference_the_scheduler_slowed_names_no_kernel_longer_than_the_inference() -> None:
    """Three profiled inferences of a 1 ms model; in the second the scheduler took the core from
    `relu` for 4 ms. The median of each kernel's share keeps it at its usual time, and no kernel
    is listed longer than the timed inference (a reader was shown a 4 ms kernel in a 1 ms model)."""
    usual = CpuKernelTimes(calls=(("conv", 0.6e6), ("relu", 0.2e6)), wall_ns=1e6)
    preempted = CpuKernelTimes(calls=(("conv", 0.6e6), ("relu", 4.2e6)), wall_ns=5e6)
    figures = cpu_kernel_figures([usual, preempted, usual], 1e6)
    assert figures["profiled_iters"] == 3
    assert [k["name"] for k in figures["top_kernels"]] == ["conv", "relu"]
    assert figures["top_kernels"][0]["ns_per_inference"] == pytest.approx(0.6e6)
    assert figures["top_kernels"][1]["ns_per_inference"] == pytest.approx(0.2e6)
    assert figures["kernel_share"] == pytest.approx(0.8)
    assert sum(k["ns_per_inference"] for k in figures["top_kernels"]) <= 1e6


def test_the_kinds_add_up_to_the_time_in_kernels_when_most_profiled_inferences_were_slowed() -> None:
    """Three profiled inferences of a 1 ms model (conv 0.6 ms, add and relu 0.1 ms each): in the first
    the scheduler took the core from `add` for 1 ms, in the second between two kernels for 1 ms. Each
    halved conv's share of its inference, so the median of conv's shares was half its usual one, and
    the kinds added up to 0.45 of the call where `time_split` put 0.8 of it in kernels: findings'
    `kernels in all` and a fusion pair's moves were short by what the slowed inferences took from the
    others (0.59 of a busy VM's mobilenet_v3_small on ONNX Runtime). Each kind now takes its median
    part of an inference's time in kernels, and the kinds add up to that time."""
    slowed_add = CpuKernelTimes(calls=(("conv", 0.6e6), ("add", 1.1e6), ("relu", 0.1e6)), wall_ns=2e6)
    slowed_between = CpuKernelTimes(calls=(("conv", 0.6e6), ("add", 0.1e6), ("relu", 0.1e6)), wall_ns=2e6)
    usual = CpuKernelTimes(calls=(("conv", 0.6e6), ("add", 0.1e6), ("relu", 0.1e6)), wall_ns=1e6)
    figures = cpu_kernel_figures([slowed_add, slowed_between, usual], 1e6)
    assert figures["kernel_share"] == pytest.approx(0.8)
    kinds = {k["kind"]: k["ns_per_inference"] for k in figures["by_kind"]}
    assert kinds == {"conv": pytest.approx(0.6e6), "add": pytest.approx(0.1e6), "relu": pytest.approx(0.1e6)}
    assert sum(k["ns_per_inference"] for k in figures["top_kernels"]) == pytest.approx(0.8e6)


def test_a_kernel_most_profiled_inferences_did_not_run_is_not_listed() -> None:
    """A kernel seen in one inference of three (a lazily built cache, say) has a median of 0 calls:
    listed, it read `0 calls, 0 ns`."""
    plain = CpuKernelTimes(calls=(("conv", 0.5e6),), wall_ns=1e6)
    once = CpuKernelTimes(calls=(("conv", 0.5e6), ("build", 0.3e6)), wall_ns=1e6)
    tops = {k["name"]: k for k in cpu_kernel_figures([plain, once, plain], 1e6)["top_kernels"]}
    assert list(tops) == ["conv"] and tops["conv"]["calls_per_inference"] == 1
    twice = cpu_kernel_figures([plain, once, once], 1e6)["top_kernels"]
    assert [k["name"] for k in twice] == ["conv", "build"]


def test_the_profile_pass_asks_for_profile_iters_inferences_on_the_cpu(tmp_path) -> None:
    """`passes.profile_iters` was used on a GPU only: a CPU cell profiled one inference whatever it said."""
    from harness.measure import passes

    class Counting:
        dispatch_definition = kernel_time_definition = "one call"
        asked = 0

        def fusion_report(self):
            from harness.fusion import FusionReport, KernelGroup

            return FusionReport(kernels=(KernelGroup(kernel="k", ops=("op",)),), source="stub")

        def cpu_dispatches(self, batch):
            return 1

        def cpu_kernel_times(self, batch):
            self.asked += 1
            return CpuKernelTimes(calls=(("k", 0.5e6),), wall_ns=1e6)

        def profile_figures(self, batch):
            return {}

    stub = Counting()
    result = passes.profile(stub, None, 4, "cpu", tmp_path, 2e6)  # type: ignore[arg-type]
    assert stub.asked == 4 and result["profiled_iters"] == 4
    assert result["top_kernels"] == [{"name": "k", "calls_per_inference": 1, "ns_per_inference": pytest.approx(1e6)}]
    assert result["kernel_time_method"] == ("one call; the kernels' share the median over 4 profiled inferences, split between "
                                           "them in proportion to the median of each one's part of an inference's "
                                           "time in kernels")


def test_a_backend_whose_profiler_cannot_tell_leaves_the_share_unmeasured() -> None:
    assert cpu_kernel_figures([], 10e6) == {"kernel_share": None}
    split = time_split(10e6, _kernels(**cpu_kernel_figures([], 10e6), kernel_time_method="not measured by this backend"), "cpu")
    assert split["kernel_ns"] is None


def test_a_cpu_profile_sums_each_kind_of_kernel_by_the_kind_its_backend_names_or_its_name() -> None:
    """TVM's matmul14 and matmul18 are one kind, matmul; ONNX Runtime names a node's operator type
    itself, which wins over its name. Each kind's time is its median share applied to the timed median."""
    from harness.measure.kernel_kinds import KIND_METHOD_NAME, KIND_METHOD_NAMED, kind_method

    first = CpuKernelTimes(calls=(("matmul14", 2e6), ("matmul18", 1e6), ("node_17", 1e6), ("aten::add", 0.5e6)),
                           wall_ns=5e6, kinds={"node_17": "SkipLayerNormalization"})
    # an inference in which the scheduler took the core from aten::add for 4.5 ms: the medians keep it out
    slow = CpuKernelTimes(calls=(("matmul14", 6e6), ("matmul18", 3e6), ("node_17", 3e6), ("aten::add", 6e6)),
                          wall_ns=19.5e6, kinds={"node_17": "SkipLayerNormalization"})
    figures = cpu_kernel_figures([first, slow, first], 10e6)
    assert figures["by_kind"] == [
        {"kind": "matmul", "kernels": 2, "calls_per_inference": 2, "ns_per_inference": pytest.approx(6e6)},
        {"kind": "SkipLayerNormalization", "kernels": 1, "calls_per_inference": 1, "ns_per_inference": pytest.approx(2e6)},
        {"kind": "aten::add", "kernels": 1, "calls_per_inference": 1, "ns_per_inference": pytest.approx(1e6)},
    ]
    assert figures["kind_method"].startswith(KIND_METHOD_NAMED) and figures["kind_method"].endswith(KIND_METHOD_NAME)
    assert kind_method([CpuKernelTimes(calls=(("cpp_fused_gelu_178", 1.0),), wall_ns=1.0)]) == KIND_METHOD_NAME
    assert Kernels.model_validate({"kernels_per_inference": 4, "kernel_count_method": "x", **figures}).by_kind[0].kernels == 2


def test_a_kernel_kind_is_its_name_without_the_numbers_a_compiler_numbers_its_kernels_by() -> None:
    """TVM numbers each part of a fused function's name, Inductor each kernel: kept, each fused
    kernel was a kind of its own. An operator's name is its kind as it is (aten::log10 is no log)."""
    from harness.measure.kernel_kinds import kind_of

    names = {"fused_conv2d38_subtract16_add45_tir_sigmoid22": "fused_conv2d_subtract_add_tir_sigmoid",
             "cpp_fused__softmax_168": "cpp_fused__softmax", "cpp_fused_gelu_view_176": "cpp_fused_gelu_view",
             "matmul14": "matmul", "conv2d": "conv2d", "aten::log10": "aten::log10", "42": "42"}
    assert {name: kind_of(name, {}) for name in names} == names
    assert kind_of("gemm_output_reshape_token_143", {"gemm_output_reshape_token_143": "Gemm"}) == "Gemm"


#: Kernel names as CUPTI gave them on an H200 (docs/results/bundles/gpu-h200-2026-11-28-*), and their kinds.
CUDA_KINDS = {
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> >"
    "(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)": "at::native::vectorized_elementwise_kernel",
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >"
    "(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)": "at::native::vectorized_elementwise_kernel",
    "void at::native::(anonymous namespace)::max_pool_forward_nchw<float, int>(int, float const*, long, long, long, int, "
    "int, int, int, int, int, int, int, int, int, float*, long*)": "at::native::(anonymous namespace)::max_pool_forward_nchw",
    "std::enable_if<!(false), void>::type internal::gemvx::kernel<int, int, float, float, float, float, false, true, "
    "true, false, 7, false, cublasGemvParamsEx<int, cublasGemvTensorStridedBatched<float const>, "
    "cublasGemvTensorStridedBatched<float>, float> >(cublasGemvParamsEx<int, cublasGemvTensorStridedBatched<float const>,"
    " cublasGemvTensorStridedBatched<float>, float>)": "internal::gemvx::kernel",
    "void elemWiseRNNcell<float, float, float, (cudnnRNNMode_t)2, (cudnnRNNBiasMode_t)2>(int, int, int, int, int, bool, "
    "float const*, float*)": "elemWiseRNNcell",
    "void onnxruntime::cuda::_UnaryElementWise<float, float, onnxruntime::cuda::OP_Relu<float>, 256, 4>(float const*, "
    "float*, onnxruntime::cuda::OP_Relu<float>, long)": "onnxruntime::cuda::_UnaryElementWise",
    "sm80_xmma_fprop_implicit_gemm_f32f32_f32f32_f32_nchwkcrs_nchw_tilesize128x32x8_stage3_warpsize2x2x1_g1_ffma_aligna4_"
    "alignc4_execute_kernel__5x_cudnn": "cudnn xmma_fprop_implicit_gemm",
    "sm80_xmma_fprop_implicit_gemm_f32f32_f32f32_f32_nchwkcrs_nchw_tilesize256x64x8_stage3_warpsize2x2x1_g1_ffma_aligna4_"
    "alignc4_execute_kernel__5x_cudnn": "cudnn xmma_fprop_implicit_gemm",
    "sm80_xmma_gemm_cf32cf32_f32f32_cf32_tn_n_tilesize32x64x8_stage3_warpsize2x2x1_ffma_aligna8_alignc8_execute_kernel__5x_"
    "cublas": "cublas xmma_gemm",
    "triton_poi_fused_add_convolution_relu_4": "triton_poi_fused_add_convolution_relu",
    "triton_poi_fused_add_convolution_relu_10": "triton_poi_fused_add_convolution_relu",
    "fused_conv2d1_subtract1_divide1_multiply1_add2_relu1_kernel": "fused_conv2d_subtract_divide_multiply_add_relu_kernel",
    "conv2d8_kernel": "conv2d_kernel",
    # names of the kinds other cells give (TensorRT's, cuBLAS's on Hopper, CUTLASS's): no tile shape or hash in a kind
    "sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x16_stage4_warpsize2x2x1_g1_"
    "tensor16x8x8_t1r3s3": "xmma_fprop_implicit_gemm",
    "nvjet_tst_128x64_64x6_1x1_v_bz_coopB_TNT": "nvjet_tst",
    "ampere_sgemm_128x64_nn": "sgemm",
    "cutlass3x_sm90_tensorop_s64x128x8tf32gemm_f32_f32_f32_f32_f32_128x128x32_1x2x1_0_tnn_align4_warpspecialized_"
    "cooperative_epi_tma": "cutlass3x_tensorop",
    "cutlass_80_simt_sgemm_64x64_8x5_tn_align1": "cutlass_simt_sgemm",
    # CUTLASS's launchers take the kind of the kernel they launch: the first two as the H200 bundles recorded them
    # (CUPTI's parameters, Nsight Compute's), the others written as CUTLASS 2 and 3 name their kernels
    "void cutlass::Kernel2<cutlass_80_simt_sgemm_64x64_8x5_tn_align1>(cutlass_80_simt_sgemm_64x64_8x5_tn_align1::Params)":
    "cutlass_simt_sgemm",
    "void cutlass::Kernel2<cutlass_80_simt_sgemm_64x64_8x5_tn_align1>(T1::Params)": "cutlass_simt_sgemm",
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_16x3_nn_align4>(cutlass_80_tensorop_s1688gemm_128x128_16x3_"
    "nn_align4::Params)": "cutlass_tensorop",
    "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cutlass::gemm::GemmShape<128, 128, 32>, float> >"
    "(cutlass::gemm::kernel::GemmUniversal<cutlass::gemm::GemmShape<128, 128, 32>, float>::Params)":
    "cutlass::gemm::kernel::GemmUniversal",
    "__myl_AddMulTanh_0xeca0d4f1c2b3a44": "__myl_AddMulTanh",
    # Nsight Compute's demangler names the anonymous namespace otherwise
    "void at::<unnamed>::max_pool_forward_nchw<float, int>(T2, const T1 *, long, long, long, int, int, int, int, int, int,"
    " int, int, int, int, T1 *, long *)": "at::(anonymous namespace)::max_pool_forward_nchw",
}


def test_a_gpu_kernel_kind_is_its_function_its_library_operation_or_its_name_without_numbers() -> None:
    """A C++ kernel's kind is its function (every ATen elementwise functor one kind), a CUTLASS
    launcher's the kernel it launches (a GEMM's kind is not a convolution's); a library
    kernel named by its tile shapes is its library and operation; Triton's and TVM's kernels lose
    their numbers, and any kernel its tile shapes and hashes. A signature whose brackets do not
    close is its own kind; each bracket closes the one it opened."""
    from harness.measure.kernel_kinds import kind_of

    assert {name: kind_of(name, {}) for name in CUDA_KINDS} == CUDA_KINDS
    assert kind_of("void broken<int(", {}) == "void broken<int("
    assert kind_of("void pick<(1>0), int>(int)", {}) == "pick"
    assert kind_of("void cutlass::Kernel2<>(int)", {}) == "cutlass::Kernel2"  # a launcher that names no kernel
    assert kind_of("void other::Kernel2<cutlass_80_simt_sgemm_64x64_8x5_tn_align1>(int)", {}) == "other::Kernel2"
    assert kind_of("std::enable_if<true, void>::type cutlass::Kernel<cutlass_80_simt_sgemm_64x64_8x5_tn_align1>(int)",
                   {}) == "cutlass_simt_sgemm"  # the launcher's argument, not its return type's
    assert kind_of("ampere_128x64_nn", {}) == "ampere_nn"  # no operation word: the numbering rule
    assert kind_of("winograd_fprop_4x4_cudnn", {}) == "cudnn winograd_fprop"  # the library named by the last word alone


def test_a_gpu_trace_sums_each_kind_of_kernel_over_the_inferences() -> None:
    """Two traced inferences, each with three Triton kernels of one kind (two differently numbered),
    two cuDNN convolutions of two tile shapes and an ATen fill: each kind's kernels, calls and time
    per inference, the costliest first; every kernel in one kind."""
    names = list(CUDA_KINDS)
    fill, conv_a, conv_b, add_4, add_10 = names[1], names[6], names[7], names[9], names[10]
    events = []
    for i in range(2):
        t = i * 1000.0
        events += [{"cat": "kernel", "name": name, "ts": t + 10 * k, "dur": dur}
                   for k, (name, dur) in enumerate([(fill, 1.0), (conv_a, 30.0), (add_4, 4.0), (conv_b, 50.0),
                                                    (add_10, 5.0), (add_4, 4.0)])]
        events.append({"cat": "cpu_op", "name": "aten::conv2d", "ts": t, "dur": 200.0})
    figures = cuda_kernel_figures(events, iters=2)
    assert figures["by_kind"] == [
        {"kind": "cudnn xmma_fprop_implicit_gemm", "kernels": 2, "calls_per_inference": 2, "ns_per_inference": 80e3},
        {"kind": "triton_poi_fused_add_convolution_relu", "kernels": 2, "calls_per_inference": 3, "ns_per_inference": 13e3},
        {"kind": "at::native::vectorized_elementwise_kernel", "kernels": 1, "calls_per_inference": 1,
         "ns_per_inference": 1e3},
    ]
    assert sum(k["calls_per_inference"] for k in figures["by_kind"]) == figures["kernels_per_inference"] == 6
    assert figures["kind_method"].startswith("a C++ kernel's function")
    assert Kernels.model_validate({"kernel_count_method": "x", **figures}).by_kind[1].kernels == 2
