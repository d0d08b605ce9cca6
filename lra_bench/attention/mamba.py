"""Mamba: the selective state space model (S6) in its gated block, bidirectional for classification.

Gu & Dao 2023, "Mamba: Linear-Time Sequence Modeling with Selective State Spaces", https://arxiv.org/abs/2312.00752
(Algorithm 2, §3.4 and Figure 3). The block of the official ``mamba_ssm/modules/mamba_simple.py``, parameter names
kept: ``in_proj`` C → 2E (the x and z branches, E = expand·C, no bias); on x a causal depthwise ``conv1d`` of width
``d_conv``, SiLU; the selective SSM with input-dependent Δ, B, C from ``x_proj`` (E → dt_rank + 2·d_state, no
bias), Δ = softplus(``dt_proj``(·)) (dt_rank → E; weight uniform in ±dt_rank^-½, bias the inverse softplus of a step
log-uniform in [dt_min, dt_max], floored at 1e-4), A = −exp(``A_log``) with the S4D-Real initialisation A_n = −n
(n = 1..d_state), zero-order hold Ā = exp(ΔA) with B̄ = ΔB (the paper's simplification of B's discretisation),
h_t = Ā_t h_{t−1} + B̄_t x_t, y_t = C_t h_t + ``D`` ⊙ x_t; output ``out_proj``(y ⊙ SiLU(z)) (E → C, no bias).

Bidirectional (default; LRA's tasks are not causal): Vision Mamba's bidirectional block, ``bimamba_type="v2"`` of
Zhu et al. 2024, "Vision Mamba", https://arxiv.org/abs/2401.09417 (hustvl/Vim ``mamba_simple.py``): a second
``conv1d``, ``x_proj``, ``dt_proj``, ``A_log`` and ``D`` run the same SSM over the reversed sequence; ``in_proj``,
``out_proj`` and the z gate are shared, and the two directions' outputs are averaged before ``out_proj``
(Vim's ``if_devide_out=True``). Each direction is a module in ``directions`` (0 forward, 1 backward).

The scan: on CUDA with ``mamba-ssm`` installed (``kernel: auto``), its fused ``selective_scan_fn``; everywhere else
the pure-PyTorch path, a log-depth parallel scan over time (``lra_bench.attention._scan.scan_``), in fp32
outside autocast (fp64 for fp64 input). Both compute the same function of the same tensors (the kernel's
arguments: u, Δ before softplus and bias, A, B, C, D, the Δ bias).

Padding: the conv input and the SSM input are zeroed at padded positions, so a padded step adds nothing to the
state (B̄x = 0, its Δ no longer depends on content) and the conv sees zeros there, as past the sequence's ends.
Padded content never reaches a real position, and with right padding the outputs at real tokens equal the
truncated input's in both directions.

Time O(B·N·E·(C + d_state + d_conv)), memory O(B·N·E·d_state) for the states (the fused kernel keeps them in SRAM:
O(B·N·E)); no N × N tensor.
"""

from __future__ import annotations

import functools
import importlib
import math
from collections.abc import Callable
from typing import Literal, get_args

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import Tensor, nn

from lra_bench.attention._scan import scan_, scan_reverse_
from lra_bench.attention.base import ParamSettings, TokenMixer, ssm_dtype
from lra_bench.checks import Count, PositiveFloat
from lra_bench.errors import ConfigError

Kernel = Literal["auto", "torch"]
KERNELS = get_args(Kernel)
CUDA_SCAN = ("mamba_ssm.ops.selective_scan_interface", "selective_scan_fn")  # module, function of mamba-ssm


@functools.cache
def cuda_selective_scan() -> Callable[..., Tensor] | None:
    """mamba-ssm's fused selective scan, or None when the package is not installed (an optional extra)."""
    try:
        module = importlib.import_module(CUDA_SCAN[0])
    except ImportError:
        return None
    return getattr(module, CUDA_SCAN[1])


