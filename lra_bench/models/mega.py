"""Mega's own block and classifier (``model=mega``): the official LRA encoder of facebookresearch/mega.

Mirrors ``fairseq/models/lra/mega_lra_encoder.py`` with ``MegaSentenceEncoderLayer`` and the LRA model's head
(``fairseq/models/lra/model.py``), for ``attention=mega`` (Ma et al. 2023, https://arxiv.org/abs/2209.10655):
token embedding ~ N(0, dim^-½) (no positions: the EMA and the relative bias are order-aware), dropout, padded
positions zeroed; ``depth`` layers, each the Mega layer then the normalised feed-forward network (NFFN):

* postnorm (ListOps, Text, Retrieval): x = Norm₁(x + φ ⊙ (Ĥ − x)), then x = Norm₂(x + Drop(W₂ Drop_h(SiLU(W₁x)))),
* prenorm (image, Pathfinder, Path-X): x = x + φ ⊙ (Ĥ(Norm₁ x) − x) (the gate mixes with the un-normalised x),
  x = x + Drop(W₂ Drop_h(SiLU(W₁ Norm₂ x))), and a final norm after the last layer;

``norm``: layer (LayerNorm), scale (ScaleNorm: a learned scalar times x / RMS(x)) or batch (statistics over every
position of the batch, padding included, as the official ``SequenceNorm``); eps 1e-5. Then padded positions zeroed,
mean pooling over real tokens, and the head Dense(classifier_dim) → Dropout → GELU → Dense(num_classes, no bias)
(Xavier-uniform; the official ``classifier_layers: 1`` with ``classifier_activation_fn: gelu``). Retrieval: one
shared encoder for both documents, the head over the task's interaction (the official code concatenates).
Differences from the official code: the image tasks embed the 256 grey levels as tokens (the official
``RealNumberEmbedding`` projects the normalised pixel value linearly); Mega-chunk pads inside the mixer rather than
in the encoder (the same outputs at real tokens).

Axes: B batch, N tokens, C model dim.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import Tensor, nn

from lra_bench.attention.base import TokenMixer
from lra_bench.attention.mega import Mega
from lra_bench.checks import Count, DropRate, NonNegativeInt, check_kwargs
from lra_bench.errors import ConfigError
from lra_bench.models.encoder import pair_features

NORMS = ("layer", "scale", "batch")
TRANSFORMER_ONLY = ("num_heads", "mlp_dim", "positions", "pool")  # model=encoder sizes a profile may set
SUPPLIED = ("attention", "vocab_size", "max_len", "pad_id", "num_classes", "interaction")  # from the task


class ScaleNorm(nn.Module):
    """x · g / sqrt(mean(x²) + eps) over the channels, one learned scalar g (init 1): the official ``ScaleNorm``."""

    def __init__(self, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.scalar = nn.Parameter(torch.ones(1))

    def forward(self, x: Tensor) -> Tensor:
        return self.scalar * x * torch.rsqrt(x.square().mean(-1, keepdim=True) + self.eps)


class SequenceNorm(nn.Module):
    """Layer, scale or batch norm of (B, N, C); batch norm takes its statistics over every position of the batch."""

    def __init__(self, kind: str, dim: int) -> None:
        super().__init__()
        self.batch = kind == "batch"
        self.norm = {"layer": lambda: nn.LayerNorm(dim, eps=1e-5), "scale": lambda: ScaleNorm(1e-5),
                     "batch": lambda: nn.BatchNorm1d(dim, eps=1e-5)}[kind]()

    def forward(self, x: Tensor) -> Tensor:
        if self.batch:
            return rearrange(self.norm(rearrange(x, "b n c -> b c n")), "b c n -> b n c")
        return self.norm(x)  # (B, N, C)


class MegaBlock(nn.Module):
    """The Mega layer with its norm, then the NFFN (skipped when ffn_dim = 0) with its own norm."""

    def __init__(self, mixer: Mega, dim: int, ffn_dim: int, dropout: float, hidden_dropout: float, norm: str,
                 prenorm: bool) -> None:
        super().__init__()
        self.mixer, self.prenorm = mixer, prenorm
        self.norm1 = SequenceNorm(norm, dim)
        self.ffn = None
        if ffn_dim > 0:
            self.norm2 = SequenceNorm(norm, dim)
            self.ffn = nn.Sequential(nn.Linear(dim, ffn_dim), nn.SiLU(), nn.Dropout(hidden_dropout),
                                     nn.Linear(ffn_dim, dim), nn.Dropout(dropout))
            for linear in (self.ffn[0], self.ffn[3]):
                nn.init.normal_(linear.weight, std=0.02)
                nn.init.zeros_(linear.bias)

    def forward(self, x: Tensor, mask: Tensor | None) -> Tensor:
        if self.prenorm:
            x = x + self.mixer(self.norm1(x), mask, residual=x)  # (B, N, C): φ ⊙ Ĥ + (1 − φ) ⊙ x
        else:
            x = self.norm1(x + self.mixer(x, mask))
        if self.ffn is None:
            return x
        if self.prenorm:
            return x + self.ffn(self.norm2(x))
        return self.norm2(x + self.ffn(x))


class MegaEncoder(nn.Module):
    """Token ids (B, L) -> mean-pooled representation (B, C).

    Args:
        attention: the partial of ``configs/attention/mega.yaml`` (called with dim, num_heads=1, seq_len, dropout).
        vocab_size, max_len, pad_id: from the task.
        dim, depth: model width and layers (official ``encoder_embed_dim``, ``encoder_layers``).
        ffn_dim: NFFN hidden width (official ``encoder_ffn_embed_dim``, = the attention's hidden_dim in every LRA
            recipe); 0 = no NFFN.
        dropout: on the embeddings, the EMA output, Ĥ, the NFFN output and the head (official ``dropout``).
        hidden_dropout: inside the NFFN, after the activation (official ``act_dropout``).
        norm: "layer", "scale" or "batch". prenorm: normalise before each sublayer (and once at the end).
    """

    def __init__(
        self,
        attention: Callable[..., TokenMixer],
        vocab_size: int,
        max_len: int,
        pad_id: int | None,
        dim: Count,
        depth: Count,
        ffn_dim: NonNegativeInt,
        dropout: DropRate,
        hidden_dropout: DropRate,
        norm: Literal["layer", "scale", "batch"],
        prenorm: bool,
    ) -> None:
        super().__init__()
        if norm not in NORMS:
            raise ConfigError(f"model.norm must be one of {', '.join(NORMS)} under model=mega, got {norm!r}")
        if dim <= 0 or depth <= 0 or ffn_dim < 0:
            raise ConfigError(f"model=mega needs dim > 0, depth > 0 and ffn_dim >= 0, got {dim}, {depth}, {ffn_dim}")
        self.pad_id, self.dim = pad_id, dim
        self.embed = nn.Embedding(vocab_size, dim)
        nn.init.normal_(self.embed.weight, std=dim**-0.5)
        self.drop = nn.Dropout(dropout)
        blocks = []
        for _ in range(depth):
            mixer = attention(dim=dim, num_heads=1, seq_len=max_len, dropout=dropout)
            if not isinstance(mixer, Mega):
                raise ConfigError(f"model=mega is Mega's own block and needs attention=mega, got "
                                  f"attention={mixer.name}; other mixers run in model=encoder (or model=ssm)")
            blocks.append(MegaBlock(mixer, dim, ffn_dim, dropout, hidden_dropout, norm, prenorm))
        self.blocks = nn.ModuleList(blocks)
        self.final_norm = SequenceNorm(norm, dim) if prenorm else None

    def padding(self, input_ids: Tensor) -> Tensor | None:
        """(B, L) True = real token, or None when the task has no padding."""
        return None if self.pad_id is None else input_ids != self.pad_id

    def token_states(self, x: Tensor, mask: Tensor | None) -> Tensor:
        """Embedded tokens x (B, L, C) and their padding mask -> every token's final state (B, L, C) (what
        self-pretraining's token-level head reads, models/pretraining.py)."""
        x = self.drop(x)
        if mask is not None:
            x = x * mask.to(x.dtype)[..., None]  # padded positions start at zero
        for block in self.blocks:
            x = block(x, mask)
        if self.final_norm is not None:
            x = self.final_norm(x)
        return x

    def forward(self, input_ids: Tensor) -> Tensor:
        mask = self.padding(input_ids)  # (B, L) True = real token
        x = self.token_states(self.embed(input_ids), mask)  # (B, L, C)
        keep = torch.ones_like(input_ids, dtype=x.dtype) if mask is None else mask.to(x.dtype)  # (B, L)
        return (x * keep[..., None]).sum(1) / keep.sum(1, keepdim=True).clamp(min=1.0)  # (B, C)


