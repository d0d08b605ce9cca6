"""Performer: FAVOR+ linear attention with positive orthogonal random features.

Choromanski et al. 2021, "Rethinking Attention with Performers", https://arxiv.org/abs/2009.14794.

softmax kernel exp(q·k/√D) ≈ φ(q)·φ(k) with φ(x) = exp(Wx' − ‖x'‖²/2) / √M, x' = x / D^¼, and W (M × D)
made of stacked random orthogonal blocks whose rows are rescaled by χ_D-distributed norms. Exponents are
stabilised by subtracting their per-query max (queries) and the max over real keys and features of each
(batch, head) (keys); both constants cancel in the normaliser. φ(k) is zeroed at padded keys, so
padding enters neither Σ_j φ(k_j) v_jᵀ nor Σ_j φ(k_j). Computed in fp32.

The features live in a buffer (saved with checkpoints) and are redrawn every ``redraw_interval`` training
steps by ``on_train_step`` (called by the trainer after each optimizer step); never redrawn in eval.

Time O(B·H·N·M·D), memory O(B·H·N·M) (M = ``nb_features``).
"""

from __future__ import annotations

import math
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor

from lra_bench.attention.base import Attention
from lra_bench.checks import Count, NonNegativeInt, check_choice
from lra_bench.errors import ConfigError


def orthogonal_gaussian(num_rows: int, dim: int, device: torch.device | None = None) -> Tensor:
    """(num_rows, dim) random matrix: stacked orthogonal blocks, row norms ~ χ_dim (as Gaussian rows)."""
    blocks = []
    for _ in range(math.ceil(num_rows / dim)):
        q, r = torch.linalg.qr(torch.randn(dim, dim, device=device))  # (D, D) orthogonal, (D, D) upper
        # Haar-distributed only with diag(R) > 0: LAPACK's signs are not random, and an uncorrected Q biases the
        # softmax-kernel estimate (about +0.9 % at D = 64). Mezzadri 2007, "How to generate random matrices".
        q = q * torch.sign(torch.diagonal(r))[None, :]  # (D, D): column j times sign(R_jj)
        blocks.append(q.T)
    w = torch.cat(blocks, dim=0)[:num_rows]  # (M, D) rows orthonormal within each block
    norms = torch.randn(num_rows, dim, device=device).norm(dim=-1)  # (M,)
    return w * norms[:, None]


def softmax_kernel_features(x: Tensor, projection: Tensor, is_query: bool, mask: Tensor | None = None) -> Tensor:
    """FAVOR+ positive features of (B, H, N, D) ``x`` -> (B, H, N, M), fp32, stabilised, zero at padded keys.

    One (B, H, N, M) tensor is kept for the backward (the exp's output): the stabiliser is found without autograd,
    and the per-row terms (‖x'‖²/2, the stabiliser, log √M for the 1/√M factor, +inf at padded keys so that
    exp gives exactly 0 there) are folded into one (B, H, N, 1) shift.
    """
    x = x.float() * x.shape[-1] ** -0.25  # (B, H, N, D)
    proj = torch.einsum("bhnd,md->bhnm", x, projection.float())  # (B, H, N, M): w·x'
    half_sq = 0.5 * x.square().sum(dim=-1, keepdim=True)  # (B, H, N, 1): ‖x'‖²/2
    padded = None if mask is None or is_query else ~mask[:, None, :, None]  # (B, 1, N, 1) True = padded key
    with torch.no_grad():
        logits = proj - half_sq  # (B, H, N, M)
        if is_query:
            stab = logits.amax(dim=-1, keepdim=True)  # (B, H, N, 1): per query
        else:
            if padded is not None:
                logits.masked_fill_(padded, float("-inf"))
            stab = logits.amax(dim=(-2, -1), keepdim=True)  # (B, H, 1, 1): over real keys and features
            stab = torch.nan_to_num(stab, neginf=0.0)  # a fully padded row
        del logits
    shift = half_sq + stab + 0.5 * math.log(projection.shape[0])  # (B, H, N, 1)
    if padded is not None:
        shift = shift.masked_fill(padded, float("inf"))  # exp(-inf) = 0 at padded keys
    return torch.exp(proj - shift)  # (B, H, N, M) = exp(w·x' − ‖x'‖²/2 − stab) / √M


