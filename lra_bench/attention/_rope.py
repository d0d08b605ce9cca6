"""Rotary position embedding (RoPE): queries and keys rotated by their position before ``attend``.

Su, Lu, Pan, Murtadha, Wen & Liu 2021, "RoFormer: Enhanced Transformer with Rotary Position Embedding",
https://arxiv.org/abs/2104.09864. Each pair of channels (i, i + D/2) of a head is rotated by the angle
``position * theta_i`` with ``theta_i = base^(-2i/D)``. A rotation is orthogonal, so the dot product of a query at
position m and a key at position n depends on m - n only (RoFormer eq. 16): attention that scores by q.k sees
relative positions, and nothing is added to the token embeddings. The pairs (i, i + D/2) are a fixed permutation of
RoFormer's (2i, 2i + 1) (the layout of GPT-NeoX and most PyTorch code): the same rotation of the same pairs.

Axes: B batch, H heads, N positions, D head dim.
"""

from __future__ import annotations

import torch
from einops import rearrange
from torch import Tensor, nn

from lra_bench.errors import ConfigError

BASE = 10000.0  # RoFormer's base of the angular frequencies


class RotaryPositions(nn.Module):
    """Rotates (B, H, N, D) queries or keys by their positions ``offset .. offset + N - 1``.

    Args:
        head_dim: D, the channels of one head (must be even: channels rotate in pairs).
        seq_len: the longest N (the angle table is built for it; no parameters, nothing in the state dict).
    """

    def __init__(self, head_dim: int, seq_len: int) -> None:
        super().__init__()
        if head_dim % 2:
            raise ConfigError(f"model.positions=rope rotates pairs of channels, so the head dimension "
                              f"(model.dim / model.num_heads = {head_dim}) must be even; change model.dim or "
                              "model.num_heads")
        self.head_dim, self.seq_len = head_dim, seq_len
        self.freqs = BASE ** (-torch.arange(0, head_dim // 2, dtype=torch.float64) * 2 / head_dim)  # (D/2,)
        cos, sin = self.angles(seq_len, 0)
        self.register_buffer("cos", cos, persistent=False)  # (seq_len, D/2): moves with the module, not saved
        self.register_buffer("sin", sin, persistent=False)

    def angles(self, n: int, offset: int) -> tuple[Tensor, Tensor]:
        """cos and sin of every (position, pair) angle: each (N, D/2), fp32 on the CPU. The angles are formed in
        fp64: at position 16,000 an fp32 angle is off by ~1e-3 rad."""
        positions = torch.arange(offset, offset + n, dtype=torch.float64)  # (N,)
        angle = positions[:, None] * self.freqs[None, :]  # (N, D/2)
        return angle.cos().float(), angle.sin().float()

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """x: (B, H, N, D) -> the same shape, pair (i, i + D/2) of position p rotated by (offset + p) * theta_i.
        Computed in fp32, returned in x's dtype."""
        n = x.shape[-2]
        if offset + n <= self.seq_len:
            cos, sin = self.cos[offset : offset + n], self.sin[offset : offset + n]  # (N, D/2)
        else:  # beyond the table (only the relative-position tests shift this far)
            cos, sin = (t.to(x.device) for t in self.angles(n, offset))
        first, second = rearrange(x.float(), "... n (two half) -> two ... n half", two=2)  # each (B, H, N, D/2)
        rotated = torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)  # (B, H, N, D)
        return rotated.to(x.dtype)
