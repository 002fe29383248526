"""FLOPs of the operators torch's FlopCounterMode counts none for, though they are matrix work.

FlopCounterMode knows matrix multiplications, convolutions and attention on a GPU. Four fused
operators are none of those to it, and counted 0:
- `mkldnn_rnn_layer`: a layer of nn.LSTM on the CPU (oneDNN); the 10-layer LSTM read 0 FLOPs;
- `_cudnn_rnn`: nn.LSTM, nn.GRU and nn.RNN on a GPU (cuDNN), every layer in one call;
- `_native_multi_head_attention`: nn.MultiheadAttention's inference fast path (batch first, no
  gradient), torchvision's ViTs: vit_b_16 read 22.5 GFLOPs of its 35.1;
- `_scaled_dot_product_flash_attention_for_cpu`: F.scaled_dot_product_attention on the CPU
  (nn.MultiheadAttention off its fast path; no model of the zoo reaches it in eval mode).

Each is counted as the roofline counts the rest: two FLOPs per multiply-add of its matrix products
(the projections, and attention's two batched products), element-wise work (the gates, softmax)
left out. The formulas take shapes (`_or_none` reads them from the tensors FlopCounterMode hands
over, as its `custom_mapping` takes them).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

Shape = Sequence[int]


def _steps(input_shape: Shape) -> int:
    """Time steps times the batch: every row a recurrent layer's weights multiply (a packed input's
    rows are the steps of all its sequences)."""
    return math.prod(input_shape[:-1])


def _matrices(shapes: Sequence[Any]) -> int:
    """Multiply-adds per step of the 2-D weights among `shapes` (biases are element-wise)."""
    return sum(math.prod(shape) for shape in shapes if shape is not None and len(shape) == 2)


def mkldnn_rnn_layer_flops(input_shape: Shape, weight_ih: Shape, weight_hh: Shape, *args: Any,
                           out_shape: Any = None, **kwargs: Any) -> int:
    """One layer, one direction: the input and the hidden state through their weights at each step."""
    return 2 * _steps(input_shape) * _matrices((weight_ih, weight_hh))


def cudnn_rnn_flops(input_shape: Shape, weights: Sequence[Any], *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """Every layer and direction at once: each 2-D weight (input, hidden, projection) at each step."""
    return 2 * _steps(input_shape) * _matrices(weights)


def native_multi_head_attention_flops(query: Shape, key: Shape, value: Shape, embed_dim: int, num_heads: int,
                                      *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """Batch-first query [B, L, E] and key [B, S, E]: the query, key and value projections, the
    scores (Q K^T over all heads), the weighted values, and the output projection."""
    batch, target, source = math.prod(query[:-2]), query[-2], key[-2]
    projections = (2 * target + 2 * source) * embed_dim * embed_dim  # q and out over L; k and v over S
    attention = 2 * target * source * embed_dim  # Q K^T, then the weights times V
    return 2 * batch * (projections + attention)


def cpu_attention_flops(query: Shape, key: Shape, value: Shape, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """Query [..., L, E], key [..., S, E], value [..., S, Ev] (batch and heads in front): the scores
    and the weighted values."""
    pairs = math.prod(query[:-1]) * key[-2]  # every query row against every key row, per batch and head
    return 2 * pairs * (query[-1] + value[-1])


def _or_none(formula: Callable[..., int]) -> Callable[..., int]:
    """`formula` over the shapes of the tensors it is given, counting 0 (as torch did) where a shape
    cannot be read or is not one it reads, instead of failing the count of the whole model (a
    plugin's model may pass a nested tensor, whose `.shape` raises). It takes the raw arguments
    (`_get_raw`), so that reading the shapes is inside the guard."""
    from torch import Tensor
    from torch.utils._pytree import tree_map

    def counted(*args: Any, out_val: Any = None, **kwargs: Any) -> int:
        try:
            shapes, named = tree_map(lambda x: x.shape if isinstance(x, Tensor) else x, (args, kwargs))
            return formula(*shapes, **named)
        except (TypeError, ValueError, IndexError, RuntimeError):
            return 0

    counted._get_raw = True  # type: ignore[attr-defined]  # FlopCounterMode: pass the tensors as they are
    return counted


def custom_mapping() -> dict[Any, Any]:
    """The formulas by operator, for FlopCounterMode(custom_mapping=...): those this torch has."""
    import torch

    aten = torch.ops.aten
    formulas: dict[str, Callable[..., int]] = {"mkldnn_rnn_layer": mkldnn_rnn_layer_flops, "_cudnn_rnn": cudnn_rnn_flops,
                "_native_multi_head_attention": native_multi_head_attention_flops,
                "_scaled_dot_product_flash_attention_for_cpu": cpu_attention_flops}
    return {getattr(aten, name): _or_none(formula) for name, formula in formulas.items() if hasattr(aten, name)}
