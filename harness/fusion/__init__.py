"""Which operators ran in which kernel: a backend describes its prepared model as a `FusionReport`
of `KernelGroup`s, and this package classifies each group. `ops` names operators and gives a
group's fusion class (tensor+element, element, ...); `mapping` gives each operator's mapping
class (one-to-one, many-to-many, ...); `report` is the report a backend returns and its JSON form.
Part of the plugin API: `from harness.fusion import FusionReport, KernelGroup` is stable.
"""

from harness.fusion.mapping import kernel_mapping, mapping_class
from harness.fusion.ops import (
    CLASSES,
    PART_OF_TENSOR_OP,
    classify,
    computing_ops,
    is_part_of_tensor_op,
    is_tensor_op,
    is_view_op,
    op_name,
)
from harness.fusion.report import FusionReport, KernelGroup

__all__ = [
    "CLASSES", "PART_OF_TENSOR_OP", "FusionReport", "KernelGroup", "classify", "computing_ops", "is_part_of_tensor_op",
    "is_tensor_op", "is_view_op", "kernel_mapping", "mapping_class", "op_name",
]