class MegaClassifier(nn.Module):
    """Mega encoder + the official LRA head: Dense(classifier_dim) → Dropout → GELU → Dense(num_classes, no bias).
    ``interaction``: None for one sequence, "concat" or "nli" for LRA retrieval's two documents (B, 2, L)."""

    def __init__(self, encoder: MegaEncoder, classifier_dim: int, num_classes: int, dropout: float,
                 interaction: str | None) -> None:
        super().__init__()
        if classifier_dim <= 0:
            raise ConfigError(f"model.classifier_dim must be positive, got {classifier_dim}")
        if interaction not in (None, "concat", "nli"):
            raise ConfigError(f"task.interaction must be 'concat' or 'nli', got {interaction!r}")
        self.encoder, self.interaction = encoder, interaction
        width = encoder.dim * {None: 1, "concat": 2, "nli": 4}[interaction]
        self.hidden = nn.Linear(width, classifier_dim)
        self.drop = nn.Dropout(dropout)
        self.out = nn.Linear(classifier_dim, num_classes, bias=False)
        for linear in (self.hidden, self.out):
            nn.init.xavier_uniform_(linear.weight)
        nn.init.zeros_(self.hidden.bias)

    def forward(self, input_ids: Tensor) -> Tensor:
        if self.interaction is None:
            features = self.encoder(input_ids)  # (B, C)
        else:
            b = input_ids.shape[0]
            pooled = self.encoder(rearrange(input_ids, "b two l -> (two b) l"))  # (2B, C), shared encoder
            features = pair_features(pooled[:b], pooled[b:], self.interaction)
        return self.out(F.gelu(self.drop(self.hidden(features))))  # (B, num_classes)


