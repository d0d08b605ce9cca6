"""Routing Transformer attention: online k-means routes queries and keys into balanced clusters.

Roy et al. 2021, "Efficient Content-Based Sparse Attention with Routing Transformers", https://arxiv.org/abs/2003.05997
(§4). Per head, K centroids (unit vectors, EMA-updated buffers, updated only in training) route the unit-normalised
queries and keys. Balanced routing as in the paper's implementation: each centroid takes its top-w closest queries and
top-w closest keys (w = ⌈N/K⌉) and those queries attend to those keys. A query routed to several clusters averages
its outputs; a query routed to none gets a zero output (as in the reference implementation, where such tokens are
covered by the local-attention heads). Padded tokens are ranked last, masked as keys and excluded from the centroid
updates. Time O(B·H·(N·K + K·w²)·D), memory O(B·H·(N·K + K·w²)) = O(B·H·N^1.5) at K = √N.
"""

from __future__ import annotations

import math
from typing import Annotated

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lra_bench.attention._blocks import masked_attention, real_keys
from lra_bench.attention.base import Attention
from lra_bench.checks import Count, DropRate, Range
from lra_bench.errors import ConfigError

Decay = Annotated[float, Range(0.0, 1.0, hi_open=True, why="an EMA decay of 1 never moves the centroids")]
PADDED_SIM = -2.0  # cosine similarities are >= -1: padded tokens rank after every real token


class RoutingAttention(Attention):
    """Content-based sparse attention with balanced k-means routing (Routing Transformer).

    Args:
        dim, num_heads, seq_len, dropout: supplied by the encoder (see ``Attention``).
        num_clusters: clusters K per head; None = ⌈√seq_len⌉ (the paper's choice k ≈ √n).
        ema_decay: decay of the exponential moving average of the centroids (paper: 0.999).
        attn_dropout: dropout on the attention probabilities.
    """

    name = "routing"
    truncation_exact = False  # the window length w = ⌈N/K⌉ depends on the (padded) length N

    def __init__(
        self,
        dim: int,
        num_heads: int,
        seq_len: int,
        dropout: float,
        num_clusters: Count | None = None,
        ema_decay: Decay = 0.999,
        attn_dropout: DropRate = 0.1,
    ) -> None:
        super().__init__(dim, num_heads, seq_len, dropout)
        self.num_clusters = num_clusters if num_clusters is not None else math.ceil(math.sqrt(seq_len))
        if self.num_clusters <= 0 or not 0.0 <= ema_decay < 1.0:
            raise ConfigError(f"routing: need num_clusters > 0 and 0 <= ema_decay < 1, got {num_clusters}, {ema_decay}")
        self.ema_decay = ema_decay
        self.attn_drop = nn.Dropout(attn_dropout)
        centroids = F.normalize(torch.randn(num_heads, self.num_clusters, self.head_dim), dim=-1)
        self.register_buffer("centroids", centroids)  # (H, K, D) unit vectors

    @torch.no_grad()
    def update_centroids(self, qn: Tensor, kn: Tensor, real: Tensor) -> None:
        """EMA k-means step on the real (unit) queries and keys: qn, kn (B, H, N, D), real (B, N)."""
        x = torch.cat([qn, kn], dim=2)  # (B, H, 2N, D)
        w = torch.cat([real, real], dim=1).to(x.dtype)[:, None, :, None]  # (B, 1, 2N, 1)
        assign = F.one_hot((x @ self.centroids.to(x.dtype).transpose(-2, -1)).argmax(-1), self.num_clusters)
        assign = assign.to(x.dtype) * w  # (B, H, 2N, K), zero for padded tokens
        sums = torch.einsum("bhnk,bhnd->hkd", assign, x)  # (H, K, D)
        counts = assign.sum(dim=(0, 2))[..., None]  # (H, K, 1)
        means = F.normalize(sums / counts.clamp(min=1), dim=-1)
        new = F.normalize(self.ema_decay * self.centroids + (1 - self.ema_decay) * means.to(self.centroids), dim=-1)
        self.centroids.copy_(torch.where(counts > 0, new, self.centroids))

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
        b_, h_, n, d = q.shape
        kc = min(self.num_clusters, n)  # no more clusters than tokens
        w = math.ceil(n / kc)  # balanced window per cluster
        real = real_keys(mask, b_, n, q.device)  # (B, N)
        qn, kn = F.normalize(q.detach(), dim=-1), F.normalize(k.detach(), dim=-1)
        if self.training:
            self.update_centroids(qn, kn, real)
        with torch.no_grad():
            mu = self.centroids[:, :kc].to(q.dtype)  # (H, K, D)
            sim_q = torch.einsum("bhnd,hkd->bhkn", qn, mu).masked_fill(~real[:, None, None, :], PADDED_SIM)
            sim_k = torch.einsum("bhnd,hkd->bhkn", kn, mu).masked_fill(~real[:, None, None, :], PADDED_SIM)
            idx_q = sim_q.topk(w, dim=-1).indices  # (B, H, K, w) queries routed to each cluster
            idx_k = sim_k.topk(w, dim=-1).indices  # (B, H, K, w) keys of each cluster
        flat_q, flat_k = idx_q.flatten(2), idx_k.flatten(2)  # (B, H, K*w)
        qc = q.gather(2, flat_q[..., None].expand(-1, -1, -1, d)).view(b_, h_, kc, w, d)  # (B, H, K, w, D)
        kc_ = k.gather(2, flat_k[..., None].expand(-1, -1, -1, d)).view(b_, h_, kc, w, d)  # (B, H, K, w, D)
        vc = v.gather(2, flat_k[..., None].expand(-1, -1, -1, d)).view(b_, h_, kc, w, d)  # (B, H, K, w, D)
        valid = real[:, None, :].expand(-1, h_, -1).gather(2, flat_k).view(b_, h_, kc, 1, w)  # (B, H, K, 1, w)
        out, _ = masked_attention(qc, kc_, vc, valid, d**-0.5, self.attn_drop)  # (B, H, K, w, D)
        total = q.new_zeros(b_, h_, n, d).scatter_add(
            2, flat_q[..., None].expand(-1, -1, -1, d), out.flatten(2, 3)
        )  # (B, H, N, D)
        count = q.new_zeros(b_, h_, n).scatter_add(2, flat_q, q.new_ones(flat_q.shape))  # (B, H, N)
        return total / count.clamp(min=1)[..., None]  # (B, H, N, D); unrouted queries get 0
