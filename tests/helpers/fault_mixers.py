"""Mixers that break the run-time contract, for tests/test_fault_classes.py (each registers under its own name;
the tests that import this module in-process remove them from the registry afterwards)."""

from __future__ import annotations

import sys

import torch
from torch import Tensor

from lra_bench.attention.base import Attention


class ShapeBreaker(Attention):
    """No paper: a test double. Returns one position per sequence, (B, 1, C): it broadcasts through the residual sum,
    so the model trains without a shape error."""

    name = "test_shape_breaker"

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
        return v

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        return super().forward(x, mask)[:, :1]  # (B, 1, C)


class EvalNaN(Attention):
    """No paper: a test double. Softmax-free mixing that returns NaN in evaluation only (argmax of NaN logits is
    class 0: the run would score, not fail)."""

    name = "test_eval_nan"

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
        return v if self.training else torch.full_like(v, float("nan"))


class Exits(Attention):
    """No paper: a test double. Calls ``sys.exit(0)`` on its first evaluation batch (a library calling exit)."""

    name = "test_exits"

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
        if not self.training:
            sys.exit(0)
        return v


class Unbuildable(Attention):
    """No paper: a test double. Its constructor fails like torch's own argument checks do (a raw ValueError)."""

    name = "test_unbuildable"

    def __init__(self, dim: int, num_heads: int, seq_len: int, dropout: float, rate: float = 0.1) -> None:
        super().__init__(dim, num_heads, seq_len, dropout)
        self.drop = torch.nn.Dropout(rate)  # no declared range: torch's own ValueError for a rate outside [0, 1]

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
        return v


NAMES = ("test_shape_breaker", "test_eval_nan", "test_exits", "test_unbuildable")