class _SelectiveScan(torch.autograd.Function):
    """y_t = C_t·h_t with h_t = exp(Δ_t A) h_{t−1} + Δ_t u_t B_t (h_{−1} = 0), its gradient written out: the decays
    and states are the only (B, L, E, S) tensors kept, the drive is scanned in place into the states, and the
    backward is the reverse scan followed by reductions (about half the passes over (B, L, E, S) of autograd through
    the same operations). u, dt (B, L, E) contiguous; a (E, S); b, c (B, L, S) contiguous. Returns (B, L, E)."""

    @staticmethod
    def forward(ctx, u: Tensor, dt: Tensor, a: Tensor, b: Tensor, c: Tensor) -> Tensor:  # noqa: ANN001
        decay = torch.exp(dt[..., None] * a)  # (B, L, E, S): Ā
        states = (dt * u)[..., None] * b[:, :, None, :]  # (B, L, E, S): B̄u, scanned in place into h
        scan_(decay, states)
        ctx.save_for_backward(u, dt, a, b, c, decay, states)
        return (states @ c[..., None]).squeeze(-1)  # (B, L, E)

    @staticmethod
    def backward(ctx, grad_y: Tensor) -> tuple[Tensor, ...]:  # noqa: ANN001
        u, dt, a, b, c, decay, states = ctx.saved_tensors
        grad_y = grad_y.contiguous()
        grad_c = (grad_y[..., None, :] @ states).squeeze(-2)  # (B, L, S): Σ_e ∂y·h
        g = grad_y[..., None] * c[:, :, None, :]  # (B, L, E, S): ∂loss/∂h through y_t only ...
        scan_reverse_(decay[:, 1:], g)  # ... then through the later states
        dtu = dt * u  # (B, L, E)
        grad_b = (dtu[..., None, :] @ g).squeeze(-2)  # (B, L, S)
        grad_dtu = (g @ b[..., None]).squeeze(-1)  # (B, L, E)
        g[:, 1:].mul_(states[:, :-1]).mul_(decay[:, 1:])  # ∂loss/∂(Δ_t A) = g_t h_{t−1} Ā_t, and 0 at t = 0
        g[:, 0] = 0
        grad_dt = torch.einsum("bles,es->ble", g, a) + grad_dtu * u
        grad_a = torch.einsum("bles,ble->es", g, dt)
        return grad_dtu * dt, grad_dt, grad_a, grad_b, grad_c


def selective_scan(u: Tensor, delta: Tensor, a: Tensor, b: Tensor, c: Tensor, d: Tensor, delta_bias: Tensor) -> Tensor:
    """The selective SSM in PyTorch, with the argument layout of mamba-ssm's ``selective_scan_fn`` (batch first,
    channels before time): u, delta (B, E, L) (delta before bias and softplus), a (E, S), b, c (B, S, L), d (E,),
    delta_bias (E,). Returns y (B, E, L): y_t = C_t·h_t + D·u_t, h_t = exp(Δ_t A)·h_{t−1} + Δ_t B_t u_t."""
    dt = F.softplus(delta + delta_bias[:, None])  # (B, E, L)
    dt, u_t = (rearrange(t, "b e l -> b l e").contiguous() for t in (dt, u))  # (B, L, E): time-major states
    b_t, c_t = (rearrange(t, "b s l -> b l s").contiguous() for t in (b, c))  # (B, L, S)
    y = _SelectiveScan.apply(u_t, dt, a, b_t, c_t) + u_t * d  # (B, L, E)
    return rearrange(y, "b l e -> b e l")


class MambaDirection(nn.Module):
    """One direction of the selective SSM: the causal ``conv1d``, ``x_proj``, ``dt_proj``, ``A_log`` and ``D``.

    Args:
        inner: channels E. d_state: state size S per channel. d_conv: conv width. dt_rank: rank of Δ's projection.
        dt_min, dt_max: range of the step Δ at initialisation (log-uniform; Δ's bias is its inverse softplus).
    """

    def __init__(self, inner: int, d_state: int, d_conv: int, dt_rank: int, dt_min: float, dt_max: float) -> None:
        super().__init__()
        self.d_state, self.dt_rank = d_state, dt_rank
        self.conv1d = nn.Conv1d(inner, inner, d_conv, groups=inner, padding=d_conv - 1, bias=True)
        self.x_proj = nn.Linear(inner, dt_rank + 2 * d_state, bias=False)
        self.dt_proj = nn.Linear(dt_rank, inner, bias=True)
        nn.init.uniform_(self.dt_proj.weight, -(dt_rank**-0.5), dt_rank**-0.5)
        dt = torch.exp(torch.rand(inner) * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min)).clamp(min=1e-4)
        with torch.no_grad():
            self.dt_proj.bias.copy_(dt + torch.log(-torch.expm1(-dt)))  # softplus(bias) = dt
        self.A_log = nn.Parameter(torch.log(torch.arange(1, d_state + 1, dtype=torch.float32).repeat(inner, 1)))
        self.D = nn.Parameter(torch.ones(inner))  # (E,)

    def forward(self, x: Tensor, keep: Tensor | None, scan: Callable[..., Tensor]) -> Tensor:
        """x (B, L, E) in scan order; keep (B, L, 1) 1.0 at real positions or None. Returns y (B, L, E), D included."""
        n = x.shape[1]
        if keep is not None:
            x = x * keep  # the conv sees zeros at padded positions
        u = F.silu(self.conv1d(rearrange(x, "b l e -> b e l"))[..., :n])  # (B, E, L): causal
        if keep is not None:
            u = u * rearrange(keep, "b l 1 -> b 1 l")  # a padded step drives nothing into the state
        dtype = ssm_dtype(u)
        with torch.autocast(device_type=u.device.type, enabled=False):
            u = u.to(dtype)
            dt, b, c = torch.split(self.x_proj.weight.to(dtype) @ u, [self.dt_rank, self.d_state, self.d_state], dim=1)
            delta = self.dt_proj.weight.to(dtype) @ dt  # (B, E, L): Δ before its bias and softplus
            a = -torch.exp(self.A_log.to(dtype))  # (E, S)
            y = scan(u, delta, a, b, c, self.D.to(dtype), delta_bias=self.dt_proj.bias.to(dtype))  # (B, E, L)
        return rearrange(y, "b e l -> b l e")


