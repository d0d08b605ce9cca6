"""Pathfinder / Path-X files in the LRA release layout: metadata, PNG decoding, empty images, the split.

Layout (LRA release ``lra_release/pathfinder{32,64,128,256}/``, shared/reference/LRA.md §1.2; also what
``pathfinder_generate`` writes)::

    <difficulty>/imgs/<batch>/sample_<i>.png     8-bit grayscale, resolution x resolution
    <difficulty>/metadata/<batch>.npy            text despite the name, one line per image:
        imgs/<batch> sample_<i>.png <i> <label> <continuity> <contour_length> <distractor_length>
        <paddle_length> <paddle_thickness> <paddle_margin> <number of paddle contrasts>

The image of a line is ``<difficulty>/<field 0>/<field 1>`` and its label ``int(field 3)`` (1 = the two
markers are connected). As in LRA's input pipeline, pixels are the tokens (vocabulary 256, no padding) in
row-major order. Empty images (a zero-byte file, or all pixels 0, like the release's
``pathfinder32/curv_baseline/imgs/0/sample_172.png``) are skipped and counted, never silently; any other
unreadable file, and any malformed metadata line, is a ``DataError`` naming the file (and line).
The split is LRA's 80/10/10 over a seeded permutation (``numpy.random.default_rng(split_seed)``).
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lra_bench.errors import DataError
from lra_bench.infra.progress import tracked

log = logging.getLogger(__name__)

RELEASE_URL = "https://storage.googleapis.com/long-range-arena/lra_release.gz"
DIFFICULTIES = ("curv_baseline", "curv_contour_length_9", "curv_contour_length_14")
METADATA_FIELDS = 11
SPLIT_FRACTIONS = (0.8, 0.1, 0.1)
READER_VERSION = 1  # bump when decoding or splitting changes, so old caches are not reused


@dataclass(frozen=True)
class Record:
    """One metadata line: the image it names, its label, and where the line is (for error messages)."""

    image: Path
    label: int
    metadata: Path
    line: int


def metadata_files(folder: Path) -> list[Path]:
    """``<folder>/metadata/*.npy`` in batch order (numeric stems numerically, then the rest by name)."""
    files = [p for p in (Path(folder) / "metadata").glob("*.npy") if p.is_file()]
    return sorted(files, key=lambda p: (0, int(p.stem), "") if p.stem.isdigit() else (1, 0, p.stem))


def parse_metadata(path: Path, folder: Path) -> list[Record]:
    """The records of one metadata file; a malformed line raises a DataError naming the file and line."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise DataError(f"{path}: cannot read Pathfinder metadata ({e}); it must be the release's text "
                        f"format (one line per image); re-extract it from {RELEASE_URL}") from e
    records = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        fields = line.split()
        problem = _line_problem(fields)
        if problem:
            raise DataError(f"{path}, line {number}: malformed Pathfinder metadata line ({problem}): {line!r}; "
                            f"expected {METADATA_FIELDS} space-separated fields like "
                            f"'imgs/0 sample_0.png 0 1 1.0 14 4 2 0.5 1 1' (label = field 4). The file may be "
                            f"truncated: re-extract it from {RELEASE_URL} or regenerate the data")
        records.append(Record(Path(folder) / fields[0] / fields[1], int(fields[3]), Path(path), number))
    return records


def _line_problem(fields: list[str]) -> str:
    if len(fields) != METADATA_FIELDS:
        return f"{len(fields)} fields instead of {METADATA_FIELDS}"
    if not fields[1].endswith(".png"):
        return f"field 2 {fields[1]!r} is not a .png file name"
    if fields[3] not in ("0", "1"):
        return f"label (field 4) {fields[3]!r} is not 0 or 1"
    try:
        int(fields[2])
        [float(f) for f in fields[4:]]
    except ValueError:
        return "a numeric field is not a number"
    if ".." in Path(fields[0]).parts or Path(fields[0]).is_absolute():
        return f"image folder {fields[0]!r} leaves the difficulty folder"
    return ""


def decode_png(data: bytes, path: Path, resolution: int) -> np.ndarray | None:
    """(resolution**2,) uint8 pixels in row-major order, or None for an empty image."""
    if len(data) == 0:
        return None
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as im:
            im.load()
            if im.mode != "L":  # the release is 8-bit grayscale; anything else is converted like PIL does
                im = im.convert("L")
            pixels = np.asarray(im, dtype=np.uint8)
    except (OSError, SyntaxError, ValueError, UnidentifiedImageError, Image.DecompressionBombError) as e:
        raise DataError(f"{path}: cannot decode the image ({type(e).__name__}: {e}); the file is corrupt or "
                        f"truncated: re-extract it from {RELEASE_URL} or regenerate the data") from e
    if pixels.shape != (resolution, resolution):
        raise DataError(f"{path}: image is {pixels.shape[1]}x{pixels.shape[0]} pixels, expected "
                        f"{resolution}x{resolution}; point task.data_dir at lra_release/pathfinder{resolution} "
                        f"or set task.resolution (and task.max_len = resolution**2) to match the files")
    if not pixels.any():
        return None
    return pixels.reshape(-1)


@dataclass
class PathfinderImages:
    """Every usable image of one difficulty folder, in metadata order."""

    pixels: np.ndarray  # (n, resolution**2) uint8
    labels: np.ndarray  # (n,) int64
    skipped: list[str] = field(default_factory=list)  # empty images, relative to the difficulty folder
    fingerprint: str = ""  # sha256 over every metadata file and image file read (names and bytes)


def read_folder(folder: Path, resolution: int) -> PathfinderImages:
    """Read ``<folder>/metadata/*.npy`` and every image they name; empty images are skipped and reported."""
    folder = Path(folder)
    metas = metadata_files(folder)
    if not metas:
        raise DataError(f"{folder / 'metadata'} has no *.npy metadata files; see {RELEASE_URL}")
    digest = hashlib.sha256()
    records: list[Record] = []
    for meta in metas:
        digest.update(f"{meta.relative_to(folder)}\0".encode())
        digest.update(meta.read_bytes())
        records.extend(parse_metadata(meta, folder))
    if not records:
        raise DataError(f"the metadata files in {folder / 'metadata'} list no images")
    pixels = np.empty((len(records), resolution * resolution), np.uint8)
    labels = np.empty(len(records), np.int64)
    skipped: list[str] = []
    kept = 0
    for rec in tracked(records, len(records), f"read {folder.name}", "img"):
        try:
            data = rec.image.read_bytes()
        except OSError as e:
            raise DataError(f"{rec.image}: cannot read the image named on line {rec.line} of {rec.metadata} "
                            f"({e}); the release is incomplete: re-extract it from {RELEASE_URL}") from e
        digest.update(f"{rec.image.relative_to(folder)}\0".encode())
        digest.update(hashlib.sha256(data).digest())
        image = decode_png(data, rec.image, resolution)
        if image is None:
            skipped.append(str(rec.image.relative_to(folder)))
            continue
        pixels[kept], labels[kept] = image, rec.label
        kept += 1
    if skipped:
        shown = ", ".join(skipped[:5]) + (" ..." if len(skipped) > 5 else "")
        log.warning("Pathfinder %s: skipped %d empty image(s) of %d: %s", folder, len(skipped), len(records), shown)
    if kept == 0:
        raise DataError(f"every image listed in {folder / 'metadata'} is empty")
    return PathfinderImages(pixels[:kept], labels[:kept], skipped, digest.hexdigest())


def source_key(folder: Path) -> dict[str, Any]:
    """A cheap identity of a difficulty folder for cache keys: metadata sha256 + image names, sizes, mtimes."""
    folder = Path(folder)
    metas = {}
    for meta in metadata_files(folder):
        metas[str(meta.relative_to(folder))] = hashlib.sha256(meta.read_bytes()).hexdigest()
    listing = hashlib.sha256()
    imgs = folder / "imgs"
    if imgs.is_dir():
        for batch in sorted(p for p in imgs.iterdir() if p.is_dir()):
            with os.scandir(batch) as it:
                for entry in sorted(it, key=lambda e: e.name):
                    st = entry.stat()
                    listing.update(f"{batch.name}/{entry.name}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return {"metadata_sha256": metas, "images": listing.hexdigest()}


def split_indices(n: int, seed: int) -> dict[str, np.ndarray]:
    """LRA's 80/10/10 split (``[:80%]``, ``[80%:90%]``, ``[90%:]``) of a seeded permutation of n examples."""
    order = np.random.default_rng(seed).permutation(n)
    n_train = int(n * SPLIT_FRACTIONS[0])
    n_val = int(n * (SPLIT_FRACTIONS[0] + SPLIT_FRACTIONS[1])) - n_train
    return {"train": order[:n_train], "val": order[n_train : n_train + n_val], "test": order[n_train + n_val :]}


def label_counts(labels: np.ndarray) -> list[int]:
    return np.bincount(labels, minlength=2).tolist()
