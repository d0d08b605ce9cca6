"""Linear attention: kernel feature map elu(x)+1 and the associativity trick.

Katharopoulos et al. 2020, "Transformers are RNNs: Fast Autoregressive Transformers with Linear
Attention", https://arxiv.org/abs/2006.16236.

out_i = φ(q_i)ᵀ (Σ_j φ(k_j) v_jᵀ) / (φ(q_i)ᵀ Σ_j φ(k_j)), φ(x) = elu(x) + 1, with φ(k_j) = 0 at padded
keys (so padding enters neither the key-value sum nor the normaliser). Computed in fp32.

Time O(B·H·N·D²), memory O(B·H·(N·D + D²)).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from lra_bench.attention.base import Attention
from lra_bench.checks import PositiveFloat


def elu_feature_map(x: Tensor) -> Tensor:
    """φ(x) = elu(x) + 1 > 0, elementwise."""
    return F.elu(x) + 1.0


class LinearAttention(Attention):
    """Non-causal linear attention with the elu+1 feature map.

    Args:
        dim, num_heads, seq_len, dropout: supplied by the encoder (see ``Attention``).
        eps: added to the normaliser (paper's code: 1e-6).
    """

    name = "linear"

    def __init__(self, dim: int, num_heads: int, seq_len: int, dropout: float, eps: PositiveFloat = 1e-6) -> None:
        super().__init__(dim, num_heads, seq_len, dropout)
        self.eps = eps

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
        dtype = q.dtype
        with torch.autocast(device_type=q.device.type, enabled=False):
            phi_q = elu_feature_map(q.float())  # (B, H, N, D)
            phi_k = elu_feature_map(k.float())  # (B, H, N, D)
            v = v.float()
            if mask is not None:
                keep = mask[:, None, :, None]  # (B, 1, N, 1)
                phi_k = phi_k.masked_fill(~keep, 0.0)
                v = v.masked_fill(~keep, 0.0)
            kv = torch.einsum("bhnd,bhne->bhde", phi_k, v)  # (B, H, D, D)
            k_sum = phi_k.sum(dim=-2)  # (B, H, D)
            denom = torch.einsum("bhnd,bhd->bhn", phi_q, k_sum) + self.eps  # (B, H, N)
            out = torch.einsum("bhnd,bhde->bhne", phi_q, kv) / denom[..., None]  # (B, H, N, D)
        return out.to(dtype)
