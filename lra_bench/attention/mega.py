"""Mega: moving average equipped gated attention, and Mega-chunk (``chunk_size``).

Ma, Zhou, Kong, He, Gui, Neubig, May & Zettlemoyer 2023, "Mega: Moving Average Equipped Gated Attention" (ICLR),
https://arxiv.org/abs/2209.10655, §2-3; the layer of the official facebookresearch/mega
(``fairseq/modules/moving_average_gated_attention.py`` and ``exponential_moving_average.py``), parameter names
kept. With X the layer's input (B, N, C):

* multi-dimensional damped EMA (``move``): each channel expanded to ``ndim`` dimensions by β, damped recurrence
  h_t = α ⊙ β u_t + (1 − α ⊙ δ) ⊙ h_{t−1} (α = sigmoid(``alpha``), δ = sigmoid(``delta``)), projected back by
  η = ``gamma``·ndim^-½; computed as a long convolution with the kernel k_l = Σ_n η_n α_n β_n (1 − α_n δ_n)^l by FFT
  (size 2N), optionally truncated to ``truncation`` taps. Then X' = SiLU(EMA(X) + ω ⊙ X) (``omega``: the official
  code's per-channel skip).
* bidirectional (default; the official LRA encoder builds every layer with ``bidirectional=True``): a second set of
  EMA parameters (rows C..2C-1 of ``alpha``, ``delta``, ``beta``, ``gamma``) runs over the reversed sequence and is
  added; its kernel starts at lag 1 (the official ``shift=True``: the current token is counted once, forward).
* gated attention: ``mx_proj``(X') splits into the update gate φ = sigmoid(·) (C), the shared representation
  Z = SiLU(·) (``z_dim``), the reset gate γ = SiLU(·) (``hidden_dim``) and Ĥ's X' part (C); Q = κ_q ⊙ Z + μ_q and
  K = κ_k ⊙ Z + μ_k (``gamma``, ``beta``: 2 × z_dim); V = SiLU(``v_proj``(X)) (``hidden_dim``); one head,
  O = f(Q Kᵀ / τ + b_rel) V with the simple relative position bias b_rel[i, j] = ``rel_pos_bias``[P − 1 + j − i];
  f = softmax with τ = √z_dim, or laplace, f(s) = ½(1 + erf((s − √½) / (σ√2))) with σ = (4π)^-½ and τ = the number
  of real keys; Ĥ = SiLU(X' W_h + b_h + ``h_proj``(γ ⊙ O)); the layer's output Y = φ ⊙ Ĥ + (1 − φ) ⊙ X.
* Mega-chunk: with ``chunk_size`` c the attention runs within consecutive chunks of c tokens (the last one shorter
  or padded and masked), while the EMA still spans the whole sequence; P = c then, else P = seq_len.

As a ``TokenMixer`` the layer returns its update, Y − X = φ ⊙ (Ĥ − X), so the Transformer block's residual sum is
Mega's gated residual. Mega's own block (``model=mega``, ``lra_bench/models/mega.py``) normalises before the layer
and passes the un-normalised input as ``residual``, as the official prenorm layer does.

Padding: the EMA's input is zeroed at padded positions, padded keys are masked (softmax) or zeroed (laplace, whose
τ counts real keys only), so padded content never reaches a real position; chunks are cut from position 0, so with
right padding the outputs at real tokens equal the truncated input's.

Time O(B·N·C·log N + C·ndim·N + B·N·P·(z_dim + hidden_dim)) with P = N (full) or c (chunked); memory
O(B·N·(C + z_dim + hidden_dim) + B·N·P): quadratic in N without chunks, linear with them.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import Tensor, nn

from lra_bench.attention._blocks import pad_dim
from lra_bench.attention.base import TokenMixer, ssm_dtype
from lra_bench.checks import Count, DropRate, fraction
from lra_bench.errors import ConfigError

ATTENTION_FUNCTIONS = ("softmax", "laplace")
LAPLACE_MU, LAPLACE_SIGMA = math.sqrt(0.5), math.sqrt(1.0 / (4 * math.pi))  # the official utils.laplace constants


def laplace(s: Tensor) -> Tensor:
    """Mega's laplace attention function: the normal CDF at (s − √½) / σ, σ = (4π)^-½ (an approximation of
    relu² with bounded values and gradients, the paper's §3.3)."""
    return 0.5 * (1.0 + torch.erf((s - LAPLACE_MU) / (LAPLACE_SIGMA * math.sqrt(2.0))))


