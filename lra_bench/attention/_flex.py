"""Key-padding attention through FlexAttention (used by ``flash`` for padded batches on CUDA).

FlexAttention (Dong et al. 2024, "Flex Attention: A Programming Model for Generating Optimized Attention
Kernels", https://arxiv.org/abs/2412.05496) runs a fused, tiled kernel that skips key blocks the mask rules
out entirely. The block mask is built here from per-block counts of real keys, O(B·(N/S)²) integers for
block size S, never a dense N x N boolean mask (``create_block_mask`` evaluates the mask_mod on every
(query, key) pair unless compiled).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn.attention.flex_attention import BlockMask, flex_attention

BLOCK_SIZE = 128  # FlexAttention's default tile

_compiled_flex = None


def compiled_flex_attention():  # noqa: ANN201 - torch.compile's wrapper type
    """``torch.compile(flex_attention)``, built once per process (eager flex materialises the scores)."""
    global _compiled_flex
    if _compiled_flex is None:
        _compiled_flex = torch.compile(flex_attention, dynamic=False)
    return _compiled_flex


def key_padding_block_mask(keep: Tensor, block_size: int = BLOCK_SIZE) -> BlockMask:
    """A FlexAttention ``BlockMask`` letting every query attend to the keys where ``keep`` (B, N) is True.

    Key block j of row b is *full* (every key real: no mask_mod call), *partial* (mask_mod decides per key)
    or skipped (every key padded); every query block sees the same key blocks. Any padding pattern works,
    not only right padding.
    """
    if keep.dtype != torch.bool or keep.dim() != 2:
        raise ValueError(f"keep must be a (B, N) bool tensor, got {keep.dtype} {tuple(keep.shape)}")
    b, n = keep.shape
    num_blocks = -(-n // block_size)
    padded = F.pad(keep, (0, num_blocks * block_size - n))  # (B, nb·S), False past N
    real = padded.view(b, num_blocks, block_size).sum(dim=-1)  # (B, nb) real keys per block
    full = real == block_size  # (B, nb)
    partial = (real > 0) & ~full  # (B, nb)

    def blocks(selected: Tensor) -> tuple[Tensor, Tensor]:
        # selected block indices first, in ascending order (a stable sort on 0 = selected, 1 = not)
        order = torch.sort((~selected).to(torch.int8), dim=-1, stable=True).indices.to(torch.int32)  # (B, nb)
        count = selected.sum(dim=-1, dtype=torch.int32)  # (B,)
        num = count[:, None, None].expand(b, 1, num_blocks).contiguous()  # (B, 1, nq) one per query block
        idx = order[:, None, None, :].expand(b, 1, num_blocks, num_blocks).contiguous()  # (B, 1, nq, nb)
        return num, idx

    kv_num, kv_idx = blocks(partial)
    full_num, full_idx = blocks(full)

    def mask_mod(batch: Tensor, head: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        return padded[batch, kv_idx]  # in bounds for every index of the last, partial block

    return BlockMask.from_kv_blocks(kv_num, kv_idx, full_num, full_idx, BLOCK_SIZE=block_size, mask_mod=mask_mod,
                                    seq_lengths=(n, n))


def flex_key_padding_attention(q: Tensor, k: Tensor, v: Tensor, keep: Tensor, compiled: bool) -> Tensor:
    """softmax(QKᵀ/√D) V over the keys where ``keep`` (B, N) is True; q, k, v (B, H, N, D) -> (B, H, N, D).

    Rows with no real key are not supported (the caller lets such rows attend everywhere). ``compiled``
    selects the fused kernel (CUDA); eager FlexAttention is a slow, materialising reference, forward-only on
    CPU (torch has no FlexAttention backward on CPU), fine for tests.
    """
    block_mask = key_padding_block_mask(keep)
    attend = compiled_flex_attention() if compiled else flex_attention
    return attend(q, k, v, block_mask=block_mask)  # (B, H, N, D)
