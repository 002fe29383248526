"""Inductor's freezing without its fusion-like rewrites, for `fusion: off` with `freezing: true`.

Freezing (torch/_inductor/freezing.py) does two kinds of work. Kept: parameters become
constants, constant folding, convolution weights in channels-last, oneDNN weight prepacking on
CPU (a convolution becomes `mkldnn._convolution_pointwise(..., 'none')`). Switched off here, for
the length of one compile, because each puts two source operators into one kernel:
1. binary folding (fx_passes/freezing_patterns.py): an add, subtract, multiply or divide by a
   constant after a convolution or matmul folded into its weights; this is where a decomposed
   batch norm disappears into the convolution before it (CPU and GPU);
2. pre_grad.fuse_conv_bn: module-level conv+bn folding (it matches only graphs that kept their
   nn.Modules, which Dynamo does not by default; switched off all the same);
3. oneDNN epilogues (fx_passes/mkldnn_fusion.py): a packed convolution or linear with its
   activation or sum as a post-op;
4. concat-linear: matmuls that share an input merged into one.
No configuration flag does this (`cpp.weight_prepack=False` drops the epilogues only by dropping
prepacking too), so the rewrites' pattern entries are told never to apply (their `extra_check`
answers False) and binary folding's pass does nothing; everything is restored on exit. Each
internal it touches is checked to exist first, and finding nothing to switch off is an error:
checked on torch 2.11 and 2.14.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any
from unittest import mock

from harness.errors import BackendFailed


def _never(match: Any) -> bool:
    return False


def closure_contents(function: Any) -> list[Any]:
    """What `function` closes over (nothing where it is no closure): how a pattern entry's check
    says which rewrite it belongs to."""
    contents = []
    for cell in getattr(function, "__closure__", None) or ():
        try:
            contents.append(cell.cell_contents)
        except ValueError:  # an empty cell
            continue
    return contents


def _closure_names(function: Any) -> set[str]:
    return {getattr(content, "__name__", "") for content in closure_contents(function)}


def _is_onednn_epilogue(entry: Any) -> bool:
    handler = getattr(entry, "handler", None)
    return (type(entry).__name__ == "LoweringPatternEntry"
            and getattr(handler, "__module__", "") == "torch._inductor.fx_passes.mkldnn_fusion")


def _is_concat_linear(entry: Any) -> bool:
    return bool(_closure_names(getattr(entry, "extra_check", None))
                & {"check_concat_weights", "check_int8_woq_concat_linear_weights"})


def _switch_off(stack: contextlib.ExitStack, pattern_pass: Any, chosen: Callable[[Any], bool]) -> int:
    count = 0
    for entries in list(pattern_pass.patterns.values()):
        for entry in entries:
            if chosen(entry):
                stack.enter_context(mock.patch.object(entry, "extra_check", _never))
                count += 1
    return count


@contextlib.contextmanager
def freezing_without_fusion() -> Iterator[dict[str, int]]:
    """For one compile: freezing's rewrites that fuse switched off; yields how many patterns."""
    import torch
    from torch._inductor.fx_passes import freezing_patterns, post_grad, pre_grad

    for owner, attribute in ((freezing_patterns, "binary_folding_pass"), (freezing_patterns, "pass_patterns"),
                             (freezing_patterns, "lazy_init"), (post_grad, "pass_patterns"),
                             (post_grad, "lazy_init"), (pre_grad, "fuse_conv_bn")):
        if getattr(owner, attribute, None) is None:
            raise BackendFailed(f"inductor fusion=off with freezing needs {owner.__name__}.{attribute}, "
                                "which this torch does not have; use freezing: false")
    post_grad.lazy_init()  # register every pattern now (both are idempotent), so all are seen below
    freezing_patterns.lazy_init()
    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(freezing_patterns.binary_folding_pass, "apply", lambda *a, **k: 0))
        stack.enter_context(mock.patch.object(pre_grad, "fuse_conv_bn", lambda gm, inplace=False: gm))
        counts = {
            "onednn_epilogue_patterns": sum(_switch_off(stack, p, _is_onednn_epilogue) for p in post_grad.pass_patterns),
            "concat_linear_patterns": sum(_switch_off(stack, p, _is_concat_linear) for p in freezing_patterns.pass_patterns),
        }
        acl = getattr(torch.ops.mkldnn, "_is_mkldnn_acl_supported", lambda: False)()  # Arm: no epilogue patterns
        onednn = torch._C._has_mkldnn and torch.backends.mkldnn.is_available() and not acl
        if (onednn and not counts["onednn_epilogue_patterns"]) or not counts["concat_linear_patterns"]:
            raise BackendFailed(f"inductor fusion=off with freezing found no fusion patterns to switch off ({counts}): "
                                "torch's internals changed; use freezing: false")
        yield counts
