"""Blocked-attention helpers shared by the sparse variants (local, strided, global, longformer,
bigbird, reformer, routing, sinkhorn): padding to a block multiple, neighbour-block gathering, masked
attention over gathered keys, and log-sum-exp combination of partial attentions.

Axes: B batch, H heads, N tokens, D head dim; blocks are cut along N.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


def real_keys(mask: Tensor | None, batch: int, n: int, device: torch.device) -> Tensor:
    """(B, N) bool, True = real token; an all-True mask when ``mask`` is None."""
    if mask is None:
        return torch.ones(batch, n, dtype=torch.bool, device=device)
    return mask


def pad_dim(x: Tensor, multiple: int, dim: int, value: float | bool = 0) -> Tensor:
    """Right-pad ``x`` along ``dim`` with ``value`` up to the next multiple of ``multiple``."""
    dim = dim % x.dim()
    extra = -x.shape[dim] % multiple
    if extra == 0:
        return x
    shape = list(x.shape)
    shape[dim] = extra
    return torch.cat([x, x.new_full(shape, value)], dim=dim)


def neighbor_blocks(x: Tensor, before: int, after: int, dim: int, value: float | bool = 0) -> Tensor:
    """Stack, for every block along ``dim``, the blocks ``-before .. +after`` around it.

    x: (..., nb, ...) with the block axis at ``dim``; returns (..., nb, before + 1 + after, ...), out-of-range
    neighbours filled with ``value`` (callers mark them invalid through a position/validity tensor).
    """
    dim = dim % x.dim()
    nb = x.shape[dim]
    parts = []
    if before:
        shape = list(x.shape)
        shape[dim] = before
        parts.append(x.new_full(shape, value))
    parts.append(x)
    if after:
        shape = list(x.shape)
        shape[dim] = after
        parts.append(x.new_full(shape, value))
    xp = torch.cat(parts, dim=dim)  # (..., before + nb + after, ...)
    return torch.stack([xp.narrow(dim, s, nb) for s in range(before + 1 + after)], dim=dim + 1)


def all_valid(valid: Tensor | None) -> bool:
    """Whether a validity tensor excludes nothing (None counts as all valid). One host sync on a small tensor: the
    fast path of the kernels below, chosen from the batch's padding (none: no mask is applied at all). Under
    ``torch.compile`` the answer is "not known" (False: the mask is applied, which is right either way), so the
    compiled graph has no break."""
    if valid is None:
        return True
    return False if torch.compiler.is_compiling() else bool(valid.all())


def masked_attention(
    q: Tensor, k: Tensor, v: Tensor, valid: Tensor | None, scale: float, drop: nn.Module | None = None,
    need_lse: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """Softmax attention of q over its own key set, with invalid keys removed.

    q: (..., Lq, D); k, v: (..., Lk, D); valid: bool, broadcastable to (..., Lq, Lk), True = may attend, or None
    (every key valid). Returns (out (..., Lq, D), the logsumexp of the kept scores (..., Lq) when ``need_lse``, else
    None). One softmax over the scores (no mask at all when no key is invalid); with ``need_lse`` the logsumexp is
    taken once and the probabilities are exp(scores - lse). Rows without any valid key stay finite (uniform over
    junk); callers guarantee every real query keeps at least one valid key.
    """
    scores = (q * scale) @ k.transpose(-2, -1)  # (..., Lq, Lk)
    if not all_valid(valid):
        scores.masked_fill_(~valid, torch.finfo(scores.dtype).min)
    if need_lse:
        lse = scores.logsumexp(dim=-1, keepdim=True)  # (..., Lq, 1)
        probs = (scores - lse).exp()  # (..., Lq, Lk)
    else:
        lse, probs = None, scores.softmax(dim=-1)  # (..., Lq, Lk)
    if drop is not None:
        probs = drop(probs)
    return probs @ v, None if lse is None else lse.squeeze(-1)


def attention_over_key_sets(
    q: Tensor, keys: list[Tensor], values: list[Tensor], valid: Tensor | None, scale: float,
    drop: nn.Module | None = None,
) -> Tensor:
    """``masked_attention`` over the union of several key sets, without concatenating the keys: the scores of each
    set are computed apart and concatenated (contiguous, cheap), one softmax over all, and the outputs summed.

    q: (..., Lq, D); keys[i], values[i]: (..., Li, D); valid: bool broadcastable to (..., Lq, ΣLi) or None.
    Returns (..., Lq, D). ``scale`` 1.0: q comes scaled (no copy of it is made).
    """
    q = q * scale if scale != 1.0 else q
    scores = torch.cat([q @ k.transpose(-2, -1) for k in keys], dim=-1)  # (..., Lq, ΣLi)
    if not all_valid(valid):
        scores.masked_fill_(~valid, torch.finfo(scores.dtype).min)
    probs = scores.softmax(dim=-1)
    if drop is not None:
        probs = drop(probs)
    parts = probs.split([v.shape[-2] for v in values], dim=-1)  # (..., Lq, Li) each; split, not slices: no zero fill
    out = parts[0] @ values[0]  # (..., Lq, D)
    for p, v in zip(parts[1:], values[1:], strict=True):
        out += p @ v  # in place: a product's output is saved by no backward
    return out


def masked_attention_with_shared(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    valid: Tensor | None,
    k_shared: Tensor,
    v_shared: Tensor,
    valid_shared: Tensor | None,
    scale: float,
    drop: nn.Module | None = None,
) -> Tensor:
    """Like ``masked_attention`` with one softmax over two key sets: per-block keys and keys shared by all blocks.

    q: (B, H, *blocks, Lq, D); k, v: (B, H, *blocks, Lk, D); valid broadcastable to (B, H, *blocks, Lq, Lk) or None.
    k_shared, v_shared: (B, H, G, D) (e.g. global tokens) seen by every query; valid_shared: (B, G) bool or None.
    The shared keys are never copied per block: memory O(#queries · (Lk + G)).
    """
    q = q * scale
    s_loc = q @ k.transpose(-2, -1)  # (B, H, *blocks, Lq, Lk)
    if not all_valid(valid):
        s_loc.masked_fill_(~valid, torch.finfo(s_loc.dtype).min)
    q_flat = q.flatten(2, -2)  # (B, H, L, D) with L = prod(blocks) * Lq
    s_sh = q_flat @ k_shared.transpose(-2, -1)  # (B, H, L, G)
    if not all_valid(valid_shared):
        s_sh.masked_fill_(~valid_shared[:, None, None, :], torch.finfo(s_sh.dtype).min)
    s_sh = s_sh.view(*q.shape[:-1], k_shared.shape[-2])  # (B, H, *blocks, Lq, G)
    lk = s_loc.shape[-1]
    probs = torch.cat([s_loc, s_sh], dim=-1).softmax(dim=-1)  # (B, H, *blocks, Lq, Lk + G)
    if drop is not None:
        probs = drop(probs)
    out = probs[..., :lk] @ v  # (B, H, *blocks, Lq, D)
    p_sh = probs[..., lk:].flatten(2, -2)  # (B, H, L, G)
    return out + (p_sh @ v_shared).view(out.shape)  # (B, H, *blocks, Lq, D)


def combine_by_lse(outs: Tensor, lses: Tensor, dim: int) -> Tensor:
    """Merge attention results over disjoint key sets: outs (..., R, L, D), lses (..., R, L) along axis ``dim``."""
    weights = torch.softmax(lses, dim=dim).unsqueeze(-1)  # (..., R, L, 1)
    return (weights * outs).sum(dim=dim)
