"""Eager's count of dispatches (`cpu_dispatches`): the ATen operators that compute, views and empty
allocations not counted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from backends.eager import EagerBackend
from harness.contract import Variant


def _prepared(model: Any, example: Any, tmp_path: Path) -> Any:
    return EagerBackend().prepare(model, example, device="cpu", dtype="fp32", variant=Variant(),
                                  workdir=tmp_path, cache_dir=tmp_path)


def test_a_batched_matmul_counts_its_matrix_multiply_and_not_the_view_of_its_result(tmp_path: Path) -> None:
    """A [2, 3, 4] @ [4, 5] matmul dispatches view, mm and _unsafe_view: one kernel. `_unsafe_view`
    aliases its input as `view` does, but its schema does not mark it a view; counted, it made BERT
    base's eager cell 223 dispatches where 199 compute."""
    import torch

    class Project(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = torch.nn.Parameter(torch.randn(4, 5))

        def forward(self, x: Any) -> Any:
            return x @ self.weight

    example = torch.randn(2, 3, 4)
    prepared = _prepared(Project().eval(), example, tmp_path)
    assert prepared.cpu_dispatches(example) == 1
    assert [k.kernel for k in prepared.fusion_report().kernels] == ["aten.mm"]


def test_the_profile_counts_the_kernels_the_dispatch_count_counts(tmp_path: Path) -> None:
    """The profile pass (`cpu_kernel_times`: the kinds table, the slowest kernels, the kernel share)
    leaves out views by the same list as the dispatch count: it counted `aten::_unsafe_view` (a
    reshape's result after its copy), `aten::flatten` and `aten::chunk` as kernels, against its own
    definition (views not counted), where the dispatch count leaves them out."""
    import torch

    class Views(torch.nn.Module):
        def forward(self, x: Any) -> Any:
            copied = x.permute(0, 2, 1).reshape(2, -1)  # not viewable: clone, then _unsafe_view
            first, second = x.chunk(2, dim=1)
            return copied.sum() + torch.flatten(x, 1).sum() + first.sum() + second.sum()

    example = torch.randn(2, 4, 6)
    prepared = _prepared(Views().eval(), example, tmp_path)
    profiled = [name.replace("::", ".") for name, _ in prepared.cpu_kernel_times(example).calls]
    dispatched = [k.kernel for k in prepared.fusion_report().kernels]
    assert profiled == dispatched == ["aten.clone", "aten.sum", "aten.sum", "aten.add", "aten.sum", "aten.add",
                                      "aten.sum", "aten.add"], profiled


def test_the_profile_counts_no_dropout_in_inference(tmp_path: Path) -> None:
    """Dropout in inference returns its input: the dispatch count sees nothing, but the profiler
    records its call, and the profile pass counted it as a kernel (BERT base's eager cell listed 37
    `aten::dropout` among its kinds, 236 calls against 223 dispatches). In training its mask and
    product are the operators under it, and still counted."""
    import torch

    class Dropped(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(6, 6)
            self.drop, self.drop_in_place = torch.nn.Dropout(0.1), torch.nn.Dropout(0.1, inplace=True)

        def forward(self, x: Any) -> Any:
            return self.drop_in_place(self.drop(self.linear(x)).relu())

    example = torch.randn(2, 6)
    prepared = _prepared(Dropped().eval(), example, tmp_path)
    profiled = [name for name, _ in prepared.cpu_kernel_times(example).calls]
    assert profiled == ["aten::linear", "aten::relu"], profiled
    assert prepared.cpu_dispatches(example) == 2
    training = [name for name, _ in _prepared(Dropped().train(), example, tmp_path).cpu_kernel_times(example).calls]
    assert not any("dropout" in name and "native" not in name for name in training), training
    assert any("native_dropout" in name or "bernoulli" in name for name in training), training
