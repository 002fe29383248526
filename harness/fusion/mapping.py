"""The mapping class of an operator: how its output elements depend on its input elements.

The classes follow the mapping-type analysis of DNNFusion (Niu et al., PLDI 2021), which judges
whether two operators can fuse from how each maps input elements to output elements:
- `one-to-one`: each output element depends on one element of each input: element-wise
  arithmetic and activations, casts, inference batch norm (a per-channel affine), concat, slice;
- `one-to-many`: an input element feeds several output elements without a reduction:
  broadcast/expand, repeat/tile, nearest upsampling, gather and embedding lookups;
- `many-to-many`: an output element depends on many input elements: convolution, matrix
  multiplication, pooling, reductions, softmax, layer/group normalisation, attention;
- `reorganize`: the shape changes, the element order does not: reshape, view, flatten, squeeze;
- `shuffle`: the element order changes: transpose, permute, pixel/channel shuffle.

Operators are looked up by bare name (namespace, overload and case ignored), so ATen, ONNX and
Relax spellings share one table. A name the table does not know is `unknown`, never guessed.
A fused kernel is described by the set of classes it combines (`many-to-many+one-to-one` for a
convolution with its batch norm and activation), which is what decides its memory traffic.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

from harness.fusion.ops import is_part_of_tensor_op, is_view_op, op_name

CLASSES = ("many-to-many", "one-to-many", "one-to-one", "shuffle", "reorganize", "unknown")

_TABLE: dict[str, tuple[str, ...]] = {
    "one-to-one": (
        "add", "sub", "subtract", "mul", "multiply", "div", "divide", "neg", "negative", "abs", "exp", "log", "sqrt",
        "rsqrt", "pow", "power", "reciprocal", "sign", "floor", "ceil", "round", "clamp", "clip", "minimum",
        "maximum", "min_binary", "max_binary", "where", "eq", "ne", "lt", "le", "gt", "ge", "equal", "greater",
        "less", "not", "logical_not", "erf", "tanh", "sigmoid", "relu", "relu6", "leaky_relu", "leakyrelu", "prelu",
        "elu", "selu", "celu", "gelu", "silu", "swish", "mish", "hardswish", "hardsigmoid", "hardtanh", "softplus",
        "softsign", "sin", "cos", "cast", "to", "_to_copy", "copy", "clone", "identity", "dropout", "alias_copy",
        "batchnormalization", "batch_norm", "_native_batch_norm_legit_no_training", "native_batch_norm",
        "cudnn_batch_norm", "concat", "cat", "slice", "slice_scatter", "split", "split_with_sizes", "pad",
        "constant_pad_nd", "fill", "full_like", "zeros_like", "ones_like", "lerp", "addcmul", "addcdiv", "fma",
        "bias_add", "scale", "square", "exp2", "expm1", "log1p", "isnan", "bitwise_and", "bitwise_or",
    ),
    "one-to-many": (
        "expand", "expand_as", "broadcast_to", "repeat", "tile", "repeat_interleave", "upsample_nearest2d",
        "upsample_nearest1d", "upsample_nearest3d", "resize", "resize2d", "upsample", "image_resize2d", "gather",
        "index_select", "take", "embedding", "index", "gatherelements", "gathernd",
    ),
    "many-to-many": (
        "convolution", "conv", "conv1d", "conv2d", "conv3d", "conv_transpose", "convtranspose", "conv2d_transpose",
        "_convolution", "mkldnn_convolution", "_convolution_pointwise", "_convolution_pointwise_",
        "cudnn_convolution", "mm", "bmm", "addmm", "baddbmm", "matmul", "linear", "gemm", "dense",
        "_linear_pointwise", "_mkl_linear", "_convolution_transpose_pointwise", "einsum",
        "max_pool2d", "max_pool2d_with_indices", "avg_pool2d", "adaptive_avg_pool2d",
        "_adaptive_avg_pool2d", "maxpool", "averagepool", "globalaveragepool", "globalmaxpool", "mean", "sum",
        "amax", "amin", "max", "min", "prod", "var", "std", "var_mean", "reducemean", "reducesum", "reducemax",
        "reducemin", "reduceprod", "softmax", "_softmax", "log_softmax", "_log_softmax", "logsoftmax", "layer_norm",
        "native_layer_norm", "layernormalization", "group_norm", "native_group_norm", "groupnormalization",
        "instancenormalization", "instance_norm", "scaled_dot_product_attention", "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_efficient_attention", "_scaled_dot_product_flash_attention_for_cpu", "attention",
        "multiheadattention", "cumsum", "topk", "argmax", "argmin", "lstm", "gru", "rnn_tanh", "rnn_relu",
        "adaptive_avg_pool1d", "avg_pool1d", "max_pool1d", "rms_norm", "norm",
    ),
    "reorganize": (
        "reshape", "view", "_unsafe_view", "flatten", "unflatten", "squeeze", "unsqueeze", "view_as", "as_strided",
        "alias", "detach", "contiguous", "narrow", "select", "unbind", "chunk",
    ),
    "shuffle": (
        "transpose", "permute", "permute_dims", "t", "pixel_shuffle", "pixel_unshuffle", "channel_shuffle",
        "native_channel_shuffle", "depthtospace", "spacetodepth", "movedim", "flip", "roll", "reorderinput",
        "reorderoutput", "reorder", "layout_copy",
    ),
}
_CLASS_OF = {name.lower(): cls for cls, names in _TABLE.items() for name in names}
_TRAILING_DIGITS = re.compile(r"\d+$")


def mapping_class(op: str) -> str:
    """The mapping class of a qualified operator name (`aten.relu`, `onnx.Conv`, `relax.conv2d`); an
    in-place operator (`aten.relu_`, `aten.add_`: ATen's trailing underscore) maps as its operator;
    a tensor operator's part run apart from it (`aten.addmm (bias or layout)`: harness/fusion/ops.py)
    as the bias it adds, each output element from one of the operator's and one of the bias."""
    if is_part_of_tensor_op(op):
        return "one-to-one"
    name = op_name(op).lower()
    if name in _CLASS_OF:
        return _CLASS_OF[name]
    stripped = _TRAILING_DIGITS.sub("", name)  # Relax names repeated ops conv2d1, add2, ...
    if stripped in _CLASS_OF:
        return _CLASS_OF[stripped]
    in_place = name.rstrip("_")
    return _CLASS_OF.get(in_place, "unknown") if in_place and not name.startswith("_") else "unknown"


#: The names the first table that wrote a kernel's mapping (48f6f55, harness/op_mapping.py then)
#: lacked, each added since; no name has left the table or changed class. A name added from now on
#: joins it too: a report that records no version was written by a table that lacked the name.
_NAMES_ADDED_SINCE_THE_FIRST_TABLE = frozenset({"layout_copy", "_convolution_transpose_pointwise", "_mkl_linear"})


def unknown_to_the_first_table(op: str) -> bool:
    """Whether an operator may have been `unknown` to a table before today's: a name added since
    the first, or one it knew by no rule but those added since (an in-place spelling, a tensor
    operator's part run apart). Every other operator had today's class in every table, which only
    grew (harness/bundle/fusion_check.py reads older reports' mappings by this)."""
    if is_part_of_tensor_op(op):
        return True
    name = op_name(op).lower()
    stripped = _TRAILING_DIGITS.sub("", name)
    if {name, stripped} & _NAMES_ADDED_SINCE_THE_FIRST_TABLE:
        return True
    return name not in _CLASS_OF and stripped not in _CLASS_OF


def kernel_mapping(ops: Iterable[str]) -> str:
    """The mapping classes a kernel combines, in CLASSES order, joined by `+`
    (`many-to-many+one-to-one` for conv+bn+relu). ATen views are skipped: they compute nothing.
    Order-free on purpose: not every backend lists a kernel's operators in execution order
    (Inductor names kernels after its operators sorted by name)."""
    present = {mapping_class(op) for op in ops if not is_view_op(op)}
    return "+".join(cls for cls in CLASSES if cls in present)


def mapping_counts(mappings: Iterable[str]) -> dict[str, int]:
    """How many of `mappings` (fused kernels' `kernel_mapping`s) are each set of classes, the
    commonest first."""
    counts = Counter(mappings)
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))
