"""Reading the source of one kernel Inductor generated: does it compute, or only move data?

Inductor names a generated kernel after the ATen operators its nodes came from, and a node that
only copies a tensor into another layout carries the origins of the tensor it copies: the copy of
a convolution's output back to NCHW can be named `cpp_fused__native_batch_norm_legit_no_training_
convolution_relu_2` while its body is loads, transposes and stores. The name alone would count it
as a three-operator fusion. The body says what the kernel does.

Both of Inductor's code generators write each value a kernel computes as an assignment to a
`tmpN` variable (`auto tmp2 = tmp0 - tmp1;` in C++, `tmp2 = tmp0 - tmp1` in Triton, `tmp_acc0`
for reductions). A kernel computes when one of those assignments is neither a load (`loadu`,
`tl.load`, `in_ptr0[...]`) nor a plain copy of another variable, and uses another variable.
Index arithmetic is written to `xN`/`yN`/`rN` variables, never to `tmpN`, so it does not count.
"""

from __future__ import annotations

import re

# `tmp3 = ...` or `auto tmp3 = ...` up to the end of the statement; `==` is a comparison.
_ASSIGNMENT = re.compile(r"\b(tmp\w*)\s*=(?!=)\s*([^;\n]+)")
_VARIABLE = re.compile(r"\btmp\w*\b")
_BARE_VARIABLE = re.compile(r"^tmp\w*$")
_POINTER_READ = re.compile(r"^\w*ptr\d+\s*\[")
# A template kernel computes its matrix multiply or convolution itself (Triton's `triton_tem_`
# kernels; the C++ GEMM template's micro-kernel).
_TEMPLATE_NAME = re.compile(r"^triton_tem_")
_TEMPLATE_BODY = re.compile(r"micro_gemm|MicroGemm")


def computes(body: str) -> bool:
    """Whether the kernel's source computes any value, rather than only loading and storing."""
    for _, value in _ASSIGNMENT.findall(body):
        value = value.strip()
        if "load" in value or _POINTER_READ.match(value) or _BARE_VARIABLE.match(value):
            continue
        if _VARIABLE.search(value):
            return True
    return False


def is_template(kernel: str, body: str) -> bool:
    """Whether the kernel is one of Inductor's templates, which run a matrix multiply or a
    convolution in generated code; its other kernels leave those to library calls."""
    return bool(_TEMPLATE_NAME.match(kernel) or _TEMPLATE_BODY.search(body))
