"""Where a fusion pair's kernel time moved, kind by kind: what a report says of a pair beside its
fused kernels and its slowest ones.

A fused kernel has no counterpart of its name on the other side; its kind does not either, but the
kinds it replaced give their time back there. So each kind's time with fusion on less its time with
fusion off, the largest moves first, says what the fusion cost or saved and where (BERT base on
ONNX Runtime on one thread: `kernels in all +18.7 ms; Gemm +127 ms (72 calls on, none off); MatMul
-119 ms (12 calls on, 96 calls off); SkipLayerNormalization +11.8 ms (25 calls on, none off); ...`). The
kinds are the profile pass's (`Kernels.by_kind`, harness/measure/kernel_kinds.py): on the CPU each
kind's part of round 1's time inside kernels, on a GPU its traced time, scaled here to the cell's
time over its rounds where it has several (the time the fusion table gives it), so that a round 1
the machine slowed does not move the kinds of one side alone.
"""

from __future__ import annotations

from harness.bundle.passes_record import Kernels, KindTime
from harness.metric_table import format_value

#: The kinds a pair's moves name, the largest first.
KINDS_SHOWN = 4


def scaled_kinds(kernels: Kernels | None, scale: float) -> dict[str, KindTime]:
    """The kinds of `kernels`, each time scaled by `scale`."""
    if kernels is None:
        return {}
    return {k.kind: k.model_copy(update={"ns_per_inference": k.ns_per_inference * scale}) for k in kernels.by_kind}


def signed_ns(ns: float) -> str:
    """A difference of times with its sign: `+1.20 ms`, `-350 us`."""
    return ("+" if ns >= 0 else "-") + format_value(abs(ns), "ns")


def _calls(kind: KindTime | None) -> str:
    if kind is None:
        return "none"
    return f"{kind.calls_per_inference:g} call{'' if kind.calls_per_inference == 1 else 's'}"


def moves(on: Kernels | None, off: Kernels | None, scales: tuple[float, float] = (1.0, 1.0)) -> list[str]:
    """The kernel time of fusion on less fusion off's, in all and then for the KINDS_SHOWN kinds that
    moved most, each with its calls per inference on either side; `scales`: what each side's kind
    times are multiplied by (its time over rounds over round 1's). Empty where either side lists no
    kinds (a backend whose profiler cannot tell, a cell of a schema before 11, a GPU cell written
    before 2026-12-02)."""
    with_on, with_off = scaled_kinds(on, scales[0]), scaled_kinds(off, scales[1])
    if not with_on or not with_off:
        return []
    moved = {kind: (with_on[kind].ns_per_inference if kind in with_on else 0.0)
             - (with_off[kind].ns_per_inference if kind in with_off else 0.0)
             for kind in with_on.keys() | with_off.keys()}
    largest = sorted(moved, key=lambda kind: (-abs(moved[kind]), kind))[:KINDS_SHOWN]
    return [f"kernels in all {signed_ns(sum(moved[kind] for kind in sorted(moved)))}",
            *(f"{kind} {signed_ns(moved[kind])} ({_calls(with_on.get(kind))} on, {_calls(with_off.get(kind))} off)"
              for kind in largest)]


def calls_added(on: Kernels | None, off: Kernels | None) -> list[str]:
    """The kinds fusion on runs more calls of than fusion off, the KINDS_SHOWN most added first, each
    with its calls on either side, then how many more: what a pair whose fusions launched no fewer
    kernels ran instead (BERT base on ONNX Runtime: `Reshape +144 (192 on, 48 off)`, the reshapes
    around each Gemm of MatMulAddFusion). Empty where either side lists no kinds."""
    with_on, with_off = scaled_kinds(on, 1.0), scaled_kinds(off, 1.0)
    if not with_on or not with_off:
        return []
    added = {kind: with_on[kind].calls_per_inference
             - (with_off[kind].calls_per_inference if kind in with_off else 0.0) for kind in with_on}
    grown = sorted((kind for kind in added if added[kind] > 0), key=lambda kind: (-added[kind], kind))
    more = [f"{len(grown) - KINDS_SHOWN} more kinds"] if len(grown) > KINDS_SHOWN else []  # one table cell
    return [f"{kind} +{added[kind]:g} ({with_on[kind].calls_per_inference:g} on, "
            f"{with_off[kind].calls_per_inference if kind in with_off else 0:g} off)" for kind in grown[:KINDS_SHOWN]] + more
