"""Reading Inductor's generated wrapper: the kernels of one inference, in order, with their ops."""

from __future__ import annotations

import pytest

from backends.inductor_code import (
    LAYOUT_COPY,
    PART_OF_TENSOR_OP,
    branch_note,
    generated_kinds,
    kernel_calls,
    ops_from_kernel_name,
    ops_run,
    placed_back,
    placed_kernel_calls,
    region_calls,
    subgraph_kernels,
)
from backends.inductor_kernel_body import computes, steps
from harness.fusion import KernelGroup, is_tensor_op, kernel_mapping
from harness.fusion.ops import classify

VOCAB = {"_native_batch_norm_legit_no_training", "add", "relu", "max_pool2d_with_indices", "mean", "addmm", "view",
         "convolution", "clone"}

# Kernel sources as Inductor writes them, cut to the statements that matter.
CPP_LAYOUT_COPY = """
extern "C" void kernel(const float* in_ptr0, float* out_ptr0)
{
    for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(16L); x1+=static_cast<int64_t>(8L))
    {
        alignas(std::max(std::size_t(8), alignof(float))) float tmp0[8*8];
        transpose_mxn<float,8,8,false>(in_ptr0 + static_cast<int64_t>(x1), static_cast<int64_t>(16L), tmp0, 8);
        auto tmp1 = at::vec::Vectorized<float>::loadu(tmp0 + static_cast<int64_t>(8L*x1), static_cast<int64_t>(8));
        tmp1.store(out_ptr0 + static_cast<int64_t>(x1));
        auto tmp2 = in_ptr0[static_cast<int64_t>(x1)];
        out_ptr0[static_cast<int64_t>(x1)] = tmp2;
    }
}
"""
CPP_BN_RELU = """
extern "C" void kernel(float* in_out_ptr0, const float* in_ptr0, const float* in_ptr1)
{
    for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(64L); x0+=static_cast<int64_t>(8L))
    {
        auto tmp0 = at::vec::Vectorized<float>::loadu(in_out_ptr0 + static_cast<int64_t>(x0), static_cast<int64_t>(8));
        auto tmp1 = at::vec::Vectorized<float>::loadu(in_ptr0 + static_cast<int64_t>(x0), static_cast<int64_t>(8));
        auto tmp2 = tmp0 - tmp1;
        auto tmp3 = at::vec::clamp_min(tmp2, decltype(tmp2)(0));
        tmp3.store(in_out_ptr0 + static_cast<int64_t>(x0));
    }
}
"""
TRITON_BIAS_RELU = """
@triton.jit
def triton_poi_fused_convolution_relu_1(in_out_ptr0, in_ptr0, xnumel, XBLOCK : tl.constexpr):
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = xindex < xnumel
    x0 = xindex % 64
    tmp0 = tl.load(in_out_ptr0 + (xindex), xmask)
    tmp1 = tl.load(in_ptr0 + (x0), xmask, eviction_policy='evict_last')
    tmp2 = tmp0 + tmp1
    tmp3 = tl.full([1], 0, tl.int32)
    tmp4 = triton_helpers.maximum(tmp3, tmp2)
    tl.store(in_out_ptr0 + (xindex), tmp4, xmask)
"""
TRITON_COPY = """
@triton.jit
def triton_poi_fused_clone_convolution_2(in_ptr0, out_ptr0, ynumel, xnumel, YBLOCK : tl.constexpr, XBLOCK : tl.constexpr):
    y0 = yindex % 64
    tmp0 = tl.load(in_ptr0 + (y0 + 64*x2), xmask & ymask, eviction_policy='evict_last')
    tl.store(out_ptr0 + (x2 + 49*y3), tmp0, xmask & ymask)
"""

# A concatenation along channels: masks from index arithmetic, masked loads, a choice between them.
TRITON_CAT = """
    x1 = ((xindex // 64) % 96)
    tmp0 = x1
    tmp1 = tl.full([1], 0, tl.int64)
    tmp2 = tmp0 >= tmp1
    tmp3 = tl.full([1], 64, tl.int64)
    tmp4 = tmp0 < tmp3
    tmp5 = tl.load(in_ptr0 + (x0 + 64*x1), tmp4 & xmask, other=0.0)
    tmp6 = tmp0 >= tmp3
    tmp9 = tl.load(in_ptr1 + (x0 + 64*((-64) + x1)), tmp6 & xmask, other=0.0)
    tmp10 = tl.where(tmp4, tmp5, tmp9)
    tl.store(out_ptr0 + (x2), tmp10, xmask)
"""
# A zero padding in C++: a masked-load lambda and a ternary.
CPP_PAD = """
            auto tmp0 = c10::convert<int64_t>((-1L) + x1);
            auto tmp1 = static_cast<int64_t>(0);
            auto tmp2 = tmp0 >= tmp1;
            auto tmp3 = [&]
            {
                auto tmp4 = in_ptr0[static_cast<int64_t>((-1L) + x1)];
                return tmp4;
            }
            ;
            auto tmp5 = tmp2 ? tmp3() : static_cast<decltype(tmp3())>(0.0);
            out_ptr0[static_cast<int64_t>(x1)] = tmp5;
"""

