"""Reading Inductor's generated wrapper: the kernels of one inference, in order, with their ops."""

from __future__ import annotations

import pytest

from backends.inductor_code import kernel_calls, ops_from_kernel_name

VOCAB = {"_native_batch_norm_legit_no_training", "add", "relu", "max_pool2d_with_indices", "mean", "addmm", "view",
         "convolution"}

WRAPPER = '''
cpp_fused_relu_0 = async_compile.cpp_pybinding(['const float*', 'float*'], r"""...""")

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
        "cpp_fused_4",
    ]
    assert kernels[1].ops == ("mkldnn._convolution_pointwise", "aten.relu")
    assert kernels[1].fusion_class == "tensor+element"
    assert kernels[2].ops == ("mkldnn._convolution_pointwise_", "aten.add", "aten.relu")
    assert kernels[3].fusion_class == "single"
    assert kernels[4].ops == ("aten._native_batch_norm_legit_no_training", "aten.add", "aten.relu")
    assert kernels[4].fusion_class == "element"
    assert kernels[5].ops == ()


def test_kernel_name_tokens() -> None:
    assert ops_from_kernel_name("cpp_fused_addmm_mean_view_3", VOCAB) == ("aten.addmm", "aten.mean", "aten.view")
    assert ops_from_kernel_name("triton_per_fused_mean_relu_12", VOCAB) == ("aten.mean", "aten.relu")
    assert ops_from_kernel_name("cpp_fused_unknownop_add_1", VOCAB) == ("aten.unknownop", "aten.add")


def test_no_call_function() -> None:
    with pytest.raises(ValueError, match="no `call` function"):
        kernel_calls("x = 1\n", VOCAB)
