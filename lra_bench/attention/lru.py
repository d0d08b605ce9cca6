"""LRU: the Linear Recurrent Unit, a diagonal complex linear recurrence, run as an FFT convolution.

Orvieto, Smith, Gu, Fernando, Gulcehre, Pascanu & De 2023, "Resurrecting Recurrent Neural Networks for Long
Sequences", https://arxiv.org/abs/2303.06349. Per direction, over ``d_state`` complex modes:
x_t = λ ⊙ x_{t−1} + γ ⊙ (B u_t), y_t = Re(C x_t) + D ⊙ u_t, with λ = exp(−exp(ν_log) + i·exp(θ_log)) initialised
uniformly on the ring r_min ≤ |λ| ≤ r_max with phase in [0, max_phase], γ = exp(γ_log) initialised to
sqrt(1 − |λ|²), B and C Glorot-like complex (the paper's Appendix A code; its parameter names ``nu_log``,
``theta_log``, ``gamma_log``, ``B_re``, ``B_im``, ``C_re``, ``C_im``, ``D`` kept, each with a leading direction axis).
The block around it is the paper's (and S4D's): GELU, dropout, Linear(C → 2C) + GLU. The paper's LRA recipe per
task (its Tables 8-9 and Appendix D): ``attention=lru model=ssm profile=lru``.

The recurrence is time-invariant, so the states are a causal convolution of γ ⊙ (B u) with λ^l, computed per mode
by an FFT of size 2N (no loop over time; the step-by-step loop is the tests' reference). Bidirectional (default,
as S4D): a second set of parameters runs over the reversed sequence and its output is added; D is counted once.
Padded positions are zeroed first, so with right padding the outputs at real tokens equal the truncated input's.

Time O(B·N·d_state·(C + log N)), memory O(B·N·d_state); no N × N tensor.
"""

from __future__ import annotations

import math
from typing import Annotated

import torch
from torch import Tensor, nn

from lra_bench.attention.base import ParamSettings, SSMMixer, ssm_dtype
from lra_bench.checks import Count, LearningRate, Range
from lra_bench.errors import ConfigError

Modulus = Annotated[float, Range(0.0, 1.0, why="|lambda| <= 1 keeps the recurrence stable")]
Phase = Annotated[float, Range(0.0, 2 * math.pi, lo_open=True)]


