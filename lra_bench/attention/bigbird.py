"""BigBird block-sparse attention: sliding blocks + global blocks + random blocks.

Zaheer et al. 2020, "Big Bird: Transformers for Longer Sequences", https://arxiv.org/abs/2007.14062 (§2, ITC
construction; the LRA "BigBird" row uses block 64 and 3 random blocks). The sequence is cut into blocks of b tokens.
Query block i attends to key blocks i-1, i, i+1 (the sliding part), to the first ``num_global_blocks`` blocks, and to
``num_rand_blocks`` random blocks disjoint from those; the global blocks attend to every token.

Random blocks are drawn afresh on every training forward, per head; in eval mode they come from a seeded buffer
(drawn once at construction over ⌈seq_len/b⌉ blocks), so eval is deterministic and padded == truncated.
Time O(B·H·N·b·(3 + g + r)·D), memory O(B·H·N·b·(3 + g + r)) (plus the g·b global rows over N keys). When every
query block reaches every key block (short sequences: with LRA's settings up to 7 blocks of 64 in training, 4 in
eval) the pattern is plain attention with a key mask, and that is what runs (``attend_all``, SDPA). On CUDA the
same pattern runs as a FlexAttention block mask (``kernel``, see ``lra_bench.attention._sparse``), its tiles
derived from the block-level pattern every step (the random blocks change in training).
"""

from __future__ import annotations

import math

import torch
from einops import rearrange
from torch import Tensor

from lra_bench.attention._blocks import (
    masked_attention,
    masked_attention_with_shared,
    neighbor_blocks,
    pad_dim,
    real_keys,
)
from lra_bench.attention._flex import PatternMod, block_pattern_classes
from lra_bench.attention._sparse import SparseKernel, SparsePatternAttention
from lra_bench.checks import Count, DropRate, NonNegativeInt, Seed
from lra_bench.errors import ConfigError


