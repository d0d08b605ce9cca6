"""MLP-Mixer token mixing: an MLP across the sequence axis, shared by all channels.

Tolstikhin et al. 2021, "MLP-Mixer: An all-MLP Architecture for Vision", https://arxiv.org/abs/2105.01601.

y[:, c] = W₂ GELU(W₁ x[:, c] + b₁) + b₂ per channel c, with W₁ ∈ R^{hidden × seq_len} and
W₂ ∈ R^{seq_len × hidden} sliced to the first N positions. Padded rows are zeroed before mixing, so
padding never reaches real positions (and padded == truncated exactly). The encoder's feed-forward
block plays the role of Mixer's channel-mixing MLP.

Time O(B·N·hidden·C), memory O(B·hidden·C + B·N·C).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lra_bench.attention.base import TokenMixer
from lra_bench.checks import Count
from lra_bench.errors import ConfigError


class MLPMixerTokenMixing(TokenMixer):
    """Token-mixing MLP seq_len -> hidden -> seq_len (sliced to N), applied to every channel.

    Args:
        dim, num_heads, seq_len, dropout: supplied by the encoder (see ``TokenMixer``); heads are unused.
        hidden: token-mixing MLP width D_S (paper: 256 for ViT-B/16-sized Mixers).
    """

    name = "mlp_mixer"

    def __init__(self, dim: int, num_heads: int, seq_len: int, dropout: float, hidden: Count = 256) -> None:
        super().__init__(dim, num_heads, seq_len, dropout)
        if hidden <= 0:
            raise ConfigError(f"attention=mlp_mixer: hidden must be positive, got {hidden}")
        self.w1 = nn.Parameter(torch.randn(hidden, seq_len) / math.sqrt(seq_len))  # (hidden, seq_len)
        self.b1 = nn.Parameter(torch.zeros(hidden))  # (hidden,)
        self.w2 = nn.Parameter(torch.randn(seq_len, hidden) / math.sqrt(hidden))  # (seq_len, hidden)
        self.b2 = nn.Parameter(torch.zeros(seq_len))  # (seq_len,)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        self.check_input(x, mask)
        n = x.shape[1]
        if mask is not None:
            x = x.masked_fill(~mask[..., None], 0.0)  # (B, N, C)
        h = torch.einsum("kn,bnc->bkc", self.w1[:, :n].to(x.dtype), x)  # (B, hidden, C)
        h = F.gelu(h + self.b1[:, None].to(h.dtype))  # (B, hidden, C)
        y = torch.einsum("nk,bkc->bnc", self.w2[:n].to(h.dtype), h) + self.b2[:n, None].to(h.dtype)  # (B, N, C)
        return self.out_drop(y)
