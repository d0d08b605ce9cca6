"""Longformer attention: sliding window + dilated sliding window heads + global tokens.

Beltagy et al. 2020, "Longformer: The Long-Document Transformer", https://arxiv.org/abs/2004.05150 (§3.1).
Token i attends to j when |i - j| <= (w/2)·d and (i - j) mod d == 0 (d = the dilation of its head group), plus
the first ``num_global`` tokens, which attend to every token and are attended by every token (symmetric global
attention; the paper's separate global projections are not used, as in LRA's Longformer).

Banded computation: for dilation d the sequence is split into d residue classes (reshape N -> (N/d, d)); inside a
class the window is a band of half-width r = w/2, computed in blocks of r tokens that attend to the previous, own and
next block (3r keys) with a band mask. Time O(B·H·N·(w + g)·D), memory O(B·H·N·(w + g)); never N x N. When the band
reaches every token (no dilation, w/2 >= N - 1) the pattern is plain attention with a key mask, and that is what
runs (``attend_all``, SDPA): the blocks would pad to 3r keys per query. On CUDA the same pattern runs as a
FlexAttention block mask (``kernel``, see ``lra_bench.attention._sparse``).
"""

from __future__ import annotations

import torch
from einops import rearrange
from torch import Tensor

from lra_bench.attention._blocks import (
    masked_attention,
    masked_attention_with_shared,
    neighbor_blocks,
    pad_dim,
    real_keys,
)
from lra_bench.attention._flex import PatternMod
from lra_bench.attention._sparse import SparseKernel, SparsePatternAttention
from lra_bench.checks import Count, DropRate, NonNegativeInt
from lra_bench.errors import ConfigError


