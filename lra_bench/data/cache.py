"""Build-once cache of tokenised splits as Hugging Face ``datasets`` Arrow folders.

A cache entry is ``<cache_dir>/<kind>/<key-hash>/`` holding ``save_to_disk`` output per split and a
``meta.json`` written last; an entry without ``meta.json`` is incomplete and rebuilt. Entries are
built in a temporary folder and renamed into place, so a crash never leaves a half-written entry
and two processes racing to build the same entry both end up reading one complete copy. What is served is
verified (row counts and a sha256 per split, in ``meta.json``); an entry that does not verify is rebuilt.
Files a generator writes into the cache (ListOps TSVs) are listed with their sha256 in ``manifest.json``
(``record_files`` / ``files_verified``) and generated again when one is missing, cut or edited.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lra_bench.store.files import file_sha256, stable_hash, write_error, write_json_atomic

log = logging.getLogger(__name__)
META = "meta.json"
MANIFEST = "manifest.json"  # sha256 of the files a generator wrote into the cache (``record_files``)


@dataclass
class CachedSplits:
    """Token ids (uint8/uint16, padded to max_len) and labels per split, with provenance."""

    inputs: dict[str, np.ndarray]  # split -> (num_examples, max_len) token ids, 0 = pad
    labels: dict[str, np.ndarray]  # split -> (num_examples,) int64
    meta: dict[str, Any]
    path: Path
    reused: bool


class CacheCorrupt(ValueError):
    """A cache entry or generated file that does not verify (the message names the file): it is rebuilt."""


def content_sha256(inputs: np.ndarray, labels: np.ndarray, dtype: str) -> str:
    """sha256 of one split as it is served: the token ids in ``dtype`` and the labels as int64, in row order."""
    h = hashlib.sha256()
    h.update(memoryview(np.ascontiguousarray(inputs, dtype=dtype)).cast("B"))
    h.update(memoryview(np.ascontiguousarray(labels, dtype=np.int64)).cast("B"))
    return h.hexdigest()


def load_or_build(
    cache_dir: Path,
    kind: str,
    key: dict[str, Any],
    build: Callable[[], tuple[dict[str, tuple[np.ndarray, np.ndarray]], dict[str, Any]]],
) -> CachedSplits:
    """Return the cached splits for ``key``, calling ``build`` (and caching its output) only once.

    ``build`` returns ({split: (inputs, labels)}, meta) where meta must hold a ``fingerprint``. What is served is
    verified against ``meta.json`` (row counts and a sha256 of each split's ids and labels): an entry that does not
    verify (cut, corrupt, an unreadable ``meta.json``, written by an older version) is rebuilt, with a warning
    naming the file.
    """
    entry = Path(cache_dir) / kind / stable_hash(key)[:16]
    if (entry / META).is_file():
        try:
            return _read_entry(entry, reused=True)
        except CacheCorrupt as e:
            log.warning("rebuilding the data cache entry %s: %s", entry, e)
            aside = entry.parent / f".{entry.name}.stale-{os.getpid()}"
            os.replace(entry, aside)  # readers that already mapped its files keep them; new ones get the rebuild
            shutil.rmtree(aside, ignore_errors=True)
    _write_entry(entry, key, build)
    return _read_entry(entry, reused=False)


def _write_entry(entry: Path, key: dict[str, Any], build: Callable[[], Any]) -> None:
    """Build the splits and store them in a temporary folder renamed to ``entry`` once complete."""
    from datasets import Dataset, disable_progress_bars

    disable_progress_bars()
    splits, meta = build()
    entry.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=entry.parent, prefix=f".{entry.name}."))
    try:
        dtype = str(next(iter(splits.values()))[0].dtype)
        for split, (inputs, labels) in splits.items():
            ds = Dataset.from_dict({"input_ids": inputs, "label": labels})
            ds.save_to_disk(str(tmp / split))
        meta = {**meta, "key": key, "dtype": dtype, "splits": {s: int(len(y)) for s, (_, y) in splits.items()},
                "content_sha256": {s: content_sha256(x, y, dtype) for s, (x, y) in splits.items()}}
        (tmp / META).write_text(json.dumps(meta, indent=2, sort_keys=True))
        try:
            os.replace(tmp, entry)
        except OSError:  # another process finished the same entry first: use theirs
            if not (entry / META).is_file():
                shutil.rmtree(entry, ignore_errors=True)
                os.replace(tmp, entry)
    except Exception as e:
        if (failed := write_error(entry, "the data cache", e)) is not None:
            raise failed from e
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _read_entry(entry: Path, reused: bool) -> CachedSplits:
    """The splits of a complete entry, verified against its ``meta.json``; ``CacheCorrupt`` naming the file if not."""
    try:
        meta = json.loads((entry / META).read_text())
        if not isinstance(meta, dict) or not isinstance(meta.get("content_sha256"), dict):
            raise ValueError("no content checksums (written by an older lra-bench)")
        expected, dtype = dict(meta["splits"]), meta["dtype"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise CacheCorrupt(f"{entry / META} is unusable: {e}") from e
    inputs, labels = {}, {}
    order = ("train", "val", "test")
    for split in sorted(expected, key=lambda s: (order.index(s) if s in order else len(order), s)):
        try:
            table = saved_table(entry / split)  # memory-mapped Arrow table
            ids = table.column("input_ids").combine_chunks()  # fixed-length rows (padded at build time)
            flat = numpy_view(ids.flatten())
            x = flat.reshape(len(ids), -1).astype(dtype, copy=False)
            y = numpy_view(table.column("label").combine_chunks()).astype(np.int64)
        except Exception as e:  # noqa: BLE001 - pyarrow/datasets errors of a cut or corrupt file, whatever their type
            raise CacheCorrupt(f"{entry / split} cannot be read: {type(e).__name__}: {e}") from e
        if len(y) != expected[split]:
            raise CacheCorrupt(f"{entry / split} holds {len(y)} rows, {META} says {expected[split]} (cut short?)")
        if content_sha256(x, y, dtype) != meta["content_sha256"].get(split):
            raise CacheCorrupt(f"{entry / split} does not match its checksum in {META} (corrupt or edited)")
        inputs[split], labels[split] = x, y
    return CachedSplits(inputs=inputs, labels=labels, meta=meta, path=entry, reused=reused)


def saved_table(folder: Path) -> Any:
    """The Arrow table of a folder ``datasets.Dataset.save_to_disk`` wrote (its ``state.json`` names the Arrow stream
    files), memory-mapped, read with pyarrow alone: a run on a cached task never imports ``datasets`` (and pandas
    with it: about 1.6 s of start-up)."""
    import pyarrow as pa

    files = [f["filename"] for f in json.loads((folder / "state.json").read_text())["_data_files"]]
    tables = [pa.ipc.open_stream(pa.memory_map(str(folder / name))).read_all() for name in files]
    return pa.concat_tables(tables) if len(tables) != 1 else tables[0]


def numpy_view(array: Any) -> np.ndarray:
    """A pyarrow array of numbers without nulls as a numpy array over its buffer, without a copy (pyarrow's own
    ``to_numpy`` imports pandas: about 1 s of start-up)."""
    if array.null_count:
        raise ValueError(f"{array.null_count} missing values")
    dtype = np.dtype(str(array.type))  # uint8, uint16, int64: pyarrow and numpy share these names
    return np.frombuffer(array.buffers()[1], dtype=dtype, count=len(array), offset=array.offset * dtype.itemsize)


def files_verified(root: Path, names: tuple[str, ...] | list[str]) -> bool:
    """Whether ``root`` holds ``names`` exactly as ``record_files`` listed them (sha256 in ``MANIFEST``): a file
    generated into the cache that is missing, cut or edited is not used (the warning names it); False, without a
    warning, for a folder never completed."""
    manifest = Path(root) / MANIFEST
    if not manifest.is_file():
        return False
    try:
        listed = json.loads(manifest.read_text())
        for name in names:
            path = Path(root) / name
            if file_sha256(path) != listed[name]:
                raise CacheCorrupt(f"{path} does not match its checksum in {manifest} (cut short or edited)")
    except (OSError, ValueError, KeyError, TypeError) as e:
        log.warning("generating %s again: %s", root, e)
        return False
    return True


def record_files(root: Path, names: tuple[str, ...] | list[str]) -> None:
    """List the sha256 of ``names`` in ``root/MANIFEST``, written last: it marks the folder complete."""
    write_json_atomic(Path(root) / MANIFEST, {name: file_sha256(Path(root) / name) for name in names})