WRAPPER = f'''
cpp_fused_relu_0 = async_compile.cpp_pybinding(['const float*', 'float*'], r"""{CPP_LAYOUT_COPY}""")
cpp_fused_4 = async_compile.cpp_pybinding(['float*'], r"""{CPP_LAYOUT_COPY}""")
triton_poi_fused_convolution_relu_1 = async_compile.triton('triton_poi_fused_convolution_relu_1', """{TRITON_BIAS_RELU}""", device_str='cuda')
triton_poi_fused_clone_convolution_2 = async_compile.triton('triton_poi_fused_clone_convolution_2', """{TRITON_COPY}""", device_str='cuda')

class Runner:
    def call(self, args):
        arg0_1, = args
        args.clear()
        assert_size_stride(arg0_1, (1, 3, 8, 8), (192, 64, 8, 1), 'input')
        buf0 = empty_strided_cpu((1, 3, 8, 8), (192, 1, 24, 3), torch.float32)
        cpp_fused_relu_0(arg0_1, buf0)
        buf1 = torch.ops.mkldnn._convolution_pointwise.default(buf0, _frozen_param1, None, [1, 1], [1, 1], [1, 1], 1, 'relu', [None], '')
        torch.ops.mkldnn._convolution_pointwise_.binary(buf1, buf0, _frozen_param2, None, [0, 0], [1, 1], [1, 1], 1, 'add', 1.0, 'relu', [None], '')
        buf2 = extern_kernels.convolution(buf1, arg0_1, stride=(1, 1), padding=(0, 0), dilation=(1, 1), transposed=False, output_padding=(0, 0), groups=1, bias=None)
        with torch.cuda._DeviceGuard(0):
            triton_poi_fused__native_batch_norm_legit_no_training_add_relu_3.run(buf2, buf0, 64, stream=stream0)
            triton_poi_fused_convolution_relu_1.run(buf2, arg0_1, 64, stream=stream0)
            triton_poi_fused_clone_convolution_2.run(buf2, buf0, 64, 49, stream=stream0)
        cpp_fused_4(buf2)
        del buf0
        return (buf2, )
'''


def test_kernels_in_order_with_ops() -> None:
    kernels = kernel_calls(WRAPPER, VOCAB)
    assert [k.kernel for k in kernels] == [
        "cpp_fused_relu_0",
        "torch.ops.mkldnn._convolution_pointwise",
        "torch.ops.mkldnn._convolution_pointwise_",
        "extern_kernels.convolution",
        "triton_poi_fused__native_batch_norm_legit_no_training_add_relu_3",
        "triton_poi_fused_convolution_relu_1",
        "triton_poi_fused_clone_convolution_2",
        "cpp_fused_4",
    ]
    assert kernels[1].ops == ("mkldnn._convolution_pointwise", "aten.relu")
    assert kernels[1].fusion_class == "tensor+element"
    assert kernels[2].ops == ("mkldnn._convolution_pointwise_", "aten.add", "aten.relu")
    assert kernels[3].fusion_class == "single"
    # no source in the wrapper: read from the name alone
    assert kernels[4].ops == ("aten._native_batch_norm_legit_no_training", "aten.add", "aten.relu")
    assert kernels[4].fusion_class == "element"


def test_a_kernel_that_only_moves_data_is_a_copy_whatever_its_name_lists() -> None:
    kernels = kernel_calls(WRAPPER, VOCAB)
    # named after the relu whose input it reorders; its source loads, transposes and stores
    assert kernels[0].ops == (LAYOUT_COPY,)
    assert kernels[0].fusion_class == "single" and kernel_mapping(kernels[0].ops) == "shuffle"
    assert kernels[7].ops == (LAYOUT_COPY,)  # named without operators
    # a copy that the model asked for (a clone) stays that operator; the convolution is not in it
    assert kernels[6].ops == ("aten.clone",)
    assert kernels[6].fusion_class == "single"


def test_a_convolution_named_in_a_generated_kernel_is_its_bias_or_layout_not_the_convolution() -> None:
    kernels = kernel_calls(WRAPPER, VOCAB)
    bias_relu = kernels[5]  # the convolution itself is the extern call; this kernel adds its bias, then relu
    assert bias_relu.ops == ("aten.convolution" + PART_OF_TENSOR_OP, "aten.relu")
    assert bias_relu.fusion_class == "element"
    assert not is_tensor_op(bias_relu.ops[0])
    # a template computes the convolution itself
    template = "triton_tem_fused_convolution_relu_0"
    assert ops_run(template, ("aten.convolution", "aten.relu"), TRITON_BIAS_RELU) == ("aten.convolution", "aten.relu")
    assert ops_run("cpp_fused_addmm_relu_0", ("aten.addmm", "aten.relu"), CPP_BN_RELU + "cpp_micro_gemm<...>(A, B, C);") \
        == ("aten.addmm", "aten.relu")
    assert ops_run("cpp_fused__native_batch_norm_legit_no_training_convolution_relu_1",
                   ("aten._native_batch_norm_legit_no_training", "aten.convolution", "aten.relu"), CPP_BN_RELU) \
        == ("aten._native_batch_norm_legit_no_training", "aten.convolution" + PART_OF_TENSOR_OP, "aten.relu")


def test_what_counts_as_computing_in_a_kernels_source() -> None:
    assert computes(CPP_BN_RELU) and computes(TRITON_BIAS_RELU)
    assert not computes(CPP_LAYOUT_COPY) and not computes(TRITON_COPY)
    load = "auto tmp0 = at::vec::Vectorized<float>::loadu(in_ptr0 + x0, 8);\n"
    assert computes(load + "tmp_acc0_vec = tmp_acc0_vec + tmp0;")  # a reduction
    assert computes("tmp0 = tl.load(in_ptr0 + (x0), xmask)\ntmp1 = tmp0.to(tl.float16)")  # a cast changes the data
    assert computes("tmp0 = tl.load(in_ptr0 + (x0))\ntmp1 = tl.load(in_ptr1 + (x0))\ntmp2 = tmp0 == tmp1")
    # an alias, a constant, index arithmetic: no data is computed
    assert not computes("tmp0 = tl.load(in_ptr0 + (x0))\ntmp1 = tmp0\ntmp2 = tl.full([1], 0, tl.int32)\nx0 = xindex % 64")
    assert not computes(TRITON_CAT) and not computes(CPP_PAD)


