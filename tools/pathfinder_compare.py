"""Official Pathfinder-32 images next to the project's generator's, as a figure and a statistics table.

    python tools/pathfinder_compare.py                      # docs/pathfinder_official_vs_ours.png + table
    python tools/pathfinder_compare.py --official DIR --out FILE --images 400

Reads the official sample (default ../shared/data/pathfinder32, the LRA release layout), draws the same number of
images per difficulty with LRA's 32-pixel settings (seed 0), saves a grid of two official and two generated
images per difficulty (magnified, nearest neighbour, 0-255 grey scale) and prints the four image statistics of
``lra_bench.data.pathfinder.stats`` as a Markdown table (docs/pathfinder_fidelity.md).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import _repo  # noqa: F401  (this checkout's lra_bench first: tools/_repo.py)
import matplotlib.pyplot as plt
import numpy as np
from PIL import Image

from lra_bench.data.pathfinder.generate import DIFFICULTIES, draw, spec_for
from lra_bench.data.pathfinder.stats import image_statistics

ROOT = Path(__file__).resolve().parents[1]


def official_images(folder: Path, difficulty: str, count: int) -> np.ndarray:
    """The first ``count`` official images of a difficulty, (count, 32, 32) uint8."""
    paths = [folder / difficulty / "imgs" / "0" / f"sample_{i}.png" for i in range(count)]
    missing = [p for p in paths if not p.is_file()]
    if missing:
        raise SystemExit(f"official sample incomplete: {missing[0]} is missing (pass --official DIR)")
    return np.stack([np.asarray(Image.open(p)) for p in paths])


def generated_images(difficulty: str, count: int, seed: int) -> np.ndarray:
    """``count`` images from the project's generator, (count, 32, 32) uint8."""
    spec = spec_for(32, difficulty)
    rng = np.random.default_rng(seed)
    return np.stack([draw(spec, i % 2, rng).image for i in range(count)])


def save_figure(pairs: dict[str, tuple[np.ndarray, np.ndarray]], out: Path, per_side: int) -> None:
    """One row per difficulty: ``per_side`` official images, then ``per_side`` generated ones."""
    fig, axes = plt.subplots(len(pairs), 2 * per_side, figsize=(2.2 * 2 * per_side, 2.4 * len(pairs)),
                             squeeze=False)
    for row, (difficulty, (official, ours)) in enumerate(pairs.items()):
        for col in range(2 * per_side):
            side, image = ("official", official[col]) if col < per_side else ("ours", ours[col - per_side])
            ax = axes[row, col]
            ax.imshow(image, cmap="gray", vmin=0, vmax=255, interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            ax.set_title(f"{side} #{col % per_side}", fontsize=9)
        axes[row, 0].set_ylabel(difficulty, fontsize=9)
    fig.suptitle("Pathfinder-32: official generator (left) vs lra_bench generator (right)", fontsize=11)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--official", type=Path, default=ROOT.parent / "shared" / "data" / "pathfinder32")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "pathfinder_official_vs_ours.png")
    parser.add_argument("--images", type=int, default=400, help="images per difficulty for the statistics")
    parser.add_argument("--per-side", type=int, default=2, help="images of each side per row of the figure")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    pairs = {}
    print("| difficulty | side | non-zero | faint share | bright px (median) | components (median) |")
    print("|---|---|---|---|---|---|")
    for difficulty in DIFFICULTIES:
        official = official_images(args.official, difficulty, args.images)
        ours = generated_images(difficulty, args.images, args.seed)
        pairs[difficulty] = (official, ours)
        for side, images in (("official", official), ("ours", ours)):
            s = image_statistics(images)
            print(f"| {difficulty} | {side} | {s['nonzero']:.3f} | {s['faint']:.3f} | {s['bright']:g} | "
                  f"{s['components']:g} |")
    save_figure(pairs, args.out, args.per_side)
    print(f"figure: {args.out}")


if __name__ == "__main__":
    main()
