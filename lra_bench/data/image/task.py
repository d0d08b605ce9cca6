"""Image (LRA §1.1): CIFAR-10 as sequences of 1,024 grayscale pixels, 10 classes.

LRA (``image/input_pipeline.py::get_cifar10_datasets``) reads TFDS ``cifar10`` with train = ``train[:90%]``
(45,000), val = ``train[90%:]`` (5,000), test = ``test`` (10,000) and turns each image into
``tf.cast(tf.image.rgb_to_grayscale(image), tf.int32)``: one token 0-255 per pixel, row-major, vocabulary
256, no padding (pixel value 0 is a real token, so ``pad_id`` is None and nothing is masked).

``tf.image.rgb_to_grayscale`` on uint8 (TensorFlow ``image_ops_impl.py``, read for this file):
``convert_image_dtype(uint8 -> float32)`` = ``cast(x) * (1 / 255)``; ``tensordot`` with the weights
``[0.2989, 0.5870, 0.1140]`` in float32; ``convert_image_dtype(float32 -> uint8)`` = ``cast(gray * 255.5)``
("scale = dtype.max + 0.5  # avoid rounding problems in the cast"), i.e. **truncation of gray * 255.5**, which
rounds to nearest except near the top (a white pixel gives 0.9999 * 255.5 = 255.47 -> 255). ``grayscale``
below does exactly that in float32 (the three products summed in channel order); TF's matmul may fuse or
reorder that sum, which can move a value lying within one float32 ulp of an integer boundary by one grey level
(about 5 pixels in a million differ between the sequential sum and numpy's matmul on CIFAR).

Sources: the Hugging Face dataset ``uoft-cs/cifar10`` (``source: hub``) or a local copy of its Parquet files
(``source: files``: ``plain_text/{train,test}-*.parquet``, columns ``img`` = {bytes, path}, ``label``). Any
image PIL can decode is accepted (the Hub stores PNGs). An image that cannot be decoded, or is not 32x32, is
a DataError naming the file and row (never skipped: CIFAR-10 has no bad images, so one means a damaged copy,
and skipping would silently change the split sizes).

``downsample: k`` (default 1 = LRA) averages k x k pixel blocks after the grayscale conversion, giving
(32 / k)^2 tokens: a cheaper, non-LRA variant for shortened CPU runs only (as ``profile=cpu`` ListOps uses
shorter expressions); its records say so in their config.

Split order: the Hugging Face train split is in the original CIFAR order, and ``split_seed: null`` takes its
first 90% / last 10% as LRA's slices do. TFDS, however, stores examples in its own generation-time shuffled
order, so LRA's 5,000 validation images are not the last 5,000 of the original order (same sizes, same
distribution, different images); ``split_seed: <int>`` draws the 45,000/5,000 split from a seeded permutation.
"""

from __future__ import annotations

import functools
import hashlib
import io
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lra_bench.checks import Count, Seed
from lra_bench.data.cache import CachedSplits, load_or_build
from lra_bench.data.hf_source import check_subset_sizes, find_hf_parquet, hub_url, load_hub, read_parquet, subsample
from lra_bench.data.pixels import pool_pixels
from lra_bench.data.task import Task
from lra_bench.errors import ConfigError, DataError
from lra_bench.infra.progress import tracked
from lra_bench.store.files import file_sha256, stable_hash

log = logging.getLogger(__name__)

HUB_DATASET = "uoft-cs/cifar10"
SIDE = 32
NUM_PIXELS = SIDE * SIDE
TRAIN_FRACTION = 0.9  # TFDS train[:90%] / train[90%:]
RGB_WEIGHTS = (0.2989, 0.5870, 0.1140)  # tf.image.rgb_to_grayscale
TO_UINT8 = 255.5  # convert_image_dtype(float -> uint8): cast(x * (dtype.max + 0.5))
GRAYSCALE_VERSION = 1  # bump when the conversion changes, so old caches are not reused
SOURCE_SPLITS = ("train", "test")


@functools.lru_cache(maxsize=1)
def _gray_table() -> np.ndarray:
    """uint8 grey level of every (r, g, b), indexed by r << 16 | g << 8 | b (16 MiB, built once)."""
    v = np.arange(256, dtype=np.float32) * np.float32(1.0 / 255.0)  # convert_image_dtype(uint8 -> float32)
    w = np.asarray(RGB_WEIGHTS, dtype=np.float32)
    r, g, b = v * w[0], v * w[1], v * w[2]
    gray = (r[:, None, None] + g[None, :, None]) + b[None, None, :]  # float32, summed in channel order
    return (gray * np.float32(TO_UINT8)).astype(np.uint8).reshape(-1)  # cast(gray * 255.5): truncation


