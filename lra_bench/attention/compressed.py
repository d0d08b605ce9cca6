"""Memory-compressed attention: keys and values shortened by a strided convolution.

Liu et al. 2018, "Generating Wikipedia by Summarizing Long Sequences", https://arxiv.org/abs/1801.10198
(Sec. 4.2.2, memory-compressed attention, kernel = stride = 3).

Padded rows of K and V are zeroed before the convolution, the sequence is right-padded with zeros
to a multiple of the stride, and compressed keys whose window holds only padding are masked out;
the output at real positions therefore equals the truncated input's output.

Time O(B·H·N·(N/s)·D + B·N·C²), memory O(B·H·N·N/s) (s = ``compression``): still quadratic in N,
but s times smaller than softmax attention.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import Tensor, nn

from lra_bench.attention.base import Attention, key_padding_bias
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
        compression: int = 3,
        attn_dropout: float = 0.1,
    ) -> None:
        super().__init__(dim, num_heads, seq_len, dropout)
        if compression <= 0:
            raise ConfigError(f"attention=compressed: compression must be positive, got {compression}")
        self.compression = compression
        self.conv_k = nn.Conv1d(dim, dim, kernel_size=compression, stride=compression)
        self.conv_v = nn.Conv1d(dim, dim, kernel_size=compression, stride=compression)
        self.attn_drop = nn.Dropout(attn_dropout)

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
        scores = torch.einsum("bhnd,bhmd->bhnm", q, k_c) / math.sqrt(self.head_dim)  # (B, H, N, M)
        if mask is not None:
            block_mask = F.pad(mask, (0, pad)).view(mask.shape[0], -1, s).any(dim=-1)  # (B, M): window has a real row
            scores = scores + key_padding_bias(block_mask, scores.dtype)  # bias (B, 1, 1, M)
        probs = self.attn_drop(scores.softmax(dim=-1))  # (B, H, N, M)
        return torch.einsum("bhnm,bhmd->bhnd", probs, v_c)  # (B, H, N, D)
