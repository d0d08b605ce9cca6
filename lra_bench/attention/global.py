"""Global-token attention: the first g tokens attend to, and are attended by, every token; the rest see only them.

The global-attention component of Longformer (Beltagy et al. 2020, https://arxiv.org/abs/2004.05150, §3.1)
and of ETC / BigBird (Zaheer et al. 2020, https://arxiv.org/abs/2007.14062), used alone (cf. xformers'
``global_tokens`` attention). An ordinary token attends to the g global tokens and to itself.

Time O(B·H·N·g·D), memory O(B·H·N·g): the global rows are (g x N), the ordinary rows (N x (g + 1)). On CUDA the
same pattern runs as a FlexAttention block mask (``kernel``, see ``lra_bench.attention._sparse``).
"""

from __future__ import annotations

import torch
from torch import Tensor

from lra_bench.attention._blocks import masked_attention, real_keys
from lra_bench.attention._flex import PatternMod
from lra_bench.attention._sparse import SparseKernel, SparsePatternAttention
from lra_bench.checks import Count, DropRate
from lra_bench.errors import ConfigError


class GlobalAttention(SparsePatternAttention):
    """First ``num_global`` positions are global tokens (e.g. the CLS token); others attend to them and themselves.

    Args:
        dim, num_heads, seq_len, dropout: supplied by the encoder (see ``Attention``).
        num_global: number of leading positions that are global.
        attn_dropout: dropout on the attention probabilities.
        kernel: "auto" (FlexAttention on CUDA, blocked elsewhere), "blocked" or "flex".
    """

    name = "global"

    def __init__(
        self, dim: int, num_heads: int, seq_len: int, dropout: float, num_global: Count = 16,
        attn_dropout: DropRate = 0.1, kernel: SparseKernel = "auto",
    ) -> None:
        super().__init__(dim, num_heads, seq_len, dropout, attn_dropout, kernel)
        if num_global <= 0:
            raise ConfigError(f"global: num_global must be positive, got {num_global}")
        self.num_global = num_global

    def flex_pattern(self, n: int, device: torch.device) -> tuple[PatternMod, Tensor]:
        g = min(self.num_global, n)

        def pattern_mod(h: Tensor, q: Tensor, k: Tensor) -> Tensor:
            return (q < g) | (k < g) | (q == k)

        return pattern_mod, self.static_classes(pattern_mod, 1, n, device)

    def attend_blocked(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
        b_, _, n, _ = q.shape
        g = min(self.num_global, n)
        real = real_keys(mask, b_, n, q.device)  # (B, N)
        scale = self.head_dim**-0.5
        # global rows: full attention over all N keys
        out_g, _ = masked_attention(q[:, :, :g], k, v, real[:, None, None, :], scale, self.attn_drop)  # (B,H,g,D)
        # ordinary rows i >= g: keys = the g global tokens plus token i itself
        qo, ko, vo = q[:, :, g:], k[:, :, g:], v[:, :, g:]  # (B, H, N-g, D)
        s_glob = torch.einsum("bhid,bhjd->bhij", qo, k[:, :, :g]) * scale  # (B, H, N-g, g)
        s_self = (qo * ko).sum(-1, keepdim=True) * scale  # (B, H, N-g, 1)
        scores = torch.cat([s_glob, s_self], dim=-1)  # (B, H, N-g, g+1)
        valid = torch.cat([real[:, None, :g].expand(-1, n - g, -1), real[:, g:, None]], dim=2)  # (B, N-g, g+1)
        scores = scores.masked_fill(~valid[:, None], torch.finfo(scores.dtype).min)
        probs = self.attn_drop(scores.softmax(dim=-1))  # (B, H, N-g, g+1)
        out_o = probs[..., :g] @ v[:, :, :g] + probs[..., g:] * vo  # (B, H, N-g, D)
        return torch.cat([out_g, out_o], dim=2)  # (B, H, N, D)
