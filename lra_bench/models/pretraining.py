"""The self-pretraining model: a classifier's own encoder, read per token, with a token-level head.

Self-pretraining (Amos, Berant & Gupta 2024, "Never Train from Scratch", https://arxiv.org/abs/2310.02980) trains
the encoder on the task's training inputs alone, by masked-token or next-token prediction, before it is fine-tuned
on the labels. ``Pretrainer`` holds a reference to the classifier's encoder (the same module: what pretraining
learns is what the fine-tune starts from) and two pretraining-only parts that the fine-tune never sees: the
``mask`` embedding (put in place of a masked token's embedding, before positions are added) and the token-level
``head`` (one linear map of each token's final state: logits over the vocabulary for ``loss: ce``, a grey value in
[0, 1] for ``loss: l1``). Both blocks (``models/encoder.py`` Encoder and ``models/ssm.py`` SSMEncoder) expose the
same three steps, ``padding``, ``embed`` and ``token_states``. Two-document inputs (retrieval) are read as 2B single
documents, so both documents are pretrained on.

Axes: B batch, L tokens, C model dim, V vocabulary.
"""

from __future__ import annotations

from typing import Literal

import torch
from einops import rearrange
from torch import Tensor, nn

from lra_bench.errors import ConfigError

Loss = Literal["ce", "l1"]


class Pretrainer(nn.Module):
    """Encoder + mask embedding + token-level head.

    Args:
        encoder: the classifier's encoder (Encoder or SSMEncoder; shared, not copied).
        dim: its width C.
        vocab_size: V, the task's vocabulary (the targets of ``loss: ce``).
        loss: "ce" (logits over V per token) or "l1" (one grey value per token, for pixel tasks).
        dual: inputs are (B, 2, L) document pairs (retrieval), read as 2B documents.
    """

    def __init__(self, encoder: nn.Module, dim: int, vocab_size: int, loss: Loss, dual: bool) -> None:
        super().__init__()
        if loss not in ("ce", "l1"):
            raise ConfigError(f"pretrain.loss must be 'ce' or 'l1', got {loss!r}")
        self.encoder, self.loss, self.dual, self.vocab_size = encoder, loss, dual, vocab_size
        self.mask = nn.Parameter(torch.zeros(dim))  # no random draw: the classifier's initialisation is unchanged
        self.head = nn.Linear(dim, vocab_size if loss == "ce" else 1)

    def single(self, x: Tensor) -> Tensor:
        """(B, 2, L) pairs -> (2B, L) documents for dual tasks; (B, L) unchanged."""
        return rearrange(x, "b two l -> (two b) l") if self.dual else x

    def forward(self, input_ids: Tensor, masked: Tensor | None = None) -> Tensor:
        """input_ids (B, L) or (B, 2, L); masked: bool of the same shape, True = replaced by the mask embedding, or
        None (next-token prediction). Returns (B', L, V) logits for ``ce`` or (B', L) grey values in [0, 1]-units
        for ``l1``, B' = B (2B for pairs)."""
        ids = self.single(input_ids)  # (B', L)
        x = self.encoder.embed(ids)  # (B', L, C)
        if masked is not None:
            x = torch.where(self.single(masked)[..., None], self.mask.to(x.dtype), x)  # (B', L, C)
        states = self.encoder.token_states(x, self.encoder.padding(ids))  # (B', L, C)
        out = self.head(states)  # (B', L, V) or (B', L, 1)
        return out if self.loss == "ce" else out[..., 0]
