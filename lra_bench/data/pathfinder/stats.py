"""Image statistics that tell Pathfinder renderings apart (used to compare the generator with published samples).

Four numbers per set of 8-bit images, chosen because they separate the published generator's look from a
re-implementation's (issue 14):

* ``nonzero``: fraction of pixels that are not 0 (how much of the image the strokes and their halo cover);
* ``faint``: share of the non-zero pixels that are faint (1-16): the Lanczos ringing around every stroke;
* ``bright``: median over images of the number of pixels at >= 95 % of the image's maximum (the markers: a
  Lanczos-resized disc has about 3 such pixels);
* ``components``: median over images of the number of 8-connected components of pixels >= 40 (how the dashed
  contours hold together).
"""

from __future__ import annotations

import numpy as np

FAINT_MAX = 16  # faint = 1..FAINT_MAX
BRIGHT_SHARE = 0.95  # bright = at least this share of the image's maximum
STROKE_MIN = 40  # components are counted over pixels >= STROKE_MIN


def count_components(mask: np.ndarray) -> int:
    """Number of 8-connected components of a 2-D boolean mask (union-find over neighbouring pixels)."""
    h, w = mask.shape
    parent = np.arange(h * w)

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = int(parent[i])
        return i

    on = np.argwhere(mask)
    for y, x in on.tolist():
        for dy, dx in ((0, 1), (1, -1), (1, 0), (1, 1)):  # each neighbour pair once
            qy, qx = y + dy, x + dx
            if 0 <= qy < h and 0 <= qx < w and mask[qy, qx]:
                a, b = find(y * w + x), find(qy * w + qx)
                if a != b:
                    parent[max(a, b)] = min(a, b)
    return len({find(y * w + x) for y, x in on.tolist()})


def image_statistics(images: np.ndarray) -> dict[str, float]:
    """The four statistics of a stack of 8-bit grayscale images, shape (n, h, w)."""
    if images.ndim != 3 or images.dtype != np.uint8 or len(images) == 0:
        raise ValueError(f"image_statistics needs a non-empty (n, h, w) uint8 stack, got {images.dtype} "
                         f"{images.shape}")
    nonzero = images > 0
    faint = nonzero & (images <= FAINT_MAX)
    peak = images.reshape(len(images), -1).max(axis=1)  # (n,)
    bright = (images >= BRIGHT_SHARE * peak[:, None, None]).sum(axis=(1, 2))  # (n,)
    components = [count_components(im >= STROKE_MIN) for im in images]
    return {"nonzero": float(nonzero.mean()), "faint": float(faint.sum() / max(int(nonzero.sum()), 1)),
            "bright": float(np.median(bright)), "components": float(np.median(components))}
