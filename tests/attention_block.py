"""A 4-head attention block that calls `F.scaled_dot_product_attention` itself, as vit_b_16 does
(through `nn.MultiheadAttention`): two linears around one call, for the backends' fusion reports."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


class AttentionBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv, self.out = nn.Linear(32, 96), nn.Linear(32, 32)

    def forward(self, x: Any) -> Any:
        b, t, c = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, 4, 8).permute(2, 0, 3, 1, 4)
        y = nn.functional.scaled_dot_product_attention(q, k, v)
        return self.out(y.transpose(1, 2).reshape(b, t, c))


def attention_block() -> tuple[Any, Any]:
    """The block in eval mode, seeded, and its example input [1, 64, 32]."""
    torch.manual_seed(0)
    return AttentionBlock().eval(), torch.randn(1, 64, 32)
