"""The attention plugin contract shared by every variant.

Axes used in shape comments throughout ``lra_bench.attention``:
    B - batch, N - sequence length (N <= seq_len), H - heads, D - head dim,
    C - model dim (C = H * D), M - features / landmarks / projected length.

Contract (public, documented in docs/attention.md, "Add your own attention"):
    * ``configs/attention/NAME.yaml`` holds ``_target_`` (the class), ``_partial_: true`` and the
      variant's own knobs only. The encoder completes it with exactly ``dim``, ``num_heads``,
      ``seq_len`` and ``dropout``.
    * ``forward(x, mask)``: x is (B, N, C) with N <= seq_len; mask is (B, N) bool with
      True = real token, or None (every position real). Returns (B, N, C).
    * Outputs at real positions never depend on the content at padded positions. Rows at padded
      query positions must be finite but are otherwise unspecified (pooling ignores them).
    * Anything random (hashes, features, random blocks) is fixed in ``eval()`` mode.
    * Optional: ``param_settings()`` maps some parameter names to ``ParamSettings`` (a learning-rate cap, a weight
      decay); the trainer gives those parameters their own AdamW group (state-space ``log_dt``/``A``, LRU ``nu_log``).

Two base classes:
    * ``TokenMixer``: the contract checks, the output dropout and the registry. Mixers without the q/k/v shape
      (FNet, gMLP, MLP-Mixer, Synthesizer, shared-QK Reformer) subclass it, build the parameters they use and
      implement ``forward``.
    * ``Attention(TokenMixer)``: adds the fused q/k/v and output projections; subclasses implement
      ``attend(q, k, v, mask)`` only.
A subclass declares ``name`` (== file stem == config stem); declaring it registers the class so
``list_attentions()`` can enumerate the zoo.
"""

from __future__ import annotations

import abc
import re
from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import Tensor, nn

from lra_bench.checks import fraction
from lra_bench.errors import ConfigError

NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")  # a mixer's name: no space, separator or control character


@dataclass(frozen=True)
class ParamSettings:
    """Optimizer settings a mixer declares for some of its parameters (``TokenMixer.param_settings``).

    lr_max: the parameter trains with learning rate min(lr_max, trainer.lr) (the schedule scales it like the rest);
        None = trainer.lr.
    weight_decay: AdamW weight decay for it; None = trainer.weight_decay.
    """

    lr_max: float | None = None
    weight_decay: float | None = None


