"""Blocked local attention: each query block attends to its own block (and optionally its neighbours).

The "Local Attention" baseline of Long Range Arena (Tay et al. 2020, https://arxiv.org/abs/2011.04006, §4),
following the block-local pattern of Image Transformer (Parmar et al. 2018, https://arxiv.org/abs/1802.05751)
and Liu et al. 2018 (https://arxiv.org/abs/1801.10198). With ``num_neighbor_blocks=0`` the blocks do not
overlap, as in LRA's ``local`` model (block 50).

Time O(B·H·N·w·D) and memory O(B·H·N·w) with w = (2·num_neighbor_blocks + 1)·block_size keys per query:
only the attended blocks are materialised, never the N x N matrix. On CUDA the same pattern runs as a
FlexAttention block mask (``kernel``, see ``lra_bench.attention._sparse``).
"""

from __future__ import annotations

import math

import torch
from einops import rearrange
from torch import Tensor

from lra_bench.attention._blocks import masked_attention, neighbor_blocks, pad_dim, real_keys
from lra_bench.attention._flex import PatternMod
from lra_bench.attention._sparse import SparseKernel, SparsePatternAttention
from lra_bench.checks import Count, DropRate, NonNegativeInt
from lra_bench.errors import ConfigError


class LocalAttention(SparsePatternAttention):
    """Non-overlapping block-local attention with optional neighbour blocks on each side.

    Args:
        dim, num_heads, seq_len, dropout: supplied by the encoder (see ``Attention``).
        block_size: tokens per block (LRA default 50).
        num_neighbor_blocks: blocks attended on each side besides a query's own (0 = LRA's non-overlapping form).
        attn_dropout: dropout on the attention probabilities.
        kernel: "auto" (FlexAttention on CUDA, blocked elsewhere), "blocked" or "flex".
    """

    name = "local"

    def __init__(
        self,
        dim: int,
        num_heads: int,
        seq_len: int,
        dropout: float,
        block_size: Count = 50,
        num_neighbor_blocks: NonNegativeInt = 0,
        attn_dropout: DropRate = 0.1,
        kernel: SparseKernel = "auto",
    ) -> None:
        super().__init__(dim, num_heads, seq_len, dropout, attn_dropout, kernel)
        if block_size <= 0 or num_neighbor_blocks < 0:
            raise ConfigError(
                f"local: need block_size > 0 and num_neighbor_blocks >= 0, got {block_size}, {num_neighbor_blocks}"
            )
        self.require_block_fits("block_size", block_size)
        self.block_size = block_size
        self.num_neighbor_blocks = num_neighbor_blocks

    def flex_pattern(self, n: int, device: torch.device) -> tuple[PatternMod, torch.Tensor]:
        bs, nn_ = min(self.block_size, n), self.num_neighbor_blocks

        def pattern_mod(h: torch.Tensor, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
            return (q // bs - k // bs).abs() <= nn_

        return pattern_mod, self.static_classes(pattern_mod, 1, n, device)

    def attend_blocked(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
        b_, h_, n, _ = q.shape
        bs = min(self.block_size, n)  # one block of N when N < block_size (same pattern)
        nn_ = self.num_neighbor_blocks
        real = pad_dim(real_keys(mask, b_, n, q.device), bs, dim=1, value=False)  # (B, Np)
        q, k, v = (rearrange(pad_dim(t, bs, dim=2), "b h (nb w) d -> b h nb w d", w=bs) for t in (q, k, v))
        real = rearrange(real, "b (nb w) -> b nb w", w=bs)  # (B, nb, bs)
        k = rearrange(neighbor_blocks(k, nn_, nn_, dim=2), "b h nb s w d -> b h nb (s w) d")  # (B,H,nb,(2n+1)bs,D)
        v = rearrange(neighbor_blocks(v, nn_, nn_, dim=2), "b h nb s w d -> b h nb (s w) d")
        valid = rearrange(neighbor_blocks(real, nn_, nn_, dim=1, value=False), "b nb s w -> b nb (s w)")
        valid = valid[:, None, :, None, :]  # (B, 1, nb, 1, (2n+1)bs)
        out, _ = masked_attention(q, k, v, valid, 1.0 / math.sqrt(self.head_dim), self.attn_drop)  # (B,H,nb,bs,D)
        return rearrange(out, "b h nb w d -> b h (nb w) d")[:, :, :n]  # (B, H, N, D)
