"""The roofline's FLOPs of the fused operators torch counts none for (harness/measure/flop_formulas.py),
each held to torch's own count of the same work done unfused."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from harness.measure.flop_formulas import cudnn_rnn_flops, custom_mapping
from harness.measure.roofline import model_costs


def _counted(run: Callable[[], Any], *, grad: bool = False) -> tuple[int, set[str]]:
    with torch.set_grad_enabled(grad), FlopCounterMode(display=False, custom_mapping=custom_mapping()) as counter:
        run()
    return counter.get_total_flops(), {str(op) for op in counter.get_flop_counts()["Global"]}


def test_an_lstm_through_onednn_counts_what_its_matrix_products_count() -> None:
    """oneDNN's fused layer read 0 FLOPs: the 10-layer LSTM's roofline said 0 GFLOP."""
    lstm = torch.nn.LSTM(32, 48, num_layers=2, bidirectional=True).eval()
    steps = torch.randn(7, 3, 32)
    fused, ops = _counted(lambda: lstm(steps))
    if "aten.mkldnn_rnn_layer" not in ops:
        pytest.skip(f"this torch runs nn.LSTM without oneDNN here ({sorted(ops)})")
    with torch.backends.mkldnn.flags(enabled=False):
        unfused, unfused_ops = _counted(lambda: lstm(steps))
    assert "aten.addmm" in unfused_ops and fused == unfused > 0


def test_cudnns_one_call_for_every_layer_counts_as_its_layers_do() -> None:
    """cuDNN runs a whole nn.LSTM in one `_cudnn_rnn` call, its weights a flat list (checked by shape
    here: no GPU needed)."""
    lstm = torch.nn.LSTM(32, 48, num_layers=2, bidirectional=True)
    weights = [tuple(w.shape) for w in lstm._flat_weights]
    with torch.backends.mkldnn.flags(enabled=False):
        unfused, _ = _counted(lambda: lstm.eval()(torch.randn(7, 3, 32)))
    assert cudnn_rnn_flops((7, 3, 32), weights, 4, None, (4, 3, 48)) == unfused


def _torch_counted(run: Callable[[], Any]) -> int:
    """Torch's own count, none of ours: with gradients on (off the fast path) and the math attention
    kernel, whose batched products torch counts (the CPU's fused attention operator it does not)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel([SDPBackend.MATH]), torch.enable_grad(), FlopCounterMode(display=False) as counter:
        run()
    return counter.get_total_flops()


@pytest.mark.parametrize("source", [10, 12])
def test_multi_head_attention_counts_as_torch_counts_it_unfused(source: int) -> None:
    """The fast path (eval, no gradient, self-attention) is one fused operator torch counted 0 for:
    torchvision's vit_b_16 read 22.5 GFLOPs of its 35.1. Off it, the CPU's attention operator, which
    torch counted 0 for too (cross-attention, with gradients)."""
    attention = torch.nn.MultiheadAttention(64, 4, batch_first=True).eval()
    query, key = torch.randn(2, 10, 64), torch.randn(2, source, 64)
    keys = query if source == 10 else key
    expected = 2 * 2 * (2 * 10 + 2 * source) * 64 * 64 + 2 * 2 * 2 * 10 * source * 64  # projections, scores, values
    assert _torch_counted(lambda: attention(query, keys, keys, need_weights=False)) == expected
    ours, ops = _counted(lambda: attention(query, keys, keys, need_weights=False), grad=source != 10)
    assert ours == expected
    assert ("aten._native_multi_head_attention" if source == 10 else "aten._scaled_dot_product_flash_attention_for_cpu") in ops


def test_a_shape_a_formula_cannot_read_counts_0_as_before_not_a_failure() -> None:
    """A plugin's model may hand the fused attention a nested tensor: the whole count failed."""
    (formula,) = [f for op, f in custom_mapping().items() if str(op) == "aten._native_multi_head_attention"]
    nested = torch.nested.nested_tensor([torch.randn(3, 64), torch.randn(5, 64)])
    with pytest.raises(RuntimeError):
        nested.shape  # noqa: B018 - what torch's own shape reading did, outside any guard
    assert formula(nested, nested, nested, 64, 4, out_val=None) == 0
    assert formula(torch.randn(2, 10, 64), torch.randn(2, 10, 64), torch.randn(2, 10, 64), 64, 4, out_val=None) > 0


def test_the_roofline_counts_the_10_layer_lstm() -> None:
    """lstm_10x256 (hidden 256, 100 steps, batch 1): 2 x 100 x 10 x (4 x 256 x 512) FLOPs."""
    from harness.models import zoo

    model = zoo.build_model("lstm_10x256", pretrained=False, seed=0, device="cpu", dtype="fp32")
    (example,) = zoo.make_samples(1, model="lstm_10x256", input_size=100, device="cpu", dtype="fp32")
    assert model_costs(model, example).flops == 2 * 100 * 10 * 4 * 256 * 512
