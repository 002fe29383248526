"""Where a fusion pair's kernel time moved, kind by kind (harness/reporting/kind_moves.py)."""

from __future__ import annotations

from harness.bundle.passes_record import Kernels
from harness.reporting.kind_moves import calls_added, moves


def _kernels(*kinds: tuple[str, int, float, float]) -> Kernels:
    return Kernels.model_validate({
        "kernels_per_inference": sum(calls for _, _, calls, _ in kinds), "kernel_count_method": "cpu dispatches",
        "by_kind": [{"kind": kind, "kernels": kernels, "calls_per_inference": calls, "ns_per_inference": ns}
                    for kind, kernels, calls, ns in kinds]})


def test_a_fused_kind_is_set_against_the_kinds_it_replaced_the_largest_move_first() -> None:
    """BERT on ONNX Runtime: SkipLayerNormalization's 24 calls with fusion on replace 48 Adds and 24
    LayerNormalizations; the MatMuls barely move. In all the kernels took 3.5 ms more."""
    on = _kernels(("MatMul", 72, 72, 30.1e6), ("SkipLayerNormalization", 24, 24, 6.0e6), ("Add", 25, 25, 0.2e6))
    off = _kernels(("MatMul", 72, 72, 30.0e6), ("Add", 73, 73, 1.2e6), ("LayerNormalization", 24, 24, 1.6e6))
    assert moves(on, off) == [
        "kernels in all +3.50 ms",
        "SkipLayerNormalization +6.00 ms (24 calls on, none off)",
        "LayerNormalization -1.60 ms (none on, 24 calls off)",
        "Add -1.00 ms (25 calls on, 73 calls off)",
        "MatMul +100 us (72 calls on, 72 calls off)",
    ]


def test_only_the_kinds_that_moved_most_are_named_and_a_side_without_kinds_gives_none() -> None:
    on = _kernels(*((f"k{i}", 1, 1, float(i) * 1e6) for i in range(1, 7)))
    off = _kernels(("k1", 1, 1, 1e6))
    assert [move.split()[0] for move in moves(on, off)] == ["kernels", "k6", "k5", "k4", "k3"]
    bare = Kernels.model_validate({"kernels_per_inference": 3, "kernel_count_method": "CUDA kernels"})
    assert moves(on, bare) == [] and moves(None, off) == []


def test_each_sides_kinds_are_scaled_to_its_time_over_rounds() -> None:
    """Round 1 of fusion on ran while the machine was slow (134 ms, its rounds' median 77.6 ms): its
    kinds, recorded at round 1's time, set against fusion off's, named 51 ms more kernel time in an
    inference 5 ms slower."""
    on = _kernels(("Gemm", 72, 72, 40e6), ("Add", 25, 25, 2e6))
    off = _kernels(("MatMul", 96, 96, 19e6), ("Add", 122, 122, 1e6))
    assert moves(on, off, (0.5, 1.0))[:2] == ["kernels in all +1.00 ms", "Gemm +20.0 ms (72 calls on, none off)"]


def test_the_kinds_fusion_on_runs_more_often_are_named_the_most_added_first() -> None:
    """BERT base on ONNX Runtime (docs/results/bundles/cpu-2core-amd-2026-12-02-ort-bert-kinds):
    447 dispatches with fusion on against 412 off, its 109 fusions notwithstanding. The 35 more are
    the Reshapes around each of MatMulAddFusion's 72 Gemms (ONNX Runtime's profile, counted apart:
    192 Reshapes on, 48 off) less the Adds, LayerNormalizations and Muls the fusions took in."""
    on = _kernels(("Gemm", 72, 72, 127e6), ("Reshape", 1, 192, 1.6e6), ("SkipLayerNormalization", 25, 25, 11.8e6),
                  ("Add", 25, 25, 1.5e6), ("FusedMatMul", 12, 12, 2.3e6), ("MatMul", 12, 12, 2.3e6), ("Mul", 24, 24, 1e6))
    off = _kernels(("MatMul", 96, 96, 121.6e6), ("Reshape", 1, 48, 0.4e6), ("Add", 122, 122, 4.6e6),
                   ("LayerNormalization", 25, 25, 1.5e6), ("Mul", 36, 36, 1.2e6))
    assert calls_added(on, off) == ["Reshape +144 (192 on, 48 off)", "Gemm +72 (72 on, 0 off)",
                                    "SkipLayerNormalization +25 (25 on, 0 off)", "FusedMatMul +12 (12 on, 0 off)"]
    assert calls_added(on, Kernels.model_validate({"kernels_per_inference": 3, "kernel_count_method": "x"})) == []
    # a TVM pair adds dozens of fused kinds: the four that grew most, and how many more, in one table cell
    many = _kernels(*((f"fused_{i}", 1, 10 + i, 1e6) for i in range(6)))
    assert calls_added(many, off) == ["fused_5 +15 (15 on, 0 off)", "fused_4 +14 (14 on, 0 off)",
                                      "fused_3 +13 (13 on, 0 off)", "fused_2 +12 (12 on, 0 off)", "2 more kinds"]