# The classifier's bias, added after the library's matrix multiply (resnet18's and mobilenet_v3_small's
# last kernels): one step, vectorised, then the same statement for the loop's tail.
CPP_BIAS_ONLY = """
extern "C" void kernel(float* in_out_ptr0, const float* in_ptr0)
{
    for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(992L); x1+=static_cast<int64_t>(8L))
    {
        auto tmp0 = at::vec::Vectorized<float>::loadu(in_out_ptr0 + static_cast<int64_t>(x1), static_cast<int64_t>(8));
        auto tmp1 = at::vec::Vectorized<float>::loadu(in_ptr0 + static_cast<int64_t>(x1), static_cast<int64_t>(8));
        auto tmp2 = tmp0 + tmp1;
        tmp2.store(in_out_ptr0 + static_cast<int64_t>(x1));
    }
    for(int64_t x1=static_cast<int64_t>(992L); x1<static_cast<int64_t>(1000L); x1+=static_cast<int64_t>(1L))
    {
        auto tmp0 = in_out_ptr0[static_cast<int64_t>(x1)];
        auto tmp1 = in_ptr0[static_cast<int64_t>(x1)];
        auto tmp2 = tmp0 + tmp1;
        in_out_ptr0[static_cast<int64_t>(x1)] = tmp2;
    }
}
"""


def test_a_kernel_of_one_step_beside_a_tensor_operators_bias_ran_the_bias_alone() -> None:
    """Named after the mean and the hardswish whose results reach the classifier through the library
    call, the kernel only adds its bias: it was counted as a fusion, one too many for resnet18 (21
    where its code fuses 20) and for mobilenet_v3_small (54 where it fuses 53)."""
    assert steps(CPP_BIAS_ONLY) == {"tmp0 + tmp1 on in_out_ptr0,in_ptr0"}  # the loop and its tail: one step
    named = ("aten.addmm", "aten.hardswish", "aten.mean", "aten.view")
    ran = ops_run("cpp_fused_addmm_hardswish_mean_view_16", named, CPP_BIAS_ONLY)
    assert ran == ("aten.addmm" + PART_OF_TENSOR_OP, "aten.view")
    assert classify(ran) == "single"
    # two steps (the bias, then relu): the name stands
    assert ops_run("cpp_fused_convolution_relu_1", ("aten.convolution", "aten.relu"), CPP_BN_RELU) \
        == ("aten.convolution" + PART_OF_TENSOR_OP, "aten.relu")
    # one step with no tensor operator named: which operator it was is not known, the name stands
    assert ops_run("cpp_fused_add_mean_4", ("aten.add", "aten.mean"), CPP_BIAS_ONLY) == ("aten.add", "aten.mean")
    # the same addition on three pairs of buffers (BERT's query, key and value biases in one kernel):
    # three steps, a fusion, not one bias
    three = "\n".join(f"auto tmp0 = in_out_ptr{i}[x0];\nauto tmp1 = in_ptr{i}[x1];\nauto tmp2 = tmp0 + tmp1;" for i in range(3))
    assert len(steps(three)) == 3
    named = ("aten._scaled_dot_product_flash_attention_for_cpu", "aten.addmm", "aten.transpose", "aten.view")
    assert classify(ops_run("cpp_fused__scaled_dot_product_flash_attention_for_cpu_addmm_transpose_view_1", named,
                            three)) != "single"


def test_a_kernel_that_adds_three_linears_biases_runs_three_biases_not_the_attentions() -> None:
    """BERT's query, key and value linears are three operators, whose biases one kernel adds (three steps);
    its name lists the attention it feeds and `addmm` once, and it was said to run the attention's bias
    and one linear's, where an attention has none. vit_b_16's kernel of the same shape adds one linear's
    bias (its in-projection, three slices of one bias on one pair of buffers: one step) and is one operator."""
    three = "\n".join(f"auto tmp0 = in_out_ptr{i}[x0];\nauto tmp1 = in_ptr{i}[x1];\nauto tmp2 = tmp0 + tmp1;" for i in range(3))
    named = ("aten._scaled_dot_product_flash_attention_for_cpu", "aten.addmm", "aten.transpose", "aten.view")
    ran = ops_run("cpp_fused__scaled_dot_product_flash_attention_for_cpu_addmm_transpose_view_1", named, three)
    assert ran == ("aten.addmm" + PART_OF_TENSOR_OP,) * 3 + ("aten.transpose", "aten.view")
    assert classify(ran) == "element"
    vit = ("aten._scaled_dot_product_flash_attention_for_cpu", "aten.addmm", "aten.permute", "aten.select", "aten.view")
    assert ops_run("cpp_fused__scaled_dot_product_flash_attention_for_cpu_addmm_permute_select_view_0", vit,
                   CPP_QKV_BIAS) == ("aten.addmm" + PART_OF_TENSOR_OP, "aten.permute", "aten.select", "aten.view")
    # a bias and another step (a relu after it): the name stands
    assert ops_run("cpp_fused_convolution_relu_1", ("aten.convolution", "aten.relu"), CPP_BN_RELU) \
        == ("aten.convolution" + PART_OF_TENSOR_OP, "aten.relu")


