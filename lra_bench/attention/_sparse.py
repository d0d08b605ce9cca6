"""The base of the sparse-pattern variants (local, strided, global, longformer, bigbird): two kernels, one pattern.

* ``blocked``: the reference implementation of each variant, gathered blocks and masked softmax in plain PyTorch
  (what runs on CPU and in CI);
* ``flex``: the same pattern as a FlexAttention block mask (``lra_bench.attention._flex``), compiled on CUDA,
  eager on CPU (forward only; used by the tests to check both kernels give the same outputs);
* ``auto`` (default): ``flex`` on CUDA when the head dim suits compiled FlexAttention (a power of two >= 16;
  Pathfinder's paper model has head dim 8), ``blocked`` otherwise.

Both kernels compute softmax(QKᵀ/√D) V over the same set of (query, key) pairs, with attention dropout on the
probabilities in training.
"""

from __future__ import annotations

import abc
from typing import Literal, get_args

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lra_bench.attention._flex import (
    PatternMod,
    compiled_kernel_supports,
    evaluate_classes,
    flex_pattern_attention,
)
from lra_bench.attention.base import Attention, checked_attn_dropout
from lra_bench.errors import ConfigError

SparseKernel = Literal["auto", "blocked", "flex"]  # the values of ``attention.kernel``
KERNELS = get_args(SparseKernel)


class SparsePatternAttention(Attention):
    """Attention over a sparse (query, key) pattern with a ``blocked`` and a ``flex`` kernel.

    Subclasses implement ``attend_blocked`` (the reference) and ``flex_pattern`` (the same pattern per element,
    plus its tile classes).

    Args:
        dim, num_heads, seq_len, dropout: supplied by the encoder (see ``Attention``).
        attn_dropout: dropout on the attention probabilities, training only.
        kernel: "auto" (flex on CUDA for head dims compiled FlexAttention takes, blocked otherwise), "blocked" or
            "flex".
    """

    def __init__(self, dim: int, num_heads: int, seq_len: int, dropout: float, attn_dropout: float,
                 kernel: str) -> None:
        super().__init__(dim, num_heads, seq_len, dropout)
        if kernel not in KERNELS:
            raise ConfigError(f"attention.kernel={kernel!r} is not one of {', '.join(KERNELS)}")
        self.kernel = kernel
        self.attn_drop = nn.Dropout(checked_attn_dropout(attn_dropout))
        self._classes: dict[tuple[str, int, str], Tensor] = {}  # static patterns' tile classes: (tag, N, device)

    def kernel_for(self, device_type: str) -> str:
        """The kernel that runs on ``device_type`` ("blocked" or "flex")."""
        if self.kernel == "auto":
            return "flex" if device_type == "cuda" and compiled_kernel_supports(self.head_dim) else "blocked"
        return self.kernel

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
        if self.kernel_for(q.device.type) == "flex":
            compiled = q.device.type == "cuda"
            if compiled:
                self.require_compiled_flex()
            elif torch.is_grad_enabled() and q.requires_grad:
                raise ConfigError(f"attention={self.name} kernel=flex on {q.device.type}: torch has no FlexAttention "
                                  "backward there, so it cannot train; use attention.kernel=auto (blocked there)")
            return self.attend_flex(q, k, v, mask, compiled=compiled)
        return self.attend_blocked(q, k, v, mask)

    def require_compiled_flex(self) -> None:
        """A clear ConfigError when ``kernel=flex`` is asked on CUDA for a head dim compiled FlexAttention rejects."""
        if not compiled_kernel_supports(self.head_dim):
            raise ConfigError(
                f"attention={self.name} kernel=flex: compiled FlexAttention needs a head dim that is a power of "
                f"two >= 16, got model.dim / model.num_heads = {self.head_dim}; use attention.kernel=auto "
                "(blocked for this size) or change model.dim / model.num_heads")

    def attend_flex(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, compiled: bool,
                    seed: Tensor | None = None) -> Tensor:
        """The FlexAttention kernel: q, k, v (B, H, N, D), mask (B, N) or None -> (B, H, N, D)."""
        pattern_mod, classes = self.flex_pattern(q.shape[2], q.device)
        p = self.attn_drop.p if self.training else 0.0
        return flex_pattern_attention(q, k, v, pattern_mod, classes, mask, p, compiled, seed, scale=self.head_dim**-0.5)

    def static_classes(self, pattern_mod: PatternMod, heads: int, n: int, device: torch.device,
                       tag: str = "pattern") -> Tensor:
        """Tile classes of a pattern that depends only on N, computed once per (``tag``, N, device)."""
        key = (tag, n, str(device))
        if key not in self._classes:
            self._classes[key] = evaluate_classes(pattern_mod, heads, n, device)
        return self._classes[key]

    def attend_all(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
        """Every query over every real key, through SDPA: what the blocked kernel computes when the pattern reaches
        every token (short sequences), without its padded key blocks. q, k, v (B, H, N, D), mask (B, N) or None."""
        p, scale = (self.attn_drop.p if self.training else 0.0), self.head_dim**-0.5
        if mask is None:
            return F.scaled_dot_product_attention(q, k, v, dropout_p=p, scale=scale)  # (B, H, N, D)
        keep = mask | ~mask.any(dim=-1, keepdim=True)  # (B, N); a fully padded row attends everywhere, not NaN
        return F.scaled_dot_product_attention(q, k, v, attn_mask=keep[:, None, None, :], dropout_p=p, scale=scale)

    @abc.abstractmethod
    def attend_blocked(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
        """The reference kernel: q, k, v (B, H, N, D), mask (B, N) or None -> (B, H, N, D)."""

    @abc.abstractmethod
    def flex_pattern(self, n: int, device: torch.device) -> tuple[PatternMod, Tensor]:
        """(pattern_mod(h, q, k) -> bool, tile classes (H or 1, nb, nb) int8) of the pattern at length N."""
