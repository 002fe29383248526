from __future__ import annotations

import torch

from harness.measure.correctness import compare


def test_identical_and_close_pass() -> None:
    ref = torch.randn(4, 10)
    assert compare(ref.clone(), ref, "fp32")["ok"]
    assert compare(ref + 1e-6, ref, "fp32")["ok"]


def test_outside_tolerance_fails_with_reason() -> None:
    ref = torch.randn(4, 10)
    result = compare(ref + 0.5, ref, "fp32")
    assert not result["ok"] and "max abs error" in result["reason"]
    assert not compare(ref.flip(0), ref, "fp32")["ok"]


def test_scale_free_for_tiny_outputs() -> None:
    ref = torch.randn(2, 10) * 1e-12  # random-weight models can output tiny logits
    assert compare(ref * (1 + 1e-5), ref, "fp32")["ok"]
    assert not compare(ref * -1, ref, "fp32")["ok"]


def test_shape_nan_and_dtype_tolerance() -> None:
    ref = torch.randn(2, 10)
    assert "shape" in compare(ref[:1], ref, "fp32")["reason"]
    bad = ref.clone()
    bad[0, 0] = float("nan")
    assert "NaN" in compare(bad, ref, "fp32")["reason"]
    noisy = ref + 0.005 * ref.abs().max()
    assert not compare(noisy, ref, "fp32")["ok"] and compare(noisy.half(), ref.half(), "fp16")["ok"]


def test_an_output_in_another_dtype_than_the_cells_fails() -> None:
    """A float16 output passed an fp32 cell: rounding resnet18's logits to float16 errs 4.9e-4 of
    their largest, within fp32's 1e-3, so a backend computing in half could be timed as fp32."""
    ref = torch.randn(2, 1000)
    for wrong in (ref.half(), ref.double()):
        result = compare(wrong, ref, "fp32")
        assert not result["ok"] and result["reason"].startswith(f"output dtype {str(wrong.dtype)[6:]} != eager's float32")
    assert compare(ref.half(), ref.half(), "fp16")["ok"]


def test_a_constant_reference_cannot_vouch_for_anything() -> None:
    # vit_b_16's head starts at zero: with torchvision's random init every logit is 0, and a
    # backend returning zeros would have matched it.
    ref = torch.zeros(2, 10)
    result = compare(torch.zeros(2, 10), ref, "fp32")
    assert not result["ok"] and "constant" in result["reason"]


def test_a_reference_constant_within_the_tolerance_cannot_vouch_for_anything() -> None:
    """Only an exactly constant reference was refused: one varying by less than the tolerance let
    a backend answering a constant pass (max abs error 4.8e-4 against a limit of 5e-3, cosine 0.999999999)."""
    ref = 5.0 + 1e-3 * torch.rand(2, 10, generator=torch.Generator().manual_seed(0))
    result = compare(torch.full_like(ref, 5.0005), ref, "fp32")
    assert not result["ok"] and result["reason"].startswith("eager's output is constant (5.0000")
    assert "within the tolerance" in result["reason"]
    assert compare(ref, ref, "bf16")["reason"].startswith("eager's output is constant"), "a constant passes bf16's 5e-2"
    spread = torch.tensor([[1.0, -1.0, 0.5, 0.25]])  # a constant errs half the range: far outside
    assert compare(spread.clone(), spread, "bf16")["ok"]


def test_an_output_just_outside_the_tolerance_says_its_error_apart_from_the_limit() -> None:
    """A backend whose outputs were 1.001 times eager's in fp32 (1.001 rounds just above it there)
    was invalid with 'max abs error 0.00139 (limit 0.00139)': the figures it failed by read as equal."""
    ref = torch.randn(2, 1000, generator=torch.Generator().manual_seed(0))
    result = compare(ref * (1 + 1e-3), ref, "fp32")
    assert not result["ok"] and result["max_abs_error"] > result["max_abs_error_limit"]
    said = result["reason"].partition("max abs error ")[2].partition(")")[0]  # '0.0038... (limit 0.0038...'
    error, limit = said.split(" (limit ")
    assert float(error) > float(limit), result["reason"]
    near = ref + torch.randn(2, 1000, generator=torch.Generator().manual_seed(1)) * 0.01405  # cosine 0.99989991
    said = compare(near, ref, "fp32")["reason"]
    assert said and float(said.partition("cosine similarity ")[2].partition(" ")[0]) < 0.9999, said


