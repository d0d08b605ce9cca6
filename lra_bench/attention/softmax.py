"""Standard multi-head softmax attention that materialises the N x N score matrix.

Vaswani et al. 2017, "Attention Is All You Need", https://arxiv.org/abs/1706.03762 — the
vanilla Transformer baseline of Long Range Arena (Tay et al. 2020, https://arxiv.org/abs/2011.04006).

Time O(B·H·N²·D), memory O(B·H·N²) (the explicit score matrix is the point of this baseline).
"""

from __future__ import annotations

import math

from torch import Tensor, nn

from lra_bench.attention.base import Attention, key_padding_bias
from lra_bench.checks import DropRate


class SoftmaxAttention(Attention):
    """softmax(QKᵀ/√D + key-padding bias) V with the full (B, H, N, N) matrix built explicitly.

    Args:
        dim, num_heads, seq_len, dropout: supplied by the encoder (see ``Attention``).
        attn_dropout: dropout on the attention probabilities (LRA: 0.1).
    """

    name = "softmax"

    def __init__(self, dim: int, num_heads: int, seq_len: int, dropout: float, attn_dropout: DropRate = 0.1) -> None:
        super().__init__(dim, num_heads, seq_len, dropout)
        self.attn_drop = nn.Dropout(attn_dropout)

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)  # (B, H, N, N)
        bias = key_padding_bias(mask, scores.dtype)  # (B, 1, 1, N) or None
        if bias is not None:
            scores = scores + bias
        probs = self.attn_drop(scores.softmax(dim=-1))  # (B, H, N, N)
        return probs @ v  # (B, H, N, D)