class TokenMixer(nn.Module, abc.ABC):
    """A layer that mixes information across the tokens of a right- or arbitrarily-padded batch (no causal mask).

    Holds what every variant shares: the encoder's four arguments and their checks, the input contract check, the
    output dropout and the registry. Mixers without queries and keys (FNet, gMLP, MLP-Mixer, Synthesizer, shared-QK
    Reformer) subclass this and implement ``forward`` with the parameters they need; q/k/v attention subclasses
    ``Attention``.

    Args:
        dim: model width C; must be divisible by ``num_heads``.
        num_heads: number of heads H.
        seq_len: the longest N this layer will see (task length, +1 with a CLS token).
        dropout: dropout on the layer's output.
    """

    name: ClassVar[str]
    #: True when a padded input gives the same outputs at real positions as the truncated input
    #: (checked by tests/test_attention_contract.py). False for mechanisms whose mixing depends on
    #: the padded length itself (e.g. a Fourier transform over N, LSH chunking of N positions).
    truncation_exact: ClassVar[bool] = True
    _registry: ClassVar[dict[str, type[TokenMixer]]] = {}

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "name" in cls.__dict__:
            if not isinstance(cls.name, str) or not NAME_PATTERN.fullmatch(cls.name):
                raise ConfigError(f"{cls.__module__}.{cls.__qualname__}.name={cls.name!r} cannot name a mixer: a "
                                  "name is letters, digits, '_', '-', '.' or '+', starting with a letter or digit (it "
                                  "names folders, table rows and chart labels)")
            other = TokenMixer._registry.get(cls.name)
            if other is not None and other.__qualname__ != cls.__qualname__:
                raise ValueError(f"duplicate attention name {cls.name!r}: {other} and {cls}")
            TokenMixer._registry[cls.name] = cls

    def __init__(self, dim: int, num_heads: int, seq_len: int, dropout: float) -> None:
        super().__init__()
        if dim <= 0 or num_heads <= 0 or dim % num_heads != 0:
            raise ConfigError(
                f"model.dim={dim} must be a positive multiple of model.num_heads={num_heads}; "
                "change one of them so that dim % num_heads == 0"
            )
        if seq_len <= 0:
            raise ConfigError(f"seq_len must be positive, got {seq_len}")
        fraction("model.dropout", dropout)
        self.dim = dim
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.seq_len = seq_len
        self.out_drop = nn.Dropout(dropout)

    @abc.abstractmethod
    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        """x: (B, N, C); mask: (B, N) bool, True = real, or None. Returns (B, N, C)."""

    def param_settings(self) -> dict[str, ParamSettings]:
        """Per-parameter optimizer settings, keyed by the name in ``self.named_parameters()``; the trainer (and the
        benchmark's step) builds AdamW parameter groups from them and the run record lists the groups. Default:
        none (every parameter trains with the trainer's learning rate and weight decay)."""
        return {}

    def require_block_fits(self, knob: str, value: int) -> None:
        """A block/chunk knob must be in [1, seq_len]: a clear ConfigError otherwise (before any data is loaded)."""
        if not 1 <= value <= self.seq_len:
            raise ConfigError(
                f"attention={self.name}: {knob}={value} must be between 1 and seq_len={self.seq_len} "
                f"(the task's max_len, +1 with a CLS token); set attention.{knob} to at most {self.seq_len}"
            )

    def check_input(self, x: Tensor, mask: Tensor | None) -> None:
        """Fail with a clear message on a contract violation (cheap shape checks only)."""
        if x.dim() != 3 or x.shape[-1] != self.dim:
            raise ValueError(f"{type(self).__name__} expects x of shape (B, N, {self.dim}), got {tuple(x.shape)}")
        if x.shape[1] > self.seq_len:
            raise ValueError(
                f"{type(self).__name__} was built for seq_len={self.seq_len} but got N={x.shape[1]}"
            )
        if mask is not None and (mask.dtype != torch.bool or mask.shape != x.shape[:2]):
            raise ValueError(
                f"mask must be bool of shape {tuple(x.shape[:2])} (True = real token), "
                f"got {mask.dtype} {tuple(mask.shape)}"
            )


class Attention(TokenMixer):
    """Multi-head self-attention: a fused q/k/v projection, ``attend`` per head, an output projection.

    Subclasses implement ``attend(q, k, v, mask)`` only (the arguments are those of ``TokenMixer``).
    """

    def __init__(self, dim: int, num_heads: int, seq_len: int, dropout: float) -> None:
        super().__init__(dim, num_heads, seq_len, dropout)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        self.check_input(x, mask)
        q, k, v = rearrange(
            self.qkv(x), "b n (three h d) -> three b h n d", three=3, h=self.num_heads
        )  # each (B, H, N, D)
        y = self.attend(q, k, v, mask)  # (B, H, N, D)
        y = rearrange(y, "b h n d -> b n (h d)")  # (B, N, C)
        return self.out_drop(self.out(y))

    @abc.abstractmethod
    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
        """q, k, v: (B, H, N, D); mask: (B, N) bool, True = real, or None. Returns (B, H, N, D)."""


def checked_attn_dropout(value: float) -> float:
    """``attention.attn_dropout`` for variants that apply it themselves (SDPA, FlexAttention): a ConfigError outside
    [0, 1) (1 would divide by zero in the rescaling), else ``value``."""
    return fraction("attention.attn_dropout", value)


