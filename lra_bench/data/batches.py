"""Batches over in-memory token arrays: seeded shuffling for training, full ordered passes for eval."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch


def train_batches(
    inputs: np.ndarray, labels: np.ndarray, batch_size: int, seed: int, start_step: int = 0
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Endless (input_ids (B, L) long, labels (B,) long) batches; epoch e is shuffled with seed (seed, e).

    Full batches only (as LRA's ``drop_remainder``); ``start_step`` skips ahead deterministically.
    """
    n = len(labels)
    if n < batch_size:
        raise ValueError(f"the training split has {n} examples, fewer than trainer.batch_size={batch_size}")
    per_epoch = n // batch_size
    step = start_step
    while True:
        epoch, offset = divmod(step, per_epoch)
        order = np.random.default_rng([seed, epoch]).permutation(n)
        for b in range(offset, per_epoch):
            idx = np.sort(order[b * batch_size : (b + 1) * batch_size])  # sorted: faster gathers
            yield torch.from_numpy(inputs[idx].astype(np.int64)), torch.from_numpy(labels[idx])
            step += 1


def eval_batches(
    inputs: np.ndarray, labels: np.ndarray, batch_size: int
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Every example exactly once, in order, the last partial batch included."""
    for start in range(0, len(labels), batch_size):
        stop = start + batch_size
        yield torch.from_numpy(inputs[start:stop].astype(np.int64)), torch.from_numpy(labels[start:stop])
