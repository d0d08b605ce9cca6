"""Random Feature Attention (RFA): random Fourier features of L2-normalised queries and keys.

Peng et al. 2021, "Random Feature Attention", https://arxiv.org/abs/2103.02143.

For unit vectors, exp(q̂·k̂/σ²) ∝ exp(−‖q̂ − k̂‖²/2σ²) ≈ φ(q̂)·φ(k̂) with φ(x) = √(1/M)[sin(Wx), cos(Wx)],
W ~ N(0, I) (M × D) scaled per head and dimension by a learned 1/σ (the paper's reparameterisation
w = σ ∘ w̃, σ learned). out_i = φ(q̂_i)ᵀ Σ_j φ(k̂_j) v_jᵀ / φ(q̂_i)ᵀ Σ_j φ(k̂_j), φ(k̂_j) = 0 at padded keys.
The trigonometric estimate of the normaliser can be ≤ 0 with few features; it is clamped to a small
positive value to stay finite (the paper leaves this unspecified). Computed in fp32. The gated
(recurrent) variant of the paper is causal-only and not implemented.

Random draws live in a buffer, redrawn every ``redraw_interval`` training steps (never in eval).

Time O(B·H·N·M·D), memory O(B·H·N·M) (M = ``num_features``; φ has 2M entries).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lra_bench.attention.base import Attention
from lra_bench.checks import Count, NonNegativeInt, PositiveFloat
from lra_bench.errors import ConfigError


class RFAAttention(Attention):
    """Non-causal RFA with sin/cos random features of L2-normalised q and k.

    Args:
        dim, num_heads, seq_len, dropout: supplied by the encoder (see ``Attention``).
        num_features: random frequencies M (the feature vector has 2M entries).
        sigma: initial kernel width σ (per head and dimension).
        learn_sigma: learn σ (the paper's choice) instead of keeping it fixed.
        redraw_interval: redraw the random frequencies every this many training steps (0 = never).
        eps: lower clamp of the normaliser.
    """

    name = "rfa"

    def __init__(
        self,
        dim: int,
        num_heads: int,
        seq_len: int,
        dropout: float,
        num_features: Count = 128,
        sigma: PositiveFloat = 1.0,
        learn_sigma: bool = True,
        redraw_interval: NonNegativeInt = 1000,
        eps: PositiveFloat = 1e-4,
    ) -> None:
        super().__init__(dim, num_heads, seq_len, dropout)
        if num_features <= 0 or sigma <= 0 or redraw_interval < 0:
            raise ConfigError(f"attention=rfa: need num_features > 0, sigma > 0 and redraw_interval >= 0, got "
                              f"{num_features}, {sigma}, {redraw_interval}")
        self.num_features = num_features
        self.redraw_interval = redraw_interval
        self.eps = eps
        log_inv_sigma = torch.full((num_heads, self.head_dim), -math.log(sigma))  # (H, D)
        if learn_sigma:
            self.log_inv_sigma = nn.Parameter(log_inv_sigma)
        else:
            self.register_buffer("log_inv_sigma", log_inv_sigma)
        self.register_buffer("omega", torch.randn(num_features, self.head_dim))  # (M, D)

    @torch.no_grad()
    def redraw_features(self) -> None:
        self.omega.normal_()

    def on_train_step(self, step: int) -> None:
        """Called by the trainer after each optimizer step; redraws every ``redraw_interval`` steps (train only)."""
        if self.training and self.redraw_interval > 0 and step > 0 and step % self.redraw_interval == 0:
            self.redraw_features()

    def features(self, x: Tensor) -> Tensor:
        """(B, H, N, D) -> (B, H, N, 2M) fp32 features [sin, cos](ω·x/‖x‖), without the paper's 1/√M factor
        (``attend`` puts it back where it matters: the ``eps`` clamp)."""
        x = F.normalize(x.float(), dim=-1) * self.log_inv_sigma.float().exp()[:, None, :]  # (B, H, N, D)
        proj = torch.einsum("bhnd,md->bhnm", x, self.omega.float())  # (B, H, N, M)
        return torch.cat([proj.sin(), proj.cos()], dim=-1)  # (B, H, N, 2M)

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
        """φ(q)ᵀ Σ_j φ(k_j) v_jᵀ / max(φ(q)ᵀ Σ_j φ(k_j), eps) over the real keys j, φ with its 1/√M: the factor 1/M
        of numerator and denominator cancels except in the clamp, hence ``eps · M`` on the unscaled features.
        Padded keys are left out through v (zeroed) and the key sum (weighted by the mask): no masked copy of the
        (B, H, N, 2M) key features."""
        dtype = q.dtype
        with torch.autocast(device_type=q.device.type, enabled=False):
            phi_q = self.features(q)  # (B, H, N, 2M)
            phi_k = self.features(k)  # (B, H, N, 2M)
            v = v.float()
            if mask is not None:
                v = v.masked_fill(~mask[:, None, :, None], 0.0)  # (B, H, N, D)
                k_sum = torch.einsum("bhnm,bn->bhm", phi_k, mask.float())  # (B, H, 2M): real keys only
            else:
                k_sum = phi_k.sum(dim=-2)  # (B, H, 2M)
            kv = torch.einsum("bhnm,bhnd->bhmd", phi_k, v)  # (B, H, 2M, D)
            denom = torch.einsum("bhnm,bhm->bhn", phi_q, k_sum).clamp_min(self.eps * self.num_features)  # (B, H, N)
            out = torch.einsum("bhnm,bhmd->bhnd", phi_q, kv) / denom[..., None]  # (B, H, N, D)
        return out.to(dtype)
