"""Sparse and key-padding attention through FlexAttention: the CUDA path of ``flash`` and the sparse variants.

FlexAttention (Dong et al. 2024, "Flex Attention: A Programming Model for Generating Optimized Attention
Kernels", https://arxiv.org/abs/2412.05496) runs a fused, tiled kernel that skips the (query block, key block)
tiles a ``BlockMask`` rules out, calls no mask function on *full* tiles and calls ``mask_mod`` per element on
*partial* ones. Everything here builds block masks from per-tile classes (0 = skip, 1 = partial, 2 = full):
O(B·H·(N/S)²) int8 for tile size S, never a dense N x N boolean mask. ``create_block_mask`` would evaluate the
mask on every (query, key) pair on every call.

A sparse variant describes its pattern twice: ``pattern_mod(h, q, k) -> bool`` per element (broadcasting index
tensors), and the tile classes of that pattern (``evaluate_classes`` derives them from ``pattern_mod`` in
chunks, ``block_pattern_classes`` from a coarser block-level pattern). Key padding is folded in per batch row.

Attention dropout (on the probabilities, as ``nn.Dropout`` after the softmax) has no place in FlexAttention's
kernel, which only changes scores. It is computed exactly with doubled keys: copy A of the keys holds the kept
(query, key) pairs with values V/(1-p), copy B the dropped pairs with values 0, so the softmax normaliser still
sums over every pair while only kept pairs contribute to the output. The keep decision is a hash of
(seed, batch, head, query, key), so the forward and the backward see the same mask. Cost: twice the
attended tiles, every one partial.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn.attention.flex_attention import BlockMask, flex_attention

BLOCK_SIZE = 128  # FlexAttention's default tile
PatternMod = Callable[[Tensor, Tensor, Tensor], Tensor]  # (head, query, key) index tensors -> bool, broadcast
_CHUNK_ELEMENTS = 2**24  # pattern evaluations per chunk in evaluate_classes

#: Dynamo compiles ``flex_attention`` once per (mask_mod, its captured constants, shapes): a training run needs a
#: few (training with and without dropout, evaluation batch sizes), a benchmark or check script of every sparse
#: variant a few dozen. Past torch's default limit of 8, Dynamo silently runs the function eagerly, and eager
#: FlexAttention materialises the N x N scores; so the limit is raised to this when the compiled path is first used.
FLEX_RECOMPILE_LIMIT = 64

_compiled_flex = None


def compiled_flex_attention():  # noqa: ANN201 - torch.compile's wrapper type
    """``torch.compile(flex_attention)``, built once per process (eager flex materialises the scores)."""
    global _compiled_flex
    if _compiled_flex is None:
        dynamo = torch._dynamo.config  # type: ignore[attr-defined]
        dynamo.recompile_limit = max(dynamo.recompile_limit, FLEX_RECOMPILE_LIMIT)
        _compiled_flex = torch.compile(flex_attention, dynamic=False)
    return _compiled_flex


def compiled_kernel_supports(head_dim: int) -> bool:
    """Whether to use compiled FlexAttention (Triton) for this head dim: a power of two of at least 16. ``tl.dot``
    needs 16; non-powers of two are padded by recent inductor versions but were reported to fail or index out of
    bounds before, so they are left to the blocked kernel. Eager FlexAttention takes any head dim."""
    return head_dim >= 16 and head_dim & (head_dim - 1) == 0


def _num_blocks(n: int, block: int) -> int:
    return -(-n // block)


def evaluate_classes(pattern_mod: PatternMod, heads: int, n: int, device: torch.device,
                     block: int = BLOCK_SIZE) -> Tensor:
    """(heads, nb, nb) int8 tile classes of ``pattern_mod`` over N x N, evaluated in chunks of query blocks.

    Class 2 (full) = every pair of the tile attended, 1 = some, 0 = none; a tile reaching past N is never full
    (the mask_mod then masks the positions past N, whatever the kernel does at the boundary). A chunk holds about
    max(2^24, H·N·S) evaluations; time O(H·N²) once (callers cache the result for static patterns).
    """
    nb = _num_blocks(n, block)
    pad = nb * block - n
    rows = max(1, _CHUNK_ELEMENTS // max(1, heads * n * block)) * block
    h = torch.arange(heads, device=device)[:, None, None]  # (H, 1, 1)
    k = torch.arange(n, device=device)[None, None, :]  # (1, 1, N)
    out = []
    for r0 in range(0, nb * block, rows):
        q = torch.arange(r0, min(r0 + rows, n), device=device)[None, :, None]  # (1, R, 1)
        m = pattern_mod(h, q, k).expand(heads, q.shape[1], n)  # (H, R, N)
        rpad = (min(r0 + rows, nb * block) - r0) - q.shape[1]  # rows past N in the last chunk
        any_ = F.pad(m, (0, pad, 0, rpad), value=False).view(heads, -1, block, nb, block).any(4).any(2)
        all_ = F.pad(m, (0, pad, 0, rpad), value=False).view(heads, -1, block, nb, block).all(4).all(2)
        out.append(any_.to(torch.int8) + all_.to(torch.int8))  # (H, R/S, nb)
    return torch.cat(out, dim=1)  # (H, nb, nb)


def block_pattern_classes(attended: Tensor, coarse: int, n: int, block: int = BLOCK_SIZE) -> Tensor:
    """Tile classes of a pattern given at a coarser block level: ``attended`` (H, nc, nc) bool, block c of
    ``coarse`` tokens attends to block c'. Any ``coarse`` (need not divide the tile): a summed-area table counts
    the attended coarse blocks under each tile. Returns (H, nb, nb) int8, the classes ``evaluate_classes`` gives.
    O(H·nc²), so it can run every step (BigBird's random blocks)."""
    heads, nc, _ = attended.shape
    nb = _num_blocks(n, block)
    table = F.pad(attended.to(torch.int32).cumsum(1).cumsum(2), (1, 0, 1, 0))  # (H, nc+1, nc+1)
    start = torch.arange(nb, device=attended.device) * block  # first position of each tile
    lo = start // coarse  # (nb,) first coarse block under the tile
    hi = (torch.clamp(start + block, max=n) - 1) // coarse + 1  # (nb,) one past the last (in-range positions)
    count = (table[:, hi[:, None], hi[None, :]] - table[:, lo[:, None], hi[None, :]]
             - table[:, hi[:, None], lo[None, :]] + table[:, lo[:, None], lo[None, :]])  # (H, nb, nb)
    area = (hi - lo)[:, None] * (hi - lo)[None, :]  # (nb, nb)
    inside = start + block <= n  # (nb,) tiles wholly before N
    full = (count == area) & inside[:, None] & inside[None, :]  # (H, nb, nb)
    return (count > 0).to(torch.int8) + full.to(torch.int8)


def with_key_padding(classes: Tensor, keep: Tensor | None, n: int, block: int = BLOCK_SIZE) -> Tensor:
    """Fold key padding (``keep`` (B, N) bool, True = real) into tile classes (H, nb, nb) -> (B or 1, H, nb, nb)."""
    if keep is None:
        return classes[None]
    nb = classes.shape[-1]
    real = F.pad(keep, (0, nb * block - n), value=False).view(keep.shape[0], nb, block).sum(-1)  # (B, nb)
    key_class = (real > 0).to(torch.int8) + (real == block).to(torch.int8)  # (B, nb); past N counts as padding
    return torch.minimum(classes[None], key_class[:, None, None, :])  # (B, H, nb, nb)


def block_mask_from_classes(classes: Tensor, mask_mod: Callable[..., Tensor], q_len: int, kv_len: int,
                            block: int = BLOCK_SIZE) -> BlockMask:
    """A ``BlockMask`` visiting the partial (1) and full (2) tiles of ``classes`` (B', H', nq, nk) int8."""

    def blocks(selected: Tensor) -> tuple[Tensor, Tensor]:
        # selected key blocks first, in ascending order (a stable sort on 0 = selected, 1 = not)
        order = torch.sort((~selected).to(torch.int8), dim=-1, stable=True).indices.to(torch.int32)  # (B',H',nq,nk)
        return selected.sum(dim=-1, dtype=torch.int32).contiguous(), order.contiguous()

    kv_num, kv_idx = blocks(classes == 1)
    full_num, full_idx = blocks(classes == 2)
    return BlockMask.from_kv_blocks(kv_num, kv_idx, full_num, full_idx, BLOCK_SIZE=block, mask_mod=mask_mod,
                                    seq_lengths=(q_len, kv_len))


def key_padding_block_mask(keep: Tensor, block_size: int = BLOCK_SIZE) -> BlockMask:
    """A ``BlockMask`` letting every query attend to the keys where ``keep`` (B, N) is True (any padding pattern).

    Key block j of row b is full (every key real: no mask_mod call), partial (mask_mod decides per key) or
    skipped (every key padded); every query block sees the same key blocks.
    """
    if keep.dtype != torch.bool or keep.dim() != 2:
        raise ValueError(f"keep must be a (B, N) bool tensor, got {keep.dtype} {tuple(keep.shape)}")
    n = keep.shape[1]
    nb = _num_blocks(n, block_size)
    everything = torch.full((1, nb, nb), 2, dtype=torch.int8, device=keep.device)  # (1, nq, nk)
    padded = F.pad(keep, (0, nb * block_size - n), value=False)  # (B, nb·S), False past N

    def mask_mod(batch: Tensor, head: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        return padded[batch, kv_idx]  # in bounds for every index of the last, partial block

    classes = with_key_padding(everything, keep, n, block_size)  # (B, 1, nq, nk)
    return block_mask_from_classes(classes, mask_mod, n, n, block_size)


def flex_key_padding_attention(q: Tensor, k: Tensor, v: Tensor, keep: Tensor, compiled: bool) -> Tensor:
    """softmax(QKᵀ/√D) V over the keys where ``keep`` (B, N) is True; q, k, v (B, H, N, D) -> (B, H, N, D).

    Rows with no real key are not supported (the caller lets such rows attend everywhere). ``compiled``
    selects the fused kernel (CUDA); eager FlexAttention is a slow, materialising reference, forward-only on
    CPU (torch has no FlexAttention backward on CPU), fine for tests.
    """
    block_mask = key_padding_block_mask(keep)
    attend = compiled_flex_attention() if compiled else flex_attention
    return attend(q, k, v, block_mask=block_mask)  # (B, H, N, D)


def _mix32(x: Tensor) -> Tensor:
    """A 32-bit integer finaliser (two multiply-xorshift rounds) in int32 with wrapping multiplication, as torch
    (CPU, CUDA) and Triton compute it; the shifts are made logical by masking. int32 keeps it cheap in the kernel,
    which evaluates it for every attended (query, key) pair."""
    x = (x ^ ((x >> 16) & 0xFFFF)) * 0x45D9F3B
    x = (x ^ ((x >> 16) & 0xFFFF)) * 0x45D9F3B
    return x ^ ((x >> 16) & 0xFFFF)


def dropout_hash(seed: Tensor, b: Tensor, h: Tensor, q: Tensor, k: Tensor) -> Tensor:
    """Uniform int32 in [0, 2^31) per (seed, batch, head, query, key); broadcasting index tensors."""
    i32 = torch.int32
    x = _mix32(seed.to(i32) ^ (b.to(i32) * 8191 + h.to(i32)))
    x = _mix32(x ^ q.to(i32))
    return _mix32(x ^ k.to(i32)) & 0x7FFFFFFF


def dropped(seed: Tensor, p: float, b: Tensor, h: Tensor, q: Tensor, k: Tensor) -> Tensor:
    """The attention-dropout decision of the FlexAttention path: True where the pair (b, h, q, k) is dropped."""
    return dropout_hash(seed, b, h, q, k) < int(p * 2**31)


def pattern_block_mask(pattern_mod: PatternMod, classes: Tensor, mask: Tensor | None, n: int, dropout_p: float,
                       seed: Tensor | None) -> BlockMask:
    """The ``BlockMask`` of ``flex_pattern_attention``: over N keys without dropout, over the 2·Np doubled keys with
    it (copy A = kept pairs, copy B = dropped pairs, every attended tile partial). ``classes`` (H or 1, nb, nb)."""
    nb = classes.shape[-1]
    npad = nb * BLOCK_SIZE
    tiles = with_key_padding(classes, mask, n)  # (B or 1, H or 1, nb, nb)
    if mask is None:
        keep_p = (torch.arange(npad, device=classes.device) < n)[None]  # (1, Np): batch index 0 only
        def real(bi: Tensor, ki: Tensor) -> Tensor:
            return keep_p[0, ki]
    else:
        keep_p = F.pad(mask, (0, npad - n), value=False)  # (B, Np), False past N
        def real(bi: Tensor, ki: Tensor) -> Tensor:
            return keep_p[bi, ki]
    if dropout_p == 0.0:
        def mask_mod(bi: Tensor, hi: Tensor, qi: Tensor, ki: Tensor) -> Tensor:
            return pattern_mod(hi, qi, ki) & real(bi, ki)

        return block_mask_from_classes(tiles, mask_mod, n, n)
    assert seed is not None

    def dropout_mask_mod(bi: Tensor, hi: Tensor, qi: Tensor, kv: Tensor) -> Tensor:
        second = kv >= npad  # copy B: the dropped pairs
        ki = torch.where(second, kv - npad, kv)
        allowed = pattern_mod(hi, qi, ki) & real(bi, ki)
        return allowed & (dropped(seed, dropout_p, bi, hi, qi, ki) == second)

    partial = tiles.clamp(max=1)  # every attended tile: the dropout decision is per pair
    return block_mask_from_classes(torch.cat([partial, partial], dim=-1), dropout_mask_mod, n, 2 * npad)


def flex_pattern_attention(q: Tensor, k: Tensor, v: Tensor, pattern_mod: PatternMod, classes: Tensor,
                           mask: Tensor | None, dropout_p: float, compiled: bool,
                           seed: Tensor | None = None, scale: float | None = None) -> Tensor:
    """softmax(scale·QKᵀ) V (default scale 1/√D) over ``pattern_mod`` and the real keys, with attention dropout.

    q, k, v: (B, H, N, D); ``classes``: the pattern's tile classes (H or 1, nb, nb) int8; ``mask`` (B, N) bool,
    True = real, or None. ``seed`` (0-d int64) fixes the dropout mask (drawn from torch's generator on q's
    device if None). Returns (B, H, N, D); rows with no attended key are 0.
    """
    n = q.shape[2]
    npad = classes.shape[-1] * BLOCK_SIZE
    attend = compiled_flex_attention() if compiled else flex_attention
    if dropout_p == 0.0:
        block_mask = pattern_block_mask(pattern_mod, classes, mask, n, 0.0, None)
        return attend(q, k, v, block_mask=block_mask, scale=scale)  # (B, H, N, D)
    if seed is None:
        seed = torch.randint(0, 2**31 - 1, (), dtype=torch.int64, device=q.device)
    block_mask = pattern_block_mask(pattern_mod, classes, mask, n, dropout_p, seed)
    k_pad = F.pad(k, (0, 0, 0, npad - n))  # (B, H, Np, D)
    k2 = torch.cat([k_pad, k_pad], dim=2)  # (B, H, 2Np, D)
    v_pad = F.pad(v, (0, 0, 0, npad - n))  # (B, H, Np, D)
    v2 = torch.cat([v_pad / (1.0 - dropout_p), torch.zeros_like(v_pad)], dim=2)  # (B, H, 2Np, D)
    return attend(q, k2, v2, block_mask=block_mask, scale=scale)  # (B, H, N, D)
