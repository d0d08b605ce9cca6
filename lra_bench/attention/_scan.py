"""A first-order linear recurrence h_t = a_t ⊙ h_{t-1} + b_t (h_{-1} = 0) along dim 1, in log depth, on any device.

``linear_scan(a, b)`` is the parallel scan that Mamba's selective SSM needs on CPU (Gu & Dao 2023,
https://arxiv.org/abs/2312.00752, §3.3: "the recurrence is computed with a parallel scan"). It uses odd-even
(cyclic) reduction, a log-depth scan with O(L) work (first-order recurrences as a scan: Blelloch 1990, "Prefix Sums
and Their Applications", CMU-CS-90-190): pair each odd step with the even
step before it, (a, b)_{2i+1} ∘ (a, b)_{2i} = (a_{2i+1}·a_{2i}, a_{2i+1}·b_{2i} + b_{2i+1}), scan the half-length
sequence of pairs recursively (the states at odd steps), then fill the even steps from the odd ones. ⌈log₂ L⌉ levels,
no Python loop over time, any L (no padding to a power of two).

The gradient is the same recurrence run backwards: with g_t = ∂loss/∂h_t accumulated through the future,
g_t = grad_t + a_{t+1} ⊙ g_{t+1}, so ∂loss/∂b_t = g_t and ∂loss/∂a_t = g_t ⊙ h_{t-1}. The autograd function keeps
only a and h (two tensors of the input's size), not the scan's intermediate levels.
"""

from __future__ import annotations

import torch
from torch import Tensor


def scan_into(a: Tensor, b: Tensor, out: Tensor) -> Tensor:
    """Write h (B, L, ...) with h_t = a_t h_{t-1} + b_t along dim 1 into ``out`` (b's shape, any strides; ``b`` itself
    for an in-place scan) by odd-even reduction; each level writes its states straight into its slots of ``out``."""
    n = a.shape[1]
    if n == 1:
        return out.copy_(b)
    m = n // 2  # pairs (2i, 2i+1), i < m
    a_even, a_odd = a[:, 0 : 2 * m : 2], a[:, 1 : 2 * m : 2]  # (B, m, ...) each
    b_even, b_odd = b[:, 0 : 2 * m : 2], b[:, 1 : 2 * m : 2]
    h_odd = scan_into(a_odd * a_even, torch.addcmul(b_odd, a_odd, b_even), out[:, 1 : 2 * m : 2])  # h at 1, 3, ...
    out[:, 0] = b[:, 0]
    rest = (n - 1) // 2  # even steps 2, 4, ...: h_{2i} = a_{2i} h_{2i-1} + b_{2i}
    if rest:
        torch.addcmul(b[:, 2::2], a[:, 2::2], h_odd[:, :rest], out=out[:, 2::2])
    return out


def scan_reverse_into(c: Tensor, b: Tensor, out: Tensor) -> Tensor:
    """Write g (B, L, ...) with g_t = c_t g_{t+1} + b_t along dim 1 and g_{L-1} = b_{L-1} into ``out`` (may be b); c
    (B, L-1, ...) holds the coefficients between neighbours (c_t links step t to t+1). The same odd-even reduction,
    pairs (2i, 2i+1)."""
    n = b.shape[1]
    if n == 1:
        return out.copy_(b)
    m = n // 2
    links = (n - 1) // 2  # pairs that have a next pair (or, for odd n, the unpaired last step) after them
    c_even, c_odd = c[:, 0 : 2 * m : 2], c[:, 1 : 2 * links : 2]  # (B, m, ...), (B, links, ...)
    b_even, b_odd = b[:, 0 : 2 * m : 2], b[:, 1 : 2 * m : 2]
    b_pairs = torch.addcmul(b_even, c_even, b_odd)  # (B, m, ...): g_{2i} = b_{2i} + c_{2i} b_{2i+1} + ...
    c_pairs = c_even[:, :links] * c_odd  # (B, links, ...): from pair i to step 2i+2
    if n % 2:  # the unpaired last step 2m: g_{2m} = b_{2m}, folded into the last pair
        b_pairs[:, -1] += c_pairs[:, -1] * b[:, 2 * m]
        c_pairs = c_pairs[:, :-1]
        out[:, 2 * m] = b[:, 2 * m]
    else:
        out[:, n - 1] = b[:, n - 1]
    scan_reverse_into(c_pairs, b_pairs, out[:, 0 : 2 * m : 2])  # g at steps 0, 2, ..., 2m-2
    # odd steps: g_{2i+1} = b_{2i+1} + c_{2i+1} g_{2i+2}, where step 2i+2 exists for the first `links` of them
    if links:
        torch.addcmul(b_odd[:, :links], c_odd, out[:, 2 : 2 * links + 1 : 2], out=out[:, 1 : 2 * links : 2])
    return out


class _LinearScan(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a: Tensor, b: Tensor) -> Tensor:  # noqa: ANN001 - autograd's signature
        h = scan_into(a, b, torch.empty_like(b))
        ctx.save_for_backward(a, h)
        return h

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, Tensor]:  # noqa: ANN001
        a, h = ctx.saved_tensors
        g = scan_reverse_into(a[:, 1:], grad, torch.empty_like(grad))  # g_t = grad_t + a_{t+1} g_{t+1}
        grad_a = torch.empty_like(g)  # (B, L, ...): g_t h_{t-1}, and 0 at t = 0 (h_{-1} = 0)
        grad_a[:, 0] = 0
        torch.mul(g[:, 1:], h[:, :-1], out=grad_a[:, 1:])
        return grad_a, g


def linear_scan(a: Tensor, b: Tensor) -> Tensor:
    """a, b: (B, L, ...) of one shape and dtype; returns h (B, L, ...) with h_t = a_t ⊙ h_{t-1} + b_t, h_{-1} = 0."""
    if a.shape != b.shape or a.dim() < 2:
        raise ValueError(f"linear_scan needs a and b of one shape (B, L, ...), got {tuple(a.shape)}, {tuple(b.shape)}")
    return _LinearScan.apply(a, b)
