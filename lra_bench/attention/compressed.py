"""Memory-compressed attention: keys and values shortened by a strided convolution.

Liu et al. 2018, "Generating Wikipedia by Summarizing Long Sequences", https://arxiv.org/abs/1801.10198
(Sec. 4.2.2, memory-compressed attention, kernel = stride = 3).

Padded rows of K and V are zeroed before the convolution, the sequence is right-padded with zeros
to a multiple of the stride, and compressed keys whose window holds only padding are masked out;
the output at real positions therefore equals the truncated input's output.

The attention over the compressed keys runs through ``F.scaled_dot_product_attention`` with a (B, 1, 1, N/s) key
mask: a fused kernel that never stores the N x N/s probabilities where one exists (CUDA; CPU outside training
with attention dropout).

Time O(B·H·N·(N/s)·D + B·N·C²), memory O(B·H·N·N/s) (s = ``compression``; O(B·H·N) on fused kernels): still
quadratic in time, s times less than softmax attention.
"""

from __future__ import annotations

import torch.nn.functional as F
from einops import rearrange
from torch import Tensor, nn

from lra_bench.attention.base import Attention, checked_attn_dropout
from lra_bench.checks import Count, DropRate
from lra_bench.errors import ConfigError


class CompressedAttention(Attention):
    """softmax(Q conv_s(K)^T / √D) conv_s(V) with a (kernel = stride = s) Conv1d over the sequence.

    Args:
        dim, num_heads, seq_len, dropout: supplied by the encoder (see ``Attention``).
        compression: kernel size = stride s of the convolution (paper: 3).
        attn_dropout: dropout on the attention probabilities.
    """

    name = "compressed"

    def __init__(
        self,
        dim: int,
        num_heads: int,
        seq_len: int,
        dropout: float,
        compression: Count = 3,
        attn_dropout: DropRate = 0.1,
    ) -> None:
        super().__init__(dim, num_heads, seq_len, dropout)
        if compression <= 0:
            raise ConfigError(f"attention=compressed: compression must be positive, got {compression}")
        self.compression = compression
        self.conv_k = nn.Conv1d(dim, dim, kernel_size=compression, stride=compression)
        self.conv_v = nn.Conv1d(dim, dim, kernel_size=compression, stride=compression)
        self.attn_dropout = checked_attn_dropout(attn_dropout)

    def _compress(self, conv: nn.Conv1d, t: Tensor, pad: int) -> Tensor:
        t = rearrange(t, "b h n d -> b (h d) n")  # (B, C, N)
        t = conv(F.pad(t, (0, pad)))  # (B, C, M), M = ceil(N / s)
        return rearrange(t, "b (h d) m -> b h m d", h=self.num_heads)  # (B, H, M, D)

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
        n, s = q.shape[-2], self.compression
        pad = (-n) % s
        if mask is not None:
            keep = mask[:, None, :, None]  # (B, 1, N, 1)
            k = k.masked_fill(~keep, 0.0)
            v = v.masked_fill(~keep, 0.0)
        k_c = self._compress(self.conv_k, k, pad)  # (B, H, M, D)
        v_c = self._compress(self.conv_v, v, pad)  # (B, H, M, D)
        attn_mask = None
        if mask is not None:
            window_real = F.pad(mask, (0, pad)).view(mask.shape[0], -1, s).any(dim=-1)  # (B, M): a real row inside
            window_real = window_real | ~window_real.any(dim=-1, keepdim=True)  # a fully padded row: keep it finite
            attn_mask = window_real[:, None, None, :]  # (B, 1, 1, M)
        p = self.attn_dropout if self.training else 0.0
        return F.scaled_dot_product_attention(q, k_c, v_c, attn_mask=attn_mask, dropout_p=p)  # (B, H, N, D)
