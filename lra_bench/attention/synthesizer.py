"""Synthesizer: attention weights synthesised without (or in addition to) query-key dot products.

Tay et al. 2021, "Synthesizer: Rethinking Self-Attention in Transformer Models",
https://arxiv.org/abs/2005.00743.

Modes (logits per head, sliced to the first N positions, padded keys masked):
    * ``dense``: per-token MLP  x_i -> relu(W₁x_i) -> W₂ ∈ R^{seq_len}  (LRA's DenseGeneral + Dense);
    * ``random``: a (H, seq_len, seq_len) logit table, learned or fixed (``trainable_random``);
    * ``factorized_random``: R₁ R₂ᵀ with R₁, R₂ ∈ R^{H × seq_len × k}.
With ``ignore_dot_product: false`` (LRA code default) the scaled dot product QKᵀ/√D is added to the
synthetic logits, as in LRA's implementation; with ``true`` (LRA Text config) only values are projected.

Time O(B·H·N²·D) (plus O(B·N·C·seq_len) for ``dense``), memory O(B·H·N²): this mechanism builds the
N × N weight matrix by design.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from einops import rearrange
from torch import Tensor, nn

from lra_bench.attention.base import TokenMixer, key_padding_bias
from lra_bench.checks import Count, DropRate, check_choice
from lra_bench.errors import ConfigError

Mode = Literal["dense", "random", "factorized_random"]


class SynthesizerAttention(TokenMixer):
    """Synthetic attention weights (dense / random / factorized_random) applied to projected values.

    Args:
        dim, num_heads, seq_len, dropout: supplied by the encoder (see ``TokenMixer``).
        mode: ``dense``, ``random`` or ``factorized_random`` (LRA code default ``random``).
        k: rank of the factorized random logits (LRA: 32).
        trainable_random: learn the random logits (else a fixed buffer).
        ignore_dot_product: use the synthetic logits alone (true) or add QKᵀ/√D (false, LRA code default).
        attn_dropout: dropout on the attention probabilities.
    """

    name = "synthesizer"

    def __init__(
        self,
        dim: int,
        num_heads: int,
        seq_len: int,
        dropout: float,
        mode: Mode = "random",
        k: Count = 32,
        trainable_random: bool = True,
        ignore_dot_product: bool = False,
        attn_dropout: DropRate = 0.1,
    ) -> None:
        super().__init__(dim, num_heads, seq_len, dropout)
        check_choice("attention=synthesizer", "mode", mode, Mode)
        if k <= 0:
            raise ConfigError(f"attention=synthesizer: k must be positive, got {k}")
        self.mode = mode
        self.ignore_dot_product = ignore_dot_product
        if ignore_dot_product:  # values only: q and k would be unused parameters
            self.out = nn.Linear(dim, dim)
            self.value = nn.Linear(dim, dim)
        else:  # the dot product QKᵀ/√D is added to the synthetic logits (same creation order as Attention's)
            self.qkv = nn.Linear(dim, 3 * dim)
            self.out = nn.Linear(dim, dim)
        if mode == "dense":
            self.dense_in = nn.Linear(dim, dim)  # (C -> H·D), LRA's DenseGeneral(features=(H, D))
            self.dense_out = nn.Linear(self.head_dim, seq_len)  # (D -> seq_len), shared by heads
        elif mode == "random":
            table = torch.randn(num_heads, seq_len, seq_len) * seq_len**-0.5  # (H, seq_len, seq_len)
            if trainable_random:
                self.random_logits = nn.Parameter(table)
            else:
                self.register_buffer("random_logits", table)
        else:
            self.factor_1 = nn.Parameter(torch.randn(num_heads, seq_len, k) * k**-0.5)  # (H, seq_len, k)
            self.factor_2 = nn.Parameter(torch.randn(num_heads, seq_len, k) * k**-0.5)  # (H, seq_len, k)
        self.attn_drop = nn.Dropout(attn_dropout)

    def synthetic_logits(self, x: Tensor) -> Tensor:
        """(B, N, C) -> (B or 1, H, N, N) synthetic logits (no mask)."""
        n = x.shape[1]
        if self.mode == "dense":
            hidden = rearrange(torch.relu(self.dense_in(x)), "b n (h d) -> b h n d", h=self.num_heads)  # (B,H,N,D)
            return self.dense_out(hidden)[..., :n]  # (B, H, N, N)
        if self.mode == "random":
            return self.random_logits[None, :, :n, :n]  # (1, H, N, N)
        return torch.einsum("hik,hjk->hij", self.factor_1[:, :n], self.factor_2[:, :n])[None]  # (1, H, N, N)

    def _values_and_logits(self, x: Tensor) -> tuple[Tensor, Tensor]:
        logits = self.synthetic_logits(x)  # (B or 1, H, N, N)
        if self.ignore_dot_product:
            v = rearrange(self.value(x), "b n (h d) -> b h n d", h=self.num_heads)  # (B, H, N, D)
            return v, logits
        q, k, v = rearrange(self.qkv(x), "b n (three h d) -> three b h n d", three=3, h=self.num_heads)  # (B,H,N,D)
        return v, logits + (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)  # (B, H, N, N)

    def attention_weights(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        """(B, N, C) -> (B or 1, H, N, N) attention probabilities before dropout (padded keys get 0)."""
        _, logits = self._values_and_logits(x)
        bias = key_padding_bias(mask, logits.dtype)  # (B, 1, 1, N) or None
        return (logits if bias is None else logits + bias).softmax(dim=-1)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        self.check_input(x, mask)
        v, logits = self._values_and_logits(x)  # (B, H, N, D), (B or 1, H, N, N)
        bias = key_padding_bias(mask, logits.dtype)  # (B, 1, 1, N) or None
        probs = self.attn_drop((logits if bias is None else logits + bias).softmax(dim=-1))  # (B or 1, H, N, N)
        y = rearrange(probs @ v, "b h n d -> b n (h d)")  # (B, N, C)
        return self.out_drop(self.out(y))