def grayscale(rgb: np.ndarray) -> np.ndarray:
    """``tf.image.rgb_to_grayscale`` of uint8 images (..., 3) -> uint8 (...)."""
    if rgb.dtype != np.uint8 or rgb.shape[-1] != 3:
        raise ValueError(f"expected uint8 RGB images (..., 3), got {rgb.dtype} {rgb.shape}")
    key = (rgb[..., 0].astype(np.uint32) << 16) | (rgb[..., 1].astype(np.uint32) << 8) | rgb[..., 2]
    return _gray_table()[key]


def content_sha256(x: np.ndarray, y: np.ndarray) -> str:
    """sha256 of decoded pixels and labels (the fingerprint of Hub data, whose files are not ours to hash)."""
    return hashlib.sha256(np.ascontiguousarray(x).tobytes() + np.ascontiguousarray(y).tobytes()).hexdigest()


def grayscale_reference(rgb: np.ndarray) -> np.ndarray:
    """The same conversion written out elementwise (slow; for tests)."""
    f = rgb.astype(np.float32) * np.float32(1.0 / 255.0)
    w = np.asarray(RGB_WEIGHTS, dtype=np.float32)
    gray = f[..., 0] * w[0] + f[..., 1] * w[1] + f[..., 2] * w[2]
    return (gray * np.float32(TO_UINT8)).astype(np.uint8)


def decode_images(table: Any, where: str) -> tuple[np.ndarray, np.ndarray]:
    """(n, 1024) uint8 grey pixels and (n,) labels from an Arrow table with columns img {bytes, path}, label."""
    from PIL import Image, UnidentifiedImageError

    img = table.column("img").combine_chunks()
    try:
        blobs = img.field("bytes").to_pylist()
        paths = img.field("path").to_pylist() if img.type.get_field_index("path") >= 0 else [None] * len(blobs)
    except (AttributeError, KeyError, TypeError) as e:
        raise DataError(f"{where}: column 'img' must be the Hugging Face Image struct {{bytes, path}}, "
                        f"got {img.type}") from e
    labels = np.asarray(table.column("label").to_pylist())
    if labels.dtype.kind not in "iu" or len(labels) and (labels.min() < 0 or labels.max() > 9):
        bad = sorted({repr(v) for v in labels.tolist() if not (isinstance(v, int) and 0 <= v <= 9)})[:5]
        raise DataError(f"{where}: column 'label' must hold class ids 0-9; found {bad}")
    rgb = np.empty((len(blobs), SIDE, SIDE, 3), dtype=np.uint8)
    for row, blob in enumerate(tracked(blobs, len(blobs), f"decode {where}", "img")):
        name = f"{where}, row {row}" + (f" ({paths[row]})" if paths[row] else "")
        if blob is None:
            raise DataError(f"{name}: the image has no bytes; the copy is damaged: download it again")
        try:
            with Image.open(io.BytesIO(blob)) as im:
                if im.size != (SIDE, SIDE):
                    raise DataError(f"{name}: image is {im.size[0]}x{im.size[1]}, CIFAR-10 images are 32x32")
                rgb[row] = np.asarray(im if im.mode == "RGB" else im.convert("RGB"))
        except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as e:
            raise DataError(f"{name}: image cannot be decoded ({type(e).__name__}: {e}); the copy is damaged: "
                            "download it again") from e
    return grayscale(rgb).reshape(len(blobs), NUM_PIXELS), labels.astype(np.int64)


def downsample(pixels: np.ndarray, k: int) -> np.ndarray:
    """(n, 1024) uint8 -> (n, (32 / k)^2) uint8: the mean of each k x k block, rounded half up."""
    return pool_pixels(pixels, SIDE, k, "mean")


