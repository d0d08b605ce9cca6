"""S4D: a diagonal state-space layer applied as a long convolution.

Gu, Gupta, Goel & Ré 2022, "On the Parameterization and Initialization of Diagonal State Space Models",
https://arxiv.org/abs/2206.11893. Parameterisation of the s4 repository's minimal S4D (``models/s4/s4d.py`` of
https://github.com/state-spaces/s4), parameter names kept: per channel ``log_dt`` log-uniform in
[``dt_min``, ``dt_max``]; ``A = -exp(log_A_real) + i·A_imag`` over ``d_state / 2`` complex modes (their conjugates
are implied: the output is ``2·Re``); complex ``C`` stored with ``view_as_real``; zero-order hold
``Ā = exp(dt·A)``, ``B̄ = (exp(dt·A) − 1) / A · B``; the Vandermonde kernel ``K_l = 2·Re(Σ_n C_n B̄_n Ā_n^l)``; an FFT
convolution of size 2N; the ``D`` skip; GELU, dropout, then Linear(C → 2C) + GLU as the output mixing.

Initialisations (``init``): S4D-Lin and S4D-Inv with ``B = 1`` fixed (the minimal ``s4d.py``), and S4D-LegS, the
diagonal of HiPPO-LegS with its ``B`` trained (the paper's S4D-LegS; the s4 repository's ``init: diag-legs``,
``lra_bench/attention/_hippo.py``). ``A`` and ``B`` are one set per channel, or ``n_ssm`` sets shared by the channels
in turn (channel h uses set h mod n_ssm, as s4's ``n_ssm``); ``dt`` and ``C`` are always per channel.

Bidirectional (the s4 LRA configs' ``bidirectional: true``): a second ``C`` gives a second kernel that runs over
the reversed sequence, y = causal(u, K⁰) + flip(causal(flip(u), K¹)) + D·u. The s4 repository builds the same sum
from one padded kernel whose reverse half is shifted by one position (a choice its code comments call deliberate);
here the backward part is exactly the forward system run on the reversed sequence. Both parts share one FFT of
size 2N. Padded positions are zeroed before the convolution, so with right padding the outputs at real tokens equal
the truncated input's in both directions.

Time O(B·N·C·log N + C·d_state·N) (kernel), memory O(B·N·C + C·d_state·√N); no N × N tensor, and no (C, d_state,
N) Vandermonde matrix either: Ā^l = Ā^(jT)·Ā^t with T ≈ √N, so the kernel is one matrix product per channel of
two factors of about √N columns (1 GiB at width 256 and 16K for the full matrix, 16 MiB for the factors).
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from einops import rearrange, repeat
from torch import Tensor, nn

from lra_bench.attention._hippo import legs_diagonal
from lra_bench.attention.base import ParamSettings, SSMMixer, ssm_dtype
from lra_bench.checks import Count, LearningRate, PositiveFloat
from lra_bench.errors import ConfigError

INITS = ("lin", "inv", "legs")


def initial_system(init: str, d_state: int) -> tuple[Tensor, Tensor | None]:
    """(Im A of the d_state/2 modes (n,) float32, B (n,) complex64 or None for B = 1 fixed): S4D-Lin π·n, S4D-Inv
    (N/π)(N/(2n+1) − 1), S4D-LegS the diagonal of HiPPO-LegS and its B (``_hippo.legs_diagonal``)."""
    n = torch.arange(d_state // 2, dtype=torch.float32)
    if init == "lin":
        return math.pi * n, None
    if init == "inv":
        return d_state / math.pi * (d_state / (2 * n + 1) - 1), None
    a, b = legs_diagonal(d_state)
    return a.imag.float(), b.to(torch.cfloat)


class S4DKernel(nn.Module):
    """The diagonal SSM's convolution kernels: ``forward(L)`` -> (channels, C, L).

    Args:
        dim: channels H of the layer (a step size and a C per channel).
        d_state: state size N; N / 2 complex modes are stored, their conjugates implied.
        dt_min, dt_max: range of the log-uniform step size initialisation.
        init: "lin" (S4D-Lin: A_n = -1/2 + iπn), "inv" (S4D-Inv: A_n = -1/2 + i(N/π)(N/(2n+1) − 1)), both with B = 1
            fixed, or "legs" (S4D-LegS: the diagonal of HiPPO-LegS and its B, a trained parameter).
        channels: kernels per SSM (2 when bidirectional: forward and backward ``C``).
        n_ssm: independent (A, B) sets, shared by the channels in turn; None = one per channel.
    """

    def __init__(self, dim: int, d_state: int, dt_min: float, dt_max: float, init: str, channels: int,
                 n_ssm: int | None) -> None:
        super().__init__()
        modes, copies = d_state // 2, dim if n_ssm is None else n_ssm
        self.dim = dim
        log_dt = torch.rand(dim) * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min)  # (C,)
        self.log_dt = nn.Parameter(log_dt)
        self.C = nn.Parameter(torch.view_as_real(torch.randn(channels, dim, modes, dtype=torch.cfloat)))  # (c, C, n, 2)
        self.log_A_real = nn.Parameter(torch.log(0.5 * torch.ones(copies, modes)))  # (S, n)
        a_imag, b = initial_system(init, d_state)  # (n,), (n,) or None
        self.A_imag = nn.Parameter(a_imag.repeat(copies, 1))  # (S, n)
        if b is None:
            self.register_parameter("B", None)  # B = 1
        else:
            self.B = nn.Parameter(torch.view_as_real(b).repeat(copies, 1, 1))  # (S, n, 2)

    def _per_channel(self, x: Tensor) -> Tensor:
        """(S, n) -> (C, n): channel h takes set h mod S."""
        return repeat(x, "s n -> (r s) n", r=self.dim // x.shape[0])

    def _dt_a(self) -> tuple[Tensor, Tensor]:
        """(dt·A, A), each (C, n) complex."""
        a = self._per_channel(-torch.exp(self.log_A_real) + 1j * self.A_imag)  # (C, n)
        return a * torch.exp(self.log_dt)[:, None], a

    def _b_bar(self, dta: Tensor, a: Tensor) -> Tensor:
        """Zero-order-hold B̄ = (exp(dt·A) − 1) / A · B, (C, n) complex."""
        b_bar = (torch.exp(dta) - 1.0) / a
        return b_bar if self.B is None else b_bar * self._per_channel(torch.view_as_complex(self.B))

    def discrete(self) -> tuple[Tensor, Tensor, Tensor]:
        """The zero-order-hold system (Ā (C, n), B̄ (C, n), C (c, C, n)), complex: x_l = Ā x_{l-1} + B̄ u_l,
        y_l = 2·Re(C x_l). The kernel is its impulse response."""
        dta, a = self._dt_a()
        return torch.exp(dta), self._b_bar(dta, a), torch.view_as_complex(self.C)

    def forward(self, length: int) -> Tensor:
        dta, a = self._dt_a()
        c = torch.view_as_complex(self.C) * self._b_bar(dta, a)  # (c, C, n): C·B̄
        # Ā^l with l = j·T + t: never the (C, n, L) Vandermonde matrix, but its two factors of ~√L columns each,
        # Ā^t (t < T) and C·B̄·Ā^(jT) (j < J), and one matrix product per channel summing over the modes
        inner = 2 ** math.ceil(math.log2(max(length, 1)) / 2)  # T ≈ √L
        outer = -(-length // inner)  # J = ⌈L / T⌉
        steps = torch.arange(inner, device=dta.device, dtype=self.log_dt.dtype)  # (T,)
        near = torch.exp(dta[..., None] * steps)  # (C, n, T): Ā^t
        starts = torch.arange(outer, device=dta.device, dtype=steps.dtype) * inner  # (J,): j·T
        far = c[..., None] * torch.exp(dta[..., None] * starts)  # (c, C, n, J): C·B̄·Ā^(jT)
        k = torch.einsum("khnj,hnt->khjt", far, near)  # (c, C, J, T)
        return 2 * rearrange(k, "k h j t -> k h (j t)")[..., :length].real  # (c, C, L)

    def vandermonde(self, length: int) -> Tensor:
        """The same kernel by its definition, the reference ``forward`` is checked and timed against
        (tests/test_s4d_kernel.py, tools/s4d_kernel_ab.py): the whole (C, n, L) Vandermonde matrix Ā^l, then a sum over
        the modes -- how ``forward`` computed it before 2651f2b; O(C·n·L) memory, so not for training."""
        dta, a = self._dt_a()
        c = torch.view_as_complex(self.C) * self._b_bar(dta, a)  # (c, C, n): C·B̄
        steps = torch.arange(length, device=dta.device, dtype=self.log_dt.dtype)  # (L,)
        return 2 * torch.einsum("khn,hnl->khl", c, torch.exp(dta[..., None] * steps)).real  # (c, C, L)


class S4D(SSMMixer):
    """A diagonal SSM per channel as a long convolution, then GELU and a GLU output mixing.

    Args:
        dim, num_heads, seq_len, dropout: supplied by the encoder (see ``TokenMixer``); heads are unused.
        d_state: state size N per channel (N / 2 complex modes); s4's LRA configs use 64 (image, Pathfinder) or 4.
        dt_min, dt_max: step-size initialisation range (s4: 0.001, 0.1; Path-X 0.0001).
        init: "lin" (S4D-Lin), "inv" (S4D-Inv), both with B = 1 fixed, or "legs" (S4D-LegS, B trained).
        n_ssm: independent (A, B) sets shared by the channels in turn (s4's ``n_ssm``: 1 in its image, ListOps,
            Text and Retrieval configs); null = one per channel (its Pathfinder and Path-X configs). Divides ``dim``.
        bidirectional: a second kernel over the reversed sequence (LRA is not causal); false = causal.
        ssm_lr: ``log_A_real``, ``A_imag`` and a trained ``B`` train with learning rate min(ssm_lr, peak trainer rate)
            and no weight decay (the s4 configs' ``lr: 0.001``); see ``param_settings``.
        dt_lr: the same for ``log_dt``; null = the trainer's rate, still without weight decay (the s4 configs'
            ``lr: {dt: null, A: 0.001, B: 0.001}`` of ListOps, Text, Retrieval).
    """

    name = "s4d"

    def __init__(
        self,
        dim: int,
        num_heads: int,
        seq_len: int,
        dropout: float,
        d_state: Count = 64,
        dt_min: PositiveFloat = 0.001,
        dt_max: PositiveFloat = 0.1,
        init: Literal["lin", "inv", "legs"] = "lin",
        n_ssm: Count | None = None,
        bidirectional: bool = True,
        ssm_lr: LearningRate = 0.001,
        dt_lr: LearningRate | None = 0.001,
    ) -> None:
        super().__init__(dim, num_heads, seq_len, dropout)
        if d_state < 2 or d_state % 2:
            raise ConfigError(f"attention=s4d: d_state must be an even number >= 2 (N/2 complex modes), got {d_state}")
        if not 0.0 < dt_min <= dt_max:
            raise ConfigError(f"attention=s4d: need 0 < dt_min <= dt_max, got dt_min={dt_min}, dt_max={dt_max}")
        if init not in INITS:
            raise ConfigError(f"attention=s4d: init must be one of {', '.join(INITS)}, got {init!r}")
        if n_ssm is not None and not (n_ssm > 0 and dim % n_ssm == 0):
            raise ConfigError(f"attention=s4d: n_ssm must be a positive divisor of model.dim={dim} (or null: one "
                              f"per channel), got {n_ssm}")
        for knob, value in (("ssm_lr", ssm_lr), ("dt_lr", dt_lr)):
            if value is not None and value <= 0:
                raise ConfigError(f"attention=s4d: {knob} must be positive (dt_lr may be null), got {value}")
        self.bidirectional, self.ssm_lr, self.dt_lr = bidirectional, ssm_lr, dt_lr
        self.kernel = S4DKernel(dim, d_state, dt_min, dt_max, init, channels=2 if bidirectional else 1, n_ssm=n_ssm)
        self.D = nn.Parameter(torch.randn(dim))  # (C,)
        self.output_linear = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GLU(dim=-1))  # (C -> 2C -> C)

    def param_settings(self) -> dict[str, ParamSettings]:
        a = ParamSettings(lr_max=self.ssm_lr, weight_decay=0.0)
        out = {"kernel.log_dt": ParamSettings(lr_max=self.dt_lr, weight_decay=0.0), "kernel.log_A_real": a,
               "kernel.A_imag": a}
        return out if self.kernel.B is None else {**out, "kernel.B": a}

    def ssm(self, u: Tensor) -> Tensor:
        """The linear system alone: u (B, L, C) -> y (B, L, C), D skip included, computed in fp32 (fp64 for fp64)."""
        dtype = ssm_dtype(u)
        n = u.shape[1]
        k = self.kernel(n).to(dtype)  # (c, C, L)
        if self.bidirectional:  # one circular kernel of size 2L: forward taps, a zero, backward taps reversed
            k = torch.cat([k[0, :, :1] + k[1, :, :1], k[0, :, 1:], torch.zeros_like(k[0, :, :1]),
                           k[1, :, 1:].flip(-1)], dim=-1)  # (C, 2L)
        else:
            k = k[0]  # (C, L), zero-padded to 2L by the FFT
        v = rearrange(u.to(dtype), "b l c -> b c l")
        y = torch.fft.irfft(torch.fft.rfft(v, n=2 * n) * torch.fft.rfft(k, n=2 * n), n=2 * n)[..., :n]  # (B, C, L)
        y = rearrange(y, "b c l -> b l c") + u.to(dtype) * self.D.to(dtype)  # (B, L, C)
        return y
