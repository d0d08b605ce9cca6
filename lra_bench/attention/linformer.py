"""Linformer: low-rank projection of keys and values along the sequence axis.

Wang et al. 2020, "Linformer: Self-Attention with Linear Complexity", https://arxiv.org/abs/2006.04768.

Keys and values (B, H, N, D) are projected to (B, H, M, D) with learned E, F in R^{seq_len x M}; for
N < seq_len the first N rows of E and F are used, and padded rows of K and V are zeroed before the
projection, so padded content never reaches the projected keys (padded == truncated exactly).

The softmax over the M projected keys runs through ``F.scaled_dot_product_attention`` (fused kernels where one
exists: CUDA; CPU outside training with attention dropout), except when training on CPU: there SDPA takes its math
path, which guards against fully masked rows (``isneginf`` + ``where``, 5 % of the layer's step at 1K, issue 45's
profile) that M projected keys, none of them masked, never have; that step is the plain softmax product instead.
Padded rows of K and V are zeroed only when a row is padded.

Time O(B·H·N·M·D), memory O(B·H·N·M) (M = ``low_rank_features``, fixed; linear in N; O(B·H·N) on fused kernels).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lra_bench.attention._blocks import all_valid
from lra_bench.attention.base import Attention, checked_attn_dropout
from lra_bench.checks import Count, DropRate
from lra_bench.errors import ConfigError


class LinformerAttention(Attention):
    """softmax(Q (E_N^T K)^T / √D) (F_N^T V) with E, F shared across heads.

    Args:
        dim, num_heads, seq_len, dropout: supplied by the encoder (see ``Attention``).
        low_rank_features: projected length M (LRA code default 16; the LRA Text config uses 32).
        share_kv: use one projection for keys and values (E = F, the paper's "key-value sharing").
        attn_dropout: dropout on the attention probabilities.
    """

    name = "linformer"

    def __init__(
        self,
        dim: int,
        num_heads: int,
        seq_len: int,
        dropout: float,
        low_rank_features: Count = 16,
        share_kv: bool = False,
        attn_dropout: DropRate = 0.1,
    ) -> None:
        super().__init__(dim, num_heads, seq_len, dropout)
        if low_rank_features <= 0:
            raise ConfigError(f"attention=linformer: low_rank_features must be positive, got {low_rank_features}")
        std = 1.0 / math.sqrt(low_rank_features)
        self.proj_k = nn.Parameter(torch.randn(seq_len, low_rank_features) * std)  # E: (seq_len, M)
        self.proj_v = None if share_kv else nn.Parameter(torch.randn(seq_len, low_rank_features) * std)  # F
        self.attn_dropout = checked_attn_dropout(attn_dropout)

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
        n = q.shape[-2]
        if mask is not None and not all_valid(mask):
            keep = mask[:, None, :, None]  # (B, 1, N, 1)
            k = k.masked_fill(~keep, 0.0)
            v = v.masked_fill(~keep, 0.0)
        e = self.proj_k[:n].to(k.dtype)  # (N, M)
        f = e if self.proj_v is None else self.proj_v[:n].to(v.dtype)  # (N, M)
        k_low = torch.einsum("bhnd,nm->bhmd", k, e)  # (B, H, M, D)
        v_low = torch.einsum("bhnd,nm->bhmd", v, f)  # (B, H, M, D)
        p = self.attn_dropout if self.training else 0.0
        if q.device.type == "cpu" and torch.is_grad_enabled():  # SDPA's CPU math path: no masked-row guard needed
            scores = (q * q.shape[-1] ** -0.5) @ k_low.transpose(-2, -1)  # (B, H, N, M)
            return F.dropout(scores.softmax(dim=-1), p=p, training=p > 0) @ v_low  # (B, H, N, D)
        return F.scaled_dot_product_attention(q, k_low, v_low, dropout_p=p)  # (B, H, N, D): softmax over M keys