# mobilenet_v3_small's kernel after MKL's first linear of the classifier (Inductor's CPU code at batch 1,
# its loop's statements): the bias, then the hardswish; named after the mean before the linear too.
CPP_BIAS_HARDSWISH = "\n".join((
    "auto tmp0 = at::vec::Vectorized<float>::loadu(in_out_ptr0 + static_cast<int64_t>(x0), static_cast<int64_t>(16));",
    "auto tmp1 = at::vec::Vectorized<float>::loadu(in_ptr0 + static_cast<int64_t>(x0), static_cast<int64_t>(16));",
    "auto tmp2 = tmp0 + tmp1;", "auto tmp3 = static_cast<float>(3.0);", "auto tmp4 = at::vec::Vectorized<float>(tmp3);",
    "auto tmp5 = tmp2 + tmp4;", "auto tmp6 = at::vec::maximum(tmp5, at::vec::Vectorized<float>(static_cast<float>(0.0)));",
    "auto tmp7 = static_cast<float>(6.0);", "auto tmp8 = at::vec::Vectorized<float>(tmp7);",
    "auto tmp9 = at::vec::minimum(tmp6, tmp8);", "auto tmp10 = tmp2 * tmp9;", "auto tmp11 = tmp10 / tmp8;",
    "tmp11.store(in_out_ptr0 + static_cast<int64_t>(x0));"))


def test_a_kernel_that_adds_a_library_calls_bias_is_of_the_kind_of_what_it_runs() -> None:
    """mobilenet_v3_small on Inductor (CPU, batch 1): the kernels after MKL's linears,
    `cpp_fused_addmm_hardswish_mean_view_15` (the bias and the hardswish) and `_16` (the bias), and
    fusion off's `cpp_fused_addmm_164`, were of kinds named after `addmm`, whose time the anchor
    rule counted as matrix multiply beside `mkl::_mkl_linear`, which runs it; their fusion report
    mapped the bias `unknown`. Named after what they run, the bias as `bias`, they are element-wise;
    a template, which runs the matrix multiply itself, keeps the kind its name gives."""
    from harness.reporting.op_classes import ELEMENTWISE, MATRIX_MULTIPLY, class_of

    named = ("aten.addmm", "aten.hardswish", "aten.mean", "aten.view")
    linear = KernelGroup("torch.ops.mkl._mkl_linear", ("mkl._mkl_linear",))
    groups = [linear, KernelGroup("cpp_fused_addmm_hardswish_mean_view_15",
                                  ops_run("cpp_fused_addmm_hardswish_mean_view_15", named, CPP_BIAS_HARDSWISH)),
              linear, KernelGroup("cpp_fused_addmm_hardswish_mean_view_16",
                                  ops_run("cpp_fused_addmm_hardswish_mean_view_16", named, CPP_BIAS_ONLY)),
              KernelGroup("cpp_fused_addmm_164", ops_run("cpp_fused_addmm_164", ("aten.addmm",), CPP_BIAS_ONLY)),
              KernelGroup("cpp_fused_addmm_0", ops_run("cpp_fused_addmm_0", ("aten.addmm",), "auto tmp0 = micro_gemm;"))]
    kinds = generated_kinds(groups)
    assert kinds == {"cpp_fused_addmm_hardswish_mean_view_15": "cpp_fused_bias_hardswish_mean",
                     "cpp_fused_addmm_hardswish_mean_view_16": "cpp_fused_bias", "cpp_fused_addmm_164": "cpp_fused_bias"}
    assert {class_of(kind) for kind in kinds.values()} == {ELEMENTWISE}
    assert class_of("cpp_fused_addmm") == MATRIX_MULTIPLY  # the template's kind, from its name
    assert [kernel_mapping(group.ops) for group in groups if group.kernel in kinds] == [
        "many-to-many+one-to-one", "one-to-one", "one-to-one"]  # the mean its name lists, many-to-many, stays


def test_a_concatenation_that_only_copies_is_the_concatenation() -> None:
    named = ("aten.cat", "aten.convolution")
    assert ops_run("triton_poi_fused_cat_convolution_5", named, TRITON_CAT) == ("aten.cat",)
    assert ops_run("triton_poi_fused_cat_convolution_relu_5", (*named, "aten.relu"), TRITON_CAT + TRITON_BIAS_RELU) \
        == ("aten.cat", "aten.convolution" + PART_OF_TENSOR_OP, "aten.relu")


def test_kernel_name_tokens() -> None:
    assert ops_from_kernel_name("cpp_fused_addmm_mean_view_3", VOCAB) == ("aten.addmm", "aten.mean", "aten.view")
    assert ops_from_kernel_name("triton_per_fused_mean_relu_12", VOCAB) == ("aten.mean", "aten.relu")
    assert ops_from_kernel_name("cpp_fused_unknownop_add_1", VOCAB) == ("aten.unknownop", "aten.add")


def test_no_call_function() -> None:
    with pytest.raises(ValueError, match="no `call` function"):
        kernel_calls("x = 1\n", VOCAB)


def test_a_kernel_that_only_copies_is_of_the_kind_of_what_it_copies() -> None:
    """pattern_conv_bn_relu's fusion-on cell copies its input into channels-last in `cpp_fused_relu_0`
    and its output back in `cpp_fused_1`: of the kinds `cpp_fused_relu` and `cpp_fused`, the first
    set against fusion off's relu kernel (`cpp_fused_relu +143 us (1 call on, 1 call off)`) and counted
    as element-wise time against eager, the second as `other`. Named after what they copy, both
    are data movement; a kernel that computes keeps the kind its name gives."""
    from harness.reporting.op_classes import DATA_MOVEMENT, class_of

    groups = [KernelGroup("cpp_fused_relu_0", (LAYOUT_COPY,)),
              KernelGroup("torch.ops.mkldnn._convolution_pointwise", ("mkldnn._convolution_pointwise", "aten.relu")),
              KernelGroup("cpp_fused_1", (LAYOUT_COPY,)), KernelGroup("cpp_fused_cat_relu_2", ("aten.cat", "aten.view")),
              KernelGroup("cpp_fused_relu_3", ("aten.relu",)), KernelGroup("extern_kernels.mm", ("aten.mm",))]
    kinds = generated_kinds(groups)
    assert kinds == {"cpp_fused_relu_0": "cpp_fused_layout_copy", "cpp_fused_1": "cpp_fused_layout_copy",
                     "cpp_fused_cat_relu_2": "cpp_fused_cat"}
    assert {class_of(kind) for kind in kinds.values()} == {DATA_MOVEMENT}


