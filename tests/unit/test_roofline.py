"""Roofline figures: costs counted on the model, the bound from the peaks, and no bound without them."""

from __future__ import annotations

import pytest

from harness.measure.roofline import ModelCosts, bound, model_costs

torch = pytest.importorskip("torch")


def test_costs_of_a_convolution() -> None:
    model = torch.nn.Conv2d(3, 8, 3, padding=1, bias=True).eval()
    x = torch.randn(2, 3, 16, 16)
    costs = model_costs(model, x)
    assert costs.flops == 2 * (2 * 8 * 16 * 16) * (3 * 3 * 3)  # 2 x outputs x multiply-adds per output
    assert costs.weight_bytes == (8 * 3 * 3 * 3 + 8) * 4
    assert costs.input_bytes == 2 * 3 * 16 * 16 * 4 and costs.output_bytes == 2 * 8 * 16 * 16 * 4
    assert costs.compulsory_bytes == costs.weight_bytes + costs.input_bytes + costs.output_bytes


def test_bound_is_the_slower_of_compute_and_memory() -> None:
    costs = ModelCosts(flops=4_000_000_000, weight_bytes=0, input_bytes=1_000_000, output_bytes=0, compulsory_bytes=1_000_000)
    peaks = {"flops_per_s": {"fp32": 1e12}, "bytes_per_s": 1e10, "method": "test"}
    figures = bound(costs, peaks, "fp32", measured_ns=8e6)
    assert figures["compute_bound_ns"] == pytest.approx(4e6) and figures["memory_bound_ns"] == pytest.approx(1e5)
    assert figures["bound_by"] == "compute" and figures["time_bound_ns"] == pytest.approx(4e6)
    assert figures["fraction_of_bound"] == pytest.approx(0.5) and figures["kernels_per_inference_floor"] == 1
    assert figures["arithmetic_intensity_flops_per_byte"] == pytest.approx(4000)


def test_without_peaks_or_time_only_costs_are_given() -> None:
    costs = ModelCosts.counted(flops=10, weight_bytes=1, input_bytes=1, output_bytes=1)
    assert "fraction_of_bound" not in bound(costs, None, "fp32", 1e6)
    assert "no measured fp16 peak" in bound(costs, {"flops_per_s": {"fp32": 1e9}, "bytes_per_s": 1e9}, "fp16", 1e6)["note"]
    assert "computes no model" in bound(costs, {"flops_per_s": {"fp32": 1e9}, "bytes_per_s": 1e9}, "fp32", 0)["note"]
    assert "out of memory" in bound(costs, {"error": "RuntimeError: out of memory"}, "fp32", 1e6)["note"]


def test_costs_whose_compulsory_bytes_are_not_their_parts_are_refused() -> None:
    """A cache entry whose sum does not add up is damaged (`cached_costs` counts again)."""
    with pytest.raises(ValueError, match="compulsory_bytes"):
        ModelCosts(flops=1, weight_bytes=1, input_bytes=1, output_bytes=1, compulsory_bytes=4)


def test_weights_the_forward_does_not_read_are_not_compulsory() -> None:
    """An auxiliary head that eval mode skips (GoogLeNet's, Inception's) moves no bytes, and an
    unread buffer (batch norm's `num_batches_tracked`) neither."""

    class WithAuxiliaryHead(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv, self.norm = torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8)
            self.aux = torch.nn.Linear(1000, 1000)  # 4 MB a training run would read

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.aux(x.flatten(1)) if self.training else self.norm(self.conv(x))

    costs = model_costs(WithAuxiliaryHead().eval(), torch.randn(1, 3, 8, 8))
    assert costs.weight_bytes == (8 * 3 * 3 * 3 + 8) * 4 + 4 * 8 * 4  # conv, and norm's weight, bias, mean, var


def test_an_embedding_table_counts_the_rows_looked_up_and_a_table_read_whole_counts_whole() -> None:
    """BERT base's word embeddings are 93.8 MB, of which a batch of 128 tokens reads 128 rows: the
    least traffic is the distinct rows looked up. A table another operator reads whole (a tied
    output layer) is read whole."""

    class Lookup(torch.nn.Module):
        def __init__(self, tied: bool) -> None:
            super().__init__()
            self.table, self.tied = torch.nn.Embedding(1000, 16), tied

        def forward(self, tokens: torch.Tensor) -> torch.Tensor:
            hidden = self.table(tokens)
            return hidden @ self.table.weight.t() if self.tied else hidden

    tokens = torch.tensor([[3, 7, 3, 999], [7, 0, 0, 5]])  # 5 distinct rows of 16 floats
    assert model_costs(Lookup(tied=False).eval(), tokens).weight_bytes == 5 * 16 * 4
    assert model_costs(Lookup(tied=True).eval(), tokens).weight_bytes == 1000 * 16 * 4


def test_the_peaks_keep_the_spread_of_their_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """A peak is the best of its runs; their lowest and median are kept beside it, so that a probe
    that met other work shows (the 2-core VM's fp32 peak read 45 to 245 GFLOP/s over its bundles,
    with nothing saying which readings were steady)."""
    from harness.measure import roofline

    times = iter([0.5, 0.4, 0.2, 0.8, 0.25, 0.25,  # the matmul: untimed, then five
                  1.0, 2.0, 1.0, 4.0, 2.0, 2.0])   # the copy
    monkeypatch.setattr(roofline, "_seconds", lambda run, sync: [next(times) for _ in range(6)][1:])
    monkeypatch.setattr(roofline, "PEAK_COPY_BYTES", {"cpu": 1 << 20})
    monkeypatch.setattr(roofline, "PEAK_MATMUL_N", {"cpu": 8})
    peaks = roofline.measure_peaks("cpu")
    work = 2 * 8**3
    assert peaks["flops_per_s"]["fp32"] == work / 0.2 == peaks["spread"]["fp32"]["max"]
    assert peaks["spread"]["fp32"]["min"] == work / 0.8 and peaks["spread"]["fp32"]["median"] == work / 0.25
    assert peaks["bytes_per_s"] == 2 * (1 << 20) / 1.0 and peaks["spread"]["copy"]["min"] == 2 * (1 << 20) / 4.0
    assert peaks["method"].endswith(", 1 MiB copy (read + write)")
    monkeypatch.setattr(roofline, "_seconds", lambda run, sync: [1.0] * 5)
    given = roofline.measure_peaks("cpu", 3 << 20)  # FUSIONBENCH_PEAK_COPY_MIB's size, in place of the device's
    assert given["bytes_per_s"] == 2 * (3 << 20) and given["method"].endswith(", 3 MiB copy (read + write)")
