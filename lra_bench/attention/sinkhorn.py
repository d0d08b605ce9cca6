"""Sparse Sinkhorn attention: a learned soft block permutation, each query block attends to its own + a sorted block.

Tay et al. 2020, "Sparse Sinkhorn Attention", https://arxiv.org/abs/2002.11296 (§3; the LRA "Sinkhorn Trans." row,
block 50). The sequence is cut into blocks of b tokens. A meta sorting network (2-layer ReLU MLP per head) maps each
block summary (the masked mean of its keys; padded tokens excluded) to logits over the blocks; Sinkhorn iterations in
log space (with a temperature) turn them into a doubly-stochastic block x block matrix P. The sorted keys/values of
block i are Σ_j P_ij · block_j, and query block i attends to its own block and to sorted block i.

Padding: fully padded blocks are held out of the Sinkhorn normalisation (they map to themselves), padded tokens are
left out of every mixture (the mixture at a slot is renormalised over the real tokens found there), so padded content
never reaches real outputs and padded == truncated. Deviation: no Gumbel noise and no causal variant (LRA is
bidirectional). Time O(B·H·(N·b·D + nb²·(D + iterations))), memory O(B·H·(N·b + nb²)), nb = N/b.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import Tensor, nn

from lra_bench.attention._blocks import all_valid, attention_over_key_sets, pad_dim, real_keys
from lra_bench.attention.base import Attention
from lra_bench.checks import Count, DropRate, PositiveFloat
from lra_bench.errors import ConfigError

BLOCKED = -1e9  # logit of a (real, padded) block pair: exp() underflows to exactly 0


def log_sinkhorn(logits: Tensor, iterations: int) -> Tensor:
    """Alternate row / column normalisation in log space; returns log P with P (approximately) doubly stochastic."""
    for _ in range(iterations):
        logits = logits - logits.logsumexp(dim=-1, keepdim=True)
        logits = logits - logits.logsumexp(dim=-2, keepdim=True)
    return logits


class SinkhornAttention(Attention):
    """Block attention to own block + a Sinkhorn-sorted block (Sparse Sinkhorn attention).

    Args:
        dim, num_heads, seq_len, dropout: supplied by the encoder (see ``Attention``).
        block_size: tokens per block (LRA sinkhorn block_size 50; image/pathfinder configs use 64).
        iterations: Sinkhorn normalisation iterations.
        temperature: temperature τ dividing the sorting logits (lower = closer to a hard permutation).
        attn_dropout: dropout on the attention probabilities.
    """

    name = "sinkhorn"

    def __init__(
        self,
        dim: int,
        num_heads: int,
        seq_len: int,
        dropout: float,
        block_size: Count = 50,
        iterations: Count = 5,
        temperature: PositiveFloat = 0.75,
        attn_dropout: DropRate = 0.1,
    ) -> None:
        super().__init__(dim, num_heads, seq_len, dropout)
        if block_size <= 0 or iterations <= 0 or temperature <= 0:
            raise ConfigError(
                f"sinkhorn: need block_size, iterations, temperature > 0, got {block_size}, {iterations}, {temperature}"
            )
        self.require_block_fits("block_size", block_size)
        self.block_size, self.iterations, self.temperature = block_size, iterations, temperature
        self.max_blocks = math.ceil(seq_len / block_size)
        d = self.head_dim
        bound = 1.0 / math.sqrt(d)  # nn.Linear's default init range, per head
        self.sort_w1 = nn.Parameter(torch.empty(num_heads, d, d).uniform_(-bound, bound))
        self.sort_b1 = nn.Parameter(torch.empty(num_heads, d).uniform_(-bound, bound))
        self.sort_w2 = nn.Parameter(torch.empty(num_heads, d, self.max_blocks).uniform_(-bound, bound))
        self.sort_b2 = nn.Parameter(torch.empty(num_heads, self.max_blocks).uniform_(-bound, bound))
        self.attn_drop = nn.Dropout(attn_dropout)

    def permutation(self, kb: Tensor, real_b: Tensor) -> Tensor:
        """Soft block permutation P (B, H, nb, nb) from key blocks kb (B, H, nb, b, D) and real_b (B, nb, b)."""
        nb = kb.shape[2]
        w = real_b.to(kb.dtype)[:, None, :, :, None]  # (B, 1, nb, b, 1)
        if all_valid(real_b):  # no padding: the plain mean
            summary = kb.mean(3)  # (B, H, nb, D)
        else:
            summary = kb.masked_fill(w == 0, 0).sum(3) / w.sum(3).clamp(min=1)  # (B, H, nb, D) masked mean of the keys
        hidden = F.relu(torch.einsum("bhnd,hde->bhne", summary, self.sort_w1) + self.sort_b1[:, None])
        logits = torch.einsum("bhne,hem->bhnm", hidden, self.sort_w2[..., :nb]) + self.sort_b2[:, None, :nb]
        # logits: (B, H, nb target, nb source). Padded-only blocks sit out: they map to themselves.
        ok = real_b.any(dim=-1)  # (B, nb)
        pair = ok[:, :, None] & ok[:, None, :]  # (B, nb, nb)
        eye = torch.eye(nb, dtype=torch.bool, device=kb.device)
        blocked = max(BLOCKED, torch.finfo(logits.dtype).min / 4)  # finite in fp16 too
        logits = logits.masked_fill(~pair[:, None], blocked).masked_fill(~ok[:, None, :, None] & eye, 0.0)
        log_p = log_sinkhorn(logits.float() / self.temperature, self.iterations)  # float32 even under autocast
        return log_p.exp().to(kb.dtype)

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
        b_, _, n, _ = q.shape
        bs = min(self.block_size, n)
        real = pad_dim(real_keys(mask, b_, n, q.device), bs, dim=1, value=False)  # (B, Np)
        qb, kb, vb = (rearrange(pad_dim(t, bs, dim=2), "b h (nb w) d -> b h nb w d", w=bs) for t in (q, k, v))
        qb = qb * self.head_dim**-0.5  # (B, H, nb, bs, D), scaled; it and the copies below are contiguous
        kb, vb = kb.contiguous(), vb.contiguous()  # copied once for the block products below
        real_b = rearrange(real, "b (nb w) -> b nb w", w=bs)  # (B, nb, bs)
        p = self.permutation(kb, real_b)  # (B, H, nb, nb)
        # sorted block i = mixture of the blocks j, renormalised over the real tokens at each slot
        if all_valid(real_b):  # no padding: every slot holds real tokens only, nothing to mask or zero
            mix = p / p.sum(dim=-1, keepdim=True)  # (B, H, nb, nb): the renormalisation, on the block weights
            k_sort = torch.einsum("bhij,bhjtd->bhitd", mix, kb)  # (B, H, nb, bs, D)
            v_sort = torch.einsum("bhij,bhjtd->bhitd", mix, vb)
            valid = None
        else:
            realf = real_b.to(p.dtype)  # (B, nb, bs)
            den = torch.einsum("bhij,bjt->bhit", p, realf)  # (B, H, nb, bs) real weight reaching each slot
            pad = ~real_b[:, None, :, :, None]  # (B, 1, nb, bs, 1)
            zb, zv = kb.masked_fill(pad, 0), vb.masked_fill(pad, 0)  # padded tokens zeroed (robust to inf/NaN)
            den_safe = torch.where(den > 0, den, torch.ones_like(den))[..., None]  # slots with no real token: masked
            k_sort = torch.einsum("bhij,bhjtd->bhitd", p, zb) / den_safe  # (B, H, nb, bs, D)
            v_sort = torch.einsum("bhij,bhjtd->bhitd", p, zv) / den_safe
            valid = torch.cat([real_b[:, None].expand_as(den), den > 0], dim=-1)[:, :, :, None, :]  # (B,H,nb,1,2bs)
        # each query block: its own block and its sorted block, one softmax over both (B, H, nb, bs, D)
        out = attention_over_key_sets(qb, [kb, k_sort], [vb, v_sort], valid, 1.0, self.attn_drop)
        return rearrange(out, "b h nb w d -> b h (nb w) d")[:, :, :n]  # (B, H, N, D)
