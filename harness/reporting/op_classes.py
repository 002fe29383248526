"""The operator class of a kind of kernel, so that backends whose kinds are named apart can be set
side by side (harness/reporting/class_moves.py).

Each backend names its kinds its own way (harness/measure/kernel_kinds.py): eager its ATen operators
(`aten::linear`, `aten::conv2d`), ONNX Runtime its node types (`Gemm`, `FusedMatMul`,
`SkipLayerNormalization`), TVM its kernels without their numbers (`fused_conv2d_add_relu`,
`matmul`), Inductor its generated kernels (`cpp_fused_gelu`) and the library calls it makes
(`mkldnn::_convolution_pointwise`). Their kinds never match by name, but each is one of a few
classes of operator: what a model spends its time on whichever backend runs it.

A kind's class is read from the words of its name (lower-cased; a word ends at anything but a
letter or a digit, so `fused_conv2d_add_relu` has the words conv2d, add and relu, and ONNX
Runtime's `FusedMatMul` is the one word fusedmatmul). A kind whose words fall in several classes is
a fused kernel, and it belongs to the first of them in `CLASSES`: its compute-heavy anchor
(`fused_conv2d_subtract_divide_multiply_add_relu`, a convolution with its batch norm and relu, is
a convolution; `SkipLayerNormalization`, two adds and a layer norm, is a normalization). So a
class's time holds the epilogues its kernels absorbed, which on another backend are element-wise
kernels of their own. A kind none of whose words is known is `other`, never guessed.
"""

from __future__ import annotations

import re

ATTENTION = "attention"
CONVOLUTION = "convolution"
MATRIX_MULTIPLY = "matrix multiply"
NORMALIZATION = "normalization"
ELEMENTWISE = "element-wise and reductions"
DATA_MOVEMENT = "data movement"
OTHER = "other"

#: The classes, each before the ones a fused kernel of it absorbs: attention holds matrix multiplies
#: and a softmax; a convolution or matrix multiply, the normalization or activation after it; a
#: normalization, the add before it (ONNX Runtime's SkipLayerNormalization); anything that computes,
#: the reshapes and transposes TVM fuses into it.
CLASSES = (ATTENTION, CONVOLUTION, MATRIX_MULTIPLY, NORMALIZATION, ELEMENTWISE, DATA_MOVEMENT, OTHER)

_WORDS = {
    # ATen's sdpa and multi-head attention, ONNX Runtime's Attention and MultiHeadAttention.
    ATTENTION: r"\w*attention|sdpa",
    # conv2d, convolution, _convolution_pointwise, Conv, FusedConv, QLinearConv, ConvTranspose; a GPU
    # library's forward convolution is named as an implicit GEMM (cudnn xmma_fprop_implicit_gemm), or
    # as cuDNN's older kernels are, `convolve` (implicit_convolve_sgemm, a GEMM word after it,
    # convolve_common_engine_float_NHWC).
    CONVOLUTION: r"[a-z]*conv(olution)?(\dd)?(transpose|integer)?|fprop|convolve",
    # linear, addmm, bmm, einsum, TVM's matmul and dense, Gemm, FusedMatMul, MatMulNBits, sgemm; cuBLAS's
    # matrix-vector product (internal::gemvx::kernel) and the sum of a split-K GEMM's parts
    # (cublasLt::splitKreduce_kernel).
    MATRIX_MULTIPLY: r"[a-z]*(matmul|gemm|gemv)[a-z0-9]*|a?b?mm|addb?mm|baddbmm|linear|dense|einsum|splitkreduce",
    # batch_norm, layer_norm (aten's, TVM's, _native_batch_norm_legit), LayerNormalization,
    # SkipLayerNormalization, GroupNorm; and a batch norm as TVM's Relax decomposes it for inference, its
    # four operators in a row ((x - mean) / std * gamma + beta); cuDNN's batch norm (bn_fw_inf_1C11_kernel_NCHW).
    # A bare `norm` (a vector norm) is a reduction.
    NORMALIZATION: (r"(layer|batch|group|instance|rms)(_?norm(alization)?)(\dd)?|[a-z]*normali[sz](ation|e)"
                    r"|subtract_divide_multiply_add|bn"),
    # Arithmetic, activations, comparisons, casts, reductions and pooling (a reduction over a window); a
    # tensor operator's bias added apart from it (Inductor's `cpp_fused_bias`, backends/inductor_code.py).
    ELEMENTWISE: (r"bias|add|sub|subtract|mul|multiply|div|divide|true_divide|erf|[a-z]*gelu|[a-z]*relu\d*|[a-z]*silu"
                  r"|[a-z]*sigmoid|[a-z]*swish|[a-z]*tanh|mish|elu|exp|log|sqrt|rsqrt|pow|power|neg|negative|abs"
                  r"|reciprocal|clip|clamp|where|masked|eq|ne|equal|not|logical|cast|dropout|[a-z]*softmax"
                  r"|mean|sum|max|min|maximum|minimum|amax|amin|argmax|argmin|prod|norm|reduce[a-z]*"
                  r"|[a-z]*pool(\dd)?|[a-z]*pooling|[a-z]*elementwise"),
    # Reshapes, transposes, copies, concatenation, slicing, indexing and gathers (embedding lookups),
    # padding, filling, layout reorders (ONNX Runtime's ReorderInput, TVM's layout_transform, cuDNN's
    # nhwcToNchwKernel).
    DATA_MOVEMENT: (r"reshape|view|transpose|permute|copy|clone|contiguous|cat|concat|concatenate|stack|split"
                    r"|chunk|slice|strided|scatter[a-z]*|gather[a-z]*|take|index|embedding|pad|roll|flatten"
                    r"|squeeze|unsqueeze|expand|broadcast|swapaxes|full|zeros|ones|fill|empty|tile|repeat"
                    r"|identity|shape|reorder[a-z]*|layout|to|select|narrow|unbind|flip|memcpy[a-z]*"
                    r"|(nchw|nhwc)to(nchw|nhwc)[a-z]*"),
}
_PATTERNS = {cls: re.compile(rf"(?<![a-z0-9])({words})(?![a-z0-9])") for cls, words in _WORDS.items()}
#: Words of a step of a computation in the frequency domain: cuDNN's FFT convolution transforms its input
#: and filter (`fft2d_r2c_32x32`), multiplies them (`pointwise_mult_and_sum_complex`) and transforms back.
#: Such a step is not what its other words say (an element-wise product and sum here), nor, by its name, known
#: to be a convolution's (torch.fft has transforms too): other, as the transforms are.
_FOURIER = re.compile(r"(?<![a-z0-9])(fft[a-z0-9]*|complex)(?![a-z0-9])")


def class_of(kind: str) -> str:
    """The operator class of a kind (`Kernels.by_kind`): the first class of `CLASSES` any word of
    its name belongs to, else `other`; a step of a frequency-domain computation (`_FOURIER`) is
    `other` unless a word of a compute-heavy class names what it is part of."""
    name = kind.lower()
    fourier = _FOURIER.search(name) is not None
    for cls in CLASSES[:-1]:
        if fourier and cls in (ELEMENTWISE, DATA_MOVEMENT):
            return OTHER
        if _PATTERNS[cls].search(name):
            return cls
    return OTHER