class LongformerAttention(SparsePatternAttention):
    """Sliding-window (optionally dilated per head group) attention with global tokens.

    Args:
        dim, num_heads, seq_len, dropout: supplied by the encoder (see ``Attention``).
        window: total window size w (w/2 tokens on each side; LRA ``sliding_window_size`` 512).
        dilations: one dilation per head group; heads are split into ``len(dilations)`` nearly equal groups
            (``[1]`` = no dilation, as in LRA; the paper uses e.g. ``[1, 2]`` on 2 groups of heads).
        num_global: number of leading tokens with global attention (1 = the CLS token).
        attn_dropout: dropout on the attention probabilities.
        kernel: "auto" (FlexAttention on CUDA, blocked elsewhere), "blocked" or "flex".
    """

    name = "longformer"

    def __init__(
        self,
        dim: int,
        num_heads: int,
        seq_len: int,
        dropout: float,
        window: NonNegativeInt = 512,
        dilations: tuple[Count, ...] = (1,),
        num_global: NonNegativeInt = 1,
        attn_dropout: DropRate = 0.1,
        kernel: SparseKernel = "auto",
    ) -> None:
        super().__init__(dim, num_heads, seq_len, dropout, attn_dropout, kernel)
        self.dilations = tuple(int(d) for d in dilations)
        if window < 0 or num_global < 0 or not self.dilations or min(self.dilations) <= 0:
            raise ConfigError(
                f"longformer: need window >= 0, num_global >= 0 and positive dilations, got "
                f"window={window}, num_global={num_global}, dilations={list(self.dilations)}"
            )
        if len(self.dilations) > num_heads:
            raise ConfigError(f"longformer: {len(self.dilations)} dilation groups but only {num_heads} heads")
        self.window = window
        self.num_global = num_global
        dilation = torch.empty(num_heads, dtype=torch.int64)
        for h0, h1, d in self.head_groups():
            dilation[h0:h1] = d
        self.register_buffer("head_dilation", dilation, persistent=False)  # (H,) for the flex kernel's mask_mod
    def head_groups(self) -> list[tuple[int, int, int]]:
        """[(first head, end head, dilation)] for each head group: nearly equal groups, the larger ones first (as
        ``torch.tensor_split``). Plain ints, no tensors: no host sync, no graph break under ``torch.compile``."""
        groups, start = [], 0
        size, extra = divmod(self.num_heads, len(self.dilations))
        for i, d in enumerate(self.dilations):
            end = start + size + (1 if i < extra else 0)
            groups.append((start, end, d))
            start = end
        return groups

    def flex_pattern(self, n: int, device: torch.device) -> tuple[PatternMod, Tensor]:
        g, r = min(self.num_global, n), self.window // 2
        dilation = self.head_dilation  # (H,)

        def pattern_mod(h: Tensor, q: Tensor, k: Tensor) -> Tensor:
            d = dilation[h]
            band = ((q - k).abs() <= r * d) & ((q - k) % d == 0)
            return band | (q < g) | (k < g)

        return pattern_mod, self.static_classes(pattern_mod, self.num_heads, n, device)

    def _window(self, q: Tensor, k: Tensor, v: Tensor, real: Tensor, d: int, g: int) -> Tensor:
        """Dilated band attention (+ global keys) for one head group: q, k, v (B, h, N, D); real (B, N)."""
        b_, h_, n, e = q.shape
        r = self.window // 2
        kg, vg = k[:, :, :g], v[:, :, :g]  # (B, h, g, D) global keys, shared by every query
        q, k, v = (rearrange(pad_dim(t, d, dim=2), "b h (m c) e -> b h c m e", c=d) for t in (q, k, v))
        pos = torch.arange(q.shape[3] * d, device=q.device).clamp(max=n)  # (m·d,) original positions; n = padding
        pos = rearrange(pos, "(m c) -> c m", c=d)  # (d, m)
        m = q.shape[3]
        w = max(min(r, m), 1)  # band blocks of w tokens attend to blocks -1, 0, +1
        q, k, v = (rearrange(pad_dim(t, w, dim=3), "b h c (nb w) e -> b h c nb w e", w=w) for t in (q, k, v))
        nb = q.shape[3]
        t_idx = rearrange(torch.arange(nb * w, device=q.device), "(nb w) -> nb w", w=w)  # index inside the class
        pos = rearrange(pad_dim(pos, w, dim=1, value=n), "c (nb w) -> c nb w", w=w)  # (d, nb, w); n = padding
        real_p = torch.cat([real, real.new_zeros(b_, 1)], dim=1)  # (B, N+1): slot n is "padding"
        k_real = real_p[:, pos] & (pos >= g)  # (B, d, nb, w); global keys come through the shared set
        k, v = (rearrange(neighbor_blocks(t, 1, 1, dim=3), "b h c nb s w e -> b h c nb (s w) e") for t in (k, v))
        k_real = rearrange(neighbor_blocks(k_real, 1, 1, dim=2, value=False), "b c nb s w -> b c nb (s w)")
        t_key = rearrange(neighbor_blocks(t_idx, 1, 1, dim=0, value=-(10**9)), "nb s w -> nb (s w)")  # (nb, 3w)
        band = (t_idx[:, :, None] - t_key[:, None, :]).abs() <= r  # (nb, w, 3w)
        valid = k_real[:, None, :, :, None, :] & band  # (B, 1, d, nb, w, 3w)
        scale = self.head_dim**-0.5
        if g > 0:
            out = masked_attention_with_shared(q, k, v, valid, kg, vg, real[:, :g], scale, self.attn_drop)
        else:
            out, _ = masked_attention(q, k, v, valid, scale, self.attn_drop)  # (B, h, d, nb, w, e)
        out = rearrange(out, "b h c nb w e -> b h c (nb w) e")[:, :, :, :m]  # (B, h, d, m, e)
        return rearrange(out, "b h c m e -> b h (m c) e")[:, :, :n]  # (B, h, N, e)

    def covers_sequence(self, n: int) -> bool:
        """True when the pattern at length ``n`` is all-to-all: no dilation and a band reaching every token
        (w/2 >= N - 1, e.g. LRA's window 512 on sequences of up to 257 tokens)."""
        return all(d == 1 for d in self.dilations) and self.window // 2 >= n - 1

    def attend_blocked(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
        b_, _, n, _ = q.shape
        if self.covers_sequence(n):  # the same function as the blocks below, 4-10x faster on short sequences
            return self.attend_all(q, k, v, mask)  # (B, H, N, D)
        g = min(self.num_global, n)
        real = real_keys(mask, b_, n, q.device)  # (B, N)
        outs = []
        for h0, h1, d in self.head_groups():
            outs.append(self._window(q[:, h0:h1], k[:, h0:h1], v[:, h0:h1], real, d, g))
        out = torch.cat(outs, dim=1)  # (B, H, N, D)
        if g > 0:  # global rows attend to every token
            out_g, _ = masked_attention(q[:, :, :g], k, v, real[:, None, None, :], self.head_dim**-0.5, self.attn_drop)
            out = torch.cat([out_g, out[:, :, g:]], dim=2)  # (B, H, N, D)
        return out
