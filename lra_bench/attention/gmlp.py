"""gMLP: a spatial gating unit replaces attention.

Liu et al. 2021, "Pay Attention to MLPs", https://arxiv.org/abs/2105.08050.

z = GELU(x U) split into (u, v) along channels; s(v) = W_N LayerNorm(v) + b_N with the spatial
projection W ∈ R^{seq_len × seq_len} (top-left N × N block used, initialised near 0) and b (first N
entries, initialised to 1); output (u ⊙ s(v)) O. Padded rows of LayerNorm(v) are zeroed before the
spatial mixing, so padding never reaches real positions (and padded == truncated exactly).

Time O(B·N²·E + B·N·C·E), memory O(B·N·E + seq_len²) (E = ``expansion``·C): the spatial projection is a
dense seq_len × seq_len weight, applied without materialising any (B, ·, N, N) tensor.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lra_bench.attention.base import TokenMixer
from lra_bench.checks import Count, NonNegativeFloat
from lra_bench.errors import ConfigError


class GMLPSpatialGating(TokenMixer):
    """Channel projection, spatial gating unit, output projection (the gMLP block minus its residual).

    Args:
        dim, num_heads, seq_len, dropout: supplied by the encoder (see ``TokenMixer``); heads are unused.
        expansion: width of each gMLP half as a multiple of ``dim`` (paper: d_ffn = 6·d_model for the
            full block; 1 keeps the parameter count close to the attention it replaces).
        init_eps: spatial weights start uniform in ±init_eps/seq_len (paper: "near zero"; 1/seq_len keeps
            the gate ≈ 1 while letting tokens interact from step 0).
    """

    name = "gmlp"

    def __init__(
        self,
        dim: int,
        num_heads: int,
        seq_len: int,
        dropout: float,
        expansion: Count = 1,
        init_eps: NonNegativeFloat = 1.0,
    ) -> None:
        super().__init__(dim, num_heads, seq_len, dropout)
        if expansion <= 0:
            raise ConfigError(f"attention=gmlp: expansion must be positive, got {expansion}")
        hidden = expansion * dim
        self.proj_in = nn.Linear(dim, 2 * hidden)  # (C -> 2E)
        self.norm = nn.LayerNorm(hidden)
        bound = init_eps / seq_len
        self.spatial_weight = nn.Parameter(torch.empty(seq_len, seq_len).uniform_(-bound, bound))  # (seq_len, seq_len)
        self.spatial_bias = nn.Parameter(torch.ones(seq_len))  # (seq_len,)
        self.proj_out = nn.Linear(hidden, dim)  # (E -> C)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        self.check_input(x, mask)
        n = x.shape[1]
        u, v = F.gelu(self.proj_in(x)).chunk(2, dim=-1)  # each (B, N, E)
        v = self.norm(v)  # (B, N, E)
        if mask is not None:
            v = v.masked_fill(~mask[..., None], 0.0)
        w = self.spatial_weight[:n, :n].to(v.dtype)  # (N, N)
        gate = torch.einsum("ij,bje->bie", w, v) + self.spatial_bias[:n, None].to(v.dtype)  # (B, N, E)
        return self.out_drop(self.proj_out(u * gate))  # (B, N, C)
