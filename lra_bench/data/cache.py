"""Build-once cache of tokenised splits as Hugging Face ``datasets`` Arrow folders.

A cache entry is ``<cache_dir>/<kind>/<key-hash>/`` holding ``save_to_disk`` output per split and a
``meta.json`` written last; an entry without ``meta.json`` is incomplete and rebuilt. Entries are
built in a temporary folder and renamed into place, so a crash never leaves a half-written entry
and two processes racing to build the same entry both end up reading one complete copy.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lra_bench.files import stable_hash

META = "meta.json"


@dataclass
class CachedSplits:
    """Token ids (uint8/uint16, padded to max_len) and labels per split, with provenance."""

    inputs: dict[str, np.ndarray]  # split -> (num_examples, max_len) token ids, 0 = pad
    labels: dict[str, np.ndarray]  # split -> (num_examples,) int64
    meta: dict[str, Any]
    path: Path
    reused: bool


def load_or_build(
    cache_dir: Path,
    kind: str,
    key: dict[str, Any],
    build: Callable[[], tuple[dict[str, tuple[np.ndarray, np.ndarray]], dict[str, Any]]],
) -> CachedSplits:
    """Return the cached splits for ``key``, calling ``build`` (and caching its output) only once.

    ``build`` returns ({split: (inputs, labels)}, meta) where meta must hold a ``fingerprint``.
    """
    from datasets import Dataset, disable_progress_bars, load_from_disk

    disable_progress_bars()

    entry = Path(cache_dir) / kind / stable_hash(key)[:16]
    reused = (entry / META).is_file()
    if not reused:
        splits, meta = build()
        entry.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=entry.parent, prefix=f".{entry.name}."))
        try:
            for split, (inputs, labels) in splits.items():
                ds = Dataset.from_dict({"input_ids": inputs, "label": labels})
                ds.save_to_disk(str(tmp / split))
            dtype = str(next(iter(splits.values()))[0].dtype)
            meta = {**meta, "key": key, "dtype": dtype, "splits": {s: int(len(y)) for s, (_, y) in splits.items()}}
            (tmp / META).write_text(json.dumps(meta, indent=2, sort_keys=True))
            try:
                os.replace(tmp, entry)
            except OSError:  # another process finished the same entry first: use theirs
                if not (entry / META).is_file():
                    shutil.rmtree(entry, ignore_errors=True)
                    os.replace(tmp, entry)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    meta = json.loads((entry / META).read_text())
    inputs, labels = {}, {}
    order = ("train", "val", "test")
    for split in sorted(meta["splits"], key=lambda s: (order.index(s) if s in order else len(order), s)):
        table = load_from_disk(str(entry / split)).data  # memory-mapped Arrow table
        ids = table.column("input_ids").combine_chunks()  # fixed-length rows (padded at build time)
        flat = ids.flatten().to_numpy(zero_copy_only=False)
        inputs[split] = flat.reshape(len(ids), -1).astype(meta["dtype"], copy=False)
        labels[split] = table.column("label").to_numpy().astype(np.int64)
    return CachedSplits(inputs=inputs, labels=labels, meta=meta, path=entry, reused=reused)
