"""Where a fusion pair's kernel time moved, kind by kind: what a report says of a pair beside its
fused kernels and its slowest ones.

A fused kernel has no counterpart of its name on the other side; its kind does not either, but the
kinds it replaced give their time back there. So each kind's time with fusion on less its time with
fusion off, the largest moves first, says what the fusion cost or saved and where:
`SkipLayerNormalization +6.1 ms (24 calls on, none off); Add -1.2 ms (24 calls on, 73 off)`. The
kinds are the CPU profile's (`Kernels.by_kind`, harness/measure/kernel_kinds.py).
"""

from __future__ import annotations

from harness.bundle.cell_record import Kernels, KindTime
from harness.metric_table import format_value

#: The kinds a pair's moves name, the largest first.
KINDS_SHOWN = 4


def _kinds(kernels: Kernels | None) -> dict[str, KindTime]:
    return {k.kind: k for k in kernels.by_kind} if kernels is not None else {}


def _signed(ns: float) -> str:
    return ("+" if ns >= 0 else "-") + format_value(abs(ns), "ns")


def _calls(kind: KindTime | None) -> str:
    if kind is None:
        return "none"
    return f"{kind.calls_per_inference:g} call{'' if kind.calls_per_inference == 1 else 's'}"


def moves(on: Kernels | None, off: Kernels | None) -> list[str]:
    """The kernel time of fusion on less fusion off's, in all and then for the KINDS_SHOWN kinds that
    moved most, each with its calls per inference on either side. Empty where either side lists no
    kinds (a GPU cell, a backend whose profiler cannot tell, a cell written before kinds were kept)."""
    with_on, with_off = _kinds(on), _kinds(off)
    if not with_on or not with_off:
        return []
    moved = {kind: (with_on[kind].ns_per_inference if kind in with_on else 0.0)
             - (with_off[kind].ns_per_inference if kind in with_off else 0.0)
             for kind in with_on.keys() | with_off.keys()}
    largest = sorted(moved, key=lambda kind: (-abs(moved[kind]), kind))[:KINDS_SHOWN]
    return [f"kernels in all {_signed(sum(moved.values()))}",
            *(f"{kind} {_signed(moved[kind])} ({_calls(with_on.get(kind))} on, {_calls(with_off.get(kind))} off)"
              for kind in largest)]