# A linear's bias added to its output and the output split into an attention's query, key and value
# (the query's and key's loops; the value's is alike), as Inductor wrote it for a 4-head attention
# block on torch 2.14.
CPP_QKV_BIAS = """
extern "C" void kernel(const float* in_ptr0, const float* in_ptr1, float* out_ptr0, float* out_ptr1, float* out_ptr2)
{
    for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(64L); x0+=static_cast<int64_t>(1L))
    {
        auto tmp0 = at::vec::Vectorized<float>::loadu(in_ptr0 + static_cast<int64_t>(x1 + 96L*x0), static_cast<int64_t>(16));
        auto tmp1 = at::vec::Vectorized<float>::loadu(in_ptr1 + static_cast<int64_t>(x1), static_cast<int64_t>(16));
        auto tmp2 = tmp0 + tmp1;
        tmp2.store(out_ptr0 + static_cast<int64_t>(x1 + 32L*x0));
    }
    for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(64L); x0+=static_cast<int64_t>(1L))
    {
        auto tmp0 = at::vec::Vectorized<float>::loadu(in_ptr0 + static_cast<int64_t>(32L + x1 + 96L*x0), static_cast<int64_t>(16));
        auto tmp1 = at::vec::Vectorized<float>::loadu(in_ptr1 + static_cast<int64_t>(32L + x1), static_cast<int64_t>(16));
        auto tmp2 = tmp0 + tmp1;
        tmp2.store(out_ptr1 + static_cast<int64_t>(x1 + 32L*x0));
    }
}
"""


def test_a_kernel_of_one_step_adds_the_bias_of_the_operator_that_takes_one_not_the_attentions() -> None:
    """Inductor names the kernel after the attention it feeds and the linear whose bias it adds, in
    that order: it was said to run `aten._scaled_dot_product_flash_attention_for_cpu (bias or layout)`,
    an attention's bias, where an attention has none and the attention ran in its own library call."""
    assert len(steps(CPP_QKV_BIAS)) == 1
    named = ("aten._scaled_dot_product_flash_attention_for_cpu", "aten.addmm", "aten.permute", "aten.select",
             "aten.view")
    kernel = "cpp_fused__scaled_dot_product_flash_attention_for_cpu_addmm_permute_select_view_0"
    ran = ops_run(kernel, named, CPP_QKV_BIAS)
    assert ran == ("aten.addmm" + PART_OF_TENSOR_OP, "aten.permute", "aten.select", "aten.view")
    assert classify(ran) == "single"
    assert generated_kinds([KernelGroup(kernel, ran)]) == {kernel: "cpp_fused_bias"}
    # where no operator named takes a bias, the first named keeps the part, as before
    assert ops_run("cpp_fused_bmm_mm_0", ("aten.bmm", "aten.mm"), CPP_BIAS_ONLY) == ("aten.bmm" + PART_OF_TENSOR_OP,)


# The wrapper Inductor generated for a linear, relu and mul in one torch.cond branch and a sigmoid in the
# other (torch 2.14, CPU), its kernels' sources cut short.
COND_WRAPPER = """
cpp_fused_gt_sum_0 = async_compile.cpp_pybinding(['const float*', 'float*', 'bool*'], r'''
auto tmp0 = in_ptr0[x0]; tmp_acc0 = tmp_acc0 + tmp0; auto tmp1 = tmp_acc0 > 0;''')
cpp_fused_gt_sigmoid_sub_1 = async_compile.cpp_pybinding(['const float*', 'float*'], r'''
auto tmp0 = in_ptr0[x0]; auto tmp2 = tmp0 - tmp1; auto tmp3 = sigmoid(tmp2);''')

def false_graph_0(args):
    false_graph_0_arg0_1, false_graph_0_arg1_1, false_graph_0_arg2_1 = args
    false_graph_0_buf0 = empty_strided_cpu((4, 16), (16, 1), torch.float32)
    cpp_fused_gt_sigmoid_sub_1(false_graph_0_arg0_1, false_graph_0_buf0)
    return (false_graph_0_buf0, )

cpp_fused_add_gt_mul_relu_2 = async_compile.cpp_pybinding(['float*'], r'''
auto tmp0 = in_out_ptr0[x0]; auto tmp2 = tmp0 + tmp1; auto tmp3 = max(tmp2, 0); auto tmp5 = tmp3 * tmp4;''')

def true_graph_0(args):
    true_graph_0_arg0_1, true_graph_0_arg1_1, true_graph_0_arg2_1 = args
    true_graph_0_buf0 = empty_strided_cpu((4, 16), (16, 1), torch.float32)
    extern_kernels.addmm(true_graph_0_arg1_1, true_graph_0_arg0_1, true_graph_0_arg2_1, out=true_graph_0_buf0)
    cpp_fused_add_gt_mul_relu_2(true_graph_0_buf0)
    return (true_graph_0_buf0, )

class Runner:
    def call(self, args):
        arg0_1, arg1_1, arg2_1 = args
        cpp_fused_gt_sum_0(arg0_1, buf0, buf1)
        buf2_selector = int(buf1.item())
        if buf2_selector == 0:
            false_graph_0_args = [arg0_1, arg2_1, arg1_1]
            buf2 = false_graph_0(false_graph_0_args)
        else:
            true_graph_0_args = [arg0_1, arg2_1, arg1_1]
            buf2 = true_graph_0(true_graph_0_args)
        return (buf2[0], )
"""


