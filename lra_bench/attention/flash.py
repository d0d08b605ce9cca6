"""Exact softmax attention through ``torch.nn.functional.scaled_dot_product_attention``.

Same function as ``softmax`` (Vaswani et al. 2017, https://arxiv.org/abs/1706.03762), dispatched to PyTorch's
fused kernels: FlashAttention (Dao et al. 2022, https://arxiv.org/abs/2205.14135) or memory-efficient attention
on GPU where the mask/dtype allow, the math kernel otherwise.

Time O(B·H·N²·D); memory O(B·H·N) with the fused GPU kernels (O(B·H·N²) on the math fallback, e.g. CPU).
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor

from lra_bench.attention.base import Attention


class FlashAttention(Attention):
    """softmax(QKᵀ/√D) V with a boolean key-padding mask, computed by ``F.scaled_dot_product_attention``.

    Args:
        dim, num_heads, seq_len, dropout: supplied by the encoder (see ``Attention``).
        attn_dropout: dropout on the attention probabilities, applied only in training (LRA: 0.1).
    """

    name = "flash"

    def __init__(self, dim: int, num_heads: int, seq_len: int, dropout: float, attn_dropout: float = 0.1) -> None:
        super().__init__(dim, num_heads, seq_len, dropout)
        self.attn_dropout = attn_dropout

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
        attn_mask = None
        if mask is not None:
            # a fully padded row would give NaN: let it attend everywhere (its output is unspecified anyway)
            keep = mask | ~mask.any(dim=-1, keepdim=True)  # (B, N)
            attn_mask = keep[:, None, None, :]  # (B, 1, 1, N) True = attend
        p = self.attn_dropout if self.training else 0.0
        return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=p)  # (B, H, N, D)
