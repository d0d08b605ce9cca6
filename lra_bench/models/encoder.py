"""Pre-LayerNorm Transformer encoder classifier with the attention layer injected from the config.

Mirrors LRA's ``models/transformer/transformer.py``: token embedding; sinusoidal or learned
positions; optional learned CLS token prepended; blocks ``x + Drop(Attn(LN(x)))`` then
``x + MLP(LN(x))`` with GELU; final LayerNorm; CLS or masked-mean pooling; head
``Dense(mlp_dim) -> ReLU -> Dense(num_classes)``. Padding mask = ``input_ids != pad_id``.
``positions: rope`` adds nothing to the embeddings and rotates every layer's queries and keys instead (RoFormer,
``lra_bench/attention/_rope.py``); it needs q/k attention.

The forward pass is split so that self-pretraining (``lra_bench.models.pretraining``) reads the same encoder per
token: ``embed`` (ids -> (B, L, C)), ``states`` (embedded tokens -> every position's final state) and ``pooled``.

Axes: B batch, N tokens (incl. CLS), C model dim.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Callable, Iterator
from typing import Literal

import torch
from einops import rearrange
from torch import Tensor, nn

from lra_bench.attention.base import Attention, TokenMixer
from lra_bench.checks import Count, DropRate, fraction
from lra_bench.errors import ConfigError


def sinusoidal_positions(n: int, dim: int) -> Tensor:
    """(n, dim) fixed sin/cos table (Vaswani et al. 2017), sin in the first half as in LRA/flax."""
    pos = torch.arange(n, dtype=torch.float32)[:, None]  # (n, 1)
    freqs = torch.exp(-math.log(10000.0) * torch.arange(0, dim // 2, dtype=torch.float32) / max(dim // 2 - 1, 1))
    table = torch.zeros(n, dim)
    table[:, : dim // 2] = torch.sin(pos * freqs)  # (n, dim/2)
    table[:, dim // 2 : 2 * (dim // 2)] = torch.cos(pos * freqs)
    return table


class MLP(nn.Sequential):
    def __init__(self, dim: int, hidden: int, dropout: float) -> None:
        super().__init__(
            nn.Linear(dim, hidden), nn.GELU(), nn.Dropout(dropout), nn.Linear(hidden, dim), nn.Dropout(dropout)
        )


class Block(nn.Module):
    """Pre-LN residual block: attention then MLP."""

    def __init__(self, attention: TokenMixer, dim: int, mlp_dim: int, dropout: float) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = attention
        self.drop = nn.Dropout(dropout)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = MLP(dim, mlp_dim, dropout)

    def forward(self, x: Tensor, mask: Tensor | None) -> Tensor:
        x = x + self.drop(self.attn(self.norm1(x), mask))  # (B, N, C)
        return x + self.mlp(self.norm2(x))


@contextlib.contextmanager
def _running_stats_kept(module: nn.Module) -> Iterator[None]:
    """The batch norms' running statistics in ``module`` as they were before the wrapped code (the recomputation of
    a checkpointed block must not update them a second time). Written back through ``.data``, which leaves the
    tensors' version counters alone (autograd saved them in the recomputation)."""
    buffers = [b for m in module.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)
               for b in (m.running_mean, m.running_var, m.num_batches_tracked) if b is not None]
    kept = [b.detach().clone() for b in buffers]
    try:
        yield
    finally:
        for b, k in zip(buffers, kept, strict=True):
            b.data.copy_(k)


def run_blocks(blocks: nn.ModuleList, x: Tensor, mask: Tensor | None, checkpointed: bool) -> Tensor:
    """x (B, N, C) through every block in turn. ``checkpointed`` (``trainer.activation_checkpointing``) and
    gradients on: ``torch.utils.checkpoint`` per block, so only each block's input is kept and its activations are
    recomputed in the backward; the random state is replayed (same dropout masks) and batch-norm statistics are
    updated once, so the results are bit-identical."""
    if not (checkpointed and torch.is_grad_enabled()):
        for block in blocks:
            x = block(x, mask)
        return x
    from torch.utils.checkpoint import checkpoint

    for block in blocks:
        contexts = functools.partial(lambda b: (contextlib.nullcontext(), _running_stats_kept(b)), block)
        x = checkpoint(block, x, mask, use_reentrant=False, context_fn=contexts)  # (B, N, C)
    return x