def test_a_torch_cond_models_branches_are_said_with_their_kernels_not_dropped_unsaid() -> None:
    """The report lists one inference's kernels in order, and an inference runs one branch: the branches'
    kernels are not listed, and were dropped without a word (the note spoke of a branch only where Inductor
    made an attention call in it)."""
    aten = ("gt", "sum", "sigmoid", "sub", "add", "mul", "relu", "addmm")
    assert [k.kernel for k in kernel_calls(COND_WRAPPER, aten)] == ["cpp_fused_gt_sum_0"]
    branches, others = subgraph_kernels(COND_WRAPPER, aten)
    assert (branches, others) == ({"false_graph_0": 1, "true_graph_0": 2}, {})
    assert branch_note(branches).startswith("2 torch.cond branch(es) whose kernels are not listed (false_graph_0: 1 "
                                            "kernel(s), true_graph_0: 2 kernel(s))")
    assert branch_note({}) == ""


# What Inductor generated (torch 2.14, CPU) for a `torch.compiler.nested_compile_region` called twice
# (`relu(x @ w) * 2 + 1`) and a sigmoid after, and for a `while_loop` of a sine and a cosine after: each
# subgraph a function `call` calls outside any `if`'s branch, its kernels cut short.
REGION_WRAPPER = """
cpp_fused_add_mul_relu_0 = async_compile.cpp_pybinding(['float*'], r'''
auto tmp0 = in_out_ptr0[x0]; auto tmp1 = max(tmp0, 0); auto tmp3 = tmp1 * tmp2; auto tmp5 = tmp3 + tmp4;''')

def repeated_subgraph0(args):
    repeated_subgraph0_arg0_1, repeated_subgraph0_arg1_1 = args
    repeated_subgraph0_buf0 = empty_strided_cpu((4, 16), (16, 1), torch.float32)
    extern_kernels.mm(repeated_subgraph0_arg0_1, repeated_subgraph0_arg1_1, out=repeated_subgraph0_buf0)
    cpp_fused_add_mul_relu_0(repeated_subgraph0_buf0)
    return (repeated_subgraph0_buf0, )

cpp_fused_sigmoid_1 = async_compile.cpp_pybinding(['float*'], r'''
auto tmp0 = in_out_ptr0[x0]; auto tmp1 = sigmoid(tmp0);''')

class Runner:
    def call(self, args):
        arg0_1, arg1_1 = args
        repeated_subgraph0_args = [arg1_1, arg0_1]
        buf0 = repeated_subgraph0(repeated_subgraph0_args)
        buf1 = buf0[0]
        repeated_subgraph0_args = [buf1, arg0_1]
        buf2 = repeated_subgraph0(repeated_subgraph0_args)
        buf4 = buf2[0]
        cpp_fused_sigmoid_1(buf4)
        return (buf4,)
"""
WHILE_WRAPPER = """
cpp_fused_lift_fresh_0 = async_compile.cpp_pybinding(['int64_t*'], r'''
out_ptr0[0] = 0;''')
cpp_fused_lt_1 = async_compile.cpp_pybinding(['const int64_t*', 'bool*'], r'''
auto tmp0 = in_ptr0[0]; auto tmp2 = tmp0 < tmp1;''')

def while_loop_cond_graph_0(args):
    while_loop_cond_graph_0_arg0_1, while_loop_cond_graph_0_arg1_1 = args
    while_loop_cond_graph_0_buf0 = empty_strided_cpu((), (), torch.bool)
    cpp_fused_lt_1(while_loop_cond_graph_0_arg0_1, while_loop_cond_graph_0_buf0)
    return (while_loop_cond_graph_0_buf0, )

cpp_fused_add_mul_sin_2 = async_compile.cpp_pybinding(['const int64_t*', 'const float*', 'int64_t*', 'float*'], r'''
auto tmp0 = in_ptr1[x0]; auto tmp1 = std::sin(tmp0); auto tmp3 = tmp1 * tmp2;''')

def while_loop_body_graph_0(args):
    while_loop_body_graph_0_arg0_1, while_loop_body_graph_0_arg1_1 = args
    while_loop_body_graph_0_buf0 = empty_strided_cpu((), (), torch.int64)
    while_loop_body_graph_0_buf1 = empty_strided_cpu((4, 16), (16, 1), torch.float32)
    cpp_fused_add_mul_sin_2(while_loop_body_graph_0_arg0_1, while_loop_body_graph_0_arg1_1, while_loop_body_graph_0_buf0,
                            while_loop_body_graph_0_buf1)
    return (while_loop_body_graph_0_buf0, while_loop_body_graph_0_buf1, )

cpp_fused_cos_3 = async_compile.cpp_pybinding(['const float*', 'float*'], r'''
auto tmp0 = in_ptr0[x0]; auto tmp1 = std::cos(tmp0);''')

class Runner:
    def call(self, args):
        arg0_1, = args
        buf0 = empty_strided_cpu((), (), torch.int64)
        cpp_fused_lift_fresh_0(buf0)
        buf1 = [None] * 2
        buf1[0] = buf0
        buf1[1] = arg0_1
        while_loop_cond_graph_0_args = [buf1[0], buf1[1]]
        buf1_cond_result, = while_loop_cond_graph_0(while_loop_cond_graph_0_args)
        should_loop = buf1_cond_result
        if not should_loop:
            buf1[0] = buf0.clone()
            buf1[1] = arg0_1.clone()
        while should_loop:
            while_loop_body_graph_0_args = [buf1[0], buf1[1]]
            buf1[0], buf1[1] = while_loop_body_graph_0(while_loop_body_graph_0_args)
            while_loop_cond_graph_0_args = [buf1[0], buf1[1]]
            buf1_cond_result, = while_loop_cond_graph_0(while_loop_cond_graph_0_args)
            should_loop = buf1_cond_result
        buf3 = buf1[1]
        buf4 = empty_strided_cpu((4, 16), (16, 1), torch.float32)
        cpp_fused_cos_3(buf3, buf4)
        return (buf4,)
"""


