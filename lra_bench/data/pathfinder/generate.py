"""Pathfinder generator: the project's own re-implementation of the published procedure, seeded and fast.

The published generator is ``snakes2.py`` of github.com/drewlinsley/pathfinder (Linsley et al. 2018,
"Learning long-range spatial dependencies with horizontal gated recurrent units"; Kim et al. 2020). LRA
(Tay et al. 2020, ``lra_benchmarks/data/pathfinder.py``; shared/reference/LRA.md §1.4) ran it with the
settings in ``RESOLUTION_PRESETS``. This module follows the same procedure, written anew:

* a *snake* is a chain of short straight *paddles* (``paddle_length`` long, ``paddle_thickness`` thick) with a
  gap of about ``2 * margin`` between paddles. Each new paddle ends on a circle of radius ``length + margin``
  around the next pivot; candidate end points are weighted by ``cos(min(turn * continuity, pi/2))**2``
  (``continuity`` bounds and smooths the change of direction) times ``1 - occupancy`` (the occupancy map
  dilated by ``margin``), and a paddle is accepted only when its margin-dilated footprint does not overlap
  earlier paddles (``max(occupancy + footprint) < 1.8``, up to ``max_paddle_retrial + 1`` samples);
* two *target* snakes of ``contour_length`` paddles start ``seed_distance`` apart, the first one at least
  ``2 * seed_distance`` from the border, and grow in alternation; a failure restarts both;
* ``num_distractor_snakes`` distractor snakes of ``distractor_length`` paddles are then added where there is
  room (each retried up to ``max_distractor_contour_retrial + 1`` times, skipped when it never fits, and no
  more once less than 1 % of the image is free);
* two disc markers of ``marker_radius``: one on the start of a target snake, the other on the end of the
  same snake (label 1, "connected") or of the other target snake (label 0);
* rendering as published (``pathfinder_render``): each paddle is a PIL line drawn at ``antialias_scale`` times
  the resolution in a small window and shrunk with Pillow's Lanczos filter (which leaves the faint halo of
  1-16 grey levels around every stroke), its occupancy mask the same line dilated by ``margin * aa`` and
  shrunk alike, each marker a disc on a full ``aa``-scale canvas shrunk alike; target paddles have intensity
  ``paddle_contrast * snake_contrast``, distractors ``snake_contrast``, markers 1, composed with ``max``; the
  image is rescaled to 0-255 (``scipy.misc.imsave``), so a bright distractor (up to 1.2) can outshine a marker.

Output = the LRA release layout, so one reader reads both: ``<root>/<difficulty>/imgs/<batch>/sample_<i>.png``
(8-bit grayscale) and ``<root>/<difficulty>/metadata/<batch>.npy``, a text file (despite the name) with one
line per image: ``imgs/<batch> sample_<i>.png <i> <label> <continuity> <contour_length> <distractor_length>
<paddle_length> <paddle_thickness> <paddle_margin> <number of paddle contrasts>``.

Differences from the published code (none changes what the task asks):
* seeded (``numpy.random.default_rng([seed, batch])`` per batch; any worker count gives the same files);
* labels are exactly balanced within a batch (a shuffled half/half list) instead of a coin flip per image;
* every paddle shape (image, mask) is rendered once per orientation and cached (published: per paddle);
* at 32 pixels each distractor snake is attempted only with probability ``distractor_keep``
  (``DISTRACTOR_KEEP_32``: 3/10, 2/6, 1/5 by difficulty), because the official 32-pixel sample shows about
  3, 2 and 1 distractor snakes per image where the published code would place nearly all 10, 6 and 5; other
  resolutions keep them all (``distractor_keep=1``);
* the two target snakes never touch: each new paddle is also checked against the other snake's newest
  paddle, and the second seed against the first (published: the newest paddles are not yet in the occupancy
  map, so the two targets can touch, which makes a negative image look connected); and the end paddles of
  *both* target snakes block distractors (published: only the second snake's);
* the target-pair retry loop is bounded (``max_target_retrial``; published: unbounded);
* the published seed test dilates by a kernel offset by one pixel (``struct_head = L + margin + 1``); here
  the paddle's own footprint is used.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import multiprocessing
import os
import shutil
import tempfile
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any

import numpy as np

from lra_bench.checks import Count, NonNegativeInt, PositiveFloat, Probability, Range, check_fields
from lra_bench.data.pathfinder.render import bytescale, ceil_coord, marker_image, paddle_window, stamp_half
from lra_bench.errors import ConfigError
from lra_bench.infra.children import pool_worker_init, spawning, start_pool_services
from lra_bench.infra.progress import tracked

log = logging.getLogger(__name__)

#: difficulty folder -> contour length (the published wrapper: baseline 6, then 9 and 14 paddles)
DIFFICULTIES: dict[str, int] = {"curv_baseline": 6, "curv_contour_length_9": 9, "curv_contour_length_14": 14}

#: LRA's customised arguments per resolution (LRA.md §1.4); the rest are the published defaults
#: (paddle_length 5, padding 22, seed_distance 27, paddle_contrast_list [1.0]). ``distractor_budget`` is the
#: numerator of ``num_distractor_snakes = budget // distractor_length``.
RESOLUTION_PRESETS: dict[int, dict[str, Any]] = {
    32: dict(padding=1, antialias_scale=2, paddle_margin_list=(1,), seed_distance=7, marker_radius=1.5,
             paddle_length=2, paddle_thickness=0.5, continuity=1.0, snake_contrast_list=(2.0,),
             paddle_contrast_list=(0.75,), distractor_budget=20),
    64: dict(padding=1, antialias_scale=2, paddle_margin_list=(1,), seed_distance=12, marker_radius=2.5,
             paddle_length=5, paddle_thickness=1, continuity=1.8, snake_contrast_list=(0.8,),
             paddle_contrast_list=(1.0,), distractor_budget=22),
    128: dict(padding=1, antialias_scale=2, paddle_margin_list=(2, 3), seed_distance=20, marker_radius=3,
              paddle_length=5, paddle_thickness=1.5, continuity=1.8, snake_contrast_list=(0.9,),
              paddle_contrast_list=(1.0,), distractor_budget=35),
    256: dict(padding=22, antialias_scale=2, paddle_margin_list=(3,), seed_distance=27, marker_radius=5,
              paddle_length=5, paddle_thickness=2, continuity=1.8, snake_contrast_list=(1.0,),
              paddle_contrast_list=(1.0,), distractor_budget=30),
}

#: Share of the distractor snakes that the official 32-pixel sample shows (shared/data/pathfinder32, 400 images
#: per difficulty). The published code places nearly all ``num_distractor_snakes`` (so does this module with
#: ``distractor_keep=1``), but the sample's stroke-pixel counts match about 3, 2 and 1 distractor snakes per
#: image (= 20 // contour_length), spread as widely as a binomial draw, so each distractor is kept with this
#: probability. Measured, not derived: the cause in the run that produced the sample is not known.
DISTRACTOR_KEEP_32: dict[str, float] = {"curv_baseline": 3 / 10, "curv_contour_length_9": 2 / 6,
                                        "curv_contour_length_14": 1 / 5}

GENERATOR_VERSION = 3  # bump when the output of a spec changes, so cached data is regenerated


@dataclass(frozen=True)
class PathfinderSpec:
    """Every argument of the generator (names as in the published ``snakes2_wrapper.Args``)."""

    window_size: Count = 32
    padding: NonNegativeInt = 1
    antialias_scale: Count = 2
    seed_distance: Count = 7
    marker_radius: PositiveFloat = 1.5
    contour_length: Annotated[int, Range(2, why="the markers sit on both ends")] = 14
    distractor_length: Count = 4
    num_distractor_snakes: NonNegativeInt = 5
    snake_contrast_list: tuple[PositiveFloat, ...] = (2.0,)
    paddle_contrast_list: tuple[PositiveFloat, ...] = (0.75,)
    continuity: PositiveFloat = 1.0
    paddle_length: Count = 2
    paddle_thickness: PositiveFloat = 0.5
    paddle_margin_list: tuple[NonNegativeInt, ...] = (1,)
    max_paddle_retrial: NonNegativeInt = 2
    max_distractor_contour_retrial: NonNegativeInt = 4
    distractor_keep: Probability = 1.0  # probability that each distractor snake is attempted (1 = the published code)
    max_target_retrial: Count = 100_000  # attempts at the two target snakes (mean ~500 for 128 px, contour 14)
    difficulty: str = "curv_contour_length_14"

    def __post_init__(self) -> None:
        check_fields(self, "task.generator")  # types, finiteness, the declared ranges
        for key in ("window_size", "antialias_scale", "seed_distance", "paddle_length", "distractor_length"):
            if getattr(self, key) <= 0:
                raise ConfigError(f"pathfinder generator: {key} must be > 0, got {getattr(self, key)}")
        if self.contour_length < 2:
            raise ConfigError(f"pathfinder generator: contour_length must be >= 2 (the markers sit on both ends), "
                              f"got {self.contour_length}")
        for key in ("padding", "num_distractor_snakes", "max_paddle_retrial", "max_distractor_contour_retrial"):
            if getattr(self, key) < 0:
                raise ConfigError(f"pathfinder generator: {key} must be >= 0, got {getattr(self, key)}")
        if self.max_target_retrial <= 0:
            raise ConfigError(f"pathfinder generator: max_target_retrial must be > 0, got {self.max_target_retrial}")
        if self.marker_radius <= 0 or self.paddle_thickness <= 0 or self.continuity <= 0:
            raise ConfigError("pathfinder generator: marker_radius, paddle_thickness and continuity must be > 0")
        if not self.paddle_margin_list or min(self.paddle_margin_list) < 0:
            raise ConfigError(f"pathfinder generator: paddle_margin_list must be non-negative ints, "
                              f"got {self.paddle_margin_list}")
        blown = self.paddle_thickness * self.antialias_scale  # the published draw_line_n_mask requires whole pixels
        if abs(round(blown) - blown) > 1e-9:
            raise ConfigError(f"pathfinder generator: paddle_thickness * antialias_scale must be a whole number of "
                              f"pixels, got {self.paddle_thickness} * {self.antialias_scale}")
        if not 0.0 <= self.distractor_keep <= 1.0:
            raise ConfigError(f"pathfinder generator: distractor_keep must be in [0, 1], got {self.distractor_keep}")
        if not self.snake_contrast_list or not self.paddle_contrast_list:
            raise ConfigError("pathfinder generator: contrast lists must not be empty")
        if 4 * self.seed_distance >= self.window_size:
            raise ConfigError(f"pathfinder generator: seed_distance={self.seed_distance} leaves no room for the "
                              f"first snake in a {self.window_size}-pixel window (needs 4*seed_distance < size)")

    def metadata_fields(self, margin: int) -> list[Any]:
        """Fields 4-10 of a metadata line, as the published ``accumulate_meta`` writes them."""
        return [self.continuity, self.contour_length, self.distractor_length, self.paddle_length,
                self.paddle_thickness, margin, len(self.paddle_contrast_list)]


def spec_for(resolution: int, difficulty: str = "curv_contour_length_14", **overrides: Any) -> PathfinderSpec:
    """LRA's settings for a resolution (32, 64, 128 = Path-X, 256) and difficulty, with optional overrides."""
    if resolution not in RESOLUTION_PRESETS:
        raise ConfigError(f"no Pathfinder generator settings for resolution {resolution}; "
                          f"choose one of {sorted(RESOLUTION_PRESETS)}")
    if difficulty not in DIFFICULTIES:
        raise ConfigError(f"unknown Pathfinder difficulty {difficulty!r}; choose one of {list(DIFFICULTIES)}")
    preset = dict(RESOLUTION_PRESETS[resolution])
    budget = preset.pop("distractor_budget")
    contour_length = int(overrides.pop("contour_length", DIFFICULTIES[difficulty]))
    distractor_length = int(overrides.pop("distractor_length", contour_length // 3))
    values = dict(preset, window_size=resolution, contour_length=contour_length,
                  distractor_length=distractor_length,
                  num_distractor_snakes=budget // max(distractor_length, 1), difficulty=difficulty,
                  distractor_keep=DISTRACTOR_KEEP_32[difficulty] if resolution == 32 else 1.0)
    fixed = {"window_size": "task.resolution", "difficulty": "task.difficulty"}
    for key in set(overrides) & set(fixed):
        raise ConfigError(f"the generator option {key!r} is set by {fixed[key]}, not by task.generator")
    unknown = set(overrides) - {f.name for f in dataclasses.fields(PathfinderSpec)}
    if unknown:
        raise ConfigError(f"unknown Pathfinder generator option(s) {sorted(unknown)}; valid: "
                          f"{[f.name for f in dataclasses.fields(PathfinderSpec)]}")
    values.update(overrides)
    for key in ("snake_contrast_list", "paddle_contrast_list", "paddle_margin_list"):
        values[key] = tuple(values[key])
    return PathfinderSpec(**values)


# ----------------------------------------------------------------------------------------------------------
# Geometry: paddle and marker stamps, computed once per shape.
# Integer pixel (y, x) has its centre at (y, x); sub-pixel j of aa has its centre at y - 0.5 + (j + 0.5) / aa.


def _translate(p: tuple[int, int], angle: float, dist: float) -> tuple[int, int]:
    """The published ``translate_coord``: move by dist along angle (y = sin, x = cos), round up."""
    return ceil_coord(p[0] + dist * math.sin(angle)), ceil_coord(p[1] + dist * math.cos(angle))


@dataclass(frozen=True)
class Stamp:
    """A paddle drawn relative to an anchor pixel: appearance and occupancy on a (2R+1)^2 window."""

    image: np.ndarray  # (2R+1, 2R+1) float32 in [0, 1]: the Lanczos-rendered paddle at contrast 1
    mask: np.ndarray  # (2R+1, 2R+1) float32 in [0, 1]: the Lanczos-rendered, margin-dilated paddle
    core: np.ndarray  # (k, 2) int offsets from the anchor where mask == 1 (the seed test)
    segment: tuple[tuple[float, float], tuple[float, float]]  # (start, end) relative to the anchor, in the
    # direction the snake grows

    @property
    def radius(self) -> int:
        return self.image.shape[0] // 2


def _make_stamp(start: tuple[int, int], angle: float, segment: tuple[tuple[float, float], tuple[float, float]],
                length: int, thickness: float, margin: int, aa: int, radius: int) -> Stamp:
    """The published paddle window (drawn from ``start`` along ``angle``), placed in a (2R+1)^2 window."""
    image, mask = paddle_window(angle, length, thickness, margin, aa)
    half = image.shape[0] // 2
    y0, x0 = radius + start[0] - half, radius + start[1] - half
    if min(y0, x0) < 0 or max(y0, x0) + 2 * half >= 2 * radius + 1:
        raise AssertionError(f"stamp radius {radius} too small for a paddle window at {start}")  # a layout bug
    window = 2 * radius + 1
    full_image = np.zeros((window, window), np.float32)
    full_mask = np.zeros((window, window), np.float32)
    full_image[y0 : y0 + 2 * half + 1, x0 : x0 + 2 * half + 1] = image
    full_mask[y0 : y0 + 2 * half + 1, x0 : x0 + 2 * half + 1] = mask
    core = np.argwhere(full_mask >= 0.999) - radius
    return Stamp(full_image, full_mask, core, segment)


class _Layout:
    """Everything about one (geometry, margin) that does not change between images, computed once.

    Canvases are padded by ``pad`` zero pixels on every side so that stamps never need clipping;
    ``width`` is the padded width and flat offsets index the padded, flattened canvas.
    """

    def __init__(self, n: int, length: int, thickness: float, margin: int, aa: int, marker_radius: float) -> None:
        self.n, self.length, self.thickness, self.margin, self.aa = n, length, thickness, margin, aa
        self.marker_radius = marker_radius
        step = length + margin
        half = stamp_half(length, thickness, margin)
        self.seed_radius = half  # a seed's window is centred on its tail, the anchor
        ext_radius = step + half  # a later paddle's window is centred on its head, <= step from the pivot
        self.pad = max(self.seed_radius, ext_radius) + 1
        self.width = n + 2 * self.pad

        # candidate heads around a pivot: one per pixel of arc (the published get_coords_cmf)
        deg_per_pixel = 360.0 / (2 * step * math.pi)
        angles = np.deg2rad(np.arange(0.0, 360.0, deg_per_pixel))
        circle = np.stack([step * np.sin(angles), step * np.cos(angles)], 1)
        self.offsets = np.unique(np.floor(circle).astype(int), axis=0)  # (k, 2)
        self.angles = np.arctan2(self.offsets[:, 0], self.offsets[:, 1])  # (k,)
        self.stamps = []
        for (hy, hx), o in zip(self.offsets.tolist(), self.angles.tolist(), strict=True):
            tail = (hy - length * math.sin(o), hx - length * math.cos(o))  # drawn from the head back by length
            self.stamps.append(_make_stamp((hy, hx), o + math.pi, (tail, (float(hy), float(hx))), length, thickness,
                                           margin, aa, ext_radius))
        self.ext_radius = ext_radius
        self.heads = self.offsets.tolist()

        # occupancy dilated by a disk of radius margin, read at every head: flat offsets (k, d)
        r = np.arange(-margin, margin + 1)
        yy, xx = np.meshgrid(r, r, indexing="ij")
        keep = yy**2 + xx**2 <= margin**2
        disk = np.stack([yy[keep], xx[keep]], 1)
        pts = self.offsets[:, None, :] + disk[None]
        self.disk_flat = pts[..., 0] * self.width + pts[..., 1]  # (k, d)

        # which heads are inside the image, for every pivot within ``pad`` of it: (n + 2p, n + 2p, k)
        p = np.arange(-self.pad, n + self.pad)
        hy = p[:, None] + self.offsets[None, :, 0]  # (n + 2p, k)
        hx = p[:, None] + self.offsets[None, :, 1]
        oky, okx = (hy >= 0) & (hy < n), (hx >= 0) & (hx < n)
        self.inside = (oky[:, None, :] & okx[None, :, :]).astype(np.float64)

        # continuity weights cos(min(turn * continuity, pi/2))^2 from a previous candidate or a seed angle
        self._turn_cache: dict[tuple[float, float], np.ndarray] = {}
        self._seed_stamps: dict[int, Stamp] = {}
        self._free_first: dict[tuple[int, int, int], np.ndarray] = {}

    def turn_weights(self, angle: float, continuity: float) -> np.ndarray:
        key = (round(angle, 9), continuity)
        w = self._turn_cache.get(key)
        if w is None:
            turn = np.abs(self.angles - angle)
            turn = np.minimum(turn, 2 * np.pi - turn)
            w = np.maximum(np.cos(np.minimum(turn * continuity, 0.5 * np.pi)), 0.0) ** 2
            self._turn_cache[key] = w
        return w

    def seed_stamp(self, degrees: int) -> Stamp:
        s = self._seed_stamps.get(degrees)
        if s is None:
            a = math.radians(degrees)
            end = (self.length * math.sin(a), self.length * math.cos(a))
            s = _make_stamp((0, 0), a, ((0.0, 0.0), end), self.length, self.thickness, self.margin, self.aa,
                            self.seed_radius)
            self._seed_stamps[degrees] = s
        return s


@lru_cache(maxsize=64)
def _layout(n: int, length: int, thickness: float, margin: int, aa: int, marker_radius: float) -> _Layout:
    return _Layout(n, length, thickness, margin, aa, marker_radius)


def _available(blocked: np.ndarray, core: np.ndarray) -> np.ndarray:
    """(k, 2) tails whose paddle footprint core avoids every blocked pixel and stays inside."""
    n = blocked.shape[0]
    r = int(np.abs(core).max(initial=0))
    padded = np.ones((n + 2 * r, n + 2 * r), bool)
    padded[r : r + n, r : r + n] = blocked
    hit = blocked.copy()
    for dy, dx in core.tolist():
        hit |= padded[r + dy : r + dy + n, r + dx : r + dx + n]
    return np.argwhere(~hit)


# ----------------------------------------------------------------------------------------------------------
# The drawing procedure.


@dataclass
class Paddle:
    anchor: tuple[int, int]  # pixel the stamp is centred on (seed: the tail; later paddles: the pivot)
    stamp: Stamp
    contrast: float

    def segment(self) -> tuple[tuple[float, float], tuple[float, float]]:
        """(start, end) in image coordinates: from the snake's origin side to its terminal side."""
        (a, b), (y, x) = self.stamp.segment, self.anchor
        return (a[0] + y, a[1] + x), (b[0] + y, b[1] + x)


@dataclass
class Snake:
    paddles: list[Paddle]
    pivot: tuple[int, int]
    angle: float
    origin: tuple[int, int]  # the seed paddle's tail: one end of the snake
    terminal: tuple[int, int]  # the last paddle's head: the other end


def _overlap(a: Paddle, b: Paddle) -> bool:
    """Whether two paddles' margin footprints overlap (the same ``>= 1.8`` test as against the occupancy map)."""
    ra, rb = a.stamp.radius, b.stamp.radius
    dy, dx = b.anchor[0] - a.anchor[0], b.anchor[1] - a.anchor[1]
    if abs(dy) > ra + rb or abs(dx) > ra + rb:
        return False
    # the overlap of a's window [-ra, ra] with b's window [dy - rb, dy + rb], in a's coordinates
    y0, y1 = max(-ra, dy - rb), min(ra, dy + rb)
    x0, x1 = max(-ra, dx - rb), min(ra, dx + rb)
    if y0 > y1 or x0 > x1:
        return False
    pa = a.stamp.mask[y0 + ra : y1 + ra + 1, x0 + ra : x1 + ra + 1]
    pb = b.stamp.mask[y0 - dy + rb : y1 - dy + rb + 1, x0 - dx + rb : x1 - dx + rb + 1]
    return float((pa + pb).max()) >= 1.8


class _Canvas:
    """Occupancy map (padded) of one image under construction, and the drawing steps on it."""

    def __init__(self, spec: PathfinderSpec, lay: _Layout, rng: np.random.Generator) -> None:
        self.spec, self.lay, self.rng = spec, lay, rng
        n, p = lay.n, lay.pad
        self.full = np.zeros((lay.width, lay.width), np.float32)
        self.flat = self.full.reshape(-1)
        self.mask = self.full[p : p + n, p : p + n]  # view: the image area
        if spec.padding > 0:
            q = spec.padding
            self.mask[:q, :] = 1
            self.mask[-q:, :] = 1
            self.mask[:, :q] = 1
            self.mask[:, -q:] = 1

    def _view(self, anchor: tuple[int, int], radius: int) -> np.ndarray:
        y, x = anchor[0] + self.lay.pad - radius, anchor[1] + self.lay.pad - radius
        return self.full[y : y + 2 * radius + 1, x : x + 2 * radius + 1]

    def add_mask(self, paddle: Paddle) -> None:
        view = self._view(paddle.anchor, paddle.stamp.radius)
        np.maximum(view, paddle.stamp.mask, out=view)

    def in_bounds(self, p: tuple[int, int]) -> bool:
        n = self.lay.n
        return 0 <= p[0] < n and 0 <= p[1] < n

    # seeds ----------------------------------------------------------------------------------------------
    def seed(self, band: int) -> tuple[Paddle, tuple[int, int], float] | None:
        """A first paddle on a free spot (the published ``seed_snake``); None when there is no room.

        ``band`` pixels along the border are excluded (1 for distractors, 2 * seed_distance for the first
        target snake, whose free spots on the empty canvas are cached per orientation).
        """
        s, lay, rng = self.spec, self.lay, self.rng
        for _ in range(s.max_paddle_retrial + 1):
            degrees = int(rng.integers(-180, 180))
            angle = math.radians(degrees)
            stamp = lay.seed_stamp(degrees)
            key = (band, degrees, s.padding)
            free = lay._free_first.get(key) if band > 1 else None
            if free is None:
                blocked = self.mask > 0.3
                blocked[:band, :] = True
                blocked[-band:, :] = True
                blocked[:, :band] = True
                blocked[:, -band:] = True
                free = _available(blocked, stamp.core)
                if band > 1:  # the first target seed: the canvas is still empty
                    lay._free_first[key] = free
            if len(free) == 0:
                return None
            ty, tx = free[int(rng.integers(len(free)))].tolist()
            head = _translate((ty, tx), angle, s.paddle_length)
            pivot = _translate(head, angle + math.pi, s.paddle_length + lay.margin)
            if self.in_bounds(head) and self.in_bounds(pivot):
                return Paddle((ty, tx), stamp, 1.0), pivot, angle
        return None

    def seed_near(self, first: Paddle) -> tuple[Paddle, tuple[int, int], float] | None:
        """The second target seed: ``seed_distance`` from the first one, in a random direction, not touching it."""
        s, lay, rng = self.spec, self.lay, self.rng
        origin = first.anchor
        for _ in range(s.max_paddle_retrial + 1):
            degrees = int(rng.integers(-180, 180))
            angle = math.radians(degrees)
            phi = math.radians(int(rng.integers(0, 360)))
            dist = s.seed_distance
            tail = (round(origin[0] + dist * math.sin(phi)), round(origin[1] + dist * math.cos(phi)))  # half to even
            head = _translate(tail, angle, s.paddle_length)
            pivot = _translate(head, angle + math.pi, s.paddle_length + lay.margin)
            if self.in_bounds(head) and self.in_bounds(pivot):
                paddle = Paddle(tail, lay.seed_stamp(degrees), 1.0)
                if not _overlap(paddle, first):
                    return paddle, pivot, angle
        return None

    # extension ------------------------------------------------------------------------------------------
    def extend(self, snake: Snake, contrast: float, others: tuple[Snake, ...] = ()) -> bool:
        """Add one paddle to ``snake`` (the published ``extend_snake``); False at a dead end.

        The snake's newest paddle joins the occupancy map only when the next one is placed, so that
        consecutive paddles never block each other; the newest paddles of ``others`` (the other target
        snake, growing in alternation) are checked separately.
        """
        s, lay, rng = self.spec, self.lay, self.rng
        py, px = _translate(snake.pivot, snake.angle, s.paddle_length + 2 * lay.margin)
        p = lay.pad
        if not (-p <= py < lay.n + p and -p <= px < lay.n + p):
            return False
        base = (py + p) * lay.width + px + p
        free = 1.0 - self.flat[lay.disk_flat + base].max(1)
        weight = free * lay.inside[py + p, px + p] * lay.turn_weights(snake.angle, s.continuity)
        cmf = np.cumsum(weight)
        total = float(cmf[-1])
        if total < 1e-4:
            return False
        window = self._view((py, px), lay.ext_radius)
        for _ in range(s.max_paddle_retrial + 1):
            k = min(int(np.searchsorted(cmf, rng.random() * total, side="right")), len(cmf) - 1)
            paddle = Paddle((py, px), lay.stamps[k], contrast)
            if float((window + paddle.stamp.mask).max()) < 1.8 and not any(
                _overlap(paddle, o.paddles[-1]) for o in others
            ):
                self.add_mask(snake.paddles[-1])
                snake.paddles.append(paddle)
                snake.pivot, snake.angle = (py, px), float(lay.angles[k])
                hy, hx = lay.heads[k]
                snake.terminal = (py + hy, px + hx)
                return True
        return False

    # whole snakes ---------------------------------------------------------------------------------------
    def _pick(self, values: tuple[float, ...]) -> float:
        return float(values[int(self.rng.integers(len(values)))]) if len(values) > 1 else float(values[0])

    def two_snakes(self) -> list[Snake] | None:
        """The two target snakes, grown in alternation; None when any step fails (the caller restarts)."""
        s = self.spec
        mus = [self._pick(s.snake_contrast_list), self._pick(s.snake_contrast_list)]
        first = self.seed(band=2 * s.seed_distance)
        if first is None:
            return None
        second = self.seed_near(first[0])
        if second is None:
            return None
        snakes = []
        for (paddle, pivot, angle), mu in zip((first, second), mus, strict=True):
            paddle.contrast = self._pick(s.paddle_contrast_list) * mu
            snakes.append(Snake([paddle], pivot, angle, paddle.anchor, paddle.anchor))
        for _ in range(s.contour_length - 1):
            contrast = self._pick(s.paddle_contrast_list)
            for i, (snake, mu) in enumerate(zip(snakes, mus, strict=True)):
                if not self.extend(snake, contrast * mu, others=(snakes[1 - i],)):
                    return None
        for snake in snakes:
            self.add_mask(snake.paddles[-1])
        return snakes

    def distractor(self, length: int) -> Snake | None:
        """One distractor snake (the published ``make_snake``); the canvas is unchanged when it fails."""
        s = self.spec
        if float((self.mask <= 0.3).mean()) < 0.01:  # stop_with_availability=0.01
            return None
        seeded = self.seed(band=1)
        if seeded is None:
            return None
        saved = self.full.copy()
        paddle, pivot, angle = seeded
        paddle.contrast = self._pick(s.snake_contrast_list)
        snake = Snake([paddle], pivot, angle, paddle.anchor, paddle.anchor)
        for _ in range(length - 1):
            if not self.extend(snake, self._pick(s.snake_contrast_list)):
                np.copyto(self.full, saved)
                return None
        self.add_mask(snake.paddles[-1])
        return snake


@dataclass
class Drawing:
    """One generated image with everything needed to check it."""

    image: np.ndarray  # (n, n) uint8
    label: int
    margin: int
    targets: list[Snake]
    distractors: list[Snake]
    markers: tuple[tuple[int, int], tuple[int, int]]


def draw(spec: PathfinderSpec, label: int, rng: np.random.Generator) -> Drawing:
    """One image with the given label (1 = the two markers are the two ends of one snake)."""
    margin = int(spec.paddle_margin_list[int(rng.integers(len(spec.paddle_margin_list)))])
    lay = _layout(spec.window_size, spec.paddle_length, float(spec.paddle_thickness), margin, spec.antialias_scale,
                  float(spec.marker_radius))
    for _ in range(spec.max_target_retrial):
        canvas = _Canvas(spec, lay, rng)
        targets = canvas.two_snakes()
        if targets is not None:
            break
    else:
        raise RuntimeError(f"could not place two target snakes in {spec.max_target_retrial} attempts; "
                           f"the settings leave no room ({spec})")
    distractors = []
    for _ in range(spec.num_distractor_snakes):
        if spec.distractor_keep < 1.0 and rng.random() >= spec.distractor_keep:
            continue
        for _ in range(spec.max_distractor_contour_retrial + 1):
            snake = canvas.distractor(spec.distractor_length)
            if snake is not None:
                distractors.append(snake)
                break
    origin_idx = int(rng.integers(2))
    end_idx = origin_idx if label == 1 else 1 - origin_idx
    markers = (targets[origin_idx].origin, targets[end_idx].terminal)

    n, p = lay.n, lay.pad
    full = np.zeros((lay.width, lay.width), np.float32)
    for snake in (*targets, *distractors):
        for paddle in snake.paddles:
            r = paddle.stamp.radius
            y, x = paddle.anchor[0] + p - r, paddle.anchor[1] + p - r
            view = full[y : y + 2 * r + 1, x : x + 2 * r + 1]
            np.maximum(view, paddle.stamp.image * paddle.contrast, out=view)
    image = full[p : p + n, p : p + n]
    for marker in markers:
        np.maximum(image, marker_image(n, marker, spec.marker_radius, spec.antialias_scale), out=image)
    return Drawing(bytescale(image), label, margin, targets, distractors, markers)


# ----------------------------------------------------------------------------------------------------------
# Writing the release layout.


def metadata_line(batch: int, index: int, label: int, spec: PathfinderSpec, margin: int) -> str:
    fields = [f"imgs/{batch}", f"sample_{index}.png", index, label, *spec.metadata_fields(margin)]
    return " ".join(str(f) for f in fields)


def _write_png(path: Path, image: np.ndarray) -> None:
    from PIL import Image

    Image.fromarray(image, mode="L").save(path, format="PNG")


def generate_batch(spec: PathfinderSpec, root: Path, batch: int, num_images: int, seed: int) -> Path:
    """Write ``num_images`` images of batch ``batch`` under ``root/<difficulty>``; returns the metadata file.

    Deterministic for (spec, batch, num_images, seed). Images are written into a temporary folder that is
    renamed into place, and the metadata file last, so its presence marks a complete batch even when two
    processes generate the same data at once.
    """
    rng = np.random.default_rng([seed, batch])
    labels = rng.permutation(np.arange(num_images) % 2)
    folder = Path(root) / spec.difficulty
    meta_dir = folder / "metadata"
    imgs = folder / "imgs" / str(batch)
    meta_dir.mkdir(parents=True, exist_ok=True)
    imgs.parent.mkdir(parents=True, exist_ok=True)
    tmp_imgs = Path(tempfile.mkdtemp(dir=imgs.parent, prefix=f".{batch}."))
    try:
        lines = []
        for i, label in enumerate(labels.tolist()):
            drawing = draw(spec, label, rng)
            _write_png(tmp_imgs / f"sample_{i}.png", drawing.image)
            lines.append(metadata_line(batch, i, label, spec, drawing.margin))
        if imgs.exists():  # an earlier interrupted run, or another process: same content, replace it
            shutil.rmtree(imgs, ignore_errors=True)
        try:
            os.replace(tmp_imgs, imgs)
        except OSError:  # another process renamed its identical copy first
            pass
    finally:
        shutil.rmtree(tmp_imgs, ignore_errors=True)
    meta = meta_dir / f"{batch}.npy"
    tmp = meta_dir / f".{batch}.npy.{os.getpid()}.tmp"
    tmp.write_text("".join(line + "\n" for line in lines))
    os.replace(tmp, meta)
    return meta


def _generate_batch_star(args: tuple[PathfinderSpec, Path, int, int, int]) -> Path:
    return generate_batch(*args)


def generate(spec: PathfinderSpec, root: Path, num_images: int, seed: int = 0, images_per_batch: int = 1000,
             workers: int = 1) -> list[Path]:
    """Write ``num_images`` images in the release layout under ``root/<difficulty>``, in batches.

    Batches whose metadata file already exists are kept (a crashed run resumes). ``workers`` processes
    (0 = one per CPU core) share the batches; the files do not depend on the worker count.
    """
    if num_images <= 0 or images_per_batch <= 0:
        raise ConfigError(f"pathfinder generator: num_images and images_per_batch must be > 0, "
                          f"got {num_images}, {images_per_batch}")
    sizes = [min(images_per_batch, num_images - start) for start in range(0, num_images, images_per_batch)]
    todo = [(spec, Path(root), b, n, seed) for b, n in enumerate(sizes)
            if not (Path(root) / spec.difficulty / "metadata" / f"{b}.npy").is_file()]
    if todo:
        log.info("generating %d Pathfinder images (%d batches, %s, %dx%d) into %s", sum(t[3] for t in todo),
                 len(todo), spec.difficulty, spec.window_size, spec.window_size, Path(root) / spec.difficulty)
    workers = workers or os.cpu_count() or 1
    desc = f"generate {spec.difficulty} ({sum(t[3] for t in todo):,} images)"
    shorten = ("to skip generating, point task.data_dir at the LRA release's pathfinder folder; or generate fewer "
               "images (task.num_images=..., or a smaller profile such as profile=quick); more processes help too "
               f"(task.gen_workers, now {workers}); the batches made so far are kept, so a rerun resumes")
    if workers > 1 and len(todo) > 1:
        # spawn, not fork: the caller may hold threads (torch) that a forked child would inherit broken
        ctx = multiprocessing.get_context("spawn")
        start_pool_services()
        with ProcessPoolExecutor(max_workers=min(workers, len(todo)), mp_context=ctx, initializer=pool_worker_init,
                                 initargs=(os.getpid(),)) as pool:  # workers die with this process (infra/children.py)
            with spawning():  # workers start here, with the stop signals blocked until they ignore them
                results = pool.map(_generate_batch_star, todo)
            list(tracked(results, len(todo), desc, "batch", shorten))
    else:
        for args in tracked(todo, len(todo), desc, "batch", shorten):
            generate_batch(*args)
    return [Path(root) / spec.difficulty / "metadata" / f"{b}.npy" for b in range(len(sizes))]
