"""The fusion report: which source operators ran in which kernel, and the taxonomy of each group
(classes: harness/fusion/ops.py; mapping classes: harness/fusion/mapping.py)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from harness.fusion.mapping import fused_mapping_counts, kernel_mapping
from harness.fusion.ops import CLASSES, classify


@dataclass(frozen=True)
class KernelGroup:
    """One kernel (or library call) and the source operators it executes."""

    kernel: str
    ops: tuple[str, ...]

    def __post_init__(self) -> None:
        # ("aten.relu") without its comma is one string, which would be counted letter by letter
        if isinstance(self.ops, str):
            raise TypeError(f"KernelGroup {self.kernel!r}: ops is a str; give a tuple of operator names: ({self.ops!r},)")
        for op in self.ops:
            if not isinstance(op, str):
                raise TypeError(f"KernelGroup {self.kernel!r}: ops holds {op!r} ({type(op).__name__}), not an operator name")

    @property
    def fusion_class(self) -> str:
        return classify(self.ops)


@dataclass(frozen=True)
class FusionReport:
    """Kernels of one prepared model in execution order, with where the information came from."""

    kernels: tuple[KernelGroup, ...]
    source: str  # how it was obtained, e.g. "inductor generated code"
    approximate: bool = False
    notes: str = ""

    def __post_init__(self) -> None:
        for kernel in self.kernels:
            if not isinstance(kernel, KernelGroup):
                raise TypeError(f"FusionReport: kernels holds {kernel!r} ({type(kernel).__name__}), not a KernelGroup")

    @property
    def fusions(self) -> int:
        return sum(1 for k in self.kernels if k.fusion_class != "single")

    def to_json(self) -> dict[str, Any]:
        by_class = Counter(k.fusion_class for k in self.kernels)
        return {
            "source": self.source,
            "approximate": self.approximate,
            "notes": self.notes,
            "kernel_count": len(self.kernels),
            "fusion_count": self.fusions,
            "kernels_by_class": {c: by_class.get(c, 0) for c in CLASSES},
            "fusions_by_class": {c: by_class.get(c, 0) for c in CLASSES if c != "single"},
            "fusions_by_mapping": fused_mapping_counts(k.ops for k in self.kernels),
            "kernels": [
                {"kernel": k.kernel, "ops": list(k.ops), "class": k.fusion_class, "mapping": kernel_mapping(k.ops)}
                for k in self.kernels
            ],
        }
