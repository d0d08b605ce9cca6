"""Pathfinder / Path-X: the generator, the release-layout reader, bad files, the split, the task and a smoke run."""

from __future__ import annotations

import logging
import math
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from lra_bench.data.pathfinder import files as pathfinder
from lra_bench.data.pathfinder.generate import Drawing, draw, generate, generate_batch, spec_for
from lra_bench.data.pathfinder.task import PathfinderTask, PathXTask
from lra_bench.errors import ConfigError, DataError
from tests.conftest import compose_run, shared_data

HARD = "curv_contour_length_14"


def small_release(root: Path, n: int = 20, difficulty: str = "curv_baseline", per_batch: int = 1000) -> Path:
    """A generated 32x32 folder in the release layout; returns the difficulty folder."""
    generate(spec_for(32, difficulty), root, n, seed=3, images_per_batch=per_batch, workers=1)
    return root / difficulty


# ---------------------------------------------------------------------------------------------------------------
# generator


def test_generator_is_deterministic_for_a_seed(tmp_path):
    spec = spec_for(32, HARD)
    a = generate_batch(spec, tmp_path / "a", 0, 12, seed=7)
    b = generate_batch(spec, tmp_path / "b", 0, 12, seed=7)
    c = generate_batch(spec, tmp_path / "c", 0, 12, seed=8)
    assert a.read_text() == b.read_text() and c.is_file()
    for i in range(12):
        name = f"{HARD}/imgs/0/sample_{i}.png"
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    differ = [(tmp_path / "a" / f"{HARD}/imgs/0/sample_{i}.png").read_bytes()
              != (tmp_path / "c" / f"{HARD}/imgs/0/sample_{i}.png").read_bytes() for i in range(12)]
    assert all(differ)


def test_worker_processes_write_the_same_files(tmp_path):
    spec = spec_for(32, "curv_baseline")
    generate(spec, tmp_path / "one", 12, seed=5, images_per_batch=4, workers=1)
    generate(spec, tmp_path / "two", 12, seed=5, images_per_batch=4, workers=2)
    files = sorted(p.relative_to(tmp_path / "one") for p in (tmp_path / "one").rglob("*") if p.is_file())
    assert len(files) == 12 + 3
    assert all((tmp_path / "one" / f).read_bytes() == (tmp_path / "two" / f).read_bytes() for f in files)


def test_layout_and_metadata_round_trip_through_the_reader(tmp_path):
    folder = small_release(tmp_path, n=20, difficulty=HARD, per_batch=8)  # batches of 8, 8, 4
    assert [p.name for p in pathfinder.metadata_files(folder)] == ["0.npy", "1.npy", "2.npy"]
    line = re.compile(r"^imgs/(\d) sample_(\d+)\.png (\d+) ([01]) 1\.0 14 4 2 0\.5 1 1$")
    expected_pixels, expected_labels = [], []
    for batch, size in enumerate([8, 8, 4]):
        lines = (folder / "metadata" / f"{batch}.npy").read_text().splitlines()
        assert len(lines) == size
        for i, text in enumerate(lines):
            m = line.match(text)
            assert m, text
            assert (int(m[1]), int(m[2]), int(m[3])) == (batch, i, i)
            with Image.open(folder / "imgs" / str(batch) / f"sample_{i}.png") as im:
                assert im.mode == "L" and im.size == (32, 32)
                expected_pixels.append(np.asarray(im).reshape(-1))
            expected_labels.append(int(m[4]))
    images = pathfinder.read_folder(folder, 32)
    np.testing.assert_array_equal(images.pixels, np.stack(expected_pixels))
    np.testing.assert_array_equal(images.labels, expected_labels)
    assert images.skipped == [] and images.pixels.dtype == np.uint8
    assert images.pixels.max(1).min() == 255  # every image is scaled to a full-range maximum


def test_labels_are_balanced(tmp_path):
    meta = generate_batch(spec_for(32, "curv_baseline"), tmp_path, 0, 30, seed=1)
    labels = [int(line.split()[3]) for line in meta.read_text().splitlines()]
    assert sorted(labels) == [0] * 15 + [1] * 15
    assert labels != sorted(labels)  # shuffled, not blocked