class Encoder(nn.Module):
    """Token ids (B, L) -> pooled representation (B, C).

    Args:
        attention: the partial from ``configs/attention/NAME.yaml``; called with dim, num_heads,
            seq_len, dropout for each layer.
        vocab_size, max_len, pad_id: from the task (pad_id None: every position is real, no mask).
        dim, depth, num_heads, mlp_dim, dropout: model size (``configs/model``).
        positions: "sinusoidal" (LRA default), "learned", or "rope" (rotary, applied to q and k in every layer;
            only for q/k attention, ``lra_bench.attention.base.Attention``).
        pool: "cls" (learned token prepended) or "mean" (mean over real tokens).
    """

    def __init__(
        self,
        attention: Callable[..., TokenMixer],
        vocab_size: int,
        max_len: int,
        pad_id: int | None,
        dim: Count,
        depth: Count,
        num_heads: Count,
        mlp_dim: Count,
        dropout: DropRate,
        positions: Literal["sinusoidal", "learned", "rope"],
        pool: Literal["cls", "mean"],
    ) -> None:
        super().__init__()
        fraction("model.dropout", dropout)
        if positions not in ("sinusoidal", "learned", "rope"):
            raise ConfigError(f"model.positions must be 'sinusoidal', 'learned' or 'rope', got {positions!r}")
        if pool not in ("cls", "mean"):
            raise ConfigError(f"model.pool must be 'cls' or 'mean', got {pool!r}")
        self.pad_id, self.pool, self.dim = pad_id, pool, dim
        seq_len = max_len + (1 if pool == "cls" else 0)
        self.embed = nn.Embedding(vocab_size, dim)
        nn.init.normal_(self.embed.weight, std=1.0)  # flax nn.Embed(stddev=1.0)
        self.cls = nn.Parameter(torch.zeros(1, 1, dim)) if pool == "cls" else None
        if positions == "learned":
            self.pos = nn.Parameter(torch.randn(1, seq_len, dim) * 0.02)
        elif positions == "sinusoidal":
            self.register_buffer("pos", sinusoidal_positions(seq_len, dim)[None], persistent=False)
        else:
            self.pos = None  # rope: positions rotate q and k inside every layer
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(
            Block(attention(dim=dim, num_heads=num_heads, seq_len=seq_len, dropout=dropout), dim, mlp_dim, dropout)
            for _ in range(depth)
        )
        if positions == "rope":
            for block in self.blocks:
                if not isinstance(block.attn, Attention):
                    raise ConfigError(f"model.positions=rope rotates the queries and keys of attention; "
                                      f"attention={block.attn.name} has none ({type(block.attn).__name__} mixes "
                                      "tokens without q/k), so it does not apply: use model.positions=sinusoidal "
                                      "or learned")
                block.attn.use_rotary_positions()
        self.norm = nn.LayerNorm(dim)
        self.checkpoint_blocks = False  # trainer.activation_checkpointing (train.step.checkpoint_blocks)

    def padding(self, input_ids: Tensor) -> Tensor | None:
        """(B, L) True = real token, or None when every position is real (pad_id None)."""
        return None if self.pad_id is None else input_ids != self.pad_id

    def states(self, x: Tensor, mask: Tensor | None) -> tuple[Tensor, Tensor | None]:
        """Embedded tokens x (B, L, C) and their padding mask -> every position's final state (B, N, C), N = L (+1
        for the CLS token, first), with the mask of those N positions."""
        if self.cls is not None:
            x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1)  # (B, 1 + L, C)
            if mask is not None:
                mask = torch.cat([mask.new_ones(mask.shape[0], 1), mask], dim=1)  # (B, 1 + L)
        x = self.drop(x if self.pos is None else x + self.pos[:, : x.shape[1]])
        x = run_blocks(self.blocks, x, mask, self.checkpoint_blocks)  # (B, N, C)
        return self.norm(x), mask  # (B, N, C)

    def token_states(self, x: Tensor, mask: Tensor | None) -> Tensor:
        """``states`` of the L tokens only (the CLS token left out): (B, L, C), one per input position."""
        out, _ = self.states(x, mask)
        return out if self.cls is None else out[:, 1:]

    def pooled(self, x: Tensor, mask: Tensor | None) -> Tensor:
        """(B, N, C) states -> (B, C): the CLS token's, or the mean over real positions."""
        if self.cls is not None:
            return x[:, 0]  # (B, C)
        return masked_mean(x, mask)

    def forward(self, input_ids: Tensor) -> Tensor:
        x, mask = self.states(self.embed(input_ids), self.padding(input_ids))  # (B, N, C)
        return self.pooled(x, mask)


