"""Efficient attention: separate softmax normalisation of queries and keys, then Q (Kᵀ V).

Shen et al. 2021, "Efficient Attention: Attention with Linear Complexities",
https://arxiv.org/abs/1812.01243.

out = ρ_q(Q) (ρ_k(K)ᵀ V) with ρ_q = softmax over the feature axis of each query and ρ_k = softmax
over the sequence axis of each key channel (padded keys masked out of it). Computed in fp32.

Time O(B·H·N·D²), memory O(B·H·(N·D + D²)).
"""

from __future__ import annotations

import torch
from torch import Tensor

from lra_bench.attention.base import Attention


class EfficientAttention(Attention):
    """softmax_D(Q) · (softmax_N(K)ᵀ V), no N × N matrix.

    Args:
        dim, num_heads, seq_len, dropout: supplied by the encoder (see ``Attention``).
    """

    name = "efficient"

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
        dtype = q.dtype
        with torch.autocast(device_type=q.device.type, enabled=False):
            q, k, v = q.float(), k.float(), v.float()
            if mask is not None:
                keep = mask[:, None, :, None]  # (B, 1, N, 1)
                k = k.masked_fill(~keep, torch.finfo(k.dtype).min)
                v = v.masked_fill(~keep, 0.0)
            rho_q = q.softmax(dim=-1)  # (B, H, N, D): over features
            rho_k = k.softmax(dim=-2)  # (B, H, N, D): over the sequence
            context = torch.einsum("bhnd,bhne->bhde", rho_k, v)  # (B, H, D, D)
            out = torch.einsum("bhnd,bhde->bhne", rho_q, context)  # (B, H, N, D)
        return out.to(dtype)
