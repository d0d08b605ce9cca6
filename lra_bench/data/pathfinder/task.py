"""Pathfinder (LRA, 32x32 = 1,024 tokens) and Path-X (128x128 = 16,384 tokens): generated or release files.

Is there a path between the two circles? Images of dashed curves (Linsley et al. 2018; LRA.md §1.1, §1.4)
are read pixel by pixel: token = grey level 0-255, no padding, 2 classes. The data comes from the LRA
release (``task.data_dir`` = ``lra_release/pathfinder32`` or ``pathfinder128``), or from this project's
generator (``pathfinder_generate``), which writes the same layout into the cache and is read by the same
reader. Either way the tokenised 80/10/10 split is cached as Arrow.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lra_bench.checks import Count, NonNegativeInt, Seed
from lra_bench.data.cache import CachedSplits, load_or_build
from lra_bench.data.pathfinder import files as pathfinder
from lra_bench.data.pathfinder.generate import GENERATOR_VERSION, RESOLUTION_PRESETS, generate, spec_for
from lra_bench.data.pixels import pool_pixels
from lra_bench.data.task import SPLITS, Task
from lra_bench.errors import ConfigError, DataError
from lra_bench.store.files import stable_hash

log = logging.getLogger(__name__)

RELEASE_URL = pathfinder.RELEASE_URL


@dataclass
class PathfinderTask(Task):
    """Pathfinder as in LRA: does a path connect the two markers? 2 classes, ``resolution**2`` pixel tokens.

    Args:
        name: task name used in records ("pathfinder"; "pathx" for ``PathXTask``).
        source: "auto" (release files when data_dir is set, else generate), "generate", "files" or "synthetic".
        data_dir: folder holding the difficulty folders, e.g. ``lra_release/pathfinder32``.
        max_len: tokens per image; must equal ``(resolution / downsample)**2``.
        synthetic_sizes: [train, val, test] for source=synthetic.
        resolution: image side in pixels (32 Pathfinder, 128 Path-X; 64 and 256 exist in the release).
        difficulty: curv_baseline (6 paddles), curv_contour_length_9 or curv_contour_length_14 (LRA's "hard").
        num_images: images to generate (split 80/10/10); ignored for files.
        split_seed: seed of the 80/10/10 permutation.
        gen_seed: seed of the generator (independent of the training seed).
        gen_workers: processes that generate (0 = one per CPU core); the images do not depend on it.
        generator: overrides of the generator's arguments (``PathfinderSpec``), e.g. {num_distractor_snakes: 2}.
        downsample: 1 (LRA) or k dividing the resolution: each k x k block becomes its brightest pixel (max-pool keeps
            the one-pixel dashes visible), ``(resolution / k)**2`` tokens. A cheaper non-LRA variant for CPU profiles.
    """

    name: str = "pathfinder"
    source: str = "auto"
    data_dir: str | None = None
    max_len: Count = 1024
    synthetic_sizes: list[Count] = field(default_factory=lambda: [2048, 256, 256])
    resolution: Count = 32
    difficulty: str = "curv_contour_length_14"
    num_images: Count = 200_000
    split_seed: Seed = 0
    gen_seed: Seed = 0
    gen_workers: NonNegativeInt = 0
    generator: dict[str, Any] = field(default_factory=dict)
    downsample: Count = 1

    vocab_size = 256
    num_classes = 2
    pad_id = None  # every pixel is a real token (0 = black)
    sources = ("auto", "generate", "files")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.resolution <= 0:
            raise ConfigError(f"task.resolution must be > 0, got {self.resolution}")
        if self.downsample < 1 or self.resolution % self.downsample:
            raise ConfigError(f"task.downsample must be 1 (LRA) or a factor of task.resolution={self.resolution} "
                              f"(e.g. 2), got {self.downsample}")
        side = self.resolution // self.downsample
        if self.max_len != side**2:
            shrunk = f" after task.downsample={self.downsample}" if self.downsample > 1 else ""
            raise ConfigError(f"task.max_len={self.max_len} must equal {side**2} (one token per pixel of a "
                              f"{side}x{side} image{shrunk})")
        if self.difficulty not in pathfinder.DIFFICULTIES:
            raise ConfigError(f"task.difficulty={self.difficulty!r} is not valid; choose one of "
                              f"{pathfinder.DIFFICULTIES}")
        for key in ("num_images", "split_seed", "gen_seed", "gen_workers"):
            value = getattr(self, key)
            if value < 0 or (key == "num_images" and value == 0):
                raise ConfigError(f"task.{key} must be {'> 0' if key == 'num_images' else '>= 0'}, got {value}")
        if self.source == "auto":
            self.source = "files" if self.data_dir is not None else "generate"
        if self.source == "files" and self.data_dir is None:
            raise ConfigError(f"task.source=files needs task.data_dir=/path/to/lra_release/pathfinder{self.resolution}"
                              f" (from {RELEASE_URL}), or use task.source=generate")
        self.spec = None
        if self.source == "generate":
            if self.resolution not in RESOLUTION_PRESETS:
                raise ConfigError(f"task.resolution={self.resolution}: the generator has LRA's settings for "
                                  f"{sorted(RESOLUTION_PRESETS)} only")
            self.spec = spec_for(self.resolution, self.difficulty, **self.generator)
            if self.num_images < 10:
                raise ConfigError(f"task.num_images={self.num_images} is too few for an 80/10/10 split (>= 10)")

    # ------------------------------------------------------------------------------------------------------
    def _hint(self) -> str:
        return (f"point task.data_dir at the folder lra_release/pathfinder{self.resolution} of the LRA release "
                f"({RELEASE_URL}), which holds {', '.join(pathfinder.DIFFICULTIES)}; or set task.source=generate "
                f"(or leave task.data_dir unset) to generate {self.name} locally")

    def check_source(self) -> None:
        """Fail early (before any training) when ``data_dir`` is set but unusable."""
        if self.source != "files":
            return
        root = Path(self.data_dir).expanduser()
        if not root.is_dir():
            raise DataError(f"task.data_dir={self.data_dir} does not exist or is not a folder; {self._hint()}")
        folder = root / self.difficulty
        if not folder.is_dir():
            found = sorted(p.name for p in root.iterdir() if p.is_dir())[:8]
            extra = ""
            nested = root / f"pathfinder{self.resolution}" / self.difficulty
            if nested.is_dir():
                extra = f" (did you mean task.data_dir={root / f'pathfinder{self.resolution}'}?)"
            elif (root / "metadata").is_dir():
                extra = (f" ({root} looks like a difficulty folder itself: set task.data_dir to its parent and "
                         f"task.difficulty={root.name})")
            raise DataError(f"task.data_dir={self.data_dir} has no folder {self.difficulty}{extra}; it contains "
                            f"{found or 'no folders'}; {self._hint()}")
        if not pathfinder.metadata_files(folder):
            raise DataError(f"{folder / 'metadata'} is missing or holds no *.npy metadata files; {self._hint()}")
        if not (folder / "imgs").is_dir():
            raise DataError(f"{folder / 'imgs'} is missing; {self._hint()}")

    def image_root(self, cache_dir: Path) -> Path:
        """The folder holding the difficulty folders: the user's, or the generated copy in the cache."""
        if self.source == "files":
            return Path(self.data_dir).expanduser()
        assert self.spec is not None
        params = self.generator_params()
        root = Path(cache_dir) / self.name / "generated" / stable_hash(params)[:16]
        generate(self.spec, root, self.num_images, seed=self.gen_seed, workers=self.gen_workers)
        return root

    def generator_params(self) -> dict[str, Any]:
        assert self.spec is not None
        return {"spec": dataclasses.asdict(self.spec), "num_images": self.num_images, "seed": self.gen_seed,
                "version": GENERATOR_VERSION}

    def load_real(self, cache_dir: Path) -> CachedSplits:
        """Pixel tokens of the difficulty folder, split 80/10/10, built once and cached as Arrow."""
        root = self.image_root(cache_dir)
        folder = root / self.difficulty
        key: dict[str, Any] = {"task": self.name, "resolution": self.resolution, "difficulty": self.difficulty,
                               "split_seed": self.split_seed, "reader": pathfinder.READER_VERSION}
        if self.source == "generate":
            key["generated"] = self.generator_params()
        else:
            key["files"] = pathfinder.source_key(folder)

        def build() -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], dict[str, Any]]:
            images = pathfinder.read_folder(folder, self.resolution)
            parts = pathfinder.split_indices(len(images.labels), self.split_seed)
            splits = {s: (images.pixels[parts[s]], images.labels[parts[s]]) for s in SPLITS}
            meta = {"fingerprint": images.fingerprint, "source": self.source, "image_dir": str(folder),
                    "difficulty": self.difficulty, "resolution": self.resolution,
                    "images_listed": len(images.labels) + len(images.skipped),
                    "skipped_empty": len(images.skipped), "skipped_files": images.skipped[:100],
                    "label_counts": {s: pathfinder.label_counts(y) for s, (_, y) in splits.items()},
                    "generator": self.generator_params() if self.source == "generate" else None}
            return splits, meta

        data = self._pooled(load_or_build(Path(cache_dir), "pathfinder/arrow", key, build))
        if data.meta.get("skipped_empty"):
            log.warning("%s: %d empty image(s) were skipped (%s)", self.name, data.meta["skipped_empty"],
                        ", ".join(data.meta.get("skipped_files", [])[:5]))
        counts = np.bincount(np.concatenate([data.labels[s] for s in SPLITS]), minlength=2)
        if counts.min() < 0.4 * counts.sum():
            log.warning("%s: labels are unbalanced: %s (0 = not connected, 1 = connected)", self.name, counts.tolist())
        return data

    def _pooled(self, data: CachedSplits) -> CachedSplits:
        """The cached full-resolution splits max-pooled by ``downsample`` (as is when 1)."""
        if self.downsample == 1:
            return data
        inputs = {s: pool_pixels(x, self.resolution, self.downsample, "max") for s, x in data.inputs.items()}
        return dataclasses.replace(data, inputs=inputs, meta={**data.meta, "downsample": self.downsample})


@dataclass
class PathXTask(PathfinderTask):
    """Path-X: Pathfinder at 128x128 = 16,384 tokens (LRA ``pathfinder128_hard``); same args as Pathfinder."""

    name: str = "pathx"
    max_len: Count = 16384
    resolution: Count = 128
    synthetic_sizes: list[Count] = field(default_factory=lambda: [256, 32, 32])
