"""The fusion report: which source operators ran in which kernel, and the taxonomy of each group
(classes: harness/fusion/ops.py; mapping classes: harness/fusion/mapping.py)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from harness.fusion.mapping import kernel_mapping, mapping_counts
from harness.fusion.ops import CLASSES, classify

#: The version of the tables a report's kernels are classed and mapped by (harness/fusion/ops.py's
#: tensor operators and views, harness/fusion/mapping.py's table), recorded in every report so that
#: validate holds each kernel's `class` and `mapping` to the tables that wrote them, not to a date a
#: record can be given. A change to either table moves it, and harness/bundle/fusion_check.py says
#: how the version before it classed (tests/unit/test_fusion_check.py holds the tables' digest).
CLASSIFIER_VERSION = 1


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
        return int(counts((k.fusion_class, None) for k in self.kernels)["fusion_count"])

    def to_json(self) -> dict[str, Any]:
        kernels: list[dict[str, Any]] = [
            {"kernel": k.kernel, "ops": list(k.ops), "class": k.fusion_class, "mapping": kernel_mapping(k.ops)}
            for k in self.kernels
        ]
        return {
            "source": self.source,
            "approximate": self.approximate,
            "notes": self.notes,
            "classifier_version": CLASSIFIER_VERSION,
            **counts((k["class"], k["mapping"]) for k in kernels),
            "kernels": kernels,
        }


def counts(kernels: Iterable[tuple[str, str | None]]) -> dict[str, Any]:
    """A fusion report's counts from its kernels' (class, mapping): `kernel_count`, `fusion_count`
    (the kernels not `single`), `kernels_by_class`, `fusions_by_class` and `fusions_by_mapping`.
    `FusionReport.to_json` writes them with it, and validate counts them again with it from the
    kernels a bundle lists (harness/bundle/passes_record.py), so that one edited apart from its
    kernels is found."""
    listed = list(kernels)
    by_class = Counter(fusion_class for fusion_class, _ in listed)
    fused = [mapping for fusion_class, mapping in listed if fusion_class != "single"]
    return {
        "kernel_count": len(listed),
        "fusion_count": len(fused),
        "kernels_by_class": {c: by_class.get(c, 0) for c in CLASSES},
        "fusions_by_class": {c: by_class.get(c, 0) for c in CLASSES if c != "single"},
        "fusions_by_mapping": mapping_counts(str(mapping) for mapping in fused),
    }