def draw_random_blocks(
    num_heads: int,
    nb: int,
    r: int,
    g: int,
    w: int,
    generator: torch.Generator | None = None,
    device: torch.device | None = None,
) -> tuple[Tensor, Tensor]:
    """Per head and query block, r distinct random key blocks outside its sliding window and the global blocks.

    Returns (indices (H, nb, r) long, valid (H, nb, r) bool); ``valid`` is False where fewer than r candidates exist.
    """
    blocks = torch.arange(nb, device=device)
    excluded = ((blocks[:, None] - blocks[None, :]).abs() <= w // 2) | (blocks[None, :] < g)  # (nb, nb)
    noise = torch.rand(num_heads, nb, nb, generator=generator, device=device)  # (H, nb query, nb key)
    noise = noise.masked_fill(excluded, -1.0)
    val, idx = noise.topk(min(r, nb), dim=-1)  # (H, nb, r')
    valid = val >= 0
    if idx.shape[-1] < r:  # too few blocks: pad with invalid picks
        extra = r - idx.shape[-1]
        idx = torch.cat([idx, idx.new_zeros(num_heads, nb, extra)], dim=-1)
        valid = torch.cat([valid, valid.new_zeros(num_heads, nb, extra)], dim=-1)
    return idx, valid


class BigBirdAttention(SparsePatternAttention):
    """Block-sparse attention (window + global + random blocks), global blocks at the start of the sequence.

    Args:
        dim, num_heads, seq_len, dropout: supplied by the encoder (see ``Attention``).
        block_size: tokens per block (LRA / BigBird default 64).
        num_window_blocks: odd number of blocks in the sliding window (3 = blocks i-1, i, i+1, as in BigBird).
        num_global_blocks: leading blocks with global attention (BigBird ITC uses 2: first and last block).
        num_rand_blocks: random key blocks per query block (LRA / BigBird default 3).
        seed: seed of the fixed random blocks used in eval mode.
        attn_dropout: dropout on the attention probabilities.
        kernel: "auto" (FlexAttention on CUDA, blocked elsewhere), "blocked" or "flex".
    """

    name = "bigbird"

    def __init__(
        self,
        dim: int,
        num_heads: int,
        seq_len: int,
        dropout: float,
        block_size: Count = 64,
        num_window_blocks: Count = 3,
        num_global_blocks: NonNegativeInt = 2,
        num_rand_blocks: NonNegativeInt = 3,
        seed: Seed = 0,
        attn_dropout: DropRate = 0.1,
        kernel: SparseKernel = "auto",
    ) -> None:
        super().__init__(dim, num_heads, seq_len, dropout, attn_dropout, kernel)
        if block_size <= 0 or num_window_blocks <= 0 or num_window_blocks % 2 == 0:
            raise ConfigError(
                f"bigbird: need block_size > 0 and an odd num_window_blocks > 0, got {block_size}, {num_window_blocks}"
            )
        if num_global_blocks < 0 or num_rand_blocks < 0:
            raise ConfigError("bigbird: num_global_blocks and num_rand_blocks must be >= 0")
        self.require_block_fits("block_size", block_size)
        self.block_size = block_size
        self.num_window_blocks = num_window_blocks
        self.num_global_blocks = num_global_blocks
        self.num_rand_blocks = num_rand_blocks
        nb_max = math.ceil(seq_len / block_size)
        idx, valid = draw_random_blocks(
            num_heads,
            nb_max,
            num_rand_blocks,
            num_global_blocks,
            num_window_blocks,
            generator=torch.Generator().manual_seed(seed),
        )
        self.register_buffer("eval_rand_blocks", idx)  # (H, nb_max, r) key block per query block
        self.register_buffer("eval_rand_valid", valid)  # (H, nb_max, r)

    def random_blocks(self, nb: int, device: torch.device) -> tuple[Tensor, Tensor]:
        """(H, nb, r) random key blocks and validity: fresh in training, the fixed buffer in eval."""
        g, w, r = self.num_global_blocks, self.num_window_blocks, self.num_rand_blocks
        if self.training:
            return draw_random_blocks(self.num_heads, nb, r, g, w, device=device)
        idx, valid = self.eval_rand_blocks[:, :nb], self.eval_rand_valid[:, :nb]
        return idx.clamp(max=nb - 1), valid & (idx < nb)  # blocks past the current length do not exist

    def flex_pattern(self, n: int, device: torch.device) -> tuple[PatternMod, Tensor]:
        bs, half, g = self.block_size, self.num_window_blocks // 2, self.num_global_blocks
        nb = math.ceil(n / bs)
        idx, ok = self.random_blocks(nb, device)  # (H, nb, r)
        rand = torch.where(ok, idx, -1)  # (H, nb, r) key block, -1 = none
        blocks = torch.arange(nb, device=device)
        attended = ((blocks[:, None] - blocks[None, :]).abs() <= half) | (blocks[:, None] < g) | (blocks[None, :] < g)
        hits = torch.zeros(self.num_heads, nb, nb + 1, dtype=torch.int32, device=device)  # column nb: "none"
        hits.scatter_add_(2, torch.where(ok, idx, nb), torch.ones_like(idx, dtype=torch.int32))
        attended = attended | (hits[:, :, :nb] > 0)  # (H, nb, nb)

        def pattern_mod(h: Tensor, q: Tensor, k: Tensor) -> Tensor:
            qb, kb = torch.clamp(q // bs, max=nb - 1), k // bs  # query blocks past N (tile padding) clamped
            allowed = ((qb - kb).abs() <= half) | (qb < g) | (kb < g)
            for j in range(rand.shape[-1]):
                allowed = allowed | (rand[h, qb, j] == kb)
            return allowed

        return pattern_mod, block_pattern_classes(attended, bs, n)

    def covers_sequence(self, n: int) -> bool:
        """True when every query block reaches every key block at length ``n``. Either the window and the global
        blocks already do, or the blocks left outside them number at most ``num_rand_blocks``, so the random picks
        take them all: always in training (drawn over this length), in eval only at the buffer's own length (its
        picks past a shorter length are dropped). LRA's block 64, window 3, 2 global, 3 random blocks: up to 4 blocks
        (256 tokens) always, up to 7 (448) in training. Plain ints: no tensor, no graph break."""
        nb, half, g = -(-n // self.block_size), self.num_window_blocks // 2, self.num_global_blocks

        worst = 0  # the most key blocks j >= g with |i - j| > half, over the non-global query blocks i
        for i in range(g, nb):  # (global blocks' rows attend everywhere anyway)
            worst = max(worst, (nb - g) - max(0, min(nb - 1, i + half) - max(g, i - half) + 1))
        if worst == 0:
            return True
        return worst <= self.num_rand_blocks and (self.training or nb == self.eval_rand_blocks.shape[1])

    def attend_blocked(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
        b_, h_, n, _ = q.shape
        if self.covers_sequence(n):  # the same function as the blocks below, without their padded key sets
            return self.attend_all(q, k, v, mask)  # (B, H, N, D)
        bs, half = self.block_size, self.num_window_blocks // 2
        real = pad_dim(real_keys(mask, b_, n, q.device), bs, dim=1, value=False)  # (B, Np)
        gtok = min(self.num_global_blocks * bs, n)  # global tokens
        scale = self.head_dim**-0.5
        qb, kb, vb = (rearrange(pad_dim(t, bs, dim=2), "b h (nb w) d -> b h nb w d", w=bs) for t in (q, k, v))
        nb = qb.shape[2]
        real_b = rearrange(real, "b (nb w) -> b nb w", w=bs)  # (B, nb, bs)
        # sliding blocks (global blocks excluded here: they come once through the shared global keys)
        blk = neighbor_blocks(torch.arange(nb, device=q.device), half, half, dim=0, value=-1)  # (nb, w) block ids
        k_win = neighbor_blocks(kb, half, half, dim=2)  # (B, H, nb, w, bs, D)
        v_win = neighbor_blocks(vb, half, half, dim=2)
        ok_win = (
            neighbor_blocks(real_b, half, half, dim=1, value=False) & (blk >= self.num_global_blocks)[None, :, :, None]
        )  # (B, nb, w, bs)
        # random blocks, per head
        idx, ok_idx = self.random_blocks(nb, q.device)  # (H, nb, r)
        heads = torch.arange(h_, device=q.device)[:, None, None]  # (H, 1, 1)
        k_rnd, v_rnd = kb[:, heads, idx], vb[:, heads, idx]  # (B, H, nb, r, bs, D)
        ok_rnd = real_b[:, idx] & ok_idx[None, :, :, :, None]  # (B, H, nb, r, bs)
        k_set = rearrange(torch.cat([k_win, k_rnd], dim=3), "b h nb s w d -> b h nb (s w) d")  # (B,H,nb,(w+r)bs,D)
        v_set = rearrange(torch.cat([v_win, v_rnd], dim=3), "b h nb s w d -> b h nb (s w) d")
        ok = torch.cat([ok_win[:, None].expand(-1, h_, -1, -1, -1), ok_rnd], dim=3)  # (B, H, nb, w+r, bs)
        valid = rearrange(ok, "b h nb s w -> b h nb 1 (s w)")  # (B, H, nb, 1, (w+r)bs)
        if gtok > 0:
            out = masked_attention_with_shared(
                qb, k_set, v_set, valid, k[:, :, :gtok], v[:, :, :gtok], real[:, :gtok], scale, self.attn_drop
            )  # (B, H, nb, bs, D)
        else:
            out, _ = masked_attention(qb, k_set, v_set, valid, scale, self.attn_drop)
        out = rearrange(out, "b h nb w d -> b h (nb w) d")[:, :, :n]  # (B, H, N, D)
        if gtok > 0:  # global rows attend to every token
            out_g, _ = masked_attention(q[:, :, :gtok], k, v, real[:, None, None, :n], scale, self.attn_drop)
            out = torch.cat([out_g, out[:, :, gtok:]], dim=2)
        return out
