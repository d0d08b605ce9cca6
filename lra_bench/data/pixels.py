"""Pool square grey images stored as flat pixel-token rows: the cheaper, shorter-sequence variants of the
image-like tasks used by the CPU profiles (``task.downsample``); LRA itself never pools."""

from __future__ import annotations

import numpy as np

from lra_bench.errors import ConfigError

POOL_MODES = ("mean", "max")


def pool_pixels(pixels: np.ndarray, side: int, k: int, mode: str) -> np.ndarray:
    """(n, side*side) uint8 -> (n, (side/k)^2) uint8 by k x k blocks.

    mode "mean": the block mean rounded half up (keeps the grey levels of natural images);
    mode "max": the block maximum (keeps one-pixel-wide strokes, e.g. Pathfinder's dashed paths, at full brightness).
    """
    if mode not in POOL_MODES:
        raise ConfigError(f"pixel pooling mode must be one of {POOL_MODES}, got {mode!r}")
    if k == 1:
        return pixels
    if side % k:
        raise ConfigError(f"cannot pool a {side}x{side} image by {k}: {k} does not divide {side}")
    out = side // k
    blocks = pixels.reshape(len(pixels), out, k, out, k)  # (n, out, k, out, k)
    if mode == "max":
        return blocks.max(axis=(2, 4)).astype(np.uint8).reshape(len(pixels), out * out)
    sums = blocks.sum(axis=(2, 4), dtype=np.uint32)  # (n, out, out)
    return ((sums + k * k // 2) // (k * k)).astype(np.uint8).reshape(len(pixels), out * out)
