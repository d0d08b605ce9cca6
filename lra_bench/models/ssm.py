"""The state-space block (``model=ssm``): the s4 repository's residual sequence model, with the mixer injected.

Mirrors state-spaces/s4's LRA setup (``src/models/sequence/backbones/model.py`` with ``SequenceResidualBlock``):
token embedding (no positions: the mixer is order-aware); ``depth`` blocks ``x + Drop(Mixer(Norm(x)))`` (prenorm)
or ``Norm(x + Drop(Mixer(x)))`` (postnorm) with ``norm: batch | layer``; no MLP (S4D's and LRU's GLU output mixing
is inside the mixer); mean pooling over real tokens; a linear decoder (``Dense(num_classes)``). Retrieval uses the
harness's two-tower head (``DualClassifier``) with hidden width ``dim``. The s4 LRA configs set the sizes
(``profile=s4``). Differences from s4: tokens of the image tasks are embedded (s4 projects the grey value
linearly), and batch norm takes its statistics over every position of the batch, padding included, as s4 does.

Axes: B batch, N tokens, C model dim.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from einops import rearrange
from torch import Tensor, nn

from lra_bench.attention.base import TokenMixer
from lra_bench.errors import ConfigError
from lra_bench.models.encoder import run_blocks


class SSMBlock(nn.Module):
    """One residual block: mixer, dropout, residual, batch or layer norm before (prenorm) or after."""

    def __init__(self, mixer: TokenMixer, dim: int, dropout: float, norm: str, prenorm: bool) -> None:
        super().__init__()
        self.mixer, self.prenorm, self.batch_norm = mixer, prenorm, norm == "batch"
        self.norm = nn.BatchNorm1d(dim) if self.batch_norm else nn.LayerNorm(dim)
        self.drop = nn.Dropout(dropout)

    def normalise(self, x: Tensor) -> Tensor:
        if self.batch_norm:  # statistics per channel over batch and positions
            return rearrange(self.norm(rearrange(x, "b n c -> b c n")), "b c n -> b n c")
        return self.norm(x)  # (B, N, C)

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
        prenorm: normalise before the mixer (true) or after the residual sum (false).
    """

    def __init__(
        self,
        attention: Callable[..., TokenMixer],
        vocab_size: int,
        max_len: int,
        pad_id: int | None,
        dim: int,
        depth: int,
        dropout: float,
        norm: Literal["batch", "layer"],
        prenorm: bool,
    ) -> None:
        super().__init__()
        if norm not in ("batch", "layer"):
            raise ConfigError(f"model.norm must be 'batch' or 'layer', got {norm!r}")
        if depth <= 0 or dim <= 0:
            raise ConfigError(f"model.dim and model.depth must be positive, got dim={dim}, depth={depth}")
        self.pad_id, self.dim = pad_id, dim
        self.embed = nn.Embedding(vocab_size, dim)
        self.blocks = nn.ModuleList(
            SSMBlock(attention(dim=dim, num_heads=1, seq_len=max_len, dropout=dropout), dim, dropout, norm, prenorm)
            for _ in range(depth)
        )
        self.checkpoint_blocks = False  # trainer.activation_checkpointing (train.step.checkpoint_blocks)

    def forward(self, input_ids: Tensor) -> Tensor:
        mask = None if self.pad_id is None else input_ids != self.pad_id  # (B, L) True = real token
        x = self.embed(input_ids)  # (B, L, C)
        x = run_blocks(self.blocks, x, mask, self.checkpoint_blocks)  # (B, L, C)
        if mask is None:
            return x.mean(1)  # (B, C)
        weights = mask.to(x.dtype)[..., None]  # (B, L, 1)
        return (x * weights).sum(1) / weights.sum(1).clamp(min=1.0)  # (B, C)


class LinearDecoder(nn.Module):
    """SSM encoder + s4's pooled linear decoder: Dense(num_classes)."""

    def __init__(self, encoder: SSMEncoder, num_classes: int) -> None:
        super().__init__()
        self.encoder = encoder
        self.head = nn.Linear(encoder.dim, num_classes)

    def forward(self, input_ids: Tensor) -> Tensor:
        return self.head(self.encoder(input_ids))  # (B, num_classes)