# What Inductor generated (torch 2.14, CPU) for a region that calls a region, `outer(x, w) = inner(x @ w) * 3`
# with `inner(x) = cos(x) + 1`, called twice, then `torch.cond(y.sum() > 0, inner(y) * 2, sin(y))`: the inner
# region a function of its own in each function that calls it, the kernels cut short.
NESTED_WRAPPER = """
cpp_fused_gt_sum_2 = async_compile.cpp_pybinding(['const float*', 'float*', 'bool*'], r'''
auto tmp0 = in_ptr0[x0]; tmp_acc0 = tmp_acc0 + tmp0; auto tmp2 = tmp1 > tmp3;''')
cpp_fused_mul_1 = async_compile.cpp_pybinding(['float*'], r'''
auto tmp0 = in_out_ptr0[x0]; auto tmp3 = tmp0 * tmp2;''')
cpp_fused_add_cos_0 = async_compile.cpp_pybinding(['const float*', 'float*'], r'''
auto tmp0 = in_ptr0[x0]; auto tmp1 = tmp0.cos(); auto tmp4 = tmp1 + tmp3;''')

def repeated_subgraph0_repeated_subgraph0(args):
    repeated_subgraph0_repeated_subgraph0_arg0_1, = args
    repeated_subgraph0_repeated_subgraph0_buf0 = empty_strided_cpu((4, 16), (16, 1), torch.float32)
    cpp_fused_add_cos_0(repeated_subgraph0_repeated_subgraph0_arg0_1, repeated_subgraph0_repeated_subgraph0_buf0)
    return (repeated_subgraph0_repeated_subgraph0_buf0, )

def repeated_subgraph0(args):
    repeated_subgraph0_arg0_1, repeated_subgraph0_arg1_1 = args
    repeated_subgraph0_buf0 = empty_strided_cpu((4, 16), (16, 1), torch.float32)
    extern_kernels.mm(repeated_subgraph0_arg0_1, repeated_subgraph0_arg1_1, out=repeated_subgraph0_buf0)
    repeated_subgraph0_buf1 = [None] * 1
    repeated_subgraph0_repeated_subgraph0_args = [repeated_subgraph0_buf0,]
    repeated_subgraph0_buf1 = repeated_subgraph0_repeated_subgraph0(repeated_subgraph0_repeated_subgraph0_args)
    repeated_subgraph0_buf3 = repeated_subgraph0_buf1[0]
    cpp_fused_mul_1(repeated_subgraph0_buf3)
    return (repeated_subgraph0_buf3, )

cpp_fused_gt_sin_3 = async_compile.cpp_pybinding(['const float*', 'float*'], r'''
auto tmp0 = in_ptr0[x0]; auto tmp1 = tmp0.sin();''')

def false_graph_0(args):
    false_graph_0_arg0_1, = args
    false_graph_0_buf0 = empty_strided_cpu((4, 16), (16, 1), torch.float32)
    cpp_fused_gt_sin_3(false_graph_0_arg0_1, false_graph_0_buf0)
    return (false_graph_0_buf0, )

cpp_fused_gt_mul_4 = async_compile.cpp_pybinding(['float*'], r'''
auto tmp0 = in_out_ptr0[x0]; auto tmp3 = tmp0 * tmp2;''')

def true_graph_0_repeated_subgraph0(args):
    true_graph_0_repeated_subgraph0_arg0_1, = args
    true_graph_0_repeated_subgraph0_buf0 = empty_strided_cpu((4, 16), (16, 1), torch.float32)
    cpp_fused_add_cos_0(true_graph_0_repeated_subgraph0_arg0_1, true_graph_0_repeated_subgraph0_buf0)
    return (true_graph_0_repeated_subgraph0_buf0, )

def true_graph_0(args):
    true_graph_0_arg0_1, = args
    true_graph_0_buf0 = [None] * 1
    true_graph_0_repeated_subgraph0_args = [true_graph_0_arg0_1,]
    true_graph_0_buf0 = true_graph_0_repeated_subgraph0(true_graph_0_repeated_subgraph0_args)
    true_graph_0_buf2 = true_graph_0_buf0[0]
    cpp_fused_gt_mul_4(true_graph_0_buf2)
    return (true_graph_0_buf2, )

class Runner:
    def call(self, args):
        arg0_1, arg1_1 = args
        buf0 = [None] * 1
        repeated_subgraph0_args = [arg1_1, arg0_1]
        buf0 = repeated_subgraph0(repeated_subgraph0_args)
        buf1 = buf0[0]
        buf2 = [None] * 1
        repeated_subgraph0_args = [buf1, arg0_1]
        buf2 = repeated_subgraph0(repeated_subgraph0_args)
        buf3 = buf2[0]
        buf4 = empty_strided_cpu((), (), torch.float32)
        buf5 = empty_strided_cpu((), (), torch.bool)
        cpp_fused_gt_sum_2(buf3, buf4, buf5)
        buf6_selector = int(buf5.item())
        buf6 = [None] * 1
        if buf6_selector == 0:
            false_graph_0_args = [buf3,]
            buf6 = false_graph_0(false_graph_0_args)
        else:
            true_graph_0_args = [buf3,]
            buf6 = true_graph_0(true_graph_0_args)
        buf7 = buf6[0]
        return (buf7, )
"""
REGION_ATEN = ("add", "mul", "relu", "sigmoid", "mm", "lt", "sin", "cos", "lift_fresh", "gt", "sum")