def _raster(segments: list, n: int, scale: int, half_width: float) -> np.ndarray:
    """Line segments (pixel-centre coordinates) drawn as strokes of ``half_width`` on an (n*scale)^2 grid."""
    out = np.zeros((n * scale, n * scale), bool)
    for a, b in segments:
        a, b = np.asarray(a, float), np.asarray(b, float)
        lo = np.floor((np.minimum(a, b) - half_width + 0.5) * scale).astype(int).clip(0, n * scale)
        hi = np.ceil((np.maximum(a, b) + half_width + 0.5) * scale).astype(int).clip(0, n * scale)
        yy, xx = np.meshgrid((np.arange(lo[0], hi[0]) + 0.5) / scale - 0.5,
                             (np.arange(lo[1], hi[1]) + 0.5) / scale - 0.5, indexing="ij")
        d = b - a
        t = np.clip(((yy - a[0]) * d[0] + (xx - a[1]) * d[1]) / max(float(d @ d), 1e-12), 0, 1)
        out[lo[0] : hi[0], lo[1] : hi[1]] |= np.hypot(yy - a[0] - t * d[0], xx - a[1] - t * d[1]) <= half_width
    return out


def _flood(mask: np.ndarray, seed: tuple[int, int]) -> set[tuple[int, int]]:
    """8-connected flood fill of ``mask`` from ``seed`` (breadth first)."""
    todo, seen = [seed], {seed}
    while todo:
        y, x = todo.pop()
        for dy in (-1, 0, 1):
            for dx in (-1, 0, 1):
                q = (y + dy, x + dx)
                if q not in seen and 0 <= q[0] < mask.shape[0] and 0 <= q[1] < mask.shape[1] and mask[q]:
                    seen.add(q)
                    todo.append(q)
    return seen


def _connected(drawing: Drawing, n: int, half_width: float, scale: int = 4) -> bool:
    """Whether the two markers are joined by drawn contours, checked at ``scale`` x the image resolution.

    Each snake is a dashed contour: flood fill runs along its paddles and the gaps between them. One snake
    leads to another only where their paddle strokes overlap (dashed contours may cross through each other's
    gaps, as in the published data, without joining).
    """
    snakes = [*drawing.targets, *drawing.distractors]

    def cell(p: tuple[int, int]) -> tuple[int, int]:
        return p[0] * scale + scale // 2, p[1] * scale + scale // 2

    strokes = [_raster([p.segment() for p in s.paddles], n, scale, half_width) for s in snakes]
    for k, snake in enumerate(snakes):  # every contour is one connected curve from end to end
        ends = [e for p in snake.paddles for e in p.segment()]
        contour = strokes[k] | _raster(list(zip(ends[1:-1:2], ends[2::2], strict=True)), n, scale, half_width)
        assert cell(snake.terminal) in _flood(contour, cell(snake.origin)), f"snake {k} is broken"
    owner = [next(k for k, s in enumerate(snakes) if m in (s.origin, s.terminal)) for m in drawing.markers]
    reached, todo = {owner[0]}, [owner[0]]
    while todo:  # snakes joined through overlapping strokes
        k = todo.pop()
        for j in range(len(snakes)):
            if j not in reached and (strokes[k] & strokes[j]).any():
                reached.add(j)
                todo.append(j)
    return owner[1] in reached


