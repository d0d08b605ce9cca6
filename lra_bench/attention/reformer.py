"""Reformer LSH attention with shared query/key projections.

Kitaev et al. 2020, "Reformer: The Efficient Transformer", https://arxiv.org/abs/2001.04451 (§2). Keys are the
unit-normalised queries (shared QK). Each of ``n_hashes`` rounds hashes the vectors with a random rotation R
(h(x) = argmax[xR; -xR]), sorts the positions by (bucket, position), cuts the sorted sequence into chunks of
``chunk_len`` and lets every chunk attend to itself and the previous chunk (wrapping around). A token attends to
itself only when it has nothing else (its score is replaced by -1e5, as in the paper). The rounds are combined with
their logsumexp weights.

Padding: padded positions get their own bucket (sorted after every real token) and are masked as keys, so they
neither attend-in nor shift the chunks of real tokens. Rotations are drawn per forward in training and taken from a
seeded buffer in eval. Time O(B·H·R·N·(c·D + n_b·D + log N)), memory O(B·H·R·N·(c + D + n_b)) with
R = n_hashes, c = chunk_len, n_b = n_buckets (default capped at 64).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import Tensor, nn

from lra_bench.attention._blocks import all_valid, combine_by_lse, pad_dim, real_keys
from lra_bench.attention.base import TokenMixer
from lra_bench.checks import Count, DropRate, Seed
from lra_bench.errors import ConfigError

MAX_DEFAULT_BUCKETS = 64
SELF_SCORE = -1e5  # score of a token attending to itself (Reformer §2: "unless no other targets are available")


class ReformerAttention(TokenMixer):
    """Multi-round LSH attention on shared QK (Reformer).

    Args:
        dim, num_heads, seq_len, dropout: supplied by the encoder (see ``TokenMixer``).
        n_hashes: hashing rounds R.
        chunk_len: chunk length c of the sorted sequence (LRA reformer chunk_len 10).
        n_buckets: hash buckets (even, or 1); None = min(2·⌈seq_len / chunk_len⌉, 64) (paper: n_buckets = 2l/m;
            capped because the hash projections cost O(N·n_buckets) memory).
        seed: seed of the fixed rotations used in eval mode.
        attn_dropout: dropout on the attention probabilities.
    """

    name = "reformer"
    truncation_exact = False  # chunk wrap-around looks back from the first chunk to the last (padded) one

    def __init__(
        self,
        dim: int,
        num_heads: int,
        seq_len: int,
        dropout: float,
        n_hashes: Count = 2,
        chunk_len: Count = 10,
        n_buckets: Count | None = None,
        seed: Seed = 0,
        attn_dropout: DropRate = 0.1,
    ) -> None:
        super().__init__(dim, num_heads, seq_len, dropout)
        if n_buckets is None:  # paper: 2l/m buckets; capped so hashing stays O(N·64) memory
            n_buckets = min(2 * math.ceil(seq_len / chunk_len), MAX_DEFAULT_BUCKETS)
        if n_hashes <= 0 or chunk_len <= 0 or n_buckets <= 0 or (n_buckets > 1 and n_buckets % 2):
            raise ConfigError(
                f"reformer: need n_hashes > 0, chunk_len > 0 and n_buckets even (or 1), got "
                f"{n_hashes}, {chunk_len}, {n_buckets}"
            )
        self.n_hashes, self.chunk_len, self.n_buckets = n_hashes, chunk_len, n_buckets
        self.qv = nn.Linear(dim, 2 * dim)  # shared QK: queries (= keys, normalised) and values only
        self.out = nn.Linear(dim, dim)
        self.attn_drop = nn.Dropout(attn_dropout)
        g = torch.Generator().manual_seed(seed)
        self.register_buffer("eval_rotations", torch.randn(self.rotation_shape(), generator=g))  # (H, R, D, nb/2)

    def rotation_shape(self) -> tuple[int, int, int, int]:
        return (self.num_heads, self.n_hashes, self.head_dim, max(self.n_buckets // 2, 1))

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        self.check_input(x, mask)
        q, v = rearrange(self.qv(x), "b n (two h d) -> two b h n d", two=2, h=self.num_heads)  # each (B, H, N, D)
        y = self.lsh_attend(q, v, mask)  # (B, H, N, D)
        y = rearrange(y, "b h n d -> b n (h d)")  # (B, N, C)
        return self.out_drop(self.out(y))

    def buckets(self, q: Tensor, real: Tensor) -> Tensor:
        """(B, H, Np, D), real (B, Np) -> bucket ids (B, H, R, Np); padded positions get bucket n_buckets."""
        b_, h_, n, _ = q.shape
        if self.n_buckets == 1:
            ids = torch.zeros(b_, h_, self.n_hashes, n, dtype=torch.long, device=q.device)
        else:
            rot = self.eval_rotations if not self.training else torch.randn(self.rotation_shape(), device=q.device)
            proj = torch.einsum("bhnd,hrdk->bhrnk", q, rot.to(q.dtype))  # (B, H, R, Np, nb/2)
            ids = torch.cat([proj, -proj], dim=-1).argmax(dim=-1)  # (B, H, R, Np)
        return ids.masked_fill(~real[:, None, None, :], self.n_buckets)

    def lsh_attend(self, q: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
        b_, h_, n, d = q.shape
        c = min(self.chunk_len, n)
        real = pad_dim(real_keys(mask, b_, n, q.device), c, dim=1, value=False)  # (B, Np)
        padded = not all_valid(real)  # without padding no key mask is built at all
        q = q * d**-0.5  # scaled once, before the rounds' copies: hashes and unit-length keys ignore a positive scale
        q, v = pad_dim(q, c, dim=2), pad_dim(v, c, dim=2)  # (B, H, Np, D)
        npad = q.shape[2]
        pos = torch.arange(npad, device=q.device)
        with torch.no_grad():
            ids = self.buckets(q.detach(), real)  # (B, H, R, Np)
            order = (ids * npad + pos).argsort(dim=-1)  # (B, H, R, Np): sort by bucket, then position
            undo = order.argsort(dim=-1)  # inverse permutation
        gather = order[..., None].expand(-1, -1, -1, -1, d)  # (B, H, R, Np, D)
        sq = q[:, :, None].expand(-1, -1, self.n_hashes, -1, -1).gather(3, gather)  # (B, H, R, Np, D)
        sv = v[:, :, None].expand(-1, -1, self.n_hashes, -1, -1).gather(3, gather)  # (B, H, R, Np, D)
        sk = F.normalize(sq, dim=-1)  # shared QK: unit-length keys
        sq, sk, sv = (rearrange(t, "b h r (nc c) d -> b h r nc c d", c=c) for t in (sq, sk, sv))
        keyed = [sk, sv, rearrange(order, "b h r (nc c) -> b h r nc c", c=c)]  # + the keys' realness when padded
        if padded:
            sreal = real[:, None, None, :].expand(-1, h_, self.n_hashes, -1).gather(3, order)  # (B, H, R, Np)
            keyed.append(rearrange(sreal, "b h r (nc c) -> b h r nc c", c=c))
        spos = keyed[2]
        if sq.shape[3] > 1:  # attend to own chunk and the previous one (chunk 0 looks back to the last chunk)
            keyed = [torch.cat([t, t.roll(1, dims=3)], dim=4) for t in keyed]
        sk, sv, kpos = keyed[:3]  # sk, sv: (B, H, R, nc, c or 2c, D); kpos: (B, H, R, nc, c or 2c)
        scores = sq @ sk.transpose(-2, -1)  # (B, H, R, nc, c, 2c); q was scaled by 1/sqrt(D) above
        self_score = max(SELF_SCORE, torch.finfo(scores.dtype).min / 2)  # stays finite in fp16
        scores.masked_fill_(spos[..., :, None] == kpos[..., None, :], self_score)  # in place: a fresh product
        if padded:  # padded keys removed
            scores.masked_fill_(~keyed[3][..., None, :], torch.finfo(scores.dtype).min)
        lse = scores.logsumexp(dim=-1, keepdim=True)  # (B, H, R, nc, c, 1)
        probs = self.attn_drop((scores - lse).exp())
        out = rearrange(probs @ sv, "b h r nc c d -> b h r (nc c) d")  # (B, H, R, Np, D) in sorted order
        lse = rearrange(lse, "b h r nc c 1 -> b h r (nc c)")
        out = out.gather(3, undo[..., None].expand(-1, -1, -1, -1, d))  # (B, H, R, Np, D) back to positions
        lse = lse.gather(3, undo)  # (B, H, R, Np)
        return combine_by_lse(out, lse, dim=2)[:, :, :n]  # (B, H, N, D)
