"""Exact softmax attention through PyTorch's fused kernels, without a mask whenever the batch allows.

Same function as ``softmax`` (Vaswani et al. 2017, https://arxiv.org/abs/1706.03762), dispatched to fused
kernels that never build the N x N score matrix: FlashAttention (Dao et al. 2022,
https://arxiv.org/abs/2205.14135) through ``F.scaled_dot_product_attention`` (SDPA), and FlexAttention
(Dong et al. 2024, https://arxiv.org/abs/2412.05496) for padded batches on CUDA.

Which kernel runs (one host sync per call checks whether the batch has padding at all):

* no padding (mask None or all True): SDPA with no mask — FlashAttention on CUDA, the fused CPU flash kernel;
* padding, CUDA, no attention dropout active (eval, or ``attn_dropout=0``), ``flex_padded`` and a head dim
  compiled FlexAttention takes (a power of two >= 16): compiled FlexAttention with a key-padding block mask
  (fully padded key blocks are skipped);
* padding otherwise: SDPA with a (B, 1, 1, N) boolean key mask (CPU flash kernel; memory-efficient kernel
  on CUDA, which supports dropout; FlexAttention would need the doubled keys of ``_flex.py`` for it, twice the
  work).

Attention dropout (training only) has no fused CPU kernel: on CPU in training with ``attn_dropout > 0``
SDPA falls back to its math kernel, O(B·H·N²) memory, whatever the mask (``tools/bench_flash.py`` at N=4096, batch 4,
dim 256, one thread: 4,253 MiB and 93.2 s per step with dropout 0.1 against 203 MiB and 15.1 s without, on a loaded
machine; an earlier, quieter measurement gave 2.8x the time). The first such call of a run warns, once.

Time O(B·H·N²·D); memory O(B·H·N) on the fused kernels.
"""

from __future__ import annotations

import logging

import torch
import torch.nn.functional as F
from torch import Tensor

from lra_bench.attention._flex import compiled_kernel_supports, flex_key_padding_attention
from lra_bench.attention.base import Attention, checked_attn_dropout
from lra_bench.checks import DropRate

log = logging.getLogger(__name__)
CPU_DROPOUT_WARNING = (
    "attention=flash with attention.attn_dropout={p} in training on a CPU: no fused CPU kernel applies attention "
    "dropout, so scaled_dot_product_attention falls back to its math kernel, which builds the N x N matrix: "
    "softmax's memory and time (measured at N=4096, batch 4, dim 256: 21x the memory and 3-6x the time of the same "
    "call without dropout; python tools/bench_flash.py measures it on your machine). attention.attn_dropout=0.0 keeps "
    "the fused kernel (LRA trains with 0.1)")


class FlashAttention(Attention):
    """softmax(QKᵀ/√D) V with key padding, on fused kernels (see the module docstring for the dispatch).

    Args:
        dim, num_heads, seq_len, dropout: supplied by the encoder (see ``Attention``).
        attn_dropout: dropout on the attention probabilities, applied only in training (LRA: 0.1).
        flex_padded: run padded batches through compiled FlexAttention on CUDA when no dropout is active
            (False: SDPA with the key mask there too).
    """

    name = "flash"

    def __init__(self, dim: int, num_heads: int, seq_len: int, dropout: float, attn_dropout: DropRate = 0.1,
                 flex_padded: bool = True) -> None:
        super().__init__(dim, num_heads, seq_len, dropout)
        self.attn_dropout = checked_attn_dropout(attn_dropout)
        self.flex_padded = flex_padded

    warned: bool = False  # the CPU-dropout warning, once per process (one run)

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
        p = self.attn_dropout if self.training else 0.0
        compiling = torch.compiler.is_compiling()  # no logging and no host sync inside a compiled graph
        if p > 0 and q.device.type == "cpu" and not compiling and not FlashAttention.warned:
            FlashAttention.warned = True
            log.warning(CPU_DROPOUT_WARNING.format(p=p))
        if mask is None or (not compiling and bool(mask.all())):  # one host sync; no mask keeps SDPA fused
            return F.scaled_dot_product_attention(q, k, v, dropout_p=p)  # (B, H, N, D)
        # a fully padded row would give NaN: let it attend everywhere (its output is unspecified anyway)
        keep = mask | ~mask.any(dim=-1, keepdim=True)  # (B, N) True = attend
        if self.padded_kernel(q.device.type, p) == "flex":
            return self.attend_flex(q, k, v, keep, compiled=True)  # (B, H, N, D)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=keep[:, None, None, :], dropout_p=p)  # (B, H, N, D)

    def padded_kernel(self, device_type: str, dropout_p: float) -> str:
        """"flex" (compiled FlexAttention: CUDA, no dropout active, ``flex_padded``, a head dim it takes) or "sdpa"
        for a padded batch."""
        usable = self.flex_padded and compiled_kernel_supports(self.head_dim)
        return "flex" if usable and device_type == "cuda" and dropout_p == 0.0 else "sdpa"

    def attend_flex(self, q: Tensor, k: Tensor, v: Tensor, keep: Tensor, compiled: bool) -> Tensor:
        """The FlexAttention path for a padded batch; ``compiled=False`` runs it eagerly (tests on CPU)."""
        return flex_key_padding_attention(q, k, v, keep, compiled=compiled)  # (B, H, N, D)
