"""Sparse Transformer strided attention, bidirectional and blocked.

Child et al. 2019, "Generating Long Sequences with Sparse Transformers", https://arxiv.org/abs/1904.10509 (§4.2,
"strided" pattern; the LRA "Sparse Trans." row). With stride l: the local heads attend within non-overlapping
blocks of l tokens; the strided heads attend to every position j with (i - j) mod l == 0. Together they connect
any two positions in two hops (a block holds every residue mod l). Default l = ⌈√seq_len⌉ as in the paper.

Computed blocked, never as a masked N x N: the local heads reshape N into (N/l, l) blocks, the strided heads
reshape N into (N/l, l) and attend along the first axis (one group of N/l tokens per residue).
Time O(B·H·N·(l + N/l)·D), memory O(B·H·N·(l + N/l)) = O(B·H·N·√N) at l = √N. On CUDA the same pattern
runs as FlexAttention block masks (``kernel``, see ``lra_bench.attention._sparse``). With split heads, the strided
heads see the sequence reordered by residue mod l, where each residue class is a contiguous block: both head groups
are then block-diagonal, so the kernel skips all but O(N·(l + N/l)) of the tiles. Merged heads use the union pattern
as it is; for l below the 128-token tile every tile holds a pair of it, so that kernel does O(N²) work (in O(N)
memory).
"""

from __future__ import annotations

import math

import torch
from einops import rearrange
from torch import Tensor

from lra_bench.attention._blocks import combine_by_lse, masked_attention, pad_dim, real_keys
from lra_bench.attention._flex import PatternMod, flex_pattern_attention
from lra_bench.attention._sparse import SparseKernel, SparsePatternAttention
from lra_bench.checks import Count, DropRate
from lra_bench.errors import ConfigError