def relu_kernel_features(x: Tensor, projection: Tensor, mask: Tensor | None = None, eps: float = 1e-3) -> Tensor:
    """Generalized (ReLU) Performer features, the LRA code's default kernel: relu(Wx)/√M + eps, zero at padded keys."""
    scaled = projection.float() / math.sqrt(projection.shape[0])  # (M, D): relu(Wx)/√M = relu((W/√M) x)
    feats = F.relu(torch.einsum("bhnd,md->bhnm", x.float(), scaled)) + eps  # (B, H, N, M)
    if mask is not None:
        feats = feats.masked_fill(~mask[:, None, :, None], 0.0)
    return feats


def linear_attention_from_features(phi_q: Tensor, phi_k: Tensor, v: Tensor) -> Tensor:
    """φ(q)ᵀ(Σ φ(k) vᵀ) / φ(q)ᵀ Σ φ(k) for (B, H, N, M) features and (B, H, N, D) fp32 values."""
    kv = torch.einsum("bhnm,bhnd->bhmd", phi_k, v)  # (B, H, M, D)
    k_sum = phi_k.sum(dim=-2)  # (B, H, M)
    denom = torch.einsum("bhnm,bhm->bhn", phi_q, k_sum)  # (B, H, N)
    return torch.einsum("bhnm,bhmd->bhnd", phi_q, kv) / denom.clamp_min(1e-30)[..., None]  # (B, H, N, D)


Kernel = Literal["softmax", "relu"]


class PerformerAttention(Attention):
    """FAVOR+ attention; ``kernel='softmax'`` (positive random features) or ``'relu'`` (generalized).

    Args:
        dim, num_heads, seq_len, dropout: supplied by the encoder (see ``Attention``).
        nb_features: number of random features M (LRA: 256).
        kernel: ``softmax`` (FAVOR+, the paper's main method) or ``relu`` (LRA code's default
            ``generalized`` attention).
        redraw_interval: redraw the features every this many training steps (0 = never).
    """

    name = "performer"

    def __init__(
        self,
        dim: int,
        num_heads: int,
        seq_len: int,
        dropout: float,
        nb_features: Count = 256,
        kernel: Kernel = "softmax",
        redraw_interval: NonNegativeInt = 1000,
    ) -> None:
        super().__init__(dim, num_heads, seq_len, dropout)
        if nb_features <= 0 or redraw_interval < 0:
            raise ConfigError(f"attention=performer: nb_features must be > 0 and redraw_interval >= 0, got "
                              f"{nb_features} and {redraw_interval}; fix attention.nb_features / redraw_interval")
        check_choice("attention=performer", "kernel", kernel, Kernel)
        self.nb_features = nb_features
        self.kernel = kernel
        self.redraw_interval = redraw_interval
        self.register_buffer("projection", orthogonal_gaussian(nb_features, self.head_dim))  # (M, D)

    @torch.no_grad()
    def redraw_features(self) -> None:
        self.projection.copy_(orthogonal_gaussian(self.nb_features, self.head_dim, self.projection.device))

    def on_train_step(self, step: int) -> None:
        """Called by the trainer after each optimizer step; redraws every ``redraw_interval`` steps (train only)."""
        if self.training and self.redraw_interval > 0 and step > 0 and step % self.redraw_interval == 0:
            self.redraw_features()

    def features(self, x: Tensor, is_query: bool, mask: Tensor | None) -> Tensor:
        """(B, H, N, D) -> (B, H, N, M) fp32 features (key features zero at padded positions)."""
        if self.kernel == "softmax":
            return softmax_kernel_features(x, self.projection, is_query, mask)
        return relu_kernel_features(x, self.projection, None if is_query else mask)

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
        dtype = q.dtype
        with torch.autocast(device_type=q.device.type, enabled=False):
            phi_q = self.features(q, True, mask)  # (B, H, N, M)
            phi_k = self.features(k, False, mask)  # (B, H, N, M)
            v = v.float()
            if mask is not None:
                v = v.masked_fill(~mask[:, None, :, None], 0.0)  # (B, H, N, D)
            out = linear_attention_from_features(phi_q, phi_k, v)  # (B, H, N, D)
        return out.to(dtype)
