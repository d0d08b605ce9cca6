"""A first-order linear recurrence along dim 1, in place and in log depth, on any device: the scan that Mamba's
selective SSM needs without its CUDA kernel (Gu & Dao 2023, https://arxiv.org/abs/2312.00752, §3.3: "the recurrence
is computed with a parallel scan").

``scan_(a, h)``: h holds b on entry and h_t = a_t ⊙ h_{t-1} + b_t (h_{-1} = 0) on return. ``scan_reverse_(c, g)``: g
holds b on entry and g_t = c_t ⊙ g_{t+1} + b_t (g_L = 0) on return, c_t linking step t to t+1 (the gradient of the
forward scan: with c_t = a_{t+1}, g accumulates ∂loss/∂h through the future states).

Both use odd-even (cyclic) reduction, a log-depth scan with O(L) work (first-order recurrences as a scan: Blelloch
1990, "Prefix Sums and Their Applications", CMU-CS-90-190): pair each odd step with the even step before it,
(a, b)_{2i+1} ∘ (a, b)_{2i} = (a_{2i+1}·a_{2i}, a_{2i+1}·b_{2i} + b_{2i+1}), written into the odd slots; scan that
half-length sequence recursively in its own slots (the states at the odd steps); then complete the even steps from
the odd ones. ⌈log₂ L⌉ levels, no Python loop over time, any L (no padding to a power of two); the only allocation
is the half-length product of the coefficients per level. In-place operations on strided views only (no ``out=``),
so ``torch.compile`` traces them.
"""

from __future__ import annotations

from torch import Tensor


def scan_(a: Tensor, h: Tensor) -> Tensor:
    """h (B, L, ...) holding b in, the states h_t = a_t h_{t-1} + b_t out (in place along dim 1); a: h's shape."""
    n = h.shape[1]
    if n == 1:
        return h
    m = n // 2  # pairs (2i, 2i+1), i < m
    a_even, a_odd = a[:, 0 : 2 * m : 2], a[:, 1 : 2 * m : 2]  # (B, m, ...) each
    h_odd = h[:, 1 : 2 * m : 2]
    h_odd.addcmul_(a_odd, h[:, 0 : 2 * m : 2])  # the pairs' b: b_{2i+1} + a_{2i+1} b_{2i}
    scan_(a_odd * a_even, h_odd)  # the states at steps 1, 3, ..., 2m-1
    rest = (n - 1) // 2  # even steps 2, 4, ...: h_{2i} = a_{2i} h_{2i-1} + b_{2i}
    if rest:
        h[:, 2::2].addcmul_(a[:, 2::2], h_odd[:, :rest])
    return h


def scan_reverse_(c: Tensor, g: Tensor) -> Tensor:
    """g (B, L, ...) holding b in, g_t = c_t g_{t+1} + b_t (g_{L-1} = b_{L-1}) out, in place along dim 1; c
    (B, L-1, ...) holds the links between neighbours. The same odd-even reduction, pairs (2i, 2i+1) folded into the
    even slots."""
    n = g.shape[1]
    if n == 1:
        return g
    m = n // 2
    links = (n - 1) // 2  # pairs with a next pair (or, for odd n, the unpaired last step) after them
    c_even, c_odd = c[:, 0 : 2 * m : 2], c[:, 1 : 2 * links : 2]  # (B, m, ...), (B, links, ...)
    g_even = g[:, 0 : 2 * m : 2]
    g_even.addcmul_(c_even, g[:, 1 : 2 * m : 2])  # the pairs' b: b_{2i} + c_{2i} b_{2i+1}
    c_pairs = c_even[:, :links] * c_odd  # (B, links, ...): from pair i to step 2i+2
    if n % 2:  # the unpaired last step 2m keeps g_{2m} = b_{2m}; fold it into the last pair
        g_even[:, -1].addcmul_(c_pairs[:, -1], g[:, 2 * m])
        c_pairs = c_pairs[:, :-1]
    scan_reverse_(c_pairs, g_even)  # g at steps 0, 2, ..., 2m-2
    if links:  # odd steps: g_{2i+1} = b_{2i+1} + c_{2i+1} g_{2i+2}, where step 2i+2 exists
        g[:, 1 : 2 * links : 2].addcmul_(c_odd, g[:, 2 : 2 * links + 1 : 2])
    return g