@dataclass
class ImageTask(Task):
    """Grayscale CIFAR-10 (LRA "Image"): 1,024 tokens 0-255, 10 classes, 45k/5k/10k.

    Args:
        name: task name used in records ("image").
        source: "auto" (files when data_dir is set, else hub), "hub", "files" or "synthetic".
        data_dir: a local copy of ``uoft-cs/cifar10`` (``plain_text/{train,test}-*.parquet``).
        max_len: must be 1024 (32 x 32 pixels), or (32 / downsample)^2.
        synthetic_sizes: [train, val, test] for source=synthetic.
        split_seed: null = LRA's contiguous train[:90%] / train[90%:]; an int = a seeded random 90/10 split.
        max_train_examples: use a seeded random subset of the 45,000 training images (null = all).
        max_eval_examples: use seeded random subsets of this size of val and of test (null = all).
            For shortened runs only; LRA scores use the full splits.
        subset_seed: seed of those subsets.
        downsample: 1 (LRA) or a factor k in {2, 4, 8}: average k x k pixel blocks, (32 / k)^2 tokens. A cheaper,
            non-LRA variant for shortened CPU runs only.
    """

    name: str = "image"
    source: str = "auto"
    data_dir: str | None = None
    max_len: Count = NUM_PIXELS
    synthetic_sizes: list[Count] = field(default_factory=lambda: [512, 128, 128])
    split_seed: Seed | None = None
    max_train_examples: Count | None = None
    max_eval_examples: Count | None = None
    subset_seed: Seed = 0
    downsample: Count = 1

    vocab_size = 256
    num_classes = 10
    pad_id = None  # pixel 0 is black, not padding
    sources = ("auto", "hub", "files")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.downsample not in (1, 2, 4, 8):
            raise ConfigError(f"task.downsample must be 1 (LRA), 2, 4 or 8, got {self.downsample}")
        tokens = (SIDE // self.downsample) ** 2
        if self.max_len != tokens:
            raise ConfigError(f"task.max_len must be {tokens} ({SIDE // self.downsample}x{SIDE // self.downsample} "
                              f"pixels with task.downsample={self.downsample}) for the image task, got {self.max_len}")
        check_subset_sizes("task", self.max_train_examples, self.max_eval_examples)
        if self.source == "auto":
            self.source = "files" if self.data_dir is not None else "hub"
        if self.source == "files" and self.data_dir is None:
            raise ConfigError(f"task.source=files needs task.data_dir=/path/to/cifar10 (a copy of {HUB_DATASET})")

    def files_hint(self) -> str:
        return (f"download {HUB_DATASET} ({hub_url(HUB_DATASET)}) elsewhere and set task.data_dir=/path/to/that "
                "folder (plain_text/{train,test}-*.parquet with columns img, label)")

    def shards(self) -> dict[str, list[Path]]:
        root = Path(self.data_dir).expanduser()
        if not root.is_dir():
            raise DataError(f"task.data_dir={self.data_dir} does not exist or is not a folder; {self.files_hint()}")
        found = {s: find_hf_parquet(root, s) for s in SOURCE_SPLITS}
        missing = [s for s, ps in found.items() if not ps]
        if missing:
            raise DataError(f"task.data_dir={self.data_dir} has no {' or '.join(f'{s}-*.parquet' for s in missing)} "
                            f"(looked in plain_text/, data/ and the folder itself); {self.files_hint()}")
        return found

    def check_source(self) -> None:
        if self.synthetic:
            return
        if self.source == "files":
            self.shards()
        try:
            import PIL  # noqa: F401
        except ImportError as e:
            raise DataError("the image task decodes images with Pillow: pip install pillow") from e

    def load_real(self, cache_dir: Path) -> CachedSplits:
        key: dict[str, Any] = {"task": "image", "grayscale": GRAYSCALE_VERSION}
        if self.source == "hub":
            key["hub"] = HUB_DATASET  # cached by name: delete the cache entry to fetch a newer Hub revision

            def build() -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], dict[str, Any]]:
                tables = load_hub(HUB_DATASET, SOURCE_SPLITS, ("img", "label"), self.files_hint())
                splits = {s: decode_images(t, f"{HUB_DATASET} ({s})") for s, t in tables.items()}
                fingerprint = stable_hash({s: content_sha256(x, y) for s, (x, y) in splits.items()})
                return splits, {"fingerprint": fingerprint, "source": "hub", "hub_dataset": HUB_DATASET}
        else:
            shards = self.shards()
            key["parquet_sha256"] = {s: {p.name: file_sha256(p) for p in ps} for s, ps in shards.items()}

            def build() -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], dict[str, Any]]:
                splits = {}
                for s, ps in shards.items():
                    table = read_parquet(ps, ("img", "label"))
                    splits[s] = decode_images(table, ", ".join(map(str, ps)))
                return splits, {"fingerprint": stable_hash(key["parquet_sha256"]), "source": "files",
                                "data_dir": str(Path(self.data_dir).expanduser().resolve())}

        cached = load_or_build(Path(cache_dir), "image/arrow", key, build)
        return self._split(cached)

    def _split(self, cached: CachedSplits) -> CachedSplits:
        """train/val from the cached 50k training images (contiguous or seeded), test as is, then subsets."""
        x, y = cached.inputs["train"], cached.labels["train"]
        n_train = int(round(len(y) * TRAIN_FRACTION))
        order = np.arange(len(y)) if self.split_seed is None else np.random.default_rng(self.split_seed).permutation(
            len(y))
        train_idx, val_idx = np.sort(order[:n_train]), np.sort(order[n_train:])
        seed = self.subset_seed
        splits = {
            "train": subsample(x[train_idx], y[train_idx], self.max_train_examples, seed),
            "val": subsample(x[val_idx], y[val_idx], self.max_eval_examples, seed + 1),
            "test": subsample(cached.inputs["test"], cached.labels["test"], self.max_eval_examples, seed + 2),
        }
        splits = {s: (downsample(x_, self.downsample), y_) for s, (x_, y_) in splits.items()}
        meta = {**cached.meta, "split_seed": self.split_seed, "downsample": self.downsample,
                "subset": {"max_train_examples": self.max_train_examples,
                           "max_eval_examples": self.max_eval_examples, "seed": seed}}
        return CachedSplits(inputs={s: v[0] for s, v in splits.items()}, labels={s: v[1] for s, v in splits.items()},
                            meta=meta, path=cached.path, reused=cached.reused)