def mega_classifier(attention: Callable[..., TokenMixer], vocab_size: int, max_len: int, pad_id: int | None,
                    num_classes: int, interaction: str | None, dim: Count, depth: Count, ffn_dim: NonNegativeInt,
                    classifier_dim: Count, dropout: DropRate, hidden_dropout: DropRate,
                    norm: Literal["layer", "scale", "batch"], prenorm: bool) -> MegaClassifier:
    """The ``model=mega`` classifier; the arguments after ``interaction`` are configs/model/mega.yaml's keys."""
    encoder = MegaEncoder(attention, vocab_size, max_len, pad_id, dim, depth, ffn_dim, dropout, hidden_dropout, norm,
                          prenorm)
    return MegaClassifier(encoder, classifier_dim, num_classes, dropout, interaction)


def mega_model(model_kwargs: dict[str, Any], attention: Callable[..., TokenMixer], task: Any) -> MegaClassifier:
    """``model=mega`` for ``task``: its keys checked against ``mega_classifier``, then the classifier built."""
    foreign = sorted(set(TRANSFORMER_ONLY) & set(model_kwargs))
    if foreign:
        raise ConfigError(f"model=mega has no {', '.join(foreign)} (Transformer-block sizes, set by this profile); "
                          "use profile=mega, or drop them on the command line, e.g. "
                          + " ".join(f"~model.{k}" for k in foreign))
    check_kwargs(mega_classifier, model_kwargs, "model (model=mega)", supplied=SUPPLIED, prefix="model")
    return mega_classifier(attention=attention, vocab_size=task.vocab_size, max_len=task.max_len, pad_id=task.pad_id,
                           num_classes=task.num_classes, interaction=task.interaction if task.dual else None,
                           **model_kwargs)