@pytest.mark.parametrize("difficulty", ["curv_baseline", HARD])
def test_markers_sit_on_the_ends_of_one_contour_exactly_when_the_label_is_1(difficulty):
    spec = spec_for(32, difficulty)
    rng = np.random.default_rng(11)
    for i in range(40):
        d = draw(spec, i % 2, rng)
        assert d.image.shape == (32, 32) and d.image.dtype == np.uint8
        start, end = d.markers
        assert start in [t.origin for t in d.targets] and end in [t.terminal for t in d.targets]
        assert all(len(t.paddles) == spec.contour_length for t in d.targets)
        assert all(len(s.paddles) == spec.distractor_length for s in d.distractors)
        # markers are at full scale unless a contrast-2 distractor paddle outshines them: its Lanczos peak is
        # at most 0.6, so the image maximum is at most 1.2 x a marker (as in the published data)
        assert d.image[start] >= 255 / 1.2 - 0.5 and d.image[end] >= 255 / 1.2 - 0.5
        assert _connected(d, 32, spec.paddle_thickness / 2) == bool(d.label), (i, d.label)
        for snake in d.targets:  # continuity: consecutive paddles turn by at most 90 deg / continuity
            dirs = [math.atan2(b[0] - a[0], b[1] - a[1]) for a, b in (p.segment() for p in snake.paddles)]
            turns = [abs((y - x + math.pi) % (2 * math.pi) - math.pi) for x, y in zip(dirs, dirs[1:], strict=False)]
            assert max(turns) <= math.pi / 2 / spec.continuity + 1e-6


@pytest.mark.parametrize("resolution,difficulty", [(128, "curv_baseline"), (128, HARD), (64, "curv_baseline")])
def test_path_x_and_64_pixel_settings_draw(resolution, difficulty):
    spec = spec_for(resolution, difficulty)
    assert spec.num_distractor_snakes == {64: 22, 128: 35}[resolution] // spec.distractor_length
    d = draw(spec, 1, np.random.default_rng(0))
    assert d.image.shape == (resolution, resolution) and d.image.max() == 255
    assert d.margin in spec.paddle_margin_list and len(d.targets[0].paddles) == spec.contour_length


def test_lra_settings_at_32_pixels():
    s = spec_for(32, HARD)
    assert (s.contour_length, s.distractor_length, s.num_distractor_snakes) == (14, 4, 5)
    assert (s.paddle_length, s.paddle_thickness, s.paddle_margin_list, s.antialias_scale) == (2, 0.5, (1,), 2)
    assert (s.seed_distance, s.marker_radius, s.continuity, s.padding) == (7, 1.5, 1.0, 1)
    assert (s.snake_contrast_list, s.paddle_contrast_list) == ((2.0,), (0.75,))
    easy = spec_for(32, "curv_baseline")
    assert (easy.contour_length, easy.distractor_length, easy.num_distractor_snakes) == (6, 2, 10)
    with pytest.raises(ConfigError, match="unknown Pathfinder generator option"):
        spec_for(32, HARD, wiggle=3)


# ---------------------------------------------------------------------------------------------------------------
# reader and bad files


def test_real_sample_loads_with_exact_counts(tmp_path):
    root = shared_data("pathfinder32")
    positives = {"curv_baseline": 208, "curv_contour_length_9": 204, HARD: 206}
    for difficulty, pos in positives.items():
        task = PathfinderTask(data_dir=str(root), difficulty=difficulty)
        data = task.load(tmp_path)
        assert {s: len(y) for s, y in data.labels.items()} == {"train": 320, "val": 40, "test": 40}
        labels = np.concatenate([data.labels[s] for s in ("train", "val", "test")])
        assert labels.sum() == pos and data.meta["skipped_empty"] == 0 and data.meta["images_listed"] == 400
        assert data.inputs["train"].shape == (320, 1024) and data.inputs["train"].dtype == np.uint8
        total = sum(int(np.asarray(Image.open(p), dtype=np.int64).sum())
                    for p in (root / difficulty / "imgs" / "0").glob("*.png"))
        assert sum(int(data.inputs[s].sum(dtype=np.int64)) for s in data.inputs) == total
    again = PathfinderTask(data_dir=str(root), difficulty=HARD).load(tmp_path)
    assert again.reused and len(again.meta["fingerprint"]) == 64