def masked_mean(x: Tensor, mask: Tensor | None) -> Tensor:
    """Mean of (B, N, C) over the positions where mask (B, N) is True (all of them when None) -> (B, C)."""
    if mask is None:
        return x.mean(1)  # (B, C)
    weights = mask.to(x.dtype)[..., None]  # (B, N, 1)
    return (x * weights).sum(1) / weights.sum(1).clamp(min=1.0)  # (B, C)


class Classifier(nn.Module):
    """Encoder + LRA's classifier head: Dense(mlp_dim) -> ReLU -> Dense(num_classes)."""

    def __init__(self, encoder: Encoder, mlp_dim: int, num_classes: int) -> None:
        super().__init__()
        self.encoder = encoder
        self.head = nn.Sequential(nn.Linear(encoder.dim, mlp_dim), nn.ReLU(), nn.Linear(mlp_dim, num_classes))

    def forward(self, input_ids: Tensor) -> Tensor:
        return self.head(self.encoder(input_ids))  # (B, num_classes)


def pair_features(u: Tensor, v: Tensor, interaction: str) -> Tensor:
    """LRA retrieval's interaction of two pooled documents (B, C) each: ``concat`` = [u, v] (the released code),
    ``nli`` = [u, v, u·v, u−v] (the paper's Eq. 1). Returns (B, 2C) or (B, 4C)."""
    return torch.cat([u, v] if interaction == "concat" else [u, v, u * v, u - v], dim=-1)


class DualClassifier(nn.Module):
    """Two-tower matching (LRA retrieval): one shared encoder for both documents, then LRA's dual head
    ``Dense(mlp_dim) -> ReLU -> Dense(mlp_dim // 2) -> ReLU -> Dense(num_classes)`` over the interaction:
    ``concat`` = [u, v] (the released code) or ``nli`` = [u, v, u·v, u−v] (the paper's Eq. 1).
    """

    def __init__(self, encoder: Encoder, mlp_dim: int, num_classes: int, interaction: Literal["concat", "nli"]) -> None:
        super().__init__()
        if interaction not in ("concat", "nli"):
            raise ConfigError(f"task.interaction must be 'concat' or 'nli', got {interaction!r}")
        self.encoder, self.interaction = encoder, interaction
        width = encoder.dim * (2 if interaction == "concat" else 4)
        self.head = nn.Sequential(nn.Linear(width, mlp_dim), nn.ReLU(), nn.Linear(mlp_dim, mlp_dim // 2), nn.ReLU(),
                                  nn.Linear(mlp_dim // 2, num_classes))

    def forward(self, input_ids: Tensor) -> Tensor:
        b = input_ids.shape[0]
        pooled = self.encoder(rearrange(input_ids, "b two l -> (two b) l"))  # (2B, C), shared encoder
        return self.head(pair_features(pooled[:b], pooled[b:], self.interaction))  # (B, num_classes)