def test_a_model_whose_forward_returns_a_tuple_is_said_to_on_every_backend() -> None:
    """A plugin's forward returning (logits, score): eager's cell said `output is a tuple`, and
    ONNX Runtime's, whose output was its first tensor, failed `'tuple' object has no attribute 'shape'`."""
    ref = torch.randn(2, 10)
    said = "is a tuple, not a tensor: the harness compares a model's one output tensor (its forward returns one)"
    assert compare((ref, ref.sum()), (ref, ref.sum()), "fp32")["reason"] == f"output {said}"
    assert compare(ref, (ref, ref.sum()), "fp32")["reason"] == f"eager's output {said}"


def test_a_model_that_reads_no_batch_on_dim_0_is_said_to_at_its_reference() -> None:
    """The harness stacks samples on dim 0. A plugin's nn.LSTM without batch_first (steps first)
    mixed the samples of a batch, and a model whose output had no batch dim (a mean over it, a
    transpose) returned something else than one row a sample: every cell, eager's among them, was
    valid, on figures of another computation. A model that reads the batch on dim 0 passes."""
    from torch import nn

    from harness.measure.correctness import batch_fault

    torch.manual_seed(0)
    samples = list(torch.randn(4, 1, 6, 8).unbind())  # four samples [1, 6 steps, 8 features]

    class Lstm(nn.Module):
        def __init__(self, batch_first: bool) -> None:
            super().__init__()
            self.lstm = nn.LSTM(8, 8, batch_first=batch_first)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.lstm(x)[0]

    def fault(model: nn.Module, batch: int) -> str:
        with torch.no_grad():
            example = torch.cat(samples[:batch])
            return batch_fault(model, samples, example, model(example), "fp32")

    for batch in (1, 4):
        assert fault(Lstm(batch_first=True).eval(), batch) == ""
        mixed = fault(Lstm(batch_first=False).eval(), batch)
        given = "after another in a batch of 2" if batch == 1 else "last in a batch of 4"
        assert mixed.startswith(f"computed another row for a sample {given} than for it alone (max abs error "), mixed
        assert mixed.endswith("each row of the output must depend on its own sample alone (a forward that takes the "
                              "batch on another dim, as nn.LSTM without batch_first=True, mixes them; docs/adding_a_model.md)")

    class Reduced(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.mean(0)

    assert fault(Reduced(), 4) == (
        "returned [6, 8] for a batch of 4, its input [4, 6, 8]: the harness stacks the samples on dim 0 and reads row i "
        "of the output as sample i's, so the output's dim 0 must be the batch (docs/adding_a_model.md)")

    class Transposed(nn.Module):  # dim 0 the batch by chance at a batch of 6: the rows are not the samples'
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.transpose(0, 1)

    samples = list(torch.randn(6, 1, 6, 8).unbind())
    assert fault(Transposed(), 6).startswith("returned a row of shape [1, 6, 8] for a sample last in a batch of 6 and "
                                             "[6, 1, 8] for it alone"), fault(Transposed(), 6)


def test_a_row_near_zero_is_held_to_its_batch_s_scale_in_the_batch_check() -> None:
    """A scorer (one output a sample) whose last sample scores 0 alone and 1.5e-07 in a batch (a
    GEMM's rounding that depends on the batch, as MKL's did for an MLP here), far under the limit:
    held on its own, the row had no scale, its cosine 0, and every cell of a good model failed at the
    reference. It is held within its batch, as `compare` holds a backend's output; a model that mixes
    the samples still fails."""
    from torch import nn

    from harness.measure.correctness import batch_fault

    class Scorer(nn.Module):  # a sample's first feature, rounded otherwise in a batch
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x[:, :1] + (1.5e-7 if x.shape[0] > 1 else 0.0)

    class Mixing(nn.Module):  # each score over the batch's
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x[:, :1].softmax(0)

    torch.manual_seed(0)
    for batch in (1, 2, 4):
        samples = list(torch.randn(8, 1, 16).unbind())
        samples[batch - 1][0, 0] = 0.0  # the example's last sample
        example = torch.cat(samples[:batch])
        assert batch_fault(Scorer(), samples, example, Scorer()(example), "fp32") == "", batch
        if batch > 1:
            assert batch_fault(Mixing(), samples, example, Mixing()(example), "fp32").startswith(
                f"computed another row for a sample last in a batch of {batch} than for it alone (max abs error ")