def key_padding_bias(mask: Tensor | None, dtype: torch.dtype) -> Tensor | None:
    """(B, N) bool mask -> (B, 1, 1, N) additive bias: 0 at real keys, dtype-min at padded keys.

    The finite minimum (not -inf) keeps a fully padded row finite instead of NaN.
    """
    if mask is None:
        return None
    bias = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
    bias.masked_fill_(~mask, torch.finfo(dtype).min)
    return bias[:, None, None, :]  # (B, 1, 1, N)


NO_PAPER = "no paper:"  # the docstring's explicit statement that a variant has no paper (a baseline), and why


def cites_its_source(cls: type) -> bool:
    """The citation rule: the class's or its module's docstring links the paper (an ``http`` address) or says
    ``No paper: <why>`` (a baseline of your own)."""
    import inspect

    module = inspect.getmodule(cls)
    text = (cls.__doc__ or "") + ((module.__doc__ or "") if module is not None else "")
    return "http" in text or NO_PAPER in text.lower()


def ssm_dtype(x: Tensor) -> torch.dtype:
    """The dtype a state-space mixer computes its FFT convolution in: fp64 for fp64 input, else fp32 (no half FFTs)."""
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def list_attentions() -> list[str]:
    """Names of every registered attention variant, sorted."""
    import lra_bench.attention  # noqa: F401  (imports every variant so they register)

    return sorted(TokenMixer._registry)


def get_attention_class(name: str) -> type[TokenMixer]:
    """The class registered under ``name``; a clear error listing valid names otherwise."""
    names = list_attentions()
    if name not in TokenMixer._registry:
        raise ConfigError(f"unknown attention {name!r}; valid names: {', '.join(names)}")
    return TokenMixer._registry[name]


class ChannelDropout(nn.Module):
    """Dropout with one mask per (example, channel), shared by every position: x (B, N, C) -> (B, N, C). The s4
    repository's ``DropoutNd`` with ``tie=True`` (its ``tie_dropout``), ``torch.nn.Dropout1d`` over (B, C, N)."""

    def __init__(self, p: float) -> None:
        super().__init__()
        self.p = fraction("model.dropout", p)

    def forward(self, x: Tensor) -> Tensor:
        y = F.dropout1d(rearrange(x, "b n c -> b c n"), self.p, self.training)  # zeroes whole (example, channel) rows
        return rearrange(y, "b c n -> b n c")


class SSMMixer(TokenMixer):
    """The block shared by the state-space mixers (``s4d``, ``lru``): padded positions zeroed, the linear system
    ``ssm(u)`` ((B, L, C) -> (B, L, C), D skip included) in fp32 outside autocast, GELU, output dropout, then the
    subclass's ``output_linear`` (Linear(C -> 2C) + GLU). Subclasses set ``name`` and implement ``ssm``.

    ``tie_dropout()`` switches to the s4 repository's dropout (its S4 block with ``tie_dropout: true``): channel-tied
    (``ChannelDropout``), before the GELU (s4's ``FFTConv``) as well as after it (s4's ``S4Block``)."""

    output_linear: nn.Module

    def __init__(self, dim: int, num_heads: int, seq_len: int, dropout: float) -> None:
        super().__init__(dim, num_heads, seq_len, dropout)
        self.pre_drop: nn.Module = nn.Identity()  # dropout before the GELU: only with tie_dropout()

    def tie_dropout(self) -> None:
        """s4's dropout layout: one channel-tied mask before the GELU and another after it (same rate)."""
        p = self.out_drop.p
        self.pre_drop, self.out_drop = ChannelDropout(p), ChannelDropout(p)

    @abc.abstractmethod
    def ssm(self, u: Tensor) -> Tensor: ...

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        self.check_input(x, mask)
        with torch.autocast(device_type=x.device.type, enabled=False):
            if mask is not None:
                x = x.masked_fill(~mask[..., None], 0.0)  # (B, N, C): padding never enters the system
            y = self.out_drop(F.gelu(self.pre_drop(self.ssm(x))))  # (B, N, C)
        return self.output_linear(y.to(x.dtype))
