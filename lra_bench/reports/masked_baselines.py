"""What a masked-token pretraining scores without learning anything from its context: the baselines that its
final validation loss and metric (``record["pretraining"]``) are read against.

The masked positions are the pretraining's own fixed validation masks (``lra_bench.train.pretrain.mask_positions``
at ``VAL_STEP``), so a baseline and the record score the same positions of the same sequences.

* Tokens (``loss: ce``): the cross-entropy of the masked tokens under the training tokens' unigram distribution
  (nats), the entropy of that distribution, and the accuracy of always guessing the most frequent training token.
* Grey levels (``loss: l1``): the mean absolute error, in grey levels, of three guesses that need no training: the
  median of all training pixels (no context), the mean of the image's own visible pixels, and the mean of the visible
  pixels among a masked pixel's four neighbours (the image's visible mean where none is visible).
"""

from __future__ import annotations

import numpy as np

from lra_bench.errors import ConfigError


def token_baselines(train: np.ndarray, val: np.ndarray, masks: np.ndarray, pad_id: int | None) -> dict[str, float]:
    """Unigram cross-entropy of ``val``'s masked tokens and majority accuracy there, and the unigram entropy, from
    ``train``'s real tokens. ``val`` and ``masks``: (N, L) ids and bool. A masked token never seen in training makes
    the cross-entropy infinite: the unigram guess gives it no probability."""
    real = train[train != pad_id] if pad_id is not None else train.ravel()
    counts = np.bincount(real.ravel()).astype(np.float64)
    p = counts / counts.sum()  # (V',) the training tokens' unigram distribution
    seen = p[p > 0]
    targets = val[masks if pad_id is None else masks & (val != pad_id)]  # (n,) the masked real tokens
    if not len(targets):
        raise ConfigError("no masked token in the validation inputs: raise pretrain.mask_rate")
    q = np.zeros(max(len(p), int(targets.max()) + 1))
    q[:len(p)] = p
    with np.errstate(divide="ignore"):
        cross_entropy = float(-np.log(q[targets]).mean())
    return {"unigram_entropy": float(-(seen * np.log(seen)).sum()), "unigram_cross_entropy": cross_entropy,
            "majority_acc": float((targets == int(p.argmax())).mean())}


def grey_baselines(train: np.ndarray, val: np.ndarray, masks: np.ndarray) -> dict[str, float]:
    """Mean absolute error (grey levels 0-255) over ``val``'s masked pixels of the training median, the image's
    visible mean and the visible four-neighbour mean. ``train``, ``val``: (N, side * side) grey levels, row-major
    images; ``masks``: ``val``'s shape, True where masked."""
    n, length = val.shape
    side = int(round(length ** 0.5))
    if side * side != length:
        raise ConfigError(f"grey baselines need square images: {length} pixels is not a square")
    if not masks.any():
        raise ConfigError("no masked pixel in the validation inputs: raise pretrain.mask_rate")
    x = val.astype(np.float64)  # (N, L)
    seen = ~masks  # (N, L)
    median = float(np.median(train))
    counts = seen.sum(1, keepdims=True)  # (N, 1)
    image_mean = np.where(counts > 0, (x * seen).sum(1, keepdims=True) / np.maximum(counts, 1), median)  # (N, 1)
    grid, known = x.reshape(n, side, side), seen.reshape(n, side, side)  # (N, side, side)
    total, number = np.zeros_like(grid), np.zeros_like(grid)
    for axis, shift in ((1, 1), (1, -1), (2, 1), (2, -1)):  # the neighbour above, below, left, right
        value, there = np.roll(grid * known, shift, axis), np.roll(known, shift, axis)
        edge = [slice(None)] * 3
        edge[axis] = 0 if shift == 1 else -1  # np.roll wraps around: no neighbour across the border
        value[tuple(edge)], there[tuple(edge)] = 0.0, False
        total, number = total + value, number + there
    neighbours = np.where(number > 0, total / np.maximum(number, 1), image_mean[:, :, None])  # (N, side, side)
    target = x[masks]  # (n,)
    return {"median_mae": float(np.abs(target - median).mean()),
            "image_mean_mae": float(np.abs(target - np.broadcast_to(image_mean, x.shape)[masks]).mean()),
            "neighbour_mae": float(np.abs(target - neighbours.reshape(n, length)[masks]).mean())}