class StridedAttention(SparsePatternAttention):
    """Heads split between a block-local pattern and a strided (dilated) pattern (Child et al. 2019).

    Args:
        dim, num_heads, seq_len, dropout: supplied by the encoder (see ``Attention``).
        stride: the stride l, also the local block length; None = ⌈√seq_len⌉ (the paper's choice l ≈ √n).
        merged: True = every head attends to the union of both patterns (the paper's "merged" head);
            False = the first ⌈H/2⌉ heads are local and the others strided (with one head, merged is used).
        attn_dropout: dropout on the attention probabilities.
        kernel: "auto" (FlexAttention on CUDA, blocked elsewhere), "blocked" or "flex".
    """

    name = "strided"

    def __init__(
        self,
        dim: int,
        num_heads: int,
        seq_len: int,
        dropout: float,
        stride: Count | None = None,
        merged: bool = False,
        attn_dropout: DropRate = 0.1,
        kernel: SparseKernel = "auto",
    ) -> None:
        super().__init__(dim, num_heads, seq_len, dropout, attn_dropout, kernel)
        self.stride = stride if stride is not None else math.ceil(math.sqrt(seq_len))
        if self.stride <= 0:
            raise ConfigError(f"strided: stride must be positive, got {stride}")
        self.merged = merged or num_heads == 1
        self.local_heads = num_heads if self.merged else (num_heads + 1) // 2

    def flex_pattern(self, n: int, device: torch.device) -> tuple[PatternMod, Tensor]:
        s, merged = min(self.stride, n), self.merged
        local_head = torch.arange(self.num_heads, device=device) < self.local_heads  # (H,)

        def pattern_mod(h: Tensor, q: Tensor, k: Tensor) -> Tensor:
            local, strided = q // s == k // s, q % s == k % s
            return local | strided if merged else torch.where(local_head[h], local, strided)

        return pattern_mod, self.static_classes(pattern_mod, self.num_heads, n, device)

    def block_diagonal(self, n: int, block: int, device: torch.device) -> tuple[PatternMod, Tensor]:
        """Blocks of ``block`` consecutive tokens attending within themselves, over N tokens, and its tile classes."""
        def pattern_mod(h: Tensor, q: Tensor, k: Tensor) -> Tensor:
            return q // block == k // block

        return pattern_mod, self.static_classes(pattern_mod, 1, n, device, tag=f"blocks of {block}")

    def attend_flex(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, compiled: bool,
                    seed: Tensor | None = None) -> Tensor:
        """Split heads: local heads block-diagonal as they are, strided heads block-diagonal in residue order."""
        if self.merged:
            return super().attend_flex(q, k, v, mask, compiled, seed)
        b_, _, n, _ = q.shape
        s, hl = min(self.stride, n), self.local_heads
        p = self.attn_drop.p if self.training else 0.0
        scale = self.head_dim**-0.5
        local_mod, local_classes = self.block_diagonal(n, s, q.device)
        out_local = flex_pattern_attention(q[:, :hl], k[:, :hl], v[:, :hl], local_mod, local_classes, mask, p,
                                           compiled, seed, scale)  # (B, hl, N, D)
        m = -(-n // s)  # tokens per residue class (with the padding up to m·s)
        order = rearrange(torch.arange(m * s, device=q.device), "(m s) -> (s m)", s=s)  # residue order
        real = pad_dim(real_keys(mask, b_, n, q.device), s, dim=1, value=False)[:, order]  # (B, m·s)
        q_s, k_s, v_s = (pad_dim(t[:, hl:], s, dim=2)[:, :, order] for t in (q, k, v))  # (B, H-hl, m·s, D)
        class_mod, class_classes = self.block_diagonal(m * s, m, q.device)
        out = flex_pattern_attention(q_s, k_s, v_s, class_mod, class_classes, real, p, compiled,
                                     None if seed is None else seed + 1, scale)  # (B, H-hl, m·s, D) residue order
        undo = rearrange(torch.arange(m * s, device=q.device), "(s m) -> (m s)", m=m)  # inverse of ``order``
        out_strided = out[:, :, undo[:n]]  # (B, H-hl, N, D) in the original order
        return torch.cat([out_local, out_strided], dim=1)  # (B, H, N, D)

    def _local(self, q: Tensor, k: Tensor, v: Tensor, real: Tensor, s: int,
               need_lse: bool) -> tuple[Tensor, Tensor | None]:
        """Block-local part on padded inputs (B, h, Np, D), real (B, Np); returns out (B,h,Np,D), lse (B,h,Np) or
        None."""
        q, k, v = (rearrange(t, "b h (m s) d -> b h m s d", s=s) for t in (q, k, v))
        valid = rearrange(real, "b (m s) -> b m s", s=s)[:, None, :, None, :]  # (B, 1, m, 1, s)
        out, lse = masked_attention(q, k, v, valid, self.head_dim**-0.5, self.attn_drop, need_lse)  # (B,h,m,s,D)
        return (rearrange(out, "b h m s d -> b h (m s) d"),
                None if lse is None else rearrange(lse, "b h m s -> b h (m s)"))

    def _strided(self, q: Tensor, k: Tensor, v: Tensor, real: Tensor, s: int,
                 drop_self: bool) -> tuple[Tensor, Tensor | None]:
        """Strided part: one group per residue mod s, each of m = Np/s tokens (with ``drop_self``, the merged heads:
        self left out, and the logsumexp returned for the combination)."""
        q, k, v = (rearrange(t, "b h (m s) d -> b h s m d", s=s) for t in (q, k, v))
        valid = rearrange(real, "b (m s) -> b s m", s=s)[:, None, :, None, :]  # (B, 1, s, 1, m)
        if drop_self:  # merged heads: self is already counted in the local block
            m = q.shape[3]
            valid = valid & ~torch.eye(m, dtype=torch.bool, device=q.device)  # (B, 1, s, m, m)
        out, lse = masked_attention(q, k, v, valid, self.head_dim**-0.5, self.attn_drop, drop_self)  # (B,h,s,m,D)
        return (rearrange(out, "b h s m d -> b h (m s) d"),
                None if lse is None else rearrange(lse, "b h s m -> b h (m s)"))

    def attend_blocked(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
        b_, _, n, _ = q.shape
        s = min(self.stride, n)
        real = pad_dim(real_keys(mask, b_, n, q.device), s, dim=1, value=False)  # (B, Np)
        q, k, v = (pad_dim(t, s, dim=2) for t in (q, k, v))  # (B, H, Np, D)
        if self.merged:
            o_loc, l_loc = self._local(q, k, v, real, s, need_lse=True)
            o_str, l_str = self._strided(q, k, v, real, s, drop_self=True)
            # the strided part may be empty (no other real token with the same residue): its lse is ~dtype-min
            out = combine_by_lse(torch.stack([o_loc, o_str], dim=2), torch.stack([l_loc, l_str], dim=2), dim=2)
        else:
            hl = self.local_heads
            o_loc, _ = self._local(q[:, :hl], k[:, :hl], v[:, :hl], real, s, need_lse=False)  # (B, hl, Np, D)
            o_str, _ = self._strided(q[:, hl:], k[:, hl:], v[:, hl:], real, s, drop_self=False)  # (B, H-hl, Np, D)
            out = torch.cat([o_loc, o_str], dim=1)  # (B, H, Np, D)
        return out[:, :, :n]  # (B, H, N, D)
