"""Nyströmformer: Nyström approximation of softmax attention with segment-mean landmarks.

Xiong et al. 2021, "Nyströmformer: A Nyström-Based Algorithm for Approximating Self-Attention",
https://arxiv.org/abs/2102.03902.

softmax(QKᵀ/√D) V ≈ softmax(Q K̃ᵀ) · pinv(softmax(Q̃ K̃ᵀ)) · softmax(Q̃ Kᵀ) V, with Q̃, K̃ the means of M
segments of the real tokens, the Moore–Penrose pseudo-inverse from 6 iterations of the paper's
iterative scheme (computed in fp32), and a depthwise convolution skip on V (kernel 33).

Padding: segments are cut from each row's *real* tokens only (token of rank r among L real tokens
goes to segment floor(r·M/L)), so landmarks never see padding and a padded row gives exactly the
truncated row's output. When L < M, the empty segments are masked out of both softmaxes and kept out
of the pseudo-inverse as an identity block.

The two N-sided softmaxes are attentions: softmax(Q̃ Kᵀ) V over the real keys, and softmax(Q K̃ᵀ) W over the
filled landmarks with W = pinv · softmax(Q̃ Kᵀ) V (M x D). Both run through ``F.scaled_dot_product_attention``
(fused kernels, no N x M matrix stored where one exists); only the M x M kernel is explicit.

Time O(B·H·N·M·D + B·H·M³), memory O(B·H·N·M) (M = ``num_landmarks``; O(B·H·(N + M²)) on fused kernels).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lra_bench.attention.base import Attention, key_padding_bias
from lra_bench.checks import Count, NonNegativeInt
from lra_bench.errors import ConfigError


def iterative_pinv(mat: Tensor, iterations: int) -> Tensor:
    """Approximate Moore–Penrose pseudo-inverse of (..., M, M) ``mat`` (Razavi et al. 2014 iteration, fp32).

    Initial Z₀ = matᵀ / (‖mat‖₁ ‖mat‖_∞), per matrix (the paper's code uses one scale for the whole batch).
    """
    mat = mat.float()
    eye = torch.eye(mat.shape[-1], dtype=mat.dtype, device=mat.device)  # (M, M)
    col_sum = mat.abs().sum(dim=-2).amax(dim=-1)  # (...,)
    row_sum = mat.abs().sum(dim=-1).amax(dim=-1)  # (...,)
    z = mat.transpose(-1, -2) / (col_sum * row_sum)[..., None, None]  # (..., M, M)
    for _ in range(iterations):
        kz = mat @ z  # (..., M, M)
        z = 0.25 * z @ (13 * eye - kz @ (15 * eye - kz @ (7 * eye - kz)))  # (..., M, M)
    return z


class NystromformerAttention(Attention):
    """Nyström-approximated softmax attention (landmarks = masked segment means) + conv skip on V.

    Args:
        dim, num_heads, seq_len, dropout: supplied by the encoder (see ``Attention``).
        num_landmarks: number of landmarks M (paper: 64; xformers LRA: 128).
        pinv_iterations: iterations of the pseudo-inverse scheme (paper: 6).
        conv_kernel: kernel of the depthwise (per-head) convolution skip on V over the sequence
            (paper: 33; 0 disables it).
    """

    name = "nystromformer"

    def __init__(
        self,
        dim: int,
        num_heads: int,
        seq_len: int,
        dropout: float,
        num_landmarks: Count = 64,
        pinv_iterations: NonNegativeInt = 6,
        conv_kernel: NonNegativeInt = 33,
    ) -> None:
        super().__init__(dim, num_heads, seq_len, dropout)
        if num_landmarks <= 0 or pinv_iterations < 0 or conv_kernel < 0:
            raise ConfigError(f"attention=nystromformer: need num_landmarks > 0, pinv_iterations >= 0 and "
                              f"conv_kernel >= 0, got {num_landmarks}, {pinv_iterations}, {conv_kernel}")
        self.num_landmarks = num_landmarks
        self.pinv_iterations = pinv_iterations
        if conv_kernel > 0 and conv_kernel % 2 == 0:
            raise ConfigError(f"attention=nystromformer: conv_kernel must be odd (same-length output) or 0, "
                              f"got {conv_kernel}")
        # depthwise over heads: a (kernel x 1) filter per head slides along N, shared across D
        self.conv = None
        if conv_kernel > 0:
            pad = (conv_kernel // 2, 0)
            self.conv = nn.Conv2d(num_heads, num_heads, (conv_kernel, 1), padding=pad, groups=num_heads, bias=False)

    def segments(self, mask: Tensor) -> Tensor:
        """(B, N) bool -> (B, N, M) float one-hot segment assignment of real tokens (rows of padding are 0)."""
        rank = mask.long().cumsum(dim=-1) - 1  # (B, N): rank among the real tokens
        length = mask.long().sum(dim=-1, keepdim=True).clamp_min(1)  # (B, 1)
        seg = (rank.clamp_min(0) * self.num_landmarks) // length  # (B, N) in [0, M)
        onehot = F.one_hot(seg, self.num_landmarks).float()  # (B, N, M)
        return onehot * mask[..., None].float()  # (B, N, M)

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
        dtype = q.dtype
        b, _, n, d = q.shape
        if mask is None:
            mask = torch.ones(b, n, dtype=torch.bool, device=q.device)
        with torch.autocast(device_type=q.device.type, enabled=False):
            keep = mask[:, None, :, None]  # (B, 1, N, 1)
            scale = d**-0.25
            q = q.float().masked_fill(~keep, 0.0) * scale  # (B, H, N, D)
            k = k.float().masked_fill(~keep, 0.0) * scale  # (B, H, N, D)
            v = v.float().masked_fill(~keep, 0.0)  # (B, H, N, D)

            assign = self.segments(mask)  # (B, N, M)
            count = assign.sum(dim=1)  # (B, M)
            filled = count > 0  # (B, M): segment holds a real token
            inv_count = 1.0 / count.clamp_min(1.0)  # (B, M)
            q_land = torch.einsum("bnm,bhnd->bhmd", assign, q) * inv_count[:, None, :, None]  # (B, H, M, D)
            k_land = torch.einsum("bnm,bhnd->bhmd", assign, k) * inv_count[:, None, :, None]  # (B, H, M, D)

            land_bias = key_padding_bias(filled, torch.float32)  # (B, 1, 1, M)
            kernel_2 = (q_land @ k_land.transpose(-1, -2) + land_bias).softmax(dim=-1)  # (B, H, M, M)
            # empty landmarks: identity rows/columns, so they form a separate block of the pseudo-inverse
            eye = torch.eye(self.num_landmarks, device=q.device)  # (M, M)
            empty_row = ~filled[:, None, :, None]  # (B, 1, M, 1)
            kernel_2 = torch.where(empty_row, eye, kernel_2)  # (B, H, M, M)
            pinv = iterative_pinv(kernel_2, self.pinv_iterations)  # (B, H, M, M)

            # a row without any real key (all padding) attends everywhere: finite, and unused
            real = mask | ~mask.any(dim=-1, keepdim=True)  # (B, N)
            filled_keys = filled | ~filled.any(dim=-1, keepdim=True)  # (B, M)
            # softmax(Q̃ Kᵀ) V: q, k are pre-scaled by D^-1/4 each, hence scale 1
            land_v = F.scaled_dot_product_attention(q_land, k, v, attn_mask=real[:, None, None, :], scale=1.0)
            weights = pinv @ land_v  # (B, H, M, D)
            out = F.scaled_dot_product_attention(q, k_land, weights, attn_mask=filled_keys[:, None, None, :],
                                                 scale=1.0)  # (B, H, N, D) = softmax(Q K̃ᵀ) pinv softmax(Q̃ Kᵀ) V
            if self.conv is not None:
                out = out + self.conv(v)  # depthwise over N per head: (B, H, N, D)
        return out.to(dtype)
