"""The diagonal of HiPPO-LegS: S4D-LegS's initial A and B (Gu, Gupta, Goel & Ré 2022, https://arxiv.org/abs/2206.11893).

HiPPO-LegS (Gu et al. 2020, https://arxiv.org/abs/2008.07669) is A_nk = −sqrt((2n+1)(2k+1)) below the diagonal,
A_nn = −(n+1), 0 above, B_n = sqrt(2n+1). Adding the rank-one P Pᵀ with P_n = sqrt(n + 1/2) makes it normal:
A + P Pᵀ = −I/2 + S with S skew-symmetric, whose eigenvalues are ±i·w. S4D-LegS keeps that normal part's
eigenvalues, −1/2 + i·w (one of each conjugate pair), and B in its eigenbasis, V* B; like the s4 repository
(``hippo.nplr("legs", N, B_clip=2.0)``, commit 62a14bb) it clips the imaginary part of that B to [−2, 2] and does not
halve it. The eigenvectors are fixed up to a phase each; the phase changes which parts the clip touches, so it is
fixed as the s4 repository's eigensolver leaves it (first component real), with that component made positive.
"""

from __future__ import annotations

import torch
from torch import Tensor

B_CLIP = 2.0  # |Im B| cap of the s4 repository's S4D-LegS initialisation


def legs_diagonal(d_state: int) -> tuple[Tensor, Tensor]:
    """(A (d_state/2,), B (d_state/2,)), complex128, with Im A > 0 in decreasing order (1303 … 0.26 rad per unit time
    at d_state 64): the diagonal S4D-LegS system in this project's sign convention (A = −1/2 + i·w; the s4
    repository stores the conjugate system, whose kernel is the same)."""
    q = torch.arange(d_state, dtype=torch.float64)
    root = torch.sqrt(2 * q + 1)  # (N,)
    legs = -torch.outer(root, root).tril(-1) - torch.diag(q + 1)  # (N, N) HiPPO-LegS A
    normal = legs + 0.5 * torch.outer(root, root)  # (N, N) A + P Pᵀ = −I/2 + skew-symmetric
    skew = normal + 0.5 * torch.eye(d_state, dtype=torch.float64)
    w, v = torch.linalg.eigh(-1j * skew.to(torch.complex128))  # (N,), (N, N): −iS is Hermitian, S v = i·w v
    keep = torch.argsort(w)[: d_state // 2]  # w < 0 first, as s4 keeps them; our A is the conjugate (w > 0)
    w, v = w[keep], v[:, keep]  # (n,), (N, n)
    phase = v[0] / v[0].abs()  # (n,): the first component of each eigenvector made real and positive
    v = v / phase
    b = v.conj().T @ root.to(torch.complex128)  # (n,): V* B in s4's convention
    b = torch.complex(b.real, b.imag.clamp(-B_CLIP, B_CLIP))
    return torch.complex(torch.full_like(w, -0.5), -w), b.conj()  # the conjugate system: Im A = −w > 0