def test_empty_images_are_skipped_and_counted(tmp_path, caplog):
    folder = small_release(tmp_path / "data")
    Image.fromarray(np.zeros((32, 32), np.uint8), mode="L").save(folder / "imgs/0/sample_3.png")
    (folder / "imgs/0/sample_5.png").write_bytes(b"")
    with caplog.at_level(logging.WARNING):
        data = PathfinderTask(data_dir=str(tmp_path / "data"), difficulty="curv_baseline").load(tmp_path / "cache")
    assert sum(len(y) for y in data.labels.values()) == 18
    assert data.meta["skipped_empty"] == 2
    assert data.meta["skipped_files"] == ["imgs/0/sample_3.png", "imgs/0/sample_5.png"]
    assert "skipped 2 empty image(s)" in caplog.text


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_corrupt_png_is_a_data_error_naming_the_file(tmp_path, damage):
    folder = small_release(tmp_path)
    png = folder / "imgs/0/sample_2.png"
    png.write_bytes(b"this is not a png" if damage == "garbage" else png.read_bytes()[:40])
    with pytest.raises(DataError, match=r"sample_2\.png.*cannot decode"):
        pathfinder.read_folder(folder, 32)


def test_wrong_resolution_is_a_data_error(tmp_path):
    folder = small_release(tmp_path)
    with pytest.raises(DataError, match=r"sample_0\.png: image is 32x32 pixels, expected 128x128"):
        pathfinder.read_folder(folder, 128)


@pytest.mark.parametrize("bad_line", ["imgs/0 sample_3.pn", "imgs/0 sample_3.png 3 2 1.0 6 2 2 0.5 1 1",
                                      "imgs/0 sample_3.png 3 1 1.0 6 2 2 0.5 1"])
def test_malformed_metadata_line_is_a_data_error_naming_file_and_line(tmp_path, bad_line):
    folder = small_release(tmp_path)
    meta = folder / "metadata" / "0.npy"
    lines = meta.read_text().splitlines()
    lines[3] = bad_line
    meta.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match=r"0\.npy, line 4: malformed"):
        pathfinder.read_folder(folder, 32)


def test_missing_image_is_a_data_error(tmp_path):
    folder = small_release(tmp_path)
    (folder / "imgs/0/sample_7.png").unlink()
    with pytest.raises(DataError, match=r"sample_7\.png: cannot read the image named on line 8"):
        pathfinder.read_folder(folder, 32)


def test_check_source_fails_early_with_the_alternatives(tmp_path):
    def error(**kwargs) -> str:
        with pytest.raises(DataError) as info:
            PathfinderTask(**kwargs).check_source()
        msg = str(info.value)
        assert pathfinder.RELEASE_URL in msg and "task.data_dir" in msg and "task.source=generate" in msg
        return msg

    assert "does not exist" in error(data_dir=str(tmp_path / "nowhere"))
    (tmp_path / "lra_release" / "pathfinder32" / HARD / "metadata").mkdir(parents=True)
    assert "has no folder curv_contour_length_14" in error(data_dir=str(tmp_path / "lra_release"))
    assert "did you mean" in error(data_dir=str(tmp_path / "lra_release"))
    assert "no *.npy metadata" in error(data_dir=str(tmp_path / "lra_release" / "pathfinder32"))


# ---------------------------------------------------------------------------------------------------------------
# split, task, run


def test_seeded_80_10_10_split():
    parts = pathfinder.split_indices(400, seed=0)
    assert [len(parts[s]) for s in ("train", "val", "test")] == [320, 40, 40]
    assert sorted(np.concatenate(list(parts.values())).tolist()) == list(range(400))
    np.testing.assert_array_equal(parts["test"], pathfinder.split_indices(400, seed=0)["test"])
    assert not np.array_equal(parts["test"], pathfinder.split_indices(400, seed=1)["test"])
    assert [len(v) for v in pathfinder.split_indices(399, seed=0).values()] == [319, 40, 40]


def test_generated_source_is_cached_and_balanced(tmp_path):
    task = PathfinderTask(num_images=40, difficulty="curv_baseline", gen_workers=1)
    assert task.source == "generate"
    first = task.load(tmp_path)
    assert {s: len(y) for s, y in first.labels.items()} == {"train": 32, "val": 4, "test": 4}
    assert sum(sum(c) for c in first.meta["label_counts"].values()) == 40
    assert [sum(c[k] for c in first.meta["label_counts"].values()) for k in (0, 1)] == [20, 20]
    second = PathfinderTask(num_images=40, difficulty="curv_baseline", gen_workers=1).load(tmp_path)
    assert second.reused and second.meta["fingerprint"] == first.meta["fingerprint"]


