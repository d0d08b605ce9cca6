"""Pathfinder drawing primitives, rendered the way the published generator renders them.

The published ``snakes.draw_line_n_mask`` and ``snakes2.draw_circle`` (github.com/drewlinsley/pathfinder) draw at
``antialias_scale`` times the resolution and shrink with a Lanczos filter; this module does the same with Pillow
(whose ``LANCZOS`` resize is the filter ``scipy.misc.imresize(..., interp='lanczos')`` called). That is where
the published images' look comes from:

* a paddle is a ``round(thickness * aa)``-pixel PIL line on a ``(2h*aa + 1)``-pixel square (``h = length +
  ceil(thickness) + margin``) shrunk to ``2h + 1`` pixels (a factor of about 1.9, not exactly ``aa``): thin
  strokes peak at 0.43-0.58 of full scale, and the Lanczos side lobes leave a faint halo of 1-16 grey levels
  around every stroke (negative lobes are clipped to 0 by the 8-bit resize);
* a paddle's occupancy mask is the same line dilated by a disc of radius ``margin * aa`` and shrunk the same
  way (values in [0, 1]; pixels at exactly 1 are its core);
* a marker is a disc of radius ``marker_radius * aa`` centred on ``aa * (y, x)`` of a full ``aa``-scale canvas,
  shrunk to the image size: a soft disc about 3 pixels across whose brightest 2-4 pixels reach full scale.
"""

from __future__ import annotations

import math

import numpy as np
from PIL import Image, ImageDraw

from lra_bench.errors import ConfigError


def ceil_coord(v: float) -> int:
    """The published ``translate_coord`` rounding: up, with a guard against float noise (4.0000000001 -> 4)."""
    return int(math.ceil(v - 1e-9))


def stamp_half(length: int, thickness: float, margin: int) -> int:
    """Half width of the published paddle window: ``length + ceil(thickness) + margin``."""
    return length + int(math.ceil(thickness)) + margin


def _shrink(blown: np.ndarray, size: int) -> np.ndarray:
    """8-bit Lanczos resize of a square uint8 array to ``size`` x ``size``, as float in [0, 1]."""
    small = Image.fromarray(blown).resize((size, size), Image.Resampling.LANCZOS)
    return np.asarray(small, dtype=np.float32) / 255.0


def _dilate_disc(image: np.ndarray, radius: int) -> np.ndarray:
    """Grey dilation of a 2-D array by a disc of ``radius`` pixels (``x^2 + y^2 <= r^2``, the published kernel)."""
    if radius <= 0:
        return image.copy()
    h, w = image.shape
    padded = np.zeros((h + 2 * radius, w + 2 * radius), image.dtype)
    padded[radius : radius + h, radius : radius + w] = image
    out = image.copy()
    for dy in range(-radius, radius + 1):
        for dx in range(-radius, radius + 1):
            if dy * dy + dx * dx <= radius * radius:
                np.maximum(out, padded[radius + dy : radius + dy + h, radius + dx : radius + dx + w], out=out)
    return out


def paddle_window(angle: float, length: int, thickness: float, margin: int, aa: int) -> tuple[np.ndarray, np.ndarray]:
    """(image, mask) of one paddle drawn from the window's centre pixel along ``angle`` (y = sin, x = cos).

    Both are float32 arrays of shape (2h + 1, 2h + 1), ``h = stamp_half(...)``; the image is the paddle at
    contrast 1 (multiply by the paddle's contrast), the mask its margin-dilated footprint.
    """
    blown_width = thickness * aa
    if abs(round(blown_width) - blown_width) > 1e-9:
        raise ConfigError(f"pathfinder generator: paddle_thickness * antialias_scale must be a whole number of "
                          f"pixels (the published draw_line_n_mask requires it), got {thickness} * {aa}")
    half = stamp_half(length, thickness, margin)
    size, centre = 2 * half * aa + 1, half * aa
    head_y = ceil_coord(centre + length * aa * math.sin(angle))
    head_x = ceil_coord(centre + length * aa * math.cos(angle))
    canvas = Image.new("L", (size, size), 0)
    ImageDraw.Draw(canvas).line([(centre, centre), (head_x, head_y)], fill=255, width=int(round(blown_width)))
    blown = np.asarray(canvas)  # (size, size) uint8, 0 or 255
    return _shrink(blown, 2 * half + 1), _shrink(_dilate_disc(blown, margin * aa), 2 * half + 1)


def marker_image(n: int, centre: tuple[int, int], radius: float, aa: int) -> np.ndarray:
    """(n, n) float32 in [0, 1]: the published ``draw_circle`` marker at pixel ``centre`` (y, x)."""
    y = np.arange(n * aa)[:, None] - centre[0] * aa  # (n*aa, 1) offsets from the centre, blown pixels
    x = np.arange(n * aa)[None, :] - centre[1] * aa  # (1, n*aa)
    disc = ((x**2 + y**2) <= (radius * aa) ** 2).astype(np.uint8) * 255  # (n*aa, n*aa)
    return _shrink(disc, n)


def bytescale(image: np.ndarray) -> np.ndarray:
    """Float image -> uint8 with its minimum at 0 and maximum at 255 (``scipy.misc.imsave`` of a float array)."""
    lo, hi = float(image.min()), float(image.max())
    scale = 255.0 / (hi - lo) if hi > lo else 1.0
    return np.clip((image - lo) * scale + 0.5, 0, 255).astype(np.uint8)
