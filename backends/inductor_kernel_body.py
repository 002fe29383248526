"""Reading the source of one kernel Inductor generated: does it compute, or only move data?

Inductor names a generated kernel after the ATen operators its nodes came from, and a node that
only copies a tensor into another layout carries the origins of the tensor it copies: the copy of
a convolution's output back to NCHW can be named `cpp_fused__native_batch_norm_legit_no_training_
convolution_relu_2` while its body is loads, transposes and stores. The name alone would count it
as a three-operator fusion. The body says what the kernel does.

Both of Inductor's code generators write each value a kernel computes as an assignment to a
`tmpN` variable (`auto tmp2 = tmp0 - tmp1;` in C++, `tmp2 = tmp0 - tmp1` in Triton, `tmp_acc0`
for reductions). The values read from memory (a load, `in_ptr0[...]`, a C++ masked-load lambda
`[&]`) are the kernel's data, and so is every value computed from them. A kernel computes when an
assignment does arithmetic on its data: one that is neither a load, nor a plain copy of another
variable, nor a choice between values (`tl.where`, `? :`, `blendv`: how a concatenation or a
padding picks its source). Arithmetic on indices and constants alone (`tmp0 = x1`,
`tmp2 = tmp0 >= tmp1`, the masks of a concatenation) moves no data, and does not count.

The steps themselves bound what a kernel's name may claim (`steps`): a kernel of one arithmetic
step ran one operator, however many its name lists: the classifier's bias added in
`cpp_fused_addmm_hardswish_mean_view` is `tmp2 = tmp0 + tmp1` alone. (Whether a kernel reduces
says less than it seems: Inductor writes a mean over four values as three additions and a
division, with no accumulator.)
"""

from __future__ import annotations

import re

# `tmp3 = ...` or `auto tmp3 = ...` up to the end of the statement; `==` is a comparison.
_ASSIGNMENT = re.compile(r"\b(tmp\w*)\s*=(?!=)\s*([^;\n]+)")
_VARIABLE = re.compile(r"\btmp\w*\b")
_BARE_VARIABLE = re.compile(r"^tmp\w*$")
_BUFFER = re.compile(r"\b(?:in_out_ptr|in_ptr|out_ptr)\d+\b")
_READ = re.compile(r"load|^\w*ptr\d+\s*\[|^\[&\]")
_CHOICE = re.compile(r"\btl\.where\(|\?|blendv|\bwhere\(")
# A template kernel computes its matrix multiply or convolution itself (Triton's `triton_tem_`
# kernels; the C++ GEMM template's micro-kernel).
_TEMPLATE_NAME = re.compile(r"^triton_tem_")
_TEMPLATE_BODY = re.compile(r"micro_gemm|MicroGemm")


def steps(body: str) -> set[str]:
    """The arithmetic steps the kernel's source does on the data it reads, not its loads, choices
    and stores: each right-hand side with the buffers its operands were read from, once. Inductor's
    C++ repeats a loop's statements for its tail, on the same buffers (one step); a kernel that adds
    three linear layers' biases does `tmp0 + tmp1` on three pairs of buffers (three)."""
    data: dict[str, frozenset[str]] = {}  # each variable read or computed from memory: the buffers behind it
    found: set[str] = set()
    for name, value in _ASSIGNMENT.findall(body):
        value = value.strip()
        if _READ.search(value):
            data[name] = frozenset(_BUFFER.findall(value))
            continue
        operands = [variable for variable in _VARIABLE.findall(value) if variable in data]
        if not operands:
            continue  # indices and constants
        data[name] = frozenset().union(*(data[variable] for variable in operands))
        if _BARE_VARIABLE.match(value) or _CHOICE.search(value):
            continue
        found.add(f"{value} on {','.join(sorted(data[name]))}")
    return found


def computes(body: str) -> bool:
    """Whether the kernel's source does arithmetic on the data it reads, rather than only loading,
    choosing and storing."""
    return bool(steps(body))


def is_template(kernel: str, body: str) -> bool:
    """Whether the kernel is one of Inductor's templates, which run a matrix multiply or a
    convolution in generated code; its other kernels leave those to library calls."""
    return bool(_TEMPLATE_NAME.match(kernel) or _TEMPLATE_BODY.search(body))
