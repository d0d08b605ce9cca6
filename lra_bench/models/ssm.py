"""The state-space block (``model=ssm``): the s4 repository's residual sequence model, with the mixer injected.

Mirrors state-spaces/s4's LRA setup (``src/models/sequence/backbones/model.py`` with ``SequenceResidualBlock``,
commit 62a14bb): token embedding (no positions: the mixer is order-aware); ``depth`` blocks ``x + Drop(Mixer(Norm(x)))``
(prenorm) or ``Norm(x + Drop(Mixer(x)))`` (postnorm) with ``norm: batch | layer``; with prenorm a final norm after
the last block (s4's ``SequenceModel.norm``; postnorm ends on a norm already); no MLP (S4D's and LRU's GLU output
mixing is inside the mixer); mean pooling over real tokens; a linear decoder (``Dense(num_classes)``). Retrieval uses
the harness's two-tower head (``DualClassifier``) with hidden width ``dim``. ``tie_dropout`` is s4's: every dropout
of the block and of its state-space mixer keeps one mask per (example, channel) over the whole sequence, three per
block (before and after the mixer's GELU, and on the residual branch). The s4 LRA configs set the sizes
(``profile=s4``). Differences from s4: tokens of the image tasks are embedded (s4 projects the grey value linearly),
and batch norm takes its statistics over every position of the batch, padding included, as s4 does, but batches are
padded to the task's ``max_len`` where s4 pads them to their longest sequence.

Axes: B batch, N tokens, C model dim.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from einops import rearrange
from torch import Tensor, nn

from lra_bench.attention.base import ChannelDropout, SSMMixer, TokenMixer
from lra_bench.checks import Count, DropRate
from lra_bench.errors import ConfigError
from lra_bench.models.encoder import masked_mean, run_blocks


def make_norm(norm: str, dim: int) -> nn.Module:
    """``norm: batch`` -> BatchNorm1d over channels, ``layer`` -> LayerNorm; applied by ``normalise``."""
    return nn.BatchNorm1d(dim) if norm == "batch" else nn.LayerNorm(dim)


def normalise(norm: nn.Module, x: Tensor) -> Tensor:
    """x (B, N, C) through a ``make_norm`` module: batch norm takes statistics per channel over batch and positions."""
    if isinstance(norm, nn.BatchNorm1d):
        return rearrange(norm(rearrange(x, "b n c -> b c n")), "b c n -> b n c")
    return norm(x)  # (B, N, C)


class SSMBlock(nn.Module):
    """One residual block: mixer, dropout, residual, batch or layer norm before (prenorm) or after."""

    def __init__(self, mixer: TokenMixer, dim: int, dropout: float, norm: str, prenorm: bool,
                 tie_dropout: bool) -> None:
        super().__init__()
        self.mixer, self.prenorm = mixer, prenorm
        self.norm = make_norm(norm, dim)
        self.drop = ChannelDropout(dropout) if tie_dropout else nn.Dropout(dropout)

    def normalise(self, x: Tensor) -> Tensor:
        return normalise(self.norm, x)  # (B, N, C)

    def forward(self, x: Tensor, mask: Tensor | None) -> Tensor:
        if self.prenorm:
            return x + self.drop(self.mixer(self.normalise(x), mask))  # (B, N, C)
        return self.normalise(x + self.drop(self.mixer(x, mask)))


class SSMEncoder(nn.Module):
    """Token ids (B, L) -> mean-pooled representation (B, C).

    Args:
        attention: the partial from ``configs/attention/NAME.yaml`` (called with dim, num_heads=1, seq_len, dropout).
        vocab_size, max_len, pad_id: from the task.
        dim, depth, dropout: model size (``configs/model/ssm.yaml``, set per task by ``profile=s4``).
        norm: "batch" (the s4 LRA configs) or "layer".
        prenorm: normalise before the mixer (true; then also once after the last block) or after the residual sum.
        tie_dropout: s4's channel-tied dropout, three per block (needs a state-space mixer: s4d, lru); false =
            element-wise, two per block (after the mixer's GELU, on the residual branch).
    """

    def __init__(
        self,
        attention: Callable[..., TokenMixer],
        vocab_size: int,
        max_len: int,
        pad_id: int | None,
        dim: Count,
        depth: Count,
        dropout: DropRate,
        norm: Literal["batch", "layer"],
        prenorm: bool,
        tie_dropout: bool,
    ) -> None:
        super().__init__()
        if norm not in ("batch", "layer"):
            raise ConfigError(f"model.norm must be 'batch' or 'layer', got {norm!r}")
        if depth <= 0 or dim <= 0:
            raise ConfigError(f"model.dim and model.depth must be positive, got dim={dim}, depth={depth}")
        self.pad_id, self.dim = pad_id, dim
        self.embed = nn.Embedding(vocab_size, dim)
        mixers = [attention(dim=dim, num_heads=1, seq_len=max_len, dropout=dropout) for _ in range(depth)]
        if tie_dropout:
            for mixer in mixers:
                if not isinstance(mixer, SSMMixer):
                    raise ConfigError(f"model.tie_dropout=true is s4's dropout inside a state-space mixer; "
                                      f"attention={mixer.name} is not one (use s4d or lru, or model.tie_dropout=false)")
                mixer.tie_dropout()
        self.blocks = nn.ModuleList(SSMBlock(mixer, dim, dropout, norm, prenorm, tie_dropout) for mixer in mixers)
        self.final_norm = make_norm(norm, dim) if prenorm else None
        self.checkpoint_blocks = False  # trainer.activation_checkpointing (train.step.checkpoint_blocks)

    def padding(self, input_ids: Tensor) -> Tensor | None:
        """(B, L) True = real token, or None when every position is real (pad_id None)."""
        return None if self.pad_id is None else input_ids != self.pad_id

    def token_states(self, x: Tensor, mask: Tensor | None) -> Tensor:
        """Embedded tokens x (B, L, C) and their padding mask -> every token's final state (B, L, C)."""
        x = run_blocks(self.blocks, x, mask, self.checkpoint_blocks)  # (B, L, C)
        if self.final_norm is not None:
            x = normalise(self.final_norm, x)  # (B, L, C)
        return x

    def forward(self, input_ids: Tensor) -> Tensor:
        mask = self.padding(input_ids)  # (B, L) True = real token
        return masked_mean(self.token_states(self.embed(input_ids), mask), mask)  # (B, C)


class LinearDecoder(nn.Module):
    """SSM encoder + s4's pooled linear decoder: Dense(num_classes)."""

    def __init__(self, encoder: SSMEncoder, num_classes: int) -> None:
        super().__init__()
        self.encoder = encoder
        self.head = nn.Linear(encoder.dim, num_classes)

    def forward(self, input_ids: Tensor) -> Tensor:
        return self.head(self.encoder(input_ids))  # (B, num_classes)