class Mamba(TokenMixer):
    """The Mamba block (one or two directions) as a token mixer.

    Args:
        dim, num_heads, seq_len, dropout: supplied by the encoder (see ``TokenMixer``); heads are unused.
        d_state: SSM state size per channel (Mamba: 16).
        expand: inner width E = expand · dim (Mamba: 2).
        d_conv: width of the causal depthwise convolution (Mamba: 4).
        dt_rank: rank of Δ's projection; null = ⌈dim / 16⌉ (Mamba's "auto").
        dt_min, dt_max: Δ's initialisation range (Mamba: 0.001, 0.1).
        bidirectional: a second SSM over the reversed sequence, outputs averaged (Vision Mamba "v2"); false = causal.
        kernel: "auto" (mamba-ssm's fused CUDA scan on CUDA tensors when the package is installed, else PyTorch) or
            "torch" (always the PyTorch parallel scan).
    """

    name = "mamba"

    def __init__(
        self,
        dim: int,
        num_heads: int,
        seq_len: int,
        dropout: float,
        d_state: Count = 16,
        expand: Count = 2,
        d_conv: Count = 4,
        dt_rank: Count | None = None,
        dt_min: PositiveFloat = 0.001,
        dt_max: PositiveFloat = 0.1,
        bidirectional: bool = True,
        kernel: Kernel = "auto",
    ) -> None:
        super().__init__(dim, num_heads, seq_len, dropout)
        for knob, value in (("d_state", d_state), ("expand", expand), ("d_conv", d_conv)):
            if value <= 0:
                raise ConfigError(f"attention=mamba: {knob} must be a positive integer, got {value}")
        if dt_rank is not None and dt_rank <= 0:
            raise ConfigError(f"attention=mamba: dt_rank must be positive or null (= ceil(dim / 16)), got {dt_rank}")
        if not 0.0 < dt_min <= dt_max:
            raise ConfigError(f"attention=mamba: need 0 < dt_min <= dt_max, got dt_min={dt_min}, dt_max={dt_max}")
        if kernel not in KERNELS:
            raise ConfigError(f"attention=mamba: kernel must be one of {', '.join(KERNELS)}, got {kernel!r}")
        self.kernel, self.bidirectional = kernel, bidirectional
        inner, rank = expand * dim, dt_rank or math.ceil(dim / 16)
        self.in_proj = nn.Linear(dim, 2 * inner, bias=False)
        self.directions = nn.ModuleList(MambaDirection(inner, d_state, d_conv, rank, dt_min, dt_max)
                                        for _ in range(2 if bidirectional else 1))
        self.out_proj = nn.Linear(inner, dim, bias=False)

    def param_settings(self) -> dict[str, ParamSettings]:
        """A_log and D without weight decay (mamba_simple.py marks them ``_no_weight_decay``); the trainer's rate."""
        no_decay = ParamSettings(weight_decay=0.0)
        return {f"directions.{i}.{p}": no_decay for i in range(len(self.directions)) for p in ("A_log", "D")}

    def scan_backend(self, device: torch.device) -> Callable[..., Tensor]:
        """The selective scan used on ``device``: mamba-ssm's CUDA kernel under ``kernel: auto`` on CUDA when it is
        installed, else ``selective_scan`` (PyTorch)."""
        if self.kernel == "auto" and device.type == "cuda":
            fused = cuda_selective_scan()
            if fused is not None:
                return functools.partial(fused, z=None, delta_softplus=True)
        return selective_scan

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        self.check_input(x, mask)
        xs, z = self.in_proj(x).chunk(2, dim=-1)  # (B, N, E) each
        keep = None if mask is None else mask[..., None].to(xs.dtype)  # (B, N, 1)
        scan = self.scan_backend(x.device)
        y = self.directions[0](xs, keep, scan)  # (B, N, E)
        if self.bidirectional:
            back = self.directions[1](xs.flip(1), None if keep is None else keep.flip(1), scan)  # reversed order
            y = (y + back.flip(1)) / 2
        y = y.to(z.dtype) * F.silu(z)  # (B, N, E)
        return self.out_drop(self.out_proj(y))