def test_a_nested_compile_regions_kernels_are_listed_at_each_call_of_it() -> None:
    """A nested_compile_region called twice runs its matrix multiply and its kernel at each call, every
    inference. The report listed the one sigmoid kernel after them, its kernels per inference 1 where 5
    ran, and named the region in its note only; now its kernels stand where each call runs them."""
    listed = kernel_calls(REGION_WRAPPER, REGION_ATEN)
    assert [(k.kernel, k.ops) for k in listed] == [
        ("extern_kernels.mm", ("aten.mm",)), ("cpp_fused_add_mul_relu_0", ("aten.add", "aten.mul", "aten.relu")),
        ("extern_kernels.mm", ("aten.mm",)), ("cpp_fused_add_mul_relu_0", ("aten.add", "aten.mul", "aten.relu")),
        ("cpp_fused_sigmoid_1", ("aten.sigmoid",))]
    assert [subgraph for _, subgraph in placed_kernel_calls(REGION_WRAPPER, REGION_ATEN)] == ["repeated_subgraph0"] * 4 + [None]
    assert subgraph_kernels(REGION_WRAPPER, REGION_ATEN) == ({}, {})
    assert region_calls(REGION_WRAPPER) == {"repeated_subgraph0": 2}
    note = branch_note({}, {}, region_calls(REGION_WRAPPER))
    assert note == ("1 nested_compile_region subgraph(s) whose kernels are listed at each call (repeated_subgraph0: 2 call(s)), "
                    "as every call runs them")


def test_a_region_in_a_region_or_in_a_branch_runs_where_its_parent_calls_it() -> None:
    """A region that calls a region is listed with the inner one's kernels at each of its calls; a region
    in a torch.cond branch is counted with the branch's kernels, which stay unlisted."""
    listed = kernel_calls(NESTED_WRAPPER, REGION_ATEN)
    assert [k.kernel for k in listed] == ["extern_kernels.mm", "cpp_fused_add_cos_0", "cpp_fused_mul_1"] * 2 + ["cpp_fused_gt_sum_2"]
    assert subgraph_kernels(NESTED_WRAPPER, REGION_ATEN) == ({"false_graph_0": 1, "true_graph_0": 2}, {})
    assert region_calls(NESTED_WRAPPER) == {"repeated_subgraph0": 2, "repeated_subgraph0_repeated_subgraph0": 2}


def test_a_subgraph_that_runs_as_the_graph_runs_is_not_said_to_be_a_torch_cond_branch() -> None:
    """A nested_compile_region's subgraph and a while_loop's condition and body are functions `call` calls
    too, and the note called them torch.cond branches, of which an inference runs one. The region is listed
    (the test above); the loop's condition and body run as many times as it turns, which its data decides:
    they are not listed, not even the condition's first call before the loop, and the note says so."""
    assert subgraph_kernels(REGION_WRAPPER, REGION_ATEN)[0] == {}
    assert [k.kernel for k in kernel_calls(WHILE_WRAPPER, REGION_ATEN)] == ["cpp_fused_lift_fresh_0", "cpp_fused_cos_3"]
    branches, others = subgraph_kernels(WHILE_WRAPPER, REGION_ATEN)
    assert (branches, others, region_calls(WHILE_WRAPPER)) == ({}, {"while_loop_body_graph_0": 1, "while_loop_cond_graph_0": 1}, {})
    note = branch_note(branches, others)
    assert "torch.cond" not in note and "runs one of them" not in note
    assert note.startswith("2 subgraph(s) whose kernels are not listed (while_loop_body_graph_0: 1 kernel(s), "
                           "while_loop_cond_graph_0: 1 kernel(s)): the graph calls them in a loop")
    both = branch_note({"true_graph_0": 2}, others, {"repeated_subgraph0": 2})
    assert both.startswith("1 nested_compile_region subgraph(s) whose kernels are listed at each call")
    assert "; 1 torch.cond branch(es) whose kernels are not listed (true_graph_0: 2 kernel(s))" in both
    assert "; 2 subgraph(s) whose kernels are not listed" in both


def test_the_graphs_own_kernels_read_again_go_back_between_the_regions() -> None:
    """The graph's own kernels, read again against its passes' records (an attention call with the
    operators it replaced), take their places back between a region's kernels, which stay as read."""
    placed = [placed_kernel_calls(REGION_WRAPPER, REGION_ATEN), [(KernelGroup("cpp_fused_relu_0", ("aten.relu",)), None)]]
    own = [KernelGroup("cpp_fused_sigmoid_1", ("aten.sigmoid", "aten.mul")), KernelGroup("cpp_fused_relu_0", ("aten.relu",))]
    kernels = placed_back(own, placed)
    assert [k.kernel for k in kernels] == ["extern_kernels.mm", "cpp_fused_add_mul_relu_0"] * 2 + ["cpp_fused_sigmoid_1",
                                                                                                    "cpp_fused_relu_0"]
    assert kernels[4].ops == ("aten.sigmoid", "aten.mul")