class MultiHeadEMA(nn.Module):
    """Mega's multi-dimensional damped EMA over (B, N, C), as a long convolution.

    Args:
        dim: channels C. ndim: EMA dimensions per channel. bidirectional: a second EMA over the reversed sequence.
        truncation: the kernel's number of taps (null = the sequence length).
    """

    def __init__(self, dim: int, ndim: int, bidirectional: bool, truncation: int | None) -> None:
        super().__init__()
        self.dim, self.ndim, self.bidirectional, self.truncation = dim, ndim, bidirectional, truncation
        self.scale = math.sqrt(1.0 / ndim)
        rows = 2 * dim if bidirectional else dim  # forward channels, then backward ones
        self.alpha = nn.Parameter(torch.randn(rows, ndim, 1) * 0.2)
        self.delta = nn.Parameter(torch.randn(rows, ndim, 1) * 0.2)
        signs = torch.tensor([1.0 if i % 2 == 0 else -1.0 for i in range(ndim)])[:, None]  # (ndim, 1): 1, -1, 1, ...
        self.beta = nn.Parameter(torch.randn(rows, ndim, 1) * 0.02 + signs)
        self.gamma = nn.Parameter(torch.randn(rows, ndim))
        self.omega = nn.Parameter(torch.randn(dim))

    def kernel(self, length: int, dtype: torch.dtype) -> Tensor:
        """(rows, K) with K = min(truncation, length): k_l = Σ_n η_n α_n β_n (1 − α_n δ_n)^l, rows = C or 2C."""
        taps = length if self.truncation is None else min(self.truncation, length)
        p = torch.sigmoid(self.alpha.to(dtype))  # (rows, ndim, 1)
        q = 1.0 - p * torch.sigmoid(self.delta.to(dtype))
        steps = torch.arange(taps, device=p.device, dtype=dtype)  # (K,)
        powers = torch.exp(steps * torch.log(q))  # (rows, ndim, K)
        weights = p * self.beta.to(dtype) * (self.gamma.to(dtype) * self.scale)[..., None]  # (rows, ndim, 1)
        return (weights * powers).sum(1)  # (rows, K)

    def conv(self, x: Tensor, mask: Tensor | None) -> Tensor:
        """The EMA alone (no ω skip, no SiLU): x (B, N, C) -> (B, N, C), in fp32 (fp64 for fp64 input)."""
        dtype = ssm_dtype(x)
        n = x.shape[1]
        u = x.to(dtype)
        if mask is not None:
            u = u.masked_fill(~mask[..., None], 0.0)  # padding never enters the EMA
        k = self.kernel(n, dtype)  # (rows, K)
        taps = k.shape[1]
        kernel = F.pad(k[: self.dim], (0, 2 * n - taps))  # (C, 2N): forward lags 0..K-1
        if self.bidirectional:  # backward lags 1..K-1 at the circular end: position 2N - j holds lag j
            kernel = kernel + F.pad(k[self.dim :, 1:].flip(-1), (2 * n - taps + 1, 0))
        v = rearrange(u, "b n c -> b c n")
        y = torch.fft.irfft(torch.fft.rfft(v, n=2 * n) * torch.fft.rfft(kernel, n=2 * n), n=2 * n)[..., :n]  # (B, C, N)
        return rearrange(y, "b c n -> b n c")

    def forward(self, x: Tensor, mask: Tensor | None) -> Tensor:
        """X' = SiLU(EMA(X) + ω ⊙ X): (B, N, C) -> (B, N, C) in x's dtype."""
        with torch.autocast(device_type=x.device.type, enabled=False):
            y = self.conv(x, mask)
            y = F.silu(y + x.to(y.dtype) * self.omega.to(y.dtype))
        return y.to(x.dtype)


