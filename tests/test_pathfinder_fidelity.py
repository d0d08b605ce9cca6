"""The generator's Pathfinder-32 images look like the official generator's (issue 14): four image statistics of
400 generated images per difficulty, against the official sample in ../shared/data/pathfinder32.

Official vs the generator before the fix (anti-aliasing-free strokes, plus-shaped markers, every distractor drawn),
e.g. curv_contour_length_14: non-zero 0.337 vs 0.213, faint share 0.537 vs 0.059, bright pixels 3 vs 10,
components 13 vs 21; the tolerances below are a fraction of those gaps (docs/pathfinder_fidelity.md).
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
from PIL import Image

from lra_bench.data.pathfinder.generate import DIFFICULTIES, draw, spec_for
from lra_bench.data.pathfinder.stats import count_components, image_statistics
from tests.conftest import SHARED_DATA

OFFICIAL = SHARED_DATA / "pathfinder32"
N_IMAGES = 400

#: statistic -> largest allowed |ours - official| (the old generator missed by 0.09-0.12, 0.48-0.50, 7-8, 8-12)
TOLERANCE = {"nonzero": 0.04, "faint": 0.05, "bright": 1.0, "components": 3.0}


def official_images(difficulty: str) -> np.ndarray:
    """The shared official sample of one difficulty, (400, 32, 32) uint8; skips when it is absent."""
    folder = OFFICIAL / difficulty / "imgs" / "0"
    if not folder.is_dir():
        pytest.skip(f"{folder} is absent: this test compares generated images with the official Pathfinder sample. "
                    f"To enable it, place the shared real-data folder (shared/data/pathfinder32, described in "
                    f"shared/data/README.md) at {SHARED_DATA}, i.e. ../shared/data next to the repository")
    paths = [folder / f"sample_{i}.png" for i in range(N_IMAGES)]
    return np.stack([np.asarray(Image.open(p)) for p in paths])


def generated_images(difficulty: str, seed: int = 0) -> np.ndarray:
    """``N_IMAGES`` images from the generator with LRA's 32-pixel settings, (400, 32, 32) uint8."""
    spec = spec_for(32, difficulty)
    rng = np.random.default_rng(seed)
    return np.stack([draw(spec, i % 2, rng).image for i in range(N_IMAGES)])


def compare(difficulty: str) -> dict[str, tuple[float, float]]:
    official = image_statistics(official_images(difficulty))
    ours = image_statistics(generated_images(difficulty))
    return {key: (official[key], ours[key]) for key in TOLERANCE}


@pytest.mark.parametrize("difficulty", list(DIFFICULTIES))
def test_generated_images_match_the_official_sample(difficulty):
    stats = compare(difficulty)
    report = ", ".join(f"{k}: official {o:.3f} ours {g:.3f}" for k, (o, g) in stats.items())
    misses = [k for k, (o, g) in stats.items() if abs(g - o) > TOLERANCE[k]]
    assert not misses, f"{difficulty}: {misses} outside {TOLERANCE}; {report}"


def test_component_count_and_statistics_on_a_known_image():
    mask = np.zeros((6, 6), bool)
    mask[0, 0] = mask[1, 1] = True  # diagonal neighbours: one component
    mask[0, 3:6] = True  # a row
    mask[4, 0] = mask[5, 5] = True  # two singletons (no wrap-around)
    assert count_components(mask) == 4
    image = np.zeros((2, 4, 4), np.uint8)
    image[0, 0, :2] = 255  # two full-scale pixels
    image[0, 3, 3] = 10  # a faint pixel
    image[1, 1, 1] = 100
    image[1, 2, 2] = 50  # 100 and 50 are diagonal: one component
    stats = image_statistics(image)
    assert stats["nonzero"] == 5 / 32 and stats["faint"] == 1 / 5
    assert stats["bright"] == 1.5 and stats["components"] == 1.0  # medians of (2, 1) and (1, 1)
    with pytest.raises(ValueError, match="uint8"):
        image_statistics(image.astype(np.float32))


def test_skip_message_says_how_to_enable(monkeypatch, tmp_path):
    monkeypatch.setattr(sys.modules[__name__], "OFFICIAL", tmp_path / "nowhere")
    with pytest.raises(pytest.skip.Exception, match="To enable it"):
        official_images("curv_baseline")