def test_downsample_max_pools_the_cached_images(tmp_path):
    full = PathfinderTask(num_images=40, difficulty="curv_baseline", gen_workers=1).load(tmp_path)
    small = PathfinderTask(num_images=40, difficulty="curv_baseline", gen_workers=1, downsample=2,
                           max_len=256).load(tmp_path)
    assert small.reused and small.meta["downsample"] == 2  # the full-resolution cache is pooled, not rebuilt
    for split in ("train", "val", "test"):
        np.testing.assert_array_equal(small.labels[split], full.labels[split])
        x = full.inputs[split].reshape(-1, 16, 2, 16, 2)  # (n, row, 2, col, 2)
        np.testing.assert_array_equal(small.inputs[split], x.max(axis=(2, 4)).reshape(-1, 256))
    # the strokes stay at full brightness: the brightest pixel of every image survives
    np.testing.assert_array_equal(small.inputs["train"].max(1), full.inputs["train"].max(1))


def test_pool_pixels_modes():
    from lra_bench.data.pixels import pool_pixels

    img = np.array([[0, 255, 10, 20], [0, 0, 30, 41], [1, 2, 3, 4], [5, 6, 7, 8]], dtype=np.uint8).reshape(1, 16)
    assert pool_pixels(img, 4, 2, "max").tolist() == [[255, 41, 6, 8]]
    assert pool_pixels(img, 4, 2, "mean").tolist() == [[64, 25, 4, 6]]  # 255/4 = 63.75 -> 64; 101/4 -> 25
    assert pool_pixels(img, 4, 1, "max") is img
    with pytest.raises(ConfigError, match="mode must be one of"):
        pool_pixels(img, 4, 2, "median")
    with pytest.raises(ConfigError, match="3 does not divide 4"):
        pool_pixels(img, 4, 3, "max")


def test_synthetic_source_shapes_and_config_checks():
    data = PathfinderTask(source="synthetic", synthetic_sizes=[8, 4, 4]).load(Path("unused"))
    assert data.inputs["train"].shape == (8, 1024) and data.inputs["train"].dtype == np.uint8
    assert data.meta["synthetic"] and set(np.unique(data.labels["train"])) <= {0, 1}
    x = PathXTask(source="synthetic", synthetic_sizes=[2, 1, 1]).load(Path("unused"))
    assert x.inputs["train"].shape == (2, 16384)
    assert PathfinderTask.pad_id is None and PathfinderTask.vocab_size == 256 and PathfinderTask.num_classes == 2
    assert PathXTask().name == "pathx" and PathXTask().resolution == 128
    with pytest.raises(ConfigError, match=r"must equal 1024 \(one token per pixel of a 32x32 image\)"):
        PathfinderTask(max_len=1000)
    with pytest.raises(ConfigError, match=r"must equal 256 .* 16x16 image after task.downsample=2"):
        PathfinderTask(downsample=2)
    with pytest.raises(ConfigError, match="task.downsample must be 1 .* or a factor of task.resolution=32"):
        PathfinderTask(downsample=3, max_len=100)
    with pytest.raises(ConfigError, match="difficulty"):
        PathfinderTask(difficulty="hard")
    with pytest.raises(ConfigError, match="task.source=files needs"):
        PathfinderTask(source="files")


def test_smoke_profile_runs_in_process(tmp_path):
    from lra_bench.run.runner import run

    record = run(compose_run(["task=pathfinder", "profile=smoke"], tmp_path))
    assert record["status"] == "ok" and record["task"] == "pathfinder"
    assert record["examples"] == {"train": 51, "val": 6, "test": 7}
    assert record["dataset_source"] == "generate" and not record["synthetic"]
    assert record["config"]["model"]["positions"] == "learned"