class Mega(TokenMixer):
    """Mega's moving-average gated attention layer (full attention, or Mega-chunk with ``chunk_size``).

    Args:
        dim, num_heads, seq_len, dropout: supplied by the encoder (see ``TokenMixer``); one head, num_heads unused;
            ``dropout`` acts on the EMA output and on Ĥ (the official ``dropout``).
        z_dim: width of the shared representation Z, queries and keys (LRA: 64; image 96).
        hidden_dim: width of V and the reset gate (the official ``hdim``); null = 2·dim (every LRA recipe).
        ndim: EMA dimensions per channel (LRA: 16).
        chunk_size: null = attention over the whole sequence (Mega); c = within chunks of c tokens (Mega-chunk).
        attention_function: "softmax" (LRA ListOps, Text, Retrieval) or "laplace" (image, Pathfinder, Path-X).
        truncation: EMA kernel taps; null = the whole sequence (the official LRA architectures set 1024).
        bidirectional: a second EMA over the reversed sequence (LRA); false = causal EMA (the attention stays
            bidirectional, as the official layer without an attention mask).
        attn_dropout: dropout on the attention weights (LRA: 0.0). hidden_dropout: dropout on V (LRA: 0.0).
    """

    name = "mega"

    def __init__(
        self,
        dim: int,
        num_heads: int,
        seq_len: int,
        dropout: float,
        z_dim: Count = 64,
        hidden_dim: Count | None = None,
        ndim: Count = 16,
        chunk_size: Count | None = None,
        attention_function: Literal["softmax", "laplace"] = "softmax",
        truncation: Count | None = None,
        bidirectional: bool = True,
        attn_dropout: DropRate = 0.0,
        hidden_dropout: DropRate = 0.0,
    ) -> None:
        super().__init__(dim, num_heads, seq_len, dropout)
        for knob, value in (("z_dim", z_dim), ("hidden_dim", hidden_dim), ("ndim", ndim), ("truncation", truncation)):
            if value is not None and value <= 0:
                raise ConfigError(f"attention=mega: {knob} must be a positive integer (or null where allowed), "
                                  f"got {value}")
        if attention_function not in ATTENTION_FUNCTIONS:
            raise ConfigError(f"attention=mega: attention_function must be one of {', '.join(ATTENTION_FUNCTIONS)}, "
                              f"got {attention_function!r}")
        if chunk_size is not None:
            self.require_block_fits("chunk_size", chunk_size)
        hidden = hidden_dim or 2 * dim
        self.z_dim, self.hidden_dim, self.chunk_size = z_dim, hidden, chunk_size
        self.attention_function = attention_function
        self.move = MultiHeadEMA(dim, ndim, bidirectional, truncation)
        self.v_proj = nn.Linear(dim, hidden)
        self.mx_proj = nn.Linear(dim, dim + z_dim + hidden + dim)  # φ, Z, γ (reset), X' W_h + b_h
        self.h_proj = nn.Linear(hidden, dim)
        self.gamma = nn.Parameter(torch.randn(2, z_dim) * 0.02)  # κ_q, κ_k
        self.beta = nn.Parameter(torch.zeros(2, z_dim))  # μ_q, μ_k
        self.max_positions = chunk_size or seq_len
        self.rel_pos_bias = nn.Parameter(torch.randn(2 * self.max_positions - 1) * 0.02)
        for linear in (self.v_proj, self.mx_proj, self.h_proj):
            nn.init.normal_(linear.weight, std=0.02)
            nn.init.zeros_(linear.bias)
        self.attn_drop = nn.Dropout(fraction("attention.attn_dropout", attn_dropout))
        self.hidden_drop = nn.Dropout(fraction("attention.hidden_dropout", hidden_dropout))

    def relative_bias(self, n: int) -> Tensor:
        """(n, n): b[i, j] = rel_pos_bias[P − 1 + j − i]."""
        pos = torch.arange(n, device=self.rel_pos_bias.device)
        return self.rel_pos_bias[self.max_positions - 1 + pos[None, :] - pos[:, None]]

    def attend(self, q: Tensor, k: Tensor, v: Tensor, real: Tensor | None) -> Tensor:
        """One head within chunks: q, k (B, K, c, z); v (B, K, c, hidden); real (B, K, c) bool or None.
        Returns (B, K, c, hidden)."""
        c = q.shape[2]
        bias = self.relative_bias(c)  # (c, c)
        if self.attention_function == "softmax":
            scores = torch.einsum("bkid,bkjd->bkij", q, k) / math.sqrt(self.z_dim) + bias  # (B, K, c, c)
            if real is not None:
                scores = scores.masked_fill(~real[:, :, None, :], torch.finfo(scores.dtype).min)
            weights = torch.softmax(scores, dim=-1)
        else:
            lengths = c if real is None else real.sum(-1).clamp(min=1)[..., None, None].to(q.dtype)  # (B, K, 1, 1)
            weights = laplace(torch.einsum("bkid,bkjd->bkij", q, k) / lengths + bias)  # (B, K, c, c)
            if real is not None:
                weights = weights * real[:, :, None, :].to(weights.dtype)
        return torch.einsum("bkij,bkjd->bkid", self.attn_drop(weights), v)

    def forward(self, x: Tensor, mask: Tensor | None = None, residual: Tensor | None = None) -> Tensor:
        """x (B, N, C); mask (B, N) bool, True = real; residual: the input the gate mixes with (default x).
        Returns φ ⊙ (Ĥ − residual) (B, N, C)."""
        self.check_input(x, mask)
        n = x.shape[1]
        v = self.hidden_drop(F.silu(self.v_proj(x)))  # (B, N, hidden)
        mx = self.out_drop(self.move(x, mask))  # (B, N, C): X'
        u, zr, hx = torch.split(self.mx_proj(mx), [self.dim, self.z_dim + self.hidden_dim, self.dim], dim=-1)
        z, r = torch.split(F.silu(zr), [self.z_dim, self.hidden_dim], dim=-1)  # (B, N, z), (B, N, hidden)
        q, k = (z[..., None, :] * self.gamma + self.beta).unbind(dim=-2)  # (B, N, z) each
        c = n if self.chunk_size is None else min(self.chunk_size, n)
        real = mask if mask is not None or n % c == 0 else torch.ones(x.shape[:2], dtype=torch.bool, device=x.device)
        q, k, v = (rearrange(pad_dim(t, c, dim=1), "b (nc c) d -> b nc c d", c=c) for t in (q, k, v))
        if real is not None:
            real = rearrange(pad_dim(real, c, dim=1, value=False), "b (nc c) -> b nc c", c=c)  # (B, K, c)
        h = rearrange(self.attend(q, k, v, real), "b nc c d -> b (nc c) d")[:, :n]  # (B, N, hidden)
        h = self.out_drop(F.silu(hx + self.h_proj(h * r)))  # (B, N, C): Ĥ
        return torch.sigmoid(u) * (h - (x if residual is None else residual))