class LRU(SSMMixer):
    """Linear Recurrent Unit (one or two directions), then GELU and a GLU output mixing.

    Args:
        dim, num_heads, seq_len, dropout: supplied by the encoder (see ``TokenMixer``); heads are unused.
        d_state: complex modes per direction (the paper's N).
        r_min, r_max: |λ| initialised uniformly on the ring between them (area-uniform, as the paper).
        max_phase: arg λ initialised uniformly in [0, max_phase].
        bidirectional: a second recurrence over the reversed sequence (LRA is not causal); false = causal.
        ssm_lr: ``nu_log``, ``theta_log`` and ``gamma_log`` (the recurrence's parameters) train with learning rate
            min(ssm_lr, trainer.lr) and no weight decay.
        ssm_includes_b: ``B_re`` and ``B_im`` train that way too: the paper's Appendix D.2 gives "A and B" (and γ)
            the smaller rate and no weight decay (``profile=lru``); false keeps B with the other weights.
    """

    name = "lru"

    def __init__(
        self,
        dim: int,
        num_heads: int,
        seq_len: int,
        dropout: float,
        d_state: Count = 64,
        r_min: Modulus = 0.9,
        r_max: Modulus = 0.999,
        max_phase: Phase = math.pi / 10,
        bidirectional: bool = True,
        ssm_lr: LearningRate = 0.001,
        ssm_includes_b: bool = False,
    ) -> None:
        super().__init__(dim, num_heads, seq_len, dropout)
        if d_state <= 0:
            raise ConfigError(f"attention=lru: d_state must be positive, got {d_state}")
        if not 0.0 <= r_min < r_max <= 1.0:
            raise ConfigError(f"attention=lru: need 0 <= r_min < r_max <= 1, got r_min={r_min}, r_max={r_max}")
        if max_phase <= 0:
            raise ConfigError(f"attention=lru: max_phase must be positive, got {max_phase}")
        if ssm_lr <= 0:
            raise ConfigError(f"attention=lru: ssm_lr must be positive, got {ssm_lr}")
        self.bidirectional, self.ssm_lr, self.ssm_includes_b = bidirectional, ssm_lr, ssm_includes_b
        dirs = 2 if bidirectional else 1
        u1, u2 = torch.rand(dirs, d_state), torch.rand(dirs, d_state)
        self.nu_log = nn.Parameter(torch.log(-0.5 * torch.log(u1 * (r_max**2 - r_min**2) + r_min**2)))  # (d, S)
        self.theta_log = nn.Parameter(torch.log(max_phase * u2))  # (d, S)
        modulus = torch.exp(-torch.exp(self.nu_log.detach()))  # |λ|, (d, S)
        self.gamma_log = nn.Parameter(torch.log(torch.sqrt(1 - modulus**2)))  # (d, S)
        self.B_re = nn.Parameter(torch.randn(dirs, d_state, dim) / math.sqrt(2 * dim))  # (d, S, C)
        self.B_im = nn.Parameter(torch.randn(dirs, d_state, dim) / math.sqrt(2 * dim))
        self.C_re = nn.Parameter(torch.randn(dirs, dim, d_state) / math.sqrt(d_state))  # (d, C, S)
        self.C_im = nn.Parameter(torch.randn(dirs, dim, d_state) / math.sqrt(d_state))
        self.D = nn.Parameter(torch.randn(dim))  # (C,)
        self.output_linear = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GLU(dim=-1))  # (C -> 2C -> C)

    def param_settings(self) -> dict[str, ParamSettings]:
        ssm = ParamSettings(lr_max=self.ssm_lr, weight_decay=0.0)
        names = ("nu_log", "theta_log", "gamma_log") + (("B_re", "B_im") if self.ssm_includes_b else ())
        return dict.fromkeys(names, ssm)

    def system(self, dtype: torch.dtype) -> tuple[Tensor, Tensor, Tensor]:
        """(log λ (d, S), γ·B (d, S, C), C (d, C, S)), complex in ``dtype``'s precision."""
        nu, theta = self.nu_log.to(dtype), self.theta_log.to(dtype)
        log_lambda = torch.complex(-torch.exp(nu), torch.exp(theta))  # (d, S)
        b = torch.complex(self.B_re.to(dtype), self.B_im.to(dtype)) * torch.exp(self.gamma_log.to(dtype))[..., None]
        return log_lambda, b, torch.complex(self.C_re.to(dtype), self.C_im.to(dtype))

    def ssm(self, u: Tensor) -> Tensor:
        """The linear recurrence alone: u (B, L, C) -> y (B, L, C), D skip included; fp32 (fp64 for fp64 input)."""
        dtype = ssm_dtype(u)
        n = u.shape[1]
        u = u.to(dtype)
        log_lambda, b, c = self.system(dtype)
        steps = torch.arange(n, device=u.device, dtype=dtype)  # (L,)
        powers = torch.exp(log_lambda[..., None] * steps)  # (d, S, L): λ^l
        inputs = torch.stack([u, u.flip(1)][: b.shape[0]], dim=1).to(b.dtype)  # (B, d, L, C); backward reversed
        bu = torch.einsum("bdlc,dsc->bdsl", inputs, b)  # (B, d, S, L): γ ⊙ (B u_t)
        states = torch.fft.ifft(torch.fft.fft(bu, n=2 * n) * torch.fft.fft(powers, n=2 * n), n=2 * n)[..., :n]
        y = torch.einsum("bdsl,dcs->bdlc", states, c).real  # (B, d, L, C)
        y = y[:, 0] + (y[:, 1].flip(1) if self.bidirectional else 0.0)  # (B, L, C)
        return y + u * self.D.to(dtype)
